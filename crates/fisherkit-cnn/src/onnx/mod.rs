//! Any ONNX image classifier as the pipeline's CNN ([`OnnxCnn`]), run by
//! [tract](https://crates.io/crates/tract-onnx) (pure Rust; cargo feature `onnx`).
//!
//! # What a model must be
//! One image input of rank 4, (1, 3, H, W) (N may be free, it is fixed to 1; an unknown channel
//! count is fixed to 3), and a class-score tensor ([`OnnxOptions::output`], default the graph's
//! first output) of shape (1, C) or (1, C, h, w) with C ≥ 2.
//!
//! # Dense or exact patches
//! fisherkit walks back from the chosen output through `Softmax`/`LogSoftmax` and shape-only
//! nodes (`Flatten`, `Reshape`, `Squeeze`, `Identity`):
//! * the class scores are the tensor *before* any `Softmax`: the logits. Descriptors are
//!   log-softmax of the scores (natural parameters up to a constant), so logits and
//!   log-probabilities give the same descriptors while probabilities would not;
//! * if the walk reaches a `GlobalAveragePool` (or a `ReduceMean` over axes 2, 3) of a 4-D
//!   tensor, or the output itself is 4-D, and the image input has a free H×W, the model is
//!   **dense**: that 4-D tensor (1, C, h, w) is the class-score map, one descriptor per cell,
//!   like the built-in networks (whose logits are also the spatial mean of their score map);
//! * otherwise (a fixed input size, or layers between the last 4-D tensor and the scores that
//!   are not a global mean, e.g. VGG's fully connected classifier) the model is **exact-only**:
//!   [`Cnn::dense`] is `false` and [`crate::extract`] classifies every patch on its own
//!   (exact patches) even when dense patches were asked for.
//!
//! # Preprocessing
//! The (H, W, 3) RGB 0–255 image becomes the (3, H, W) input
//! $x_c = (\mathrm{pixel}_c / 255 - \mathrm{mean}_c) / \mathrm{std}_c$ in the model's channel
//! order ([`OnnxOptions::bgr`]); mean and std are on the 0–1 scale, in the model's channel
//! order (default: torchvision's ImageNet values, RGB). [`OnnxOptions::squeezenet`] and
//! [`OnnxOptions::efficientnet_lite0`] reproduce the built-in networks' preprocessing.
//!
//! # Geometry
//! * input side ([`Cnn::input_side`], the side a patch is resized to): [`OnnxOptions::input_side`],
//!   else the model's input side if it is fixed and square, else 224;
//! * score-map size: tract's shape inference with symbolic H and W, evaluated per size;
//! * smallest input side: probed by running the model on zero inputs (binary search);
//! * cell stride: from the map sizes at the input side and 5 times it, rounded;
//! * receptive field: not derived from the graph (informational only):
//!   [`OnnxOptions::receptive_field`], else the input side.

mod error;
mod graph;
mod guard;
mod hash;
mod load;
mod options;

pub use error::OnnxError;
pub use options::OnnxOptions;

use crate::cnn::{sealed, Cnn};
use crate::error::CnnError;
use crate::image::{check_image, ImageError};
use crate::input::check_finite_input;
use fisherkit::linalg::Par;
use guard::guarded;
use ndarray::{Array3, ArrayView3, Axis, Ix4};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tract_onnx::prelude::*;

type Plan = TypedRunnableModel;

/// An ONNX image classifier usable wherever a built-in network is ([`Cnn`]): see the module
/// docs for the models it accepts, dense against exact patches and the preprocessing.
#[derive(Clone)]
pub struct OnnxCnn {
    name: String,
    path: PathBuf,
    options: OnnxOptions,
    input_side: usize,
    classes: usize,
    /// Name of the tensor the scores are read from (the map when dense).
    score_tensor: String,
    dense: bool,
    /// Dense: the plan with symbolic H, W; exact: the plan at input_side × input_side.
    plan: Arc<Plan>,
    /// Dense: the score-map dims (C, h, w) as expressions of H, W.
    map_dims: Option<(Symbol, Symbol, TDim, TDim)>,
    min_input_side: usize,
    cell_stride: usize,
    /// The pixel→input affine map per input channel: x = pixel · scale + offset.
    scale: [f32; 3],
    offset: [f32; 3],
}

impl std::fmt::Debug for OnnxCnn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxCnn")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("options", &self.options)
            .field("input_side", &self.input_side)
            .field("classes", &self.classes)
            .field("score_tensor", &self.score_tensor)
            .field("dense", &self.dense)
            .finish_non_exhaustive()
    }
}

impl OnnxCnn {
    /// Loads the ONNX model at `path` (see the module docs for what it must be).
    ///
    /// ```no_run
    /// use fisherkit_cnn::onnx::{OnnxCnn, OnnxOptions};
    /// use fisherkit_cnn::{extract, load_image, Cnn, DescriptorParams};
    /// // A torchvision classifier exported with a free H×W input and ImageNet preprocessing.
    /// let net = OnnxCnn::load("resnet50.onnx", &OnnxOptions::default())?;
    /// println!("{} classes, dense: {}", net.num_classes(), net.dense());
    /// let img = load_image("photo.jpg")?;
    /// let per_scale = extract(&net, img.view(), &DescriptorParams::default())?;
    /// assert_eq!(per_scale[0].ncols(), net.num_classes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`OnnxError`]: the file (or an external-data file it names) cannot be read, is not ONNX or is truncated, has no 4-D image
    /// input, has no tensor named [`OnnxOptions::output`], its scores are not class scores, or
    /// tract cannot type or run it.
    pub fn load(path: impl AsRef<Path>, options: &OnnxOptions) -> Result<Self, OnnxError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes, path, options)
    }

    /// Smallest side n ≤ the input side at which an n×n zero input runs and gives the map size
    /// shape inference predicts (binary search; the model must work at the input side). A size
    /// at which shape inference gives any tensor a side < 1 is not run: tract's matrix kernels
    /// can crash the process (SIGSEGV, not a panic) on a convolution larger than its input,
    /// as VGG-16's 7×7 fc6 convolution on the 3×3 map of a 112-px input did.
    fn probe_min_side(&self) -> Result<usize, String> {
        let ok = |n: usize| {
            if !self.shapes_positive(n, n) {
                return false;
            }
            let x = Array3::<f32>::zeros((3, n, n));
            match (self.run(x.view()), self.map_size_eval(n, n)) {
                (Ok(m), Some((h, w))) => m.dim() == (self.classes, h, w),
                _ => false,
            }
        };
        if !ok(self.input_side) {
            return Err(format!(
                "the model does not run on a {0}x{0} input (the input side); set the input side",
                self.input_side
            ));
        }
        let (mut lo, mut hi) = (0, self.input_side); // !ok(lo) assumed, ok(hi)
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(hi)
    }

    /// Every dimension of every tensor of the dense plan that depends on H or W is ≥ 1 at
    /// `height`×`width` (dimensions that do not evaluate to a number are not judged).
    fn shapes_positive(&self, height: usize, width: usize) -> bool {
        let Some((sh, sw, _, _)) = self.map_dims.as_ref() else {
            return true;
        };
        let v = SymbolValues::default()
            .with(sh, height as i64)
            .with(sw, width as i64);
        self.plan.model().nodes().iter().all(|node| {
            node.outputs.iter().all(|o| {
                o.fact
                    .shape
                    .iter()
                    .all(|d| d.to_i64().is_ok() || d.eval(&v).to_i64().map_or(true, |x| x >= 1))
            })
        })
    }

    fn map_size_eval(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        let (sh, sw, dh, dw) = self.map_dims.as_ref()?;
        let v = SymbolValues::default()
            .with(sh, height as i64)
            .with(sw, width as i64);
        let h = dh.eval(&v).to_i64().ok()?;
        let w = dw.eval(&v).to_i64().ok()?;
        (h >= 1 && w >= 1).then_some((h as usize, w as usize))
    }

    /// The model's output for a preprocessed input (3, H, W) as (C, h, w) ((C, 1, 1) for an
    /// exact-only model).
    fn run(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, String> {
        let x: Tensor = input
            .as_standard_layout()
            .into_owned()
            .insert_axis(Axis(0))
            .into();
        let out = guarded("running the model", || {
            self.plan.run(tvec!(x.into_tvalue()))
        })?;
        let view = out[0]
            .to_plain_array_view::<f32>()
            .map_err(|e| format!("reading the scores: {e}"))?;
        let c = self.classes;
        match view.shape() {
            [1, n] if *n == c => Ok(view
                .to_shape((c, 1, 1))
                .map_err(|e| e.to_string())?
                .to_owned()),
            [1, n, _, _] if *n == c => {
                let v = view
                    .into_dimensionality::<Ix4>()
                    .map_err(|e| e.to_string())?;
                Ok(v.index_axis(Axis(0), 0).to_owned())
            }
            other => Err(format!(
                "the scores have shape {other:?}, expected (1, {c}) or (1, {c}, h, w)"
            )),
        }
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was loaded with.
    pub fn options(&self) -> &OnnxOptions {
        &self.options
    }

    /// Name of the tensor the class scores are read from: the score map (1, C, h, w) of a dense
    /// model, else the scores (1, C) (before any softmax).
    pub fn score_tensor(&self) -> &str {
        &self.score_tensor
    }

    /// One line for logs: file, classes, mode and geometry.
    pub fn summary(&self) -> String {
        if self.dense {
            format!(
                "{}: {} classes, dense (score map `{}`), {}-px input, cells {} px apart, \
                 smallest input {} px",
                self.path.display(),
                self.classes,
                self.score_tensor,
                self.input_side,
                self.cell_stride,
                self.min_input_side
            )
        } else {
            format!(
                "{}: {} classes, exact patches only (scores `{}`), {}-px input",
                self.path.display(),
                self.classes,
                self.score_tensor,
                self.input_side
            )
        }
    }
}

impl sealed::Forward for OnnxCnn {
    fn forward_par(&self, input: ArrayView3<'_, f32>, _par: Par) -> Result<Array3<f32>, CnnError> {
        self.run(input).map_err(|message| CnnError::Onnx {
            path: self.path.display().to_string(),
            message,
        })
    }
}

impl Cnn for OnnxCnn {
    /// `onnx:<file name>#<hash of the file and the preprocessing>`.
    fn name(&self) -> &str {
        &self.name
    }
    fn input_side(&self) -> usize {
        self.input_side
    }
    fn min_input_side(&self) -> usize {
        self.min_input_side
    }
    fn cell_stride(&self) -> usize {
        self.cell_stride
    }
    fn receptive_field(&self) -> usize {
        self.options.receptive_field.unwrap_or(self.input_side)
    }
    fn num_classes(&self) -> usize {
        self.classes
    }
    fn dense(&self) -> bool {
        self.dense
    }
    /// Dense: tract's symbolic shape at (H, W), `None` below the smallest input side.
    /// Exact-only: (1, 1) at the input side, else `None`.
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        if !self.dense {
            return ((height, width) == (self.input_side, self.input_side)).then_some((1, 1));
        }
        if height.min(width) < self.min_input_side {
            return None;
        }
        self.map_size_eval(height, width)
    }
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
        check_image(&img)?;
        let (h, w, _) = img.dim();
        let bgr = self.options.bgr;
        Ok(Array3::from_shape_fn((3, h, w), |(c, i, j)| {
            let src = if bgr { 2 - c } else { c };
            img[[i, j, src]] * self.scale[c] + self.offset[c]
        }))
    }
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        let (c, h, w) = input.dim();
        let ok = c == 3
            && if self.dense {
                self.map_size(h, w).is_some()
            } else {
                (h, w) == (self.input_side, self.input_side)
            };
        if !ok {
            return Err(CnnError::NetInputShape {
                net: "the ONNX model",
                min: if self.dense {
                    self.min_input_side
                } else {
                    self.input_side
                },
                shape: input.shape().to_vec(),
            });
        }
        check_finite_input(&input)?;
        sealed::Forward::forward_par(self, input, fisherkit::linalg::par_all())
    }
}
