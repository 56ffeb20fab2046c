//! PCA and the one-vs-rest linear SVM, and their model files (kinds `pca`
//! and `linear-svm`, written and read by fisherkit-io: the same code and
//! checks as the Rust API).

use crate::{dispatch, value_error, Mat, PyFloat, Vec1};
use fisherkit::pca::{Pca, PcaParams};
use fisherkit::svm::{LinearSvc, LinearSvcParams, SvmLoss};
use fisherkit_io::{ClassLabels, IoError, LabelledSvm, LinearSvmModel, ModelFile, PcaModel};
use ndarray::ArrayView2;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

type PcaOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    f64,
);

/// PCA of the rows of `x` (N, D): `(mean (D), components (k, D),
/// explained_variance (k), explained_variance_ratio (k), total_variance)`, in
/// x's dtype (variances float64).
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
            p.total_variance(),
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

/// Decision values (N, K) w_k^T x_i + b_k of `x` (N, D), in x's dtype.
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

/// A file error: the operating system's → `OSError` (`FileNotFoundError`
/// for a missing file), anything about the content → `ValueError`; the
/// message names the file.
fn io_error(e: IoError) -> PyErr {
    match &e {
        IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(e.to_string())
        }
        IoError::Os { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Writes a `kind = "pca"` model file: `mean` (D) and `components` (d, D) in
/// the components' dtype, `explained_variance` (d) float64, metadata
/// `whiten`, `total_variance` and the string pairs of `metadata`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn pca_save(
    py: Python<'_>,
    path: PathBuf,
    mean: Vec1<'_>,
    components: Mat<'_>,
    explained_variance: PyReadonlyArray1<'_, f64>,
    whiten: bool,
    total_variance: f64,
    metadata: BTreeMap<String, String>,
) -> PyResult<()> {
    fn run<F: PyFloat + fisherkit_io::Element>(
        py: Python<'_>,
        path: &PathBuf,
        (mean, comp, var): (&Vec1<'_>, &Mat<'_>, &PyReadonlyArray1<'_, f64>),
        (whiten, total, meta): (bool, f64, &BTreeMap<String, String>),
    ) -> PyResult<()> {
        let p = Pca::<F>::from_parts(
            mean.to_owned_as(),
            comp.to_owned_as(),
            var.as_array().to_owned(),
            whiten,
        )
        .and_then(|p| p.with_total_variance(total))
        .map_err(value_error)?;
        py.detach(|| p.write(path, meta)).map_err(io_error)
    }
    let parts = (&mean, &components, &explained_variance);
    let rest = (whiten, total_variance, &metadata);
    if components.is_f32() {
        run::<f32>(py, &path, parts, rest)
    } else {
        run::<f64>(py, &path, parts, rest)
    }
}

type PcaFile<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    bool,
    f64,
    BTreeMap<String, String>,
);

/// Reads a `kind = "pca"` model file (validated by fisherkit-io): `(mean (D),
/// components (d, D), explained_variance (d) float64, whiten,
/// total_variance, metadata)`, mean and components in the file's dtype.
#[pyfunction]
fn pca_load(py: Python<'_>, path: PathBuf) -> PyResult<PcaFile<'_>> {
    let (model, meta) = py
        .detach(|| PcaModel::read_with_metadata(&path))
        .map_err(io_error)?;
    fn out<'py, F: PyFloat>(
        py: Python<'py>,
        p: Pca<F>,
        meta: BTreeMap<String, String>,
    ) -> PcaFile<'py> {
        (
            p.mean().to_owned().into_pyarray(py).into_any(),
            p.components().to_owned().into_pyarray(py).into_any(),
            p.explained_variance().to_owned().into_pyarray(py),
            p.whiten(),
            p.total_variance(),
            meta,
        )
    }
    Ok(match model {
        PcaModel::F32(p) => out(py, p, meta),
        PcaModel::F64(p) => out(py, p, meta),
    })
}

/// Class labels from Python: a list of ints or a list of strs.
#[derive(FromPyObject)]
enum Labels {
    Int(Vec<i64>),
    Str(Vec<String>),
}

/// Writes a `kind = "linear-svm"` model file: `weights` = `coef` (C, D) and
/// `bias` = `intercept` (C) in coef's dtype, metadata `classes` (JSON list of
/// the ints or strs of `classes`), `c` (if given) and the string pairs of
/// `metadata`.
#[pyfunction]
#[pyo3(signature = (path, coef, intercept, classes, c, metadata))]
fn linear_svc_save(
    py: Python<'_>,
    path: PathBuf,
    coef: Mat<'_>,
    intercept: Vec1<'_>,
    classes: Labels,
    c: Option<f64>,
    metadata: BTreeMap<String, String>,
) -> PyResult<()> {
    let classes = match classes {
        Labels::Int(v) => ClassLabels::Int(v),
        Labels::Str(v) => ClassLabels::Str(v),
    };
    fn run<F: PyFloat + fisherkit_io::Element>(
        py: Python<'_>,
        path: &PathBuf,
        (coef, intercept): (&Mat<'_>, &Vec1<'_>),
        classes: ClassLabels,
        c: Option<f64>,
        meta: &BTreeMap<String, String>,
    ) -> PyResult<()> {
        let svm = LinearSvc::<F>::from_parts(coef.to_owned_as(), intercept.to_owned_as())
            .map_err(value_error)?;
        let m = LabelledSvm { svm, classes, c };
        py.detach(|| m.write(path, meta)).map_err(io_error)
    }
    if coef.is_f32() {
        run::<f32>(py, &path, (&coef, &intercept), classes, c, &metadata)
    } else {
        run::<f64>(py, &path, (&coef, &intercept), classes, c, &metadata)
    }
}

type SvcFile<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<f64>,
    BTreeMap<String, String>,
);

/// Reads a `kind = "linear-svm"` model file (validated by fisherkit-io):
/// `(coef (C, D), intercept (C), classes (list of int or of str), c or None,
/// metadata)`, arrays in the file's dtype.
#[pyfunction]
fn linear_svc_load(py: Python<'_>, path: PathBuf) -> PyResult<SvcFile<'_>> {
    let (model, meta) = py
        .detach(|| LinearSvmModel::read_with_metadata(&path))
        .map_err(io_error)?;
    fn out<'py, F: PyFloat>(
        py: Python<'py>,
        m: LabelledSvm<F>,
        meta: BTreeMap<String, String>,
    ) -> PyResult<SvcFile<'py>> {
        let classes = match m.classes {
            ClassLabels::Int(v) => v.into_pyobject(py)?.into_any(),
            ClassLabels::Str(v) => v.into_pyobject(py)?.into_any(),
        };
        Ok((
            m.svm.coef().to_owned().into_pyarray(py).into_any(),
            m.svm.intercept().to_owned().into_pyarray(py).into_any(),
            classes,
            m.c,
            meta,
        ))
    }
    match model {
        LinearSvmModel::F32(m) => out(py, m, meta),
        LinearSvmModel::F64(m) => out(py, m, meta),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pca_save, m)?)?;
    m.add_function(wrap_pyfunction!(pca_load, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_save, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_load, m)?)?;
    m.add_function(wrap_pyfunction!(pca_fit, m)?)?;
    m.add_function(wrap_pyfunction!(pca_transform, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_fit, m)?)?;
    m.add_function(wrap_pyfunction!(linear_svc_decision_function, m)?)?;
    Ok(())
}
