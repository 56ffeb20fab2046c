//! Reading safetensors weights: a weights file's bytes ([`read_weights`]), one checked f32
//! tensor ([`read_tensor`]) and a convolution's kernel and bias ([`load_conv`]).

use crate::error::CnnError;
use crate::ops::conv::Conv;
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// The bytes of a weights file, or an error naming it (both networks' `load`).
pub(crate) fn read_weights(path: &Path) -> Result<Vec<u8>, CnnError> {
    std::fs::read(path).map_err(|source| CnnError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Reads the f32 tensor `name` of `st`, checking its dtype, shape (`expected`) and that every
/// value is finite.
pub(crate) fn read_tensor(
    st: &SafeTensors<'_>,
    name: &str,
    expected: &[usize],
) -> Result<Vec<f32>, CnnError> {
    let view = st
        .tensor(name)
        .map_err(|_| CnnError::MissingTensor(name.to_string()))?;
    if view.dtype() != Dtype::F32 {
        return Err(CnnError::TensorDtype {
            name: name.to_string(),
            got: format!("{:?}", view.dtype()),
        });
    }
    if view.shape() != expected {
        return Err(CnnError::TensorShape {
            name: name.to_string(),
            got: view.shape().to_vec(),
            expected: expected.to_vec(),
        });
    }
    let data: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some(index) = data.iter().position(|v| !v.is_finite()) {
        return Err(CnnError::NonFiniteWeight {
            name: name.to_string(),
            index,
        });
    }
    Ok(data)
}

/// Reads `{name}.weight` (cout, cin, k, k) and `{name}.bias` (cout) as a [`Conv`].
pub(crate) fn load_conv(
    st: &SafeTensors<'_>,
    name: &str,
    cin: usize,
    cout: usize,
    k: usize,
    stride: usize,
) -> Result<Conv, CnnError> {
    let w = read_tensor(st, &format!("{name}.weight"), &[cout, cin, k, k])?;
    let b = read_tensor(st, &format!("{name}.bias"), &[cout])?;
    Ok(Conv::new(w, b, cin, k, stride))
}
