//! Model files: safetensors, the format of docs/formats.md §2 (metadata `kind`,
//! `format_version`; f32 or f64 tensors), read and written by fisherkit-io
//! only (the command line's readers and writers), so there is one reader per
//! format.

use crate::mfa::Arr3;
use crate::{value_error, Mat, Vec1};
use fisherkit::encode::parse_mfa_parts;
use fisherkit::gmm::DiagGmm;
use fisherkit_io::{
    read_model_kind, GmmModel, IoError, MfaArrays, MfaModel, MfaWhitening, Model, ModelFile,
    Whitened,
};
use numpy::IntoPyArray;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A fisherkit-io error: the operating system's → `OSError`
/// (`FileNotFoundError` for a missing file), the content's → `ValueError`.
fn io_error(e: IoError) -> PyErr {
    match &e {
        IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(e.to_string())
        }
        IoError::Os { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The `kind` of a model file (`"gmm"`, `"mfa"`, `"pca"` or `"linear-svm"`),
/// read by fisherkit-io's [`read_model_kind`]: the framing, `kind` and
/// `format_version` are checked, the tensors are left to that kind's reader.
/// A missing file is `FileNotFoundError`, another OS error `OSError`, a file
/// that is not a fisherkit model `ValueError`; each message names the file.
#[pyfunction]
fn model_kind(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    py.detach(|| read_model_kind(&path)).map_err(io_error)
}

/// Writes a `kind = "gmm"` model file with fisherkit-io's writer (the
/// command line's): `weights` (K), `means` (K, D), `variances` (K, D) in the
/// means' dtype, plus the string pairs of `metadata`. The parameters are
/// validated first.
#[pyfunction]
fn gmm_save(
    py: Python<'_>,
    path: PathBuf,
    weights: Vec1<'_>,
    means: Mat<'_>,
    variances: Mat<'_>,
    metadata: BTreeMap<String, String>,
) -> PyResult<()> {
    fn run<F: crate::PyFloat + fisherkit_io::Element>(
        py: Python<'_>,
        path: &PathBuf,
        (w, m, v): (&Vec1<'_>, &Mat<'_>, &Mat<'_>),
        meta: &BTreeMap<String, String>,
    ) -> PyResult<()> {
        let g = DiagGmm::<F>::new(w.to_owned_as(), m.to_owned_as(), v.to_owned_as())
            .map_err(value_error)?;
        py.detach(|| g.write(path, meta)).map_err(io_error)
    }
    let p = (&weights, &means, &variances);
    if means.is_f32() {
        run::<f32>(py, &path, p, &metadata)
    } else {
        run::<f64>(py, &path, p, &metadata)
    }
}

type GmmFile<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    BTreeMap<String, String>,
);

fn model_of_kind(
    path: &std::path::Path,
    want: &str,
) -> PyResult<(Model, Option<MfaWhitening>, BTreeMap<String, String>)> {
    let (Whitened { model, whitening }, meta) =
        Whitened::<Model>::read_with_metadata(path).map_err(io_error)?;
    let got = match &model {
        Model::Gmm(_) => "gmm",
        Model::Mfa(_) => "mfa",
    };
    if got != want {
        let name = |k: &str| if k == "gmm" { "a GMM" } else { "an MFA" };
        return Err(PyValueError::new_err(format!(
            "{}: is {} model (kind \"{got}\"); {} (kind \"{want}\") was expected",
            path.display(),
            name(got),
            name(want)
        )));
    }
    Ok((model, whitening, meta))
}

/// Reads a `kind = "gmm"` model file with fisherkit-io's reader (validated;
/// weights renormalised): `(weights, means, variances, metadata)` in the
/// file's dtype.
#[pyfunction]
fn gmm_load(py: Python<'_>, path: PathBuf) -> PyResult<GmmFile<'_>> {
    let (model, _, meta) = py.detach(|| model_of_kind(&path, "gmm"))?;
    fn out<'py, F: crate::PyFloat>(
        py: Python<'py>,
        g: DiagGmm<F>,
        meta: BTreeMap<String, String>,
    ) -> GmmFile<'py> {
        (
            g.weights().to_owned().into_pyarray(py).into_any(),
            g.means().to_owned().into_pyarray(py).into_any(),
            g.variances().to_owned().into_pyarray(py).into_any(),
            meta,
        )
    }
    Ok(match model {
        Model::Gmm(GmmModel::F32(g)) => out(py, g, meta),
        Model::Gmm(GmmModel::F64(g)) => out(py, g, meta),
        Model::Mfa(_) => unreachable!("model_of_kind checked the kind"),
    })
}

/// Writes a `kind = "mfa"` model file with fisherkit-io's writer: `weights`,
/// `means`, `loadings`, `psi` ((1, D) is stored as (D)) in the means' dtype,
/// the optional whitening block (`whitening_parts`, a list of "mean" /
/// "loading", and `fisher_information` (P)), plus the string pairs of
/// `metadata`. Everything is validated first.
#[pyfunction]
#[pyo3(signature = (path, weights, means, loadings, psi, metadata, whitening=None))]
#[allow(clippy::too_many_arguments)]
fn mfa_save(
    py: Python<'_>,
    path: PathBuf,
    weights: Vec1<'_>,
    means: Mat<'_>,
    loadings: Arr3<'_>,
    psi: Mat<'_>,
    metadata: BTreeMap<String, String>,
    whitening: Option<(Vec<String>, Vec1<'_>)>,
) -> PyResult<()> {
    let whitening = match &whitening {
        None => None,
        Some((parts, fim)) => {
            let parts = parse_mfa_parts(&parts.join(",")).map_err(value_error)?;
            Some(MfaWhitening::new(&parts, &fim.to_owned_as::<f64>()))
        }
    };
    fn run<F: crate::PyFloat + fisherkit_io::Element>(
        py: Python<'_>,
        path: &PathBuf,
        (w, m, l, p): (&Vec1<'_>, &Mat<'_>, &Arr3<'_>, &Mat<'_>),
        whitening: Option<MfaWhitening>,
        meta: &BTreeMap<String, String>,
    ) -> PyResult<()> {
        let arrays = MfaArrays::<F> {
            weights: w.to_owned_as(),
            means: m.to_owned_as(),
            loadings: l.to_owned_as(),
            psi: p.to_owned_as(),
        };
        arrays.validate().map_err(value_error)?;
        py.detach(|| {
            Whitened {
                model: arrays,
                whitening,
            }
            .write(path, meta)
        })
        .map_err(io_error)
    }
    let p = (&weights, &means, &loadings, &psi);
    if means.is_f32() {
        run::<f32>(py, &path, p, whitening, &metadata)
    } else {
        run::<f64>(py, &path, p, whitening, &metadata)
    }
}

type MfaFile<'py> = (
    (
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
    ),
    Option<(Vec<String>, Bound<'py, PyAny>)>,
    BTreeMap<String, String>,
);

/// Reads a `kind = "mfa"` model file with fisherkit-io's reader (validated,
/// whitening block included): `((weights, means, loadings, psi (1 or K, D)),
/// whitening or None, metadata)`, arrays in the file's dtype; the whitening
/// is `(parts, fisher_information (P))`.
#[pyfunction]
fn mfa_load(py: Python<'_>, path: PathBuf) -> PyResult<MfaFile<'_>> {
    let (model, whitening, meta) = py.detach(|| model_of_kind(&path, "mfa"))?;
    fn out<'py, F: crate::PyFloat>(
        py: Python<'py>,
        m: MfaArrays<F>,
        whitening: Option<MfaWhitening>,
        meta: BTreeMap<String, String>,
    ) -> MfaFile<'py> {
        let w = whitening.map(|w| {
            let parts = w.parts_string().split(',').map(str::to_string).collect();
            (
                parts,
                w.fisher_information_as::<F>().into_pyarray(py).into_any(),
            )
        });
        (
            (
                m.weights.into_pyarray(py).into_any(),
                m.means.into_pyarray(py).into_any(),
                m.loadings
                    .as_standard_layout()
                    .to_owned()
                    .into_pyarray(py)
                    .into_any(),
                m.psi.into_pyarray(py).into_any(),
            ),
            w,
            meta,
        )
    }
    Ok(match model {
        Model::Mfa(MfaModel::F32(m)) => out(py, m, whitening, meta),
        Model::Mfa(MfaModel::F64(m)) => out(py, m, whitening, meta),
        Model::Gmm(_) => unreachable!("model_of_kind checked the kind"),
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gmm_save, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_load, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_save, m)?)?;
    m.add_function(wrap_pyfunction!(mfa_load, m)?)?;
    m.add_function(wrap_pyfunction!(model_kind, m)?)?;
    Ok(())
}
