//! Diagonal GMM: EM fit, posteriors, log-likelihoods, mergeable statistics
//! (`GmmStatistics`) and the M-step.

use crate::mixture::{self, Mixture};
use crate::stats::{em_tol, statistics_class, Stop};
use crate::{dispatch, value_error, Mat, PyFloat, Vec1};
use fisherkit::gmm::{DiagGmm, GmmInit, GmmParams, GmmStats, VarianceFloor};
use fisherkit::stream::EmTol;
use ndarray::ArrayView2;
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, ToPyArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `(weights (K), means (K, D), variances (K, D))` as numpy arrays.
type Params<'py> = <DiagGmm<f64> as Mixture<f64>>::Out<'py>;

pub(crate) fn variance_floor(value: f64, mode: &str) -> PyResult<VarianceFloor> {
    type Floor = fn(f64) -> VarianceFloor;
    let options: [(&str, Floor); 2] = [
        ("relative", VarianceFloor::Relative),
        ("absolute", VarianceFloor::Absolute),
    ];
    Ok(mixture::choice("variance_floor_mode", mode, options)?(
        value,
    ))
}

/// Builds (and validates) the library's model in `F` from numpy parameters.
pub(crate) fn model<F: PyFloat>(w: &Vec1<'_>, m: &Mat<'_>, v: &Mat<'_>) -> PyResult<DiagGmm<F>> {
    DiagGmm::new(w.to_owned_as(), m.to_owned_as(), v.to_owned_as()).map_err(value_error)
}

type FitOut<'py> = mixture::FitOut<'py, f64, DiagGmm<f64>>;

/// EM on the rows of `x` (N, D) in x's dtype. `given`: optional starting model
/// `(weights, means, variances)` (then `init` and `n_init` are ignored).
/// Returns `((weights, means, variances), log_likelihood_history, n_iter, converged)`.
#[pyfunction]
#[pyo3(signature = (x, n_components, max_iter, tol, tol_mode, n_init, init, variance_floor, variance_floor_mode, seed, given=None))]
#[allow(clippy::too_many_arguments)]
fn gmm_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    n_components: usize,
    max_iter: usize,
    tol: f64,
    tol_mode: &str,
    n_init: usize,
    init: &str,
    variance_floor: f64,
    variance_floor_mode: &str,
    seed: u64,
    given: Option<(Vec1<'py>, Mat<'py>, Mat<'py>)>,
) -> PyResult<FitOut<'py>> {
    let floor = self::variance_floor(variance_floor, variance_floor_mode)?;
    let tol = em_tol(tol, tol_mode)?;
    mixture::choice("init_params", init, [("kmeans", ()), ("random", ())])?;
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        (k, max_iter, tol, n_init, init, floor, seed): (
            usize,
            usize,
            EmTol,
            usize,
            &str,
            VarianceFloor,
            u64,
        ),
        given: &Option<(Vec1<'py>, Mat<'py>, Mat<'py>)>,
        x: ArrayView2<'_, F>,
    ) -> PyResult<FitOut<'py>> {
        let init = match given {
            Some((w, m, v)) => GmmInit::Given(model::<F>(w, m, v)?),
            None if init == "random" => GmmInit::Random,
            None => GmmInit::KMeans,
        };
        let params = GmmParams::<F>::new(k)
            .max_iter(max_iter)
            .tol(tol)
            .n_init(n_init)
            .seed(seed)
            .init(init)
            .variance_floor(floor);
        let params = params.check().map_err(value_error)?;
        mixture::fit_interruptibly(py, |cancel| {
            params.fit_with_callback(x, &mut |_, _| Ok::<_, Stop>(cancel.checked()?))
        })
    }
    let hp = (n_components, max_iter, tol, n_init, init, floor, seed);
    dispatch!(x, run(py, hp, &given))
}

/// EM whose E-step runs in Python (the Ray fits' map-reduce over shards),
/// by the library's one EM loop (`GmmParams::fit_from_statistics`): from the
/// model `(weights, means, variances)`, whose dtype the fit keeps, each
/// iteration calls `statistics_of(weights, means, variances)` for the merged
/// `GmmStatistics` of every row under that model, then runs the M-step
/// (variance floor, re-seeding) and the stopping rule, until convergence or
/// `max_iter` iterations. An exception of `statistics_of` propagates as it
/// was raised. Returns `((weights, means, variances), log_likelihood_history,
/// n_iter, converged)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn gmm_fit_from_statistics<'py>(
    py: Python<'py>,
    weights: Vec1<'py>,
    means: Mat<'py>,
    variances: Mat<'py>,
    statistics_of: Bound<'py, PyAny>,
    max_iter: usize,
    tol: f64,
    tol_mode: &str,
    variance_floor: f64,
    variance_floor_mode: &str,
) -> PyResult<FitOut<'py>> {
    let floor = self::variance_floor(variance_floor, variance_floor_mode)?;
    let tol = em_tol(tol, tol_mode)?;
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        start: DiagGmm<F>,
        statistics_of: &Bound<'py, PyAny>,
        (max_iter, tol, floor): (usize, EmTol, VarianceFloor),
    ) -> PyResult<FitOut<'py>> {
        let params = GmmParams::<F>::new(start.n_components())
            .max_iter(max_iter)
            .tol(tol)
            .variance_floor(floor);
        mixture::fit_driven(py, statistics_of, |stats_of| {
            params.fit_from_statistics(start, stats_of, &mut |_, _| Ok(()))
        })
    }
    let hp = (max_iter, tol, floor);
    if means.is_f32() {
        let start = model::<f32>(&weights, &means, &variances)?;
        run(py, start, &statistics_of, hp)
    } else {
        let start = model::<f64>(&weights, &means, &variances)?;
        run(py, start, &statistics_of, hp)
    }
}

/// Log-likelihood log p(x_i) (N) of the rows of `x` (N, D), float64.
#[pyfunction]
fn gmm_score_samples<'py>(
    py: Python<'py>,
    weights: Vec1<'py>,
    means: Mat<'py>,
    variances: Mat<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    mixture::score_samples(py, &(weights, means, variances), &x)
}

/// Posteriors q_ik (N, K) of the rows of `x` (N, D), in x's dtype.
#[pyfunction]
fn gmm_predict_proba<'py>(
    py: Python<'py>,
    weights: Vec1<'py>,
    means: Mat<'py>,
    variances: Mat<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    mixture::predict_proba(py, &(weights, means, variances), &x)
}

/// E-step sums of the rows of `x` (N, D) under the model (see `GmmStatistics`).
#[pyfunction]
fn gmm_sufficient_statistics<'py>(
    py: Python<'py>,
    weights: Vec1<'py>,
    means: Mat<'py>,
    variances: Mat<'py>,
    x: Mat<'py>,
) -> PyResult<GmmStatistics> {
    mixture::sufficient_statistics(py, &(weights, means, variances), &x)
}

/// The M-step: a model `(weights, means, variances)` in `dtype` ("float32" or
/// "float64") from (merged) statistics, and how many starved components it
/// re-seeded (for the stopping rule).
#[pyfunction]
fn gmm_from_statistics<'py>(
    py: Python<'py>,
    stats: PyRef<'py, GmmStatistics>,
    variance_floor: f64,
    variance_floor_mode: &str,
    dtype: &str,
) -> PyResult<(Params<'py>, usize)> {
    let floor = self::variance_floor(variance_floor, variance_floor_mode)?;
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        st: &GmmStats,
        floor: VarianceFloor,
    ) -> PyResult<(Params<'py>, usize)> {
        let (g, reseeded) = py
            .detach(|| DiagGmm::<F>::from_statistics_reseeded(st, floor))
            .map_err(value_error)?;
        Ok((g.to_py(py), reseeded))
    }
    match dtype {
        "float32" => run::<f32>(py, &stats.inner, floor),
        "float64" => run::<f64>(py, &stats.inner, floor),
        other => Err(PyValueError::new_err(format!(
            "dtype must be \"float32\" or \"float64\", got {other:?}"
        ))),
    }
}

statistics_class! {
    /// E-step sufficient statistics of a diagonal GMM over some rows, in float64.
    ///
    /// With posteriors q_ik and a reference point c (D), y_i = x_i - c:
    /// ``resp_sums`` n_k = sum_i q_ik (K), ``sum_y`` sum_i q_ik y_i (K, D),
    /// ``sum_y2`` sum_i q_ik y_i^2 (K, D), ``n_rows`` and ``log_likelihood``
    /// sum_i log p(x_i). Statistics of disjoint shards add up exactly
    /// (``a + b``, ``sum([...])``; ``b``'s sums are shifted exactly to ``a``'s
    /// reference point), so EM over shards is exact:
    /// ``gmm.update_from_statistics(sum(shard_stats))`` is one batch EM step.
    /// Picklable (to ship between processes).
    GmmStatistics(GmmStats) {
        resp_sums: resp_sums,
        arrays: {
            /// sum_i q_ik(x_i - c) (K, D).
            sum_y: PyArray2,
            /// sum_i q_ik(x_i - c)^2 (K, D).
            sum_y2: PyArray2,
            /// sum_i q_ik x_i (K, D).
            sum_x: PyArray2,
            /// sum_i q_ik x_i^2 (K, D).
            sum_x2: PyArray2,
        },
        reduce: |st, py| (
            st.n_rows(),
            st.log_likelihood(),
            st.center().to_pyarray(py),
            st.resp_sums().to_pyarray(py),
            st.sum_y().to_pyarray(py),
            st.sum_y2().to_pyarray(py),
        ),
        methods: {
            /// Rebuilds statistics from their parts (validated): ``n_rows`` ≥ 0,
            /// ``log_likelihood`` finite, ``center`` (D), ``resp_sums`` (K) ≥ 0,
            /// ``sum_y`` (K, D), ``sum_y2`` (K, D) ≥ 0, all float64.
            #[new]
            fn new(
                n_rows: f64,
                log_likelihood: f64,
                center: PyReadonlyArray1<'_, f64>,
                resp_sums: PyReadonlyArray1<'_, f64>,
                sum_y: PyReadonlyArray2<'_, f64>,
                sum_y2: PyReadonlyArray2<'_, f64>,
            ) -> PyResult<Self> {
                GmmStats::from_parts(
                    n_rows,
                    log_likelihood,
                    center.as_array().to_owned(),
                    resp_sums.as_array().to_owned(),
                    sum_y.as_array().to_owned(),
                    sum_y2.as_array().to_owned(),
                )
                .map(|inner| Self { inner })
                .map_err(value_error)
            }
        },
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GmmStatistics>()?;
    m.add_function(wrap_pyfunction!(gmm_fit_from_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_fit, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_score_samples, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_predict_proba, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_sufficient_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_from_statistics, m)?)?;
    Ok(())
}
