//! [`Backbone`], an owned choice of network (built-in or ONNX) for the pipeline and the CLI,
//! behind the [`Cnn`] trait (`crate::cnn`), and [`BackboneKind`], which built-in network.
//! Each network implements [`Cnn`] in its own module.
//!
//! Both networks map a preprocessed (3, H, W) input to a class-score map (1000, h, w) whose
//! cells are the dense descriptors' class scores; their spatial mean is the network's logits.

use crate::cnn::{sealed, Cnn};
use crate::efficientnet::{self, EfficientNetLite0};
use crate::error::CnnError;
use crate::image::ImageError;
use crate::net::{self, SqueezeNet};
#[cfg(feature = "onnx")]
use crate::onnx::OnnxCnn;
use fisherkit::linalg::Par;
use ndarray::{Array3, ArrayView3};

/// Which built-in network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackboneKind {
    /// SqueezeNet v1.1 (227-px input, 13×13 cells, stride 16; the demo's network:
    /// on its 28-px images, one patch each, its finer cells measure better).
    SqueezeNet,
    /// EfficientNet-Lite0 (224-px input, 7×7 cells, stride 32): the default, the more
    /// accurate on photos (`fisherkit_pipeline::defaults::CNN`, docs/backbones.md).
    #[default]
    EfficientNetLite0,
}

impl BackboneKind {
    /// The stable name (`"squeezenet1_1"`, `"efficientnet_lite0"`).
    pub fn name(self) -> &'static str {
        match self {
            BackboneKind::SqueezeNet => net::NAME,
            BackboneKind::EfficientNetLite0 => efficientnet::NAME,
        }
    }
}

impl BackboneKind {
    /// The shipped weights file of the network (safetensors bytes), e.g. for
    /// a fingerprint that tells whether a model trained on its descriptors
    /// was trained with the same weights.
    #[cfg(feature = "builtin-weights")]
    pub fn builtin_weights(self) -> &'static [u8] {
        match self {
            BackboneKind::SqueezeNet => crate::net::BUILTIN_WEIGHTS,
            BackboneKind::EfficientNetLite0 => crate::efficientnet::BUILTIN_WEIGHTS,
        }
    }
}

impl std::fmt::Display for BackboneKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackboneKind {
    type Err = String;
    /// Accepts `squeezenet`, `squeezenet1_1`, `efficientnet-lite0`, `efficientnet_lite0`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "squeezenet" | "squeezenet1_1" => Ok(BackboneKind::SqueezeNet),
            "efficientnet-lite0" | "efficientnet_lite0" => Ok(BackboneKind::EfficientNetLite0),
            other => Err(format!(
                "unknown CNN `{other}` (expected squeezenet or efficientnet-lite0)"
            )),
        }
    }
}

/// One of the built-in networks, or (feature `onnx`) an ONNX model, owned.
// The variants differ by a few hundred bytes of layer headers (the weights are on the heap);
// one Backbone exists per run, so boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Backbone {
    SqueezeNet(SqueezeNet),
    EfficientNetLite0(EfficientNetLite0),
    /// Any ONNX image classifier ([`OnnxCnn`]).
    #[cfg(feature = "onnx")]
    Onnx(Box<OnnxCnn>),
}

impl Backbone {
    /// The network `kind` with its shipped ImageNet weights.
    #[cfg(feature = "builtin-weights")]
    pub fn builtin(kind: BackboneKind) -> Result<Self, CnnError> {
        Ok(match kind {
            BackboneKind::SqueezeNet => Backbone::SqueezeNet(SqueezeNet::builtin()?),
            BackboneKind::EfficientNetLite0 => {
                Backbone::EfficientNetLite0(EfficientNetLite0::builtin()?)
            }
        })
    }

    /// Which built-in network; `None` for an ONNX model.
    pub fn kind(&self) -> Option<BackboneKind> {
        match self {
            Backbone::SqueezeNet(_) => Some(BackboneKind::SqueezeNet),
            Backbone::EfficientNetLite0(_) => Some(BackboneKind::EfficientNetLite0),
            #[cfg(feature = "onnx")]
            Backbone::Onnx(_) => None,
        }
    }

    fn inner(&self) -> &dyn Cnn {
        match self {
            Backbone::SqueezeNet(n) => n,
            Backbone::EfficientNetLite0(n) => n,
            #[cfg(feature = "onnx")]
            Backbone::Onnx(n) => &**n,
        }
    }
}

impl From<SqueezeNet> for Backbone {
    fn from(n: SqueezeNet) -> Self {
        Backbone::SqueezeNet(n)
    }
}

impl From<EfficientNetLite0> for Backbone {
    fn from(n: EfficientNetLite0) -> Self {
        Backbone::EfficientNetLite0(n)
    }
}

#[cfg(feature = "onnx")]
impl From<OnnxCnn> for Backbone {
    fn from(n: OnnxCnn) -> Self {
        Backbone::Onnx(Box::new(n))
    }
}

impl sealed::Forward for Backbone {
    fn forward_par(&self, input: ArrayView3<'_, f32>, par: Par) -> Result<Array3<f32>, CnnError> {
        self.inner().forward_par(input, par)
    }
}

impl Cnn for Backbone {
    fn name(&self) -> &str {
        self.inner().name()
    }
    fn num_classes(&self) -> usize {
        self.inner().num_classes()
    }
    fn dense(&self) -> bool {
        self.inner().dense()
    }
    fn input_side(&self) -> usize {
        self.inner().input_side()
    }
    fn min_input_side(&self) -> usize {
        self.inner().min_input_side()
    }
    fn cell_stride(&self) -> usize {
        self.inner().cell_stride()
    }
    fn receptive_field(&self) -> usize {
        self.inner().receptive_field()
    }
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        self.inner().map_size(height, width)
    }
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
        self.inner().preprocess(img)
    }
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        self.inner().score_map(input)
    }
}
