//! [`OnnxError`], the errors of loading an ONNX model.

/// Errors of loading an ONNX model: each names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("cannot read the ONNX model {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read its external data file {file}: {source}")]
    ExternalData {
        path: String,
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable ONNX model (truncated, or not ONNX at all): {message}")]
    NotOnnx { path: String, message: String },
    #[error(
        "{path}: no 4-D image input: the model needs one input of shape (1, 3, H, W), {found}"
    )]
    NoImageInput { path: String, found: String },
    #[error("{path}: no tensor named `{name}` (graph outputs: {outputs})")]
    MissingOutput {
        path: String,
        name: String,
        outputs: String,
    },
    #[error(
        "{path}: output `{name}` is not a classifier: expected class scores (1, C) or a \
             class-score map (1, C, h, w) with C >= 2, got shape {shape}"
    )]
    NotClassifier {
        path: String,
        name: String,
        shape: String,
    },
    #[error("{path}: {message}")]
    Options { path: String, message: String },
    #[error("{path}: tract cannot run this model: {message}")]
    Tract { path: String, message: String },
}
