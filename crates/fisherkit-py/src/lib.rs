//! Native core of the Python module `fisherkit` (imported as `fisherkit._fisherkit`).
//!
//! This layer is deliberately thin and functional: model parameters travel as
//! numpy arrays, every call validates them by building the library's model
//! (O(K·D), negligible next to the computation), and the scikit-learn style
//! estimators live in the pure-Python package (`python/fisherkit`). Data are
//! borrowed from numpy without copies (the Python layer passes C-contiguous
//! `float32`/`float64` arrays), the GIL is released during every computation
//! (`Python::detach`), and library errors become `ValueError` with the
//! library's message.

use fisherkit::Float;
use ndarray::{Array1, Array2, ArrayView2};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

mod encode;
mod gmm;
mod interrupt;
mod io;
mod kmeans;
mod linear;
mod mfa;
mod mixture;
mod mixture_kinds;
mod pipeline;
mod run;
mod scene;
mod stats;

/// The float types the bindings compute in: the library's [`Float`] that numpy
/// also knows.
pub(crate) trait PyFloat: Float + numpy::Element {}
impl PyFloat for f32 {}
impl PyFloat for f64 {}

/// A 2-D `float32` or `float64` numpy array, borrowed.
#[derive(FromPyObject)]
pub(crate) enum Mat<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

/// A 1-D `float32` or `float64` numpy array, borrowed.
#[derive(FromPyObject)]
pub(crate) enum Vec1<'py> {
    F32(PyReadonlyArray1<'py, f32>),
    F64(PyReadonlyArray1<'py, f64>),
}

impl Mat<'_> {
    /// A copy in `F` (model parameters: small).
    pub(crate) fn to_owned_as<F: Float>(&self) -> Array2<F> {
        match self {
            Mat::F32(a) => a.as_array().mapv(|v| F::from_f64_lossy(v as f64)),
            Mat::F64(a) => a.as_array().mapv(F::from_f64_lossy),
        }
    }

    pub(crate) fn is_f32(&self) -> bool {
        matches!(self, Mat::F32(_))
    }
}

impl Vec1<'_> {
    pub(crate) fn to_owned_as<F: Float>(&self) -> Array1<F> {
        match self {
            Vec1::F32(a) => a.as_array().mapv(|v| F::from_f64_lossy(v as f64)),
            Vec1::F64(a) => a.as_array().mapv(F::from_f64_lossy),
        }
    }
}

/// Any library error → `ValueError` with the library's message.
pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Borrowed views of a list of bags, all of type `F` (the Python layer casts
/// them to one dtype first).
pub(crate) fn bag_views<'a, F: PyFloat>(
    bags: &'a [Mat<'_>],
    pick: impl Fn(&'a Mat<'_>) -> Option<ArrayView2<'a, F>>,
) -> PyResult<Vec<ArrayView2<'a, F>>> {
    bags.iter()
        .enumerate()
        .map(|(i, b)| {
            pick(b).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "bag {i} has a different dtype from bag 0; all bags must share one dtype"
                ))
            })
        })
        .collect()
}

pub(crate) fn as_f32<'a>(m: &'a Mat<'_>) -> Option<ArrayView2<'a, f32>> {
    match m {
        Mat::F32(a) => Some(a.as_array()),
        Mat::F64(_) => None,
    }
}

pub(crate) fn as_f64<'a>(m: &'a Mat<'_>) -> Option<ArrayView2<'a, f64>> {
    match m {
        Mat::F64(a) => Some(a.as_array()),
        Mat::F32(_) => None,
    }
}

/// Calls `$run(py, view, ...)` with the borrowed view of a [`Mat`] in its own dtype.
macro_rules! dispatch {
    ($x:expr, $run:ident($($arg:expr),*)) => {
        match &$x {
            $crate::Mat::F32(a) => $run($($arg,)* a.as_array()),
            $crate::Mat::F64(a) => $run($($arg,)* a.as_array()),
        }
    };
}
pub(crate) use dispatch;

/// Runs `$body` with `$views` bound to the bags' views in their common dtype,
/// `$F` aliased to it (float64 when there are no bags).
macro_rules! with_views {
    ($bags:expr, |$views:ident : $F:ident| $body:expr) => {
        if $bags.first().is_some_and($crate::Mat::is_f32) {
            type $F = f32;
            let $views = $crate::bag_views::<f32>(&$bags, $crate::as_f32)?;
            $body
        } else {
            type $F = f64;
            let $views = $crate::bag_views::<f64>(&$bags, $crate::as_f64)?;
            $body
        }
    };
}
pub(crate) use with_views;

/// The native module.
#[pymodule]
fn _fisherkit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // rust-numpy looks numpy's C API up on first use, by importing numpy, and
    // panics if that fails ("Failed to access NumPy array API capsule"): it
    // did when the first use came after a long computation with a Ctrl-C
    // pending, whose KeyboardInterrupt the import raised. Looked up here, at
    // import, after numpy imported cleanly (a pending Ctrl-C raises from it).
    m.py().import("numpy")?;
    m.py().check_signals()?;
    let _ = numpy::PyArray1::<f64>::zeros(m.py(), 0, false);
    kmeans::register(m)?;
    gmm::register(m)?;
    encode::register(m)?;
    io::register(m)?;
    mfa::register(m)?;
    linear::register(m)?;
    pipeline::register(m)?;
    run::register(m)?;
    scene::register(m)?;
    stats::register(m)?;
    Ok(())
}
