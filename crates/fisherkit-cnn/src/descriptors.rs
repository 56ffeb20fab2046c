//! Semantic patch descriptors: the natural parameters (log-softmax of the 1000 ImageNet class
//! scores) of image patches at several sizes — the paper's §3 descriptors (docs/math.md §6).
//!
//! # Geometry
//! Images are first capped ([`DescriptorParams::max_image_side`]): if the larger side exceeds
//! it, the image is shrunk to it (aspect kept). Patch sizes $P$ are measured in pixels of this
//! *working image*. If its smaller side is below $P$, it is enlarged (aspect kept) so that the
//! smaller side equals $P$.
//!
//! * [`PatchMode::Dense`]: the working image is resized by $227/P$ (so a $P$-pixel patch becomes
//!   the network's 227-pixel input) and run fully-convolutionally; each cell of the class-score
//!   map is one descriptor. Cells are $16 P / 227$ working-image pixels apart
//!   (≈ 0.07 P: 6.8 px at P = 96, 9.0 px at P = 128), see [`crate::net`] for the exact centres;
//!   each cell's receptive field is 207 network pixels ≈ 0.91 P. A $P \times P$ working image
//!   gives 13×13 = 169 descriptors. `stride` is not used.
//! * [`PatchMode::Exact`]: $P \times P$ crops on a regular grid with step
//!   $\max(1, \mathrm{round}(\text{stride} \cdot P))$, centred in the image (equal margins), each
//!   resized to 227×227 and classified on its own (mean of its 13×13 score map).
//!
//! Both give, per scale, an (n_patches, 1000) array; rows are in row-major grid order.
//!
//! The numbers above are SqueezeNet's. Every function here takes any [`Cnn`] (SqueezeNet,
//! EfficientNet-Lite0 or a [`crate::Backbone`]); 227 then stands for [`Cnn::input_side`] and
//! 16 for [`Cnn::cell_stride`]. EfficientNet-Lite0: 224-px input, cells $32 P / 224$ apart
//! (≈ 0.14 P), receptive field 851 px (the whole 224-px input), a $P \times P$ working image
//! gives 7×7 = 49 descriptors; a cell's scores are its classifier `fc` applied to that cell of
//! the last feature map ([`crate::efficientnet`]).
//!
//! A network that is not [`Cnn::dense`] (an ONNX model with a fixed input size or a
//! classifier that is not a global mean of a score map, see `crate::onnx`) always gets exact
//! patches: [`PatchMode::Dense`] then means [`PatchMode::Exact`] with `stride`.
//!
//! [`check_geometry`] bounds the input with SqueezeNet's 227-px side; for a network with a
//! smaller input side (EfficientNet-Lite0's 224) the bound is therefore conservative.

use crate::cnn::Cnn;
use crate::error::CnnError;
use crate::image::{check_image, resize_bilinear, ImageError};
use crate::net::geometry::INPUT_SIDE;
use crate::scores::{log_softmax, pool_scores};
use fisherkit::linalg::{par_all, Par};
use ndarray::{s, Array1, Array2, Array3, ArrayView3, Axis};
use rayon::prelude::*;

/// How the patches of one scale are turned into network inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PatchMode {
    /// Every patch cropped and classified on its own (slow, exact patch boundaries).
    Exact,
    /// One fully-convolutional pass per scale; one descriptor per score-map cell.
    #[default]
    Dense,
}

/// Parameters of [`extract`].
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptorParams {
    /// Patch sides in working-image pixels (default 96, 128, 160 — the paper's scales).
    pub scales: Vec<u32>,
    /// Dense (default) or exact patches.
    pub mode: PatchMode,
    /// Exact mode only: grid step as a fraction of the patch side, in (0, 1] (default 0.5).
    pub stride: f32,
    /// Images whose larger side exceeds this are shrunk to it first (default `Some(512)`),
    /// bounding the cost of large photos; `None` keeps the original size.
    pub max_image_side: Option<u32>,
}

impl Default for DescriptorParams {
    fn default() -> Self {
        Self {
            scales: vec![96, 128, 160],
            mode: PatchMode::Dense,
            stride: 0.5,
            max_image_side: Some(512),
        }
    }
}

impl DescriptorParams {
    /// Checks the parameters: at least one scale, scales ≥ 1, stride in (0, 1],
    /// max side ≥ 1.
    pub fn validate(&self) -> Result<(), CnnError> {
        if self.scales.is_empty() {
            return Err(CnnError::Params("no patch scale given".into()));
        }
        if let Some(s) = self.scales.iter().find(|&&s| s == 0) {
            return Err(CnnError::Params(format!("patch scale {s} must be >= 1 px")));
        }
        if !(self.stride > 0.0 && self.stride <= 1.0) {
            return Err(CnnError::Params(format!(
                "stride {} must be a fraction of the patch side in (0, 1]",
                self.stride
            )));
        }
        if self.max_image_side == Some(0) {
            return Err(CnnError::Params("max_image_side must be >= 1".into()));
        }
        Ok(())
    }
}

/// Largest network input (H·W pixels) a patch scale may need: $2^{22}$, about
/// 2.9 times the 1211×1211 input of a 512×512 working image at $P = 96$. Only
/// extremely elongated images (aspect ratio beyond about 80:1, whose smaller
/// side is enlarged to $P$ and larger side with it) or huge images with no
/// `max_image_side` reach it; without the bound a 1×65535 PNG of a few hundred
/// bytes would make a dense pass allocate gigabytes (found while writing the
/// image fuzz target).
pub const MAX_INPUT_PIXELS: usize = 1 << 22;

/// Checks that an `h`×`w` image's patch geometry stays within
/// [`MAX_INPUT_PIXELS`] at every scale of `params`: the dense network input
/// ([`dense_input_size`]) or, in exact mode, the enlarged working image the
/// crops are taken from. [`extract`] and [`extract_batch`] call it; the
/// pipeline calls it right after decoding, to skip such an image.
pub fn check_geometry(h: usize, w: usize, params: &DescriptorParams) -> Result<(), ImageError> {
    let (hw, ww) = working_size(h.max(1), w.max(1), params.max_image_side);
    for &p in &params.scales {
        let (ih, iw) = match params.mode {
            PatchMode::Dense => dense_input_size(hw, ww, p),
            PatchMode::Exact => upscaled_size(hw, ww, p.max(1) as usize),
        };
        if ih.saturating_mul(iw) > MAX_INPUT_PIXELS {
            return Err(ImageError::TooElongated {
                height: h,
                width: w,
                scale: p,
                input_h: ih,
                input_w: iw,
                max: MAX_INPUT_PIXELS,
            });
        }
    }
    Ok(())
}

fn round_side(x: f64) -> usize {
    (x.round() as usize).max(1)
}

/// Size (h, w) of the working image for an `h`×`w` input and an optional cap on the larger side.
pub fn working_size(h: usize, w: usize, max_side: Option<u32>) -> (usize, usize) {
    match max_side {
        Some(m) if h.max(w) > m as usize => {
            let f = m as f64 / h.max(w) as f64;
            (round_side(h as f64 * f), round_side(w as f64 * f))
        }
        _ => (h, w),
    }
}

/// Working-image size after enlarging so the smaller side is at least `patch`.
fn upscaled_size(h: usize, w: usize, patch: usize) -> (usize, usize) {
    let m = h.min(w);
    if m >= patch {
        (h, w)
    } else {
        let f = patch as f64 / m as f64;
        (
            round_side(h as f64 * f).max(patch),
            round_side(w as f64 * f).max(patch),
        )
    }
}

/// The network-input size (H, W) of a dense pass at patch side `patch` for a working image of
/// `h`×`w` (after the small-image enlargement): $\mathrm{round}(\cdot\, 227 / P)$, the smaller
/// side at least 227. The number of descriptors is then
/// [`crate::SqueezeNet::score_map_size`]`(H, W)`'s product. SqueezeNet's input side (227);
/// see [`dense_input_size_for`] for another network.
pub fn dense_input_size(h: usize, w: usize, patch: u32) -> (usize, usize) {
    dense_input_size_for(INPUT_SIDE, h, w, patch)
}

/// [`dense_input_size`] for a network whose classification input is `side` pixels
/// ([`Cnn::input_side`]: 227 for SqueezeNet, 224 for EfficientNet-Lite0):
/// $\mathrm{round}(\cdot\, \text{side} / P)$, the smaller side at least `side`.
pub fn dense_input_size_for(side: usize, h: usize, w: usize, patch: u32) -> (usize, usize) {
    let p = patch as usize;
    let (h, w) = upscaled_size(h, w, p);
    let f = side as f64 / p as f64;
    // The smaller side is >= P, hence >= `side` after scaling.
    (round_side(h as f64 * f), round_side(w as f64 * f))
}

/// Row-wise log-softmax of a score map (C, h, w) → (h·w, C), cells in row-major order.
fn map_to_descriptors(map: &Array3<f32>) -> Array2<f32> {
    let (c, h, w) = map.dim();
    let n = h * w;
    let map = map.as_standard_layout();
    let flat = map.as_slice().expect("standard layout");
    // Per-cell max and log-sum-exp, reading the (C, cells) map row by row (contiguous).
    let mut mx = vec![f32::NEG_INFINITY; n];
    for row in flat.chunks_exact(n) {
        for (m, &v) in mx.iter_mut().zip(row) {
            *m = m.max(v);
        }
    }
    let mut sum = vec![0.0f64; n];
    for row in flat.chunks_exact(n) {
        for ((s, &m), &v) in sum.iter_mut().zip(&mx).zip(row) {
            let d = v - m;
            // e^-80 relative to the largest term (1) cannot change an f64 sum >= 1.
            if d > -80.0 {
                *s += d.exp() as f64;
            }
        }
    }
    let lse: Vec<f64> = sum.iter().map(|s| s.ln()).collect();
    // Blocked transpose to (cells, classes): ℓ = (s - m) - log Σ e^(s - m).
    const B: usize = 32;
    let mut out = vec![0.0f32; n * c];
    for j0 in (0..n).step_by(B) {
        for k0 in (0..c).step_by(B) {
            for k in k0..(k0 + B).min(c) {
                let row = &flat[k * n..(k + 1) * n];
                for j in j0..(j0 + B).min(n) {
                    out[j * c + k] = ((row[j] - mx[j]) as f64 - lse[j]) as f32;
                }
            }
        }
    }
    Array2::from_shape_vec((n, c), out).expect("n*c")
}

/// Natural-parameter descriptors of `image` ((H, W, 3) RGB on the 0–255 scale, see
/// [`crate::image`]) at every scale of `params`: one (n_patches, 1000) array per scale, row
/// $= \ell = s - \log\sum_k e^{s_k}$ (log-softmax of the patch's class scores). Uses all rayon
/// threads for this image. See the module docs for the patch geometry.
pub fn extract<N: Cnn + ?Sized>(
    net: &N,
    image: ArrayView3<'_, f32>,
    params: &DescriptorParams,
) -> Result<Vec<Array2<f32>>, CnnError> {
    params.validate()?;
    check_image(&image)?;
    check_geometry(image.dim().0, image.dim().1, params)?;
    extract_unchecked(net, image, params, par_all())
}

/// [`extract`] on many images: rayon over the images, and over bands of rows inside each
/// image's network passes, so both levels share the pool: with several images each thread
/// mostly works through whole images, while one image (or the last of a batch) still has
/// every thread on it. Fails on the first invalid image, naming its index.
pub fn extract_batch<N: Cnn + ?Sized>(
    net: &N,
    images: &[ArrayView3<'_, f32>],
    params: &DescriptorParams,
) -> Result<Vec<Vec<Array2<f32>>>, CnnError> {
    params.validate()?;
    for (i, img) in images.iter().enumerate() {
        check_image(img)
            .and_then(|_| check_geometry(img.dim().0, img.dim().1, params))
            .map_err(|source| CnnError::BatchImage { index: i, source })?;
    }
    images
        .par_iter()
        .map(|img| extract_unchecked(net, img.view(), params, par_all()))
        .collect()
}

fn extract_unchecked<N: Cnn + ?Sized>(
    net: &N,
    image: ArrayView3<'_, f32>,
    params: &DescriptorParams,
    par: Par,
) -> Result<Vec<Array2<f32>>, CnnError> {
    let (h0, w0, _) = image.dim();
    let (hw, ww) = working_size(h0, w0, params.max_image_side);
    // A network that only runs at its input side (an exact-only ONNX model) gets exact patches.
    let mode = if net.dense() {
        params.mode
    } else {
        PatchMode::Exact
    };
    let working = if (hw, ww) != (h0, w0) && mode == PatchMode::Exact {
        Some(resize_bilinear(image, hw, ww)?)
    } else {
        None
    };
    params
        .scales
        .iter()
        .map(|&p| match mode {
            PatchMode::Dense => {
                // One resize from the original straight to the network input.
                let (nh, nw) = dense_input_size_for(net.input_side(), hw, ww, p);
                let x = net.preprocess(resize_bilinear(image, nh, nw)?.view())?;
                let map = net.forward_par(x.view(), par)?;
                Ok(map_to_descriptors(&map))
            }
            PatchMode::Exact => {
                let base = working.as_ref().map_or(image, |a| a.view());
                exact_patches(net, base, p as usize, params.stride, par)
            }
        })
        .collect()
}

/// Grid offsets of `patch`-sized windows with step `step` along a side of `n ≥ patch`, centred.
fn grid(n: usize, patch: usize, step: usize) -> Vec<usize> {
    let count = (n - patch) / step + 1;
    let margin = (n - patch - (count - 1) * step) / 2;
    (0..count).map(|i| margin + i * step).collect()
}

fn exact_patches<N: Cnn + ?Sized>(
    net: &N,
    image: ArrayView3<'_, f32>,
    patch: usize,
    stride: f32,
    par: Par,
) -> Result<Array2<f32>, CnnError> {
    let (h, w, _) = image.dim();
    let (uh, uw) = upscaled_size(h, w, patch);
    let up;
    let base = if (uh, uw) != (h, w) {
        up = resize_bilinear(image, uh, uw)?;
        up.view()
    } else {
        image
    };
    let step = ((stride as f64 * patch as f64).round() as usize).max(1);
    let ys = grid(uh, patch, step);
    let xs = grid(uw, patch, step);
    let cells: Vec<(usize, usize)> = ys
        .iter()
        .flat_map(|&y| xs.iter().map(move |&x| (y, x)))
        .collect();
    let one = |&(y, x): &(usize, usize), inner: Par| -> Result<Array1<f32>, CnnError> {
        let crop = base.slice(s![y..y + patch, x..x + patch, ..]);
        let side = net.input_side();
        let input = net.preprocess(resize_bilinear(crop, side, side)?.view())?;
        let map = net.forward_par(input.view(), inner)?;
        Ok(log_softmax(pool_scores(&map).view()))
    };
    let rows: Vec<Array1<f32>> = if matches!(par, Par::Seq) || cells.len() == 1 {
        cells
            .iter()
            .map(|c| one(c, par))
            .collect::<Result<_, _>>()?
    } else {
        cells
            .par_iter()
            .map(|c| one(c, Par::Seq))
            .collect::<Result<_, _>>()?
    };
    let mut out = Array2::<f32>::zeros((rows.len(), net.num_classes()));
    for (mut o, r) in out.axis_iter_mut(Axis(0)).zip(rows) {
        o.assign(&r);
    }
    Ok(out)
}

/// The paper's "CNN global" descriptor: `image` ((H, W, 3) RGB, 0–255) resized to the
/// network's input side ([`Cnn::input_side`]: 227×227 for SqueezeNet, 224×224 for
/// EfficientNet-Lite0; aspect not kept), log-softmax of its 1000 pooled class scores.
pub fn global_descriptor<N: Cnn + ?Sized>(
    net: &N,
    image: ArrayView3<'_, f32>,
) -> Result<Array1<f32>, CnnError> {
    check_image(&image)?;
    let side = net.input_side();
    let x = net.preprocess(resize_bilinear(image, side, side)?.view())?;
    Ok(log_softmax(net.logits(x.view())?.view()))
}
