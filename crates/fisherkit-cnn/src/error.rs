//! [`CnnError`], the error of the networks and of descriptor extraction (loading an ONNX
//! model has its own, `OnnxError`).

use crate::image::ImageError;
use crate::net::geometry::MIN_INPUT_SIDE;

/// Errors of the network and of descriptor extraction.
#[derive(Debug, thiserror::Error)]
pub enum CnnError {
    #[error("cannot read the weights file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid safetensors weights: {0}")]
    Format(String),
    #[error("weights: tensor `{0}` is missing")]
    MissingTensor(String),
    #[error("weights: tensor `{name}` has shape {got:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        got: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("weights: tensor `{name}` has dtype {got}, expected F32")]
    TensorDtype { name: String, got: String },
    #[error("weights: tensor `{name}` holds a non-finite value at flat index {index}")]
    NonFiniteWeight { name: String, index: usize },
    #[error("network input must be (3, H, W) with H, W >= {MIN_INPUT_SIDE}, got {0:?}")]
    InputShape(Vec<usize>),
    /// The input of a network other than SqueezeNet (which keeps [`CnnError::InputShape`]).
    #[error("{net} input must be (3, H, W) with H, W >= {min}, got {shape:?}")]
    NetInputShape {
        net: &'static str,
        min: usize,
        shape: Vec<usize>,
    },
    #[error("network input holds a non-finite value at (channel {0}, row {1}, column {2})")]
    NonFiniteInput(usize, usize, usize),
    /// The ONNX runtime failed on a model that loaded (feature `onnx`).
    #[error("ONNX model {path}: {message}")]
    Onnx { path: String, message: String },
    #[error("invalid descriptor parameters: {0}")]
    Params(String),
    #[error("image {index} of the batch: {source}")]
    BatchImage {
        index: usize,
        #[source]
        source: ImageError,
    },
    #[error(transparent)]
    Image(#[from] ImageError),
}
