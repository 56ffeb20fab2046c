//! [`OnnxOptions`]: how an ONNX model's input is preprocessed and which tensor holds its
//! class scores; presets reproducing the built-in networks.

/// How an [`OnnxCnn`] preprocesses images and which tensor holds the class scores.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxOptions {
    /// Side a patch is resized to (the classification input); `None`: the model's fixed input
    /// side if it has one, else 224.
    pub input_side: Option<usize>,
    /// Per-channel mean on the 0–1 scale, in the model's channel order.
    pub mean: [f32; 3],
    /// Per-channel standard deviation on the 0–1 scale, in the model's channel order.
    pub std: [f32; 3],
    /// The model takes BGR (Caffe) rather than RGB channels.
    pub bgr: bool,
    /// Name of the class-score tensor (a graph output or any tensor of the graph); `None`: the
    /// graph's first output.
    pub output: Option<String>,
    /// Run every patch on its own even when the model could run densely.
    pub exact_only: bool,
    /// Receptive field reported by [`Cnn::receptive_field`] (not used in computations);
    /// `None`: the input side.
    pub receptive_field: Option<usize>,
}

impl Default for OnnxOptions {
    /// torchvision's ImageNet preprocessing: RGB, mean (0.485, 0.456, 0.406),
    /// std (0.229, 0.224, 0.225); the model's input side or 224; the first output.
    fn default() -> Self {
        Self {
            input_side: None,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            bgr: false,
            output: None,
            exact_only: false,
            receptive_field: None,
        }
    }
}

impl OnnxOptions {
    /// The built-in SqueezeNet's preprocessing (BGR, 0–255 minus
    /// [`crate::image::MEAN_BGR`]), input side 227: for an ONNX export of SqueezeNet v1.1 such
    /// as `scripts/export_onnx.py` writes.
    pub fn squeezenet() -> Self {
        let m = crate::image::MEAN_BGR;
        Self {
            input_side: Some(crate::net::geometry::INPUT_SIDE),
            mean: [m[0] / 255.0, m[1] / 255.0, m[2] / 255.0],
            std: [1.0 / 255.0; 3],
            bgr: true,
            receptive_field: Some(crate::net::geometry::RECEPTIVE_FIELD),
            ..Self::default()
        }
    }

    /// The built-in EfficientNet-Lite0's preprocessing (RGB, (x − 127) / 128 of 0–255 values),
    /// input side 224.
    pub fn efficientnet_lite0() -> Self {
        use crate::efficientnet::{EFFNET_MEAN_RGB, EFFNET_STD_RGB};
        Self {
            input_side: Some(crate::efficientnet::EFFNET_INPUT_SIDE),
            mean: [EFFNET_MEAN_RGB / 255.0; 3],
            std: [EFFNET_STD_RGB / 255.0; 3],
            bgr: false,
            receptive_field: Some(crate::efficientnet::EFFNET_RECEPTIVE_FIELD),
            ..Self::default()
        }
    }
}
