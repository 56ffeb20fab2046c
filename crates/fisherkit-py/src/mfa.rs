//! Mixture of factor analysers: EM fit, posteriors, log-likelihoods,
//! mergeable statistics (`MfaStatistics`), the M-step, and the MFA Fisher score.

use crate::{dispatch, value_error, with_views, Mat, PyFloat, Vec1};
use fisherkit::encode::{parse_mfa_parts, MfaFisherScore, MfaFisherScoreParams};
use fisherkit::mfa::{Mfa, MfaParams, MfaStats, PsiMode};
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2, Array3, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray3, ToPyArray};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;

/// A 3-D `float32` or `float64` numpy array (the loadings), borrowed.
#[derive(FromPyObject)]
pub(crate) enum Arr3<'py> {
    F32(PyReadonlyArray3<'py, f32>),
    F64(PyReadonlyArray3<'py, f64>),
}

impl Arr3<'_> {
    fn to_owned_as<F: PyFloat>(&self) -> Array3<F> {
        match self {
            Arr3::F32(a) => a.as_array().mapv(|v| F::from_f64_lossy(v as f64)),
            Arr3::F64(a) => a.as_array().mapv(F::from_f64_lossy),
        }
    }
}

/// `(weights (K), means (K, D), loadings (K, D, R), psi (1, D) or (K, D))`.
type MfaArgs<'py> = (Vec1<'py>, Mat<'py>, Arr3<'py>, Mat<'py>);
type MfaOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

fn model<F: PyFloat>(p: &MfaArgs<'_>) -> PyResult<Mfa<F>> {
    Mfa::new(
        p.0.to_owned_as(),
        p.1.to_owned_as(),
        p.2.to_owned_as(),
        p.3.to_owned_as(),
    )
    .map_err(value_error)
}

fn params_to_py<F: PyFloat>(py: Python<'_>, m: Mfa<F>) -> MfaOut<'_> {
    let (w, mu, l, psi) = m.into_parts();
    (
        w.into_pyarray(py).into_any(),
        mu.into_pyarray(py).into_any(),
        l.into_pyarray(py).into_any(),
        psi.into_pyarray(py).into_any(),
    )
}

fn psi_mode(s: &str) -> PyResult<PsiMode> {
    match s {
        "shared" => Ok(PsiMode::Shared),
        "per_component" => Ok(PsiMode::PerComponent),
        other => Err(PyValueError::new_err(format!(
            "psi_mode must be \"shared\" or \"per_component\", got {other:?}"
        ))),
    }
}

type FitOut<'py> = (MfaOut<'py>, Vec<f64>, usize, bool);

/// EM (k-means + PPCA initialisation) on the rows of `x` (N, D) in x's dtype.
/// Returns `((weights, means, loadings, psi), log_likelihood_history, n_iter, converged)`.
#[pyfunction]
#[pyo3(signature = (x, n_components, n_factors, psi_mode, max_iter, tol, n_init, psi_floor, seed))]
#[allow(clippy::too_many_arguments)]
fn mfa_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    n_components: usize,
    n_factors: usize,
    psi_mode: &str,
    max_iter: usize,
    tol: f64,
    n_init: usize,
    psi_floor: f64,
    seed: u64,
) -> PyResult<FitOut<'py>> {
    let params = MfaParams::new(n_components, n_factors)
        .psi_mode(self::psi_mode(psi_mode)?)
        .max_iter(max_iter)
        .tol(tol)
        .n_init(n_init)
        .psi_floor(psi_floor)
        .seed(seed);
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        params: &MfaParams,
        x: ArrayView2<'_, F>,
    ) -> PyResult<FitOut<'py>> {
        let fit = py.detach(|| params.fit(x)).map_err(value_error)?;
        Ok((
            params_to_py(py, fit.model),
            fit.log_likelihood,
            fit.n_iter,
            fit.converged,
        ))
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
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        p: &MfaArgs<'py>,
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let m = model::<F>(p)?;
        let ll = py.detach(|| m.score_samples(x)).map_err(value_error)?;
        Ok(ll.into_pyarray(py))
    }
    dispatch!(x, run(py, &params))
}

/// Posteriors (N, K) of the rows of `x` (N, D), in x's dtype.
#[pyfunction]
fn mfa_predict_proba<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        p: &MfaArgs<'py>,
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = model::<F>(p)?;
        let q = py.detach(|| m.predict_proba(x)).map_err(value_error)?;
        Ok(q.into_pyarray(py).into_any())
    }
    dispatch!(x, run(py, &params))
}

/// E-step sums of the rows of `x` (N, D) under the model (`MfaStatistics`).
#[pyfunction]
fn mfa_sufficient_statistics<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    x: Mat<'py>,
) -> PyResult<MfaStatistics> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        p: &MfaArgs<'py>,
        x: ArrayView2<'_, F>,
    ) -> PyResult<MfaStatistics> {
        let m = model::<F>(p)?;
        let st = py
            .detach(|| m.sufficient_statistics(x))
            .map_err(value_error)?;
        Ok(MfaStatistics { inner: st })
    }
    dispatch!(x, run(py, &params))
}

/// The M-step of the model `params` (in its means' dtype) from statistics it
/// computed (merged over shards or not): the new `(weights, means, loadings, psi)`.
#[pyfunction]
fn mfa_update_from_statistics<'py>(
    py: Python<'py>,
    params: MfaArgs<'py>,
    stats: PyRef<'py, MfaStatistics>,
    psi_floor: f64,
) -> PyResult<MfaOut<'py>> {
    let st = &stats.inner;
    if params.1.is_f32() {
        let m = model::<f32>(&params)?;
        let new = py
            .detach(|| m.update_from_statistics(st, psi_floor))
            .map_err(value_error)?;
        Ok(params_to_py(py, new))
    } else {
        let m = model::<f64>(&params)?;
        let new = py
            .detach(|| m.update_from_statistics(st, psi_floor))
            .map_err(value_error)?;
        Ok(params_to_py(py, new))
    }
}

/// E-step sufficient statistics of a mixture of factor analysers (float64).
///
/// ``a + b`` (and ``sum([...])``) merges the statistics of disjoint shards
/// computed with the same model; ``update_from_statistics`` of that model on
/// the merged statistics is one exact EM step on the union. (Not picklable:
/// the library exposes no constructor from parts yet.)
#[pyclass(frozen, module = "fisherkit._fisherkit", name = "MfaStatistics")]
pub(crate) struct MfaStatistics {
    inner: MfaStats,
}

#[pymethods]
impl MfaStatistics {
    /// Number of rows summed.
    #[getter]
    fn n_rows(&self) -> usize {
        self.inner.n_rows()
    }

    /// $\sum_i \log p(x_i)$ under the model that computed the statistics.
    #[getter]
    fn log_likelihood(&self) -> f64 {
        self.inner.log_likelihood()
    }

    /// Mean log-likelihood per row (0 with no rows).
    #[getter]
    fn mean_log_likelihood(&self) -> f64 {
        let n = self.inner.n_rows();
        if n > 0 {
            self.inner.log_likelihood() / n as f64
        } else {
            0.0
        }
    }

    /// Soft counts $n_k$ (K).
    #[getter]
    fn resp_sums<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.soft_counts().to_pyarray(py)
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.add(py, other)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.add(py, other)
    }

    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "MfaStatistics cannot be pickled yet (fisherkit::mfa::MfaStats has no constructor from its parts)",
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "MfaStatistics(n_components={}, n_rows={}, mean_log_likelihood={})",
            self.inner.soft_counts().len(),
            self.inner.n_rows(),
            self.mean_log_likelihood()
        )
    }
}

impl MfaStatistics {
    fn add(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(o) = other.cast::<MfaStatistics>() {
            let mut acc = self.inner.clone();
            acc.merge(&o.get().inner).map_err(value_error)?;
            return Ok(Py::new(py, MfaStatistics { inner: acc })?.into_any());
        }
        if other.is_instance_of::<PyInt>() && other.extract::<i64>().ok() == Some(0) {
            let copy = MfaStatistics {
                inner: self.inner.clone(),
            };
            return Ok(Py::new(py, copy)?.into_any());
        }
        Ok(py.NotImplemented())
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
    m.add_function(wrap_pyfunction!(mfa_fisher_score, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fisher_score_dim, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_fit_whitening, m)?)?;
    Ok(())
}
