//! Model files: safetensors, the format of docs/formats.md §2 (metadata `kind`,
//! `format_version`; f32 or f64 tensors), written with the `safetensors` crate.

use numpy::{IntoPyArray, PyReadonlyArrayDyn};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use safetensors::tensor::{serialize_to_file, Dtype, SafeTensorError, TensorView};
use safetensors::SafeTensors;
use std::collections::HashMap;
use std::path::PathBuf;

/// An n-D `float32` or `float64` numpy array, borrowed.
#[derive(FromPyObject)]
enum AnyArr<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

fn st_error(path: &std::path::Path, e: SafeTensorError) -> PyErr {
    match e {
        SafeTensorError::IoError(io) => PyOSError::new_err(format!("{}: {io}", path.display())),
        other => PyValueError::new_err(format!(
            "{}: not a valid safetensors file: {other}",
            path.display()
        )),
    }
}

/// Writes `tensors` (name → float32/float64 array, C order) and the string
/// `metadata` to a safetensors file at `path` (atomically: a sibling temporary
/// file renamed over it).
#[pyfunction]
fn save_safetensors(
    py: Python<'_>,
    path: PathBuf,
    metadata: HashMap<String, String>,
    tensors: Vec<(String, AnyArr<'_>)>,
) -> PyResult<()> {
    let owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, a)| match a {
            AnyArr::F32(a) => {
                let v = a.as_array();
                let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                (name.clone(), Dtype::F32, v.shape().to_vec(), bytes)
            }
            AnyArr::F64(a) => {
                let v = a.as_array();
                let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                (name.clone(), Dtype::F64, v.shape().to_vec(), bytes)
            }
        })
        .collect();
    let views = owned
        .iter()
        .map(|(n, dt, shape, bytes)| {
            TensorView::new(*dt, shape.clone(), bytes)
                .map(|v| (n.as_str(), v))
                .map_err(|e| st_error(&path, e))
        })
        .collect::<PyResult<Vec<_>>>()?;
    py.detach(|| serialize_to_file(views, Some(metadata), &path))
        .map_err(|e| st_error(&path, e))
}

/// Reads a safetensors file: `(metadata: dict[str, str], tensors: list[(name,
/// ndarray)])`, tensors in file order, float32 or float64 only.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn load_safetensors<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(HashMap<String, String>, Vec<(String, Bound<'py, PyAny>)>)> {
    let bytes =
        std::fs::read(&path).map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(|e| st_error(&path, e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| st_error(&path, e))?;
    let mut out = Vec::new();
    let mut tensors = st.tensors();
    tensors.sort_by_key(|(_, t)| t.data().as_ptr() as usize);
    for (name, t) in tensors {
        let shape = ndarray::IxDyn(t.shape());
        let arr = match t.dtype() {
            Dtype::F32 => {
                let v: Vec<f32> = t
                    .data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect();
                ndarray::ArrayD::from_shape_vec(shape, v)
                    .map_err(crate::value_error)?
                    .into_pyarray(py)
                    .into_any()
            }
            Dtype::F64 => {
                let v: Vec<f64> = t
                    .data()
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                ndarray::ArrayD::from_shape_vec(shape, v)
                    .map_err(crate::value_error)?
                    .into_pyarray(py)
                    .into_any()
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "{}: tensor `{name}` has dtype {other:?}; fisherkit model files hold F32 or F64 tensors",
                    path.display()
                )))
            }
        };
        out.push((name, arr));
    }
    Ok((meta.metadata().clone().unwrap_or_default(), out))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(save_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(load_safetensors, m)?)?;
    Ok(())
}
