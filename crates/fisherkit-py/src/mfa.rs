//! Mixture of factor analysers: EM fit, posteriors, log-likelihoods,
//! mergeable statistics (`MfaStatistics`), the M-step, and the MFA Fisher score.

use crate::mixture::{self, Mixture, ModelArgs};
use crate::stats::{em_tol, statistics_class, Stop};
use crate::{dispatch, value_error, with_views, Mat, PyFloat, Vec1};
use fisherkit::encode::{parse_mfa_parts, MfaFisherScore, MfaFisherScoreParams};
use fisherkit::mfa::{Mfa, MfaParams, MfaStats, PsiMode};
use fisherkit::stream::EmTol;
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2, Array3, ArrayView2};
use numpy::{
    IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, ToPyArray,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A 3-D `float32` or `float64` numpy array (the loadings), borrowed.
#[derive(FromPyObject)]
pub(crate) enum Arr3<'py> {
    F32(PyReadonlyArray3<'py, f32>),
    F64(PyReadonlyArray3<'py, f64>),
}

impl Arr3<'_> {
    pub(crate) fn to_owned_as<F: PyFloat>(&self) -> Array3<F> {
        match self {
            Arr3::F32(a) => a.as_array().mapv(|v| F::from_f64_lossy(v as f64)),
            Arr3::F64(a) => a.as_array().mapv(F::from_f64_lossy),
        }
    }
}

/// `(weights (K), means (K, D), loadings (K, D, R), psi (1, D) or (K, D))`.
type MfaArgs<'py> = (Vec1<'py>, Mat<'py>, Arr3<'py>, Mat<'py>);
type MfaOut<'py> = <Mfa<f64> as Mixture<f64>>::Out<'py>;

fn model<F: PyFloat>(p: &MfaArgs<'_>) -> PyResult<Mfa<F>> {
    p.model()
}

fn psi_mode_name(mode: PsiMode) -> &'static str {
    match mode {
        PsiMode::Shared => "shared",
        PsiMode::PerComponent => "per_component",
    }
}

fn psi_mode(s: &str) -> PyResult<PsiMode> {
    let options = [
        ("shared", PsiMode::Shared),
        ("per_component", PsiMode::PerComponent),
    ];
    mixture::choice("psi_mode", s, options)
}

type FitOut<'py> = mixture::FitOut<'py, f64, Mfa<f64>>;

/// EM (k-means + PPCA initialisation) on the rows of `x` (N, D) in x's dtype.
/// Returns `((weights, means, loadings, psi), log_likelihood_history, n_iter, converged)`.
#[pyfunction]
#[pyo3(signature = (x, n_components, n_factors, psi_mode, max_iter, tol, tol_mode, n_init, psi_floor, seed))]
#[allow(clippy::too_many_arguments)]
fn mfa_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    n_components: usize,
    n_factors: usize,
    psi_mode: &str,
    max_iter: usize,
    tol: f64,
    tol_mode: &str,
    n_init: usize,
    psi_floor: f64,
    seed: u64,
) -> PyResult<FitOut<'py>> {
    let params = MfaParams::new(n_components, n_factors)
        .psi_mode(self::psi_mode(psi_mode)?)
        .max_iter(max_iter)
        .tol(em_tol(tol, tol_mode)?)
        .n_init(n_init)
        .psi_floor(psi_floor)
        .seed(seed);
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        params: &MfaParams,
        x: ArrayView2<'_, F>,
    ) -> PyResult<FitOut<'py>> {
        let params = params.check().map_err(value_error)?;
        mixture::fit_interruptibly(py, |cancel| {
            params.fit_with_callback(x, &mut |_, _| Ok::<_, Stop>(cancel.checked()?))
        })
    }
    dispatch!(x, run(py, &params))
}

/// Log-likelihood (N) of the rows of `x` (N, D), float64.
#[pyfunction]
fn mfa_score_samples<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    mixture::score_samples(py, &params, &x)
}

/// Posteriors (N, K) of the rows of `x` (N, D), in x's dtype.
#[pyfunction]
fn mfa_predict_proba<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    mixture::predict_proba(py, &params, &x)
}

/// E-step sums of the rows of `x` (N, D) under the model (`MfaStatistics`).
#[pyfunction]
fn mfa_sufficient_statistics<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    x: Mat<'py>,
) -> PyResult<MfaStatistics> {
    mixture::sufficient_statistics(py, &params, &x)
}

/// The M-step of the model `params` (in its means' dtype) from statistics it
/// computed (merged over shards or not): the new `(weights, means, loadings, psi)`
/// and how many starved components it re-seeded (for the stopping rule).
#[pyfunction]
fn mfa_update_from_statistics<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    stats: PyRef<'py, MfaStatistics>,
    psi_floor: f64,
) -> PyResult<(MfaOut<'py>, usize)> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        params: &MfaArgs<'py>,
        st: &MfaStats,
        psi_floor: f64,
    ) -> PyResult<(MfaOut<'py>, usize)> {
        let m = model::<F>(params)?;
        let (new, reseeded) = py
            .detach(|| m.update_from_statistics_reseeded(st, psi_floor))
            .map_err(value_error)?;
        Ok((new.to_py(py), reseeded))
    }
    if params.1.is_f32() {
        run::<f32>(py, &params, &stats.inner, psi_floor)
    } else {
        run::<f64>(py, &params, &stats.inner, psi_floor)
    }
}

/// EM whose E-step runs in Python (the Ray fits' map-reduce over shards),
/// by the library's one EM loop (`MfaParams::fit_from_statistics`): from the
/// model `params`, whose dtype the fit keeps, each iteration calls
/// `statistics_of(weights, means, loadings, psi)` for the merged
/// `MfaStatistics` of every row under that model, then runs the M-step (ψ
/// floor, re-seeding) and the stopping rule, until convergence or `max_iter`
/// iterations. An exception of `statistics_of` propagates as it was raised.
/// Returns `((weights, means, loadings, psi), log_likelihood_history, n_iter,
/// converged)`.
#[pyfunction]
fn mfa_fit_from_statistics<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    statistics_of: Bound<'py, PyAny>,
    max_iter: usize,
    tol: f64,
    tol_mode: &str,
    psi_floor: f64,
) -> PyResult<(MfaOut<'py>, Vec<f64>, usize, bool)> {
    let tol = em_tol(tol, tol_mode)?;
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        start: Mfa<F>,
        statistics_of: &Bound<'py, PyAny>,
        (max_iter, tol, psi_floor): (usize, EmTol, f64),
    ) -> PyResult<(MfaOut<'py>, Vec<f64>, usize, bool)> {
        let params = MfaParams::new(start.n_components(), start.n_factors())
            .psi_mode(start.psi_mode())
            .max_iter(max_iter)
            .tol(tol)
            .psi_floor(psi_floor);
        mixture::fit_driven(py, statistics_of, |stats_of| {
            params.fit_from_statistics(start, stats_of, &mut |_, _| Ok(()))
        })
    }
    let hp = (max_iter, tol, psi_floor);
    if params.1.is_f32() {
        run(py, model::<f32>(&params)?, &statistics_of, hp)
    } else {
        run(py, model::<f64>(&params)?, &statistics_of, hp)
    }
}

statistics_class! {
    /// E-step sufficient statistics of a mixture of factor analysers, in float64.
    ///
    /// With y_i = x_i - c (c the model's reference point), posteriors
    /// h_ik and e_ik = E[z | x_i, k]: ``resp_sums`` n_k (K),
    /// ``sum_e`` sum_i h_ik e_ik (K, R), ``sum_ee``
    /// sum_i h_ik e_ik e_ik^T (K, R, R), ``sum_y``
    /// sum_i h_ik y_i (K, D), ``sum_ye`` sum_i h_ik y_i e_ik^T
    /// (K, D, R), ``sum_yy`` sum_i y_i^2 (1, D) (shared Psi) or
    /// sum_i h_ik y_i^2 (K, D) (per component), ``n_rows`` and
    /// ``log_likelihood``. ``a + b`` (and ``sum([...])``) merges the
    /// statistics of disjoint shards computed with the same model;
    /// ``update_from_statistics`` of that model on the merged statistics is one
    /// exact EM step on the union. Picklable (to ship between processes).
    MfaStatistics(MfaStats) {
        resp_sums: soft_counts,
        arrays: {
            /// sum_i h_ik e_ik (K, R).
            sum_e: PyArray2,
            /// sum_i h_ik e_ik e_ik^T (K, R, R).
            sum_ee: PyArray3,
            /// sum_i h_ik y_i (K, D).
            sum_y: PyArray2,
            /// sum_i h_ik y_i e_ik^T (K, D, R).
            sum_ye: PyArray3,
            /// sum_i y_i^2 (1, D) shared, sum_i h_ik y_i^2 (K, D) per component.
            sum_yy: PyArray2,
        },
        reduce: |st, py| (
            psi_mode_name(st.psi_mode()),
            st.n_rows(),
            st.log_likelihood(),
            st.center().to_pyarray(py),
            st.soft_counts().to_pyarray(py),
            st.sum_e().to_pyarray(py),
            st.sum_ee().to_pyarray(py),
            st.sum_y().to_pyarray(py),
            st.sum_ye().to_pyarray(py),
            st.sum_yy().to_pyarray(py),
        ),
        methods: {
            /// Rebuilds statistics from their parts (validated: shapes, finite
            /// values, ``resp_sums`` and ``sum_yy`` ≥ 0): ``psi_mode`` "shared" or
            /// "per_component", ``n_rows`` ≥ 0, ``log_likelihood``, then the float64
            /// arrays ``center`` (D), ``resp_sums`` (K), ``sum_e`` (K, R),
            /// ``sum_ee`` (K, R, R), ``sum_y`` (K, D), ``sum_ye`` (K, D, R),
            /// ``sum_yy`` (1 or K, D).
            #[new]
            #[allow(clippy::too_many_arguments)]
            fn new(
                psi_mode: &str,
                n_rows: i64,
                log_likelihood: f64,
                center: PyReadonlyArray1<'_, f64>,
                resp_sums: PyReadonlyArray1<'_, f64>,
                sum_e: PyReadonlyArray2<'_, f64>,
                sum_ee: PyReadonlyArray3<'_, f64>,
                sum_y: PyReadonlyArray2<'_, f64>,
                sum_ye: PyReadonlyArray3<'_, f64>,
                sum_yy: PyReadonlyArray2<'_, f64>,
            ) -> PyResult<Self> {
                let n_rows = usize::try_from(n_rows).map_err(|_| {
                    PyValueError::new_err(format!("n_rows must be >= 0, got {n_rows}"))
                })?;
                MfaStats::from_parts(
                    self::psi_mode(psi_mode)?,
                    n_rows,
                    log_likelihood,
                    center.as_array().to_owned(),
                    resp_sums.as_array().to_owned(),
                    sum_e.as_array().to_owned(),
                    sum_ee.as_array().to_owned(),
                    sum_y.as_array().to_owned(),
                    sum_ye.as_array().to_owned(),
                    sum_yy.as_array().to_owned(),
                )
                .map(|inner| Self { inner })
                .map_err(value_error)
            }

            /// "shared" or "per_component".
            #[getter]
            fn psi_mode(&self) -> &'static str {
                psi_mode_name(self.inner.psi_mode())
            }

            /// Number of factors R.
            #[getter]
            fn n_factors(&self) -> usize {
                self.inner.n_factors()
            }
        },
    }
}

fn fs_params<F: PyFloat>(
    parts: &[String],
    power: f64,
    l2: bool,
    whitening: &Option<Vec1<'_>>,
) -> PyResult<MfaFisherScoreParams<F>> {
    Ok(MfaFisherScoreParams {
        parts: parse_mfa_parts(&parts.join(",")).map_err(value_error)?,
        normalization: Normalization { power, l2 },
        whitening: whitening.as_ref().map(|w| w.to_owned_as::<F>()),
    })
}

/// MFA Fisher scores (n_bags, dim) of `bags` (each (N_i, D), one dtype),
/// computed in the bags' dtype. `parts`: "mean" and/or "loading" (laid out
/// mean then loading); `whitening`: optional diagonal Fisher information (dim).
#[pyfunction]
#[pyo3(signature = (params, bags, parts, power, l2, whitening=None))]
fn mfa_fisher_score<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    bags: Vec<Mat<'py>>,
    parts: Vec<String>,
    power: f64,
    l2: bool,
    whitening: Option<Vec1<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    with_views!(bags, |views: F| {
        let enc = MfaFisherScore::new(
            model::<F>(&params)?,
            fs_params(&parts, power, l2, &whitening)?,
        )
        .map_err(value_error)?;
        let out = if views.is_empty() {
            Array2::<F>::zeros((0, enc.output_dim()))
        } else {
            py.detach(|| enc.encode_batch(&views))
                .map_err(value_error)?
        };
        Ok(out.into_pyarray(py).into_any())
    })
}

/// Length of the MFA Fisher score of K components, D dimensions, R factors.
#[pyfunction]
fn mfa_fisher_score_dim(k: usize, d: usize, r: usize, parts: Vec<String>) -> PyResult<usize> {
    let parts = parse_mfa_parts(&parts.join(",")).map_err(value_error)?;
    Ok(parts
        .iter()
        .map(|p| match p {
            fisherkit::encode::MfaPart::Mean => k * d,
            fisherkit::encode::MfaPart::Loading => k * d * r,
        })
        .sum())
}

/// Diagonal Fisher-information estimate (dim): the variance over `bags` (≥ 2)
/// of their raw (un-normalised) MFA Fisher scores, in the bags' dtype.
#[pyfunction]
fn mfa_fit_whitening<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    bags: Vec<Mat<'py>>,
    parts: Vec<String>,
) -> PyResult<Bound<'py, PyAny>> {
    with_views!(bags, |views: F| {
        let enc = MfaFisherScore::new(model::<F>(&params)?, fs_params(&parts, 1.0, false, &None)?)
            .map_err(value_error)?;
        let fim: Array1<F> = py
            .detach(|| enc.fit_whitening(&views))
            .map_err(value_error)?;
        Ok(fim.into_pyarray(py).into_any())
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MfaStatistics>()?;
    m.add_function(wrap_pyfunction!(mfa_fit, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_score_samples, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_predict_proba, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_sufficient_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_update_from_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fit_from_statistics, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fisher_score, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fisher_score_dim, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fit_whitening, m)?)?;
    Ok(())
}
