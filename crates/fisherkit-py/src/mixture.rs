//! What the GMM and MFA bindings share: a model built from its numpy
//! parameters ([`ModelArgs`]), handed back as numpy arrays, and the
//! inference and E-step functions over the rows of a matrix in its dtype
//! ([`Mixture`]), once for both kinds.

use crate::interrupt::{interruptible, Cancel};
use crate::stats::{returned_statistics, DriveError, Stop};
use crate::{dispatch, value_error, Mat, PyFloat};
use fisherkit::gmm::{DiagGmm, GmmFit};
use fisherkit::mfa::{Mfa, MfaFit};
use ndarray::{Array1, Array2, ArrayView2};
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A fitted mixture of the library as the bindings use it.
pub(crate) trait Mixture<F: PyFloat>: Clone + Sync {
    /// The library's error.
    type Error: std::fmt::Display + Send;
    /// The library's E-step statistics.
    type Stats: Clone + Send;
    /// The Python class of the statistics.
    type PyStats: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync;
    /// The parameters as numpy arrays (a tuple).
    type Out<'py>: IntoPyObject<'py>;
    /// The name of the Python class of the statistics (for errors).
    const STATS_CLASS: &'static str;

    fn to_py(self, py: Python<'_>) -> Self::Out<'_>;
    fn score_samples(&self, x: ArrayView2<'_, F>) -> Result<Array1<f64>, Self::Error>;
    fn predict_proba(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, Self::Error>;
    fn statistics(&self, x: ArrayView2<'_, F>) -> Result<Self::Stats, Self::Error>;
    fn wrap(st: Self::Stats) -> Self::PyStats;
    fn unwrap(st: &Self::PyStats) -> Self::Stats;
}

/// The numpy parameters of a model, as a Python function receives them.
pub(crate) trait ModelArgs {
    type Model<F: PyFloat>: Mixture<F>;
    /// Builds (and validates) the library's model in `F`.
    fn model<F: PyFloat>(&self) -> PyResult<Self::Model<F>>;
}

/// A fit's result: the model, the log-likelihood history, the iterations
/// and whether EM converged.
pub(crate) trait FitParts<M> {
    fn parts(self) -> (M, Vec<f64>, usize, bool);
}

impl<F: PyFloat> FitParts<DiagGmm<F>> for GmmFit<F> {
    fn parts(self) -> (DiagGmm<F>, Vec<f64>, usize, bool) {
        (self.model, self.log_likelihood, self.n_iter, self.converged)
    }
}

impl<F: PyFloat> FitParts<Mfa<F>> for MfaFit<F> {
    fn parts(self) -> (Mfa<F>, Vec<f64>, usize, bool) {
        (self.model, self.log_likelihood, self.n_iter, self.converged)
    }
}

/// One of two spellings of option `what`, or the error naming both.
pub(crate) fn choice<T>(what: &str, got: &str, [(a, x), (b, y)]: [(&str, T); 2]) -> PyResult<T> {
    match got {
        g if g == a => Ok(x),
        g if g == b => Ok(y),
        other => Err(PyValueError::new_err(format!(
            "{what} must be \"{a}\" or \"{b}\", got {other:?}"
        ))),
    }
}

/// Runs an in-memory fit in a worker thread (Ctrl-C stops it after the
/// current iteration: `fit` is given the cancel flag to check).
pub(crate) fn fit_interruptibly<'py, F: PyFloat, M: Mixture<F>, R: FitParts<M> + Send>(
    py: Python<'py>,
    fit: impl FnOnce(&Cancel) -> Result<R, Stop> + Send,
) -> PyResult<FitOut<'py, F, M>> {
    let r = interruptible(py, fit)?.map_err(Stop::into_py)?;
    Ok(fit_out(py, r.parts()))
}

/// Runs a fit whose E-step calls `statistics_of` (a Python callable) with
/// the model's parameters; an exception it raises propagates as raised.
pub(crate) fn fit_driven<'py, F: PyFloat, M: Mixture<F>, R: FitParts<M>>(
    py: Python<'py>,
    statistics_of: &Bound<'py, PyAny>,
    fit: impl FnOnce(&mut dyn FnMut(&M) -> Result<M::Stats, DriveError>) -> Result<R, DriveError>,
) -> PyResult<FitOut<'py, F, M>>
where
    M::Out<'py>: pyo3::call::PyCallArgs<'py>,
{
    let mut stats_of = self::statistics_of(py, statistics_of);
    let r = fit(&mut stats_of).map_err(|e| e.0)?;
    Ok(fit_out(py, r.parts()))
}

/// What a fit returns to Python: `(parameters, log_likelihood_history,
/// n_iter, converged)`.
pub(crate) type FitOut<'py, F, M> = (<M as Mixture<F>>::Out<'py>, Vec<f64>, usize, bool);

/// The [`FitOut`] of a fitted model.
pub(crate) fn fit_out<F: PyFloat, M: Mixture<F>>(
    py: Python<'_>,
    (model, log_likelihood, n_iter, converged): (M, Vec<f64>, usize, bool),
) -> FitOut<'_, F, M> {
    (model.to_py(py), log_likelihood, n_iter, converged)
}

/// The E-step of an EM whose statistics Python computes: calls
/// `statistics_of(*parameters)` and takes the statistics it returns.
fn statistics_of<'a, 'py, F: PyFloat, M: Mixture<F>>(
    py: Python<'py>,
    statistics_of: &'a Bound<'py, PyAny>,
) -> impl FnMut(&M) -> Result<M::Stats, DriveError> + use<'a, 'py, F, M>
where
    'py: 'a,
    M::Out<'py>: pyo3::call::PyCallArgs<'py>,
{
    move |m: &M| {
        let out = statistics_of.call1(m.clone().to_py(py))?;
        returned_statistics(&out, M::STATS_CLASS, M::unwrap)
    }
}

/// Log-likelihood log p(x_i) (N) of the rows of `x` (N, D), float64.
pub(crate) fn score_samples<'py, A: ModelArgs>(
    py: Python<'py>,
    args: &A,
    x: &Mat<'py>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    fn run<'py, A: ModelArgs, F: PyFloat>(
        py: Python<'py>,
        args: &A,
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let m = args.model::<F>()?;
        let ll = py.detach(|| m.score_samples(x)).map_err(value_error)?;
        Ok(ll.into_pyarray(py))
    }
    dispatch!(x, run(py, args))
}

/// Posteriors (N, K) of the rows of `x` (N, D), in x's dtype.
pub(crate) fn predict_proba<'py, A: ModelArgs>(
    py: Python<'py>,
    args: &A,
    x: &Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    fn run<'py, A: ModelArgs, F: PyFloat>(
        py: Python<'py>,
        args: &A,
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = args.model::<F>()?;
        let q = py.detach(|| m.predict_proba(x)).map_err(value_error)?;
        Ok(q.into_pyarray(py).into_any())
    }
    dispatch!(x, run(py, args))
}

/// E-step sums of the rows of `x` (N, D) under the model, as the kind's
/// statistics class.
pub(crate) fn sufficient_statistics<'py, A: ModelArgs, S>(
    py: Python<'py>,
    args: &A,
    x: &Mat<'py>,
) -> PyResult<S>
where
    A::Model<f32>: Mixture<f32, PyStats = S>,
    A::Model<f64>: Mixture<f64, PyStats = S>,
{
    fn run<'py, F: PyFloat, M: Mixture<F>>(
        py: Python<'py>,
        m: PyResult<M>,
        x: ArrayView2<'_, F>,
    ) -> PyResult<M::PyStats> {
        let m = m?;
        let st = py.detach(|| m.statistics(x)).map_err(value_error)?;
        Ok(M::wrap(st))
    }
    match x {
        Mat::F32(a) => run(py, args.model::<f32>(), a.as_array()),
        Mat::F64(a) => run(py, args.model::<f64>(), a.as_array()),
    }
}
