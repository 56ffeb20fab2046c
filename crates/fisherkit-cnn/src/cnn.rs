//! The common interface of the networks: the [`Cnn`] trait, what descriptor extraction
//! needs (preprocessing, input side, score-map geometry, the forward pass). It knows no
//! network: each implements it in its own module (`crate::net`, `crate::efficientnet`,
//! `crate::onnx`), and `crate::backbone`'s choice of network forwards to them.
//!
//! A network maps a preprocessed (3, H, W) input to a class-score map (C, h, w) whose
//! cells are the dense descriptors' class scores; their spatial mean is the network's logits.

use crate::error::CnnError;
use crate::image::ImageError;
use crate::net::geometry::NUM_CLASSES;
use crate::scores::pool_scores;
use ndarray::{Array1, Array3, ArrayView3};

pub(crate) mod sealed {
    use fisherkit::linalg::Par;
    use ndarray::{Array3, ArrayView3};

    /// The forward pass without input checks, with an explicit work split (crate-internal).
    /// Infallible for the built-in networks; an ONNX model's runtime can fail.
    pub trait Forward {
        fn forward_par(
            &self,
            input: ArrayView3<'_, f32>,
            par: Par,
        ) -> Result<Array3<f32>, crate::error::CnnError>;
    }
}

/// An image classifier usable by [`crate::extract`] and the other descriptor functions.
/// Implemented by [`crate::SqueezeNet`], [`crate::EfficientNetLite0`], `OnnxCnn` (feature `onnx`) and
/// [`crate::Backbone`]; sealed.
pub trait Cnn: sealed::Forward + Sync {
    /// Stable name, used in run keys and reports: `"squeezenet1_1"`, `"efficientnet_lite0"`,
    /// `"onnx:<file name>#<hash>"`.
    fn name(&self) -> &str;
    /// Side of the classification input (227 for SqueezeNet, 224 for EfficientNet-Lite0): the
    /// side a patch is resized to.
    fn input_side(&self) -> usize;
    /// Smallest input side with a non-empty score map.
    fn min_input_side(&self) -> usize;
    /// Stride, in network-input pixels, between neighbouring score-map cells.
    fn cell_stride(&self) -> usize;
    /// Receptive field, in network-input pixels, of one score-map cell.
    fn receptive_field(&self) -> usize;
    /// Score-map size (h, w) for an H×W input, `None` below [`Cnn::min_input_side`].
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)>;
    /// Number of classes C: rows of the score map, columns of the descriptors (1000 for the
    /// built-in networks).
    fn num_classes(&self) -> usize {
        NUM_CLASSES
    }
    /// Whether the network runs fully-convolutionally on any input of at least
    /// [`Cnn::min_input_side`] (dense patches). `false` for an ONNX model with a fixed input or a
    /// non-convolutional classifier: it only runs at [`Cnn::input_side`] and
    /// [`crate::extract`] then uses exact patches whatever the mode asked for.
    fn dense(&self) -> bool {
        true
    }
    /// (H, W, 3) RGB 0–255 → the network's (3, H, W) input.
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError>;
    /// The class-score map (C, h, w) of a preprocessed input (3, H, W), all rayon threads
    /// ((C, 1, 1) for a network that is not [`Cnn::dense`]).
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError>;
    /// The C logits (spatial mean of the score map) of a preprocessed input.
    fn logits(&self, input: ArrayView3<'_, f32>) -> Result<Array1<f32>, CnnError> {
        Ok(pool_scores(&self.score_map(input)?))
    }
}
