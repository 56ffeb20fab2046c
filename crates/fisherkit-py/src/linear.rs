//! PCA and the one-vs-rest linear SVM.

use crate::{dispatch, value_error, Mat, PyFloat, Vec1};
use fisherkit::pca::{Pca, PcaParams};
use fisherkit::svm::{LinearSvc, LinearSvcParams, SvmLoss};
use ndarray::ArrayView2;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type PcaOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// PCA of the rows of `x` (N, D): `(mean (D), components (k, D),
/// explained_variance (k), explained_variance_ratio (k))`, in x's dtype
/// (variances float64).
#[pyfunction]
fn pca_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    n_components: usize,
    whiten: bool,
    center: bool,
    clamp_components: bool,
) -> PyResult<PcaOut<'py>> {
    let params = PcaParams::new(n_components)
        .whiten(whiten)
        .center(center)
        .clamp_components(clamp_components);
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        params: &PcaParams,
        x: ArrayView2<'_, F>,
    ) -> PyResult<PcaOut<'py>> {
        let p = py.detach(|| params.fit(x)).map_err(value_error)?;
        Ok((
            p.mean().to_owned().into_pyarray(py).into_any(),
            p.components().to_owned().into_pyarray(py).into_any(),
            p.explained_variance().to_owned().into_pyarray(py),
            p.explained_variance_ratio().into_pyarray(py),
        ))
    }
    dispatch!(x, run(py, &params))
}

/// Projects `x` (N, D) on the PCA `(mean (D), components (k, D),
/// explained_variance (k))`: (N, k) in x's dtype.
#[pyfunction]
fn pca_transform<'py>(
    py: Python<'py>,
    mean: Vec1<'py>,
    components: Mat<'py>,
    explained_variance: PyReadonlyArray1<'py, f64>,
    whiten: bool,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        (mean, comp, var, whiten): (&Vec1<'py>, &Mat<'py>, &PyReadonlyArray1<'py, f64>, bool),
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = Pca::<F>::from_parts(
            mean.to_owned_as(),
            comp.to_owned_as(),
            var.as_array().to_owned(),
            whiten,
        )
        .map_err(value_error)?;
        let z = py.detach(|| p.transform(x)).map_err(value_error)?;
        Ok(z.into_pyarray(py).into_any())
    }
    dispatch!(
        x,
        run(py, (&mean, &components, &explained_variance, whiten))
    )
}

type SvcOut<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<usize>, Vec<bool>);

/// One-vs-rest linear SVM (LIBLINEAR's dual coordinate descent) on `x` (N, D)
/// with labels `y` (N) in `0..n_classes`: `(coef (K, D), intercept (K),
/// n_iter per class, converged per class)`, K = n_classes ≥ 2.
#[pyfunction]
#[pyo3(signature = (x, y, n_classes, c, loss, tol, max_iter, bias, seed))]
#[allow(clippy::too_many_arguments)]
fn linear_svc_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    y: Vec<usize>,
    n_classes: usize,
    c: f64,
    loss: &str,
    tol: f64,
    max_iter: usize,
    bias: bool,
    seed: u64,
) -> PyResult<SvcOut<'py>> {
    let loss = match loss {
        "squared_hinge" => SvmLoss::SquaredHinge,
        "hinge" => SvmLoss::Hinge,
        other => {
            return Err(PyValueError::new_err(format!(
                "loss must be \"squared_hinge\" or \"hinge\", got {other:?}"
            )))
        }
    };
    let params = LinearSvcParams {
        c,
        loss,
        tol,
        max_iter,
        bias,
        seed,
        ..LinearSvcParams::default()
    };
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        (params, y, k): (&LinearSvcParams, &[usize], usize),
        x: ArrayView2<'_, F>,
    ) -> PyResult<SvcOut<'py>> {
        let svc = py
            .detach(|| params.fit_with_n_classes(x, y, k))
            .map_err(value_error)?;
        Ok((
            svc.coef().to_owned().into_pyarray(py).into_any(),
            svc.intercept().to_owned().into_pyarray(py).into_any(),
            svc.n_iter().to_vec(),
            svc.converged().to_vec(),
        ))
    }
    dispatch!(x, run(py, (&params, &y, n_classes)))
}

/// Decision values (N, K) $w_k^\top x_i + b_k$ of `x` (N, D), in x's dtype.
#[pyfunction]
fn linear_svc_decision_function<'py>(
    py: Python<'py>,
    coef: Mat<'py>,
    intercept: Vec1<'py>,
    x: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        (coef, intercept): (&Mat<'py>, &Vec1<'py>),
        x: ArrayView2<'_, F>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let svc = LinearSvc::<F>::from_parts(coef.to_owned_as(), intercept.to_owned_as())
            .map_err(value_error)?;
        let f = py
            .detach(|| svc.decision_function(x))
            .map_err(value_error)?;
        Ok(f.into_pyarray(py).into_any())
    }
    dispatch!(x, run(py, (&coef, &intercept)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pca_fit, m)?)?;
    m.add_function(wrap_pyfunction!(pca_transform, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_fit, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_decision_function, m)?)?;
    Ok(())
}
