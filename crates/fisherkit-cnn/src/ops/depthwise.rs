//! The depthwise k×k convolution with "same" padding ([`Depthwise`]): its weights, and one
//! output row + bias + ReLU6 ([`dw_row`]), by the x86 vector kernels where the CPU has them,
//! else the portable code ([`crate::simd::depthwise_portable`]).

use crate::simd::depthwise_portable::{dw_row_generic, dw_row_k};
#[cfg(target_arch = "x86_64")]
use crate::simd::depthwise_x86;

/// A depthwise k×k convolution (one k×k filter per channel, `groups = channels`) with TF
/// "same" padding and stride `stride`:
/// $y_{i,j,c} = \mathrm{act}\big(b_c + \sum_{u,v} W_{c,u,v}\, x_{s i + u - p_t,\, s j + v - p_l,\, c}\big)$
/// (zero outside the input).
#[derive(Debug, Clone)]
pub(crate) struct Depthwise {
    /// (k·k, C) tap-major: `wt[(u * k + v) * C + c]` = $W_{c,u,v}$, so one tap's weights for
    /// all channels are contiguous like a channel-last pixel.
    pub wt: Vec<f32>,
    /// (C)
    pub bias: Vec<f32>,
    pub k: usize,
    pub stride: usize,
}

impl Depthwise {
    /// From a (C, 1, k, k) kernel (PyTorch's grouped-convolution layout) and its bias (C).
    pub fn new(weight: &[f32], bias: Vec<f32>, k: usize, stride: usize) -> Self {
        let c = bias.len();
        assert_eq!(weight.len(), c * k * k, "depthwise weight of C*k*k");
        let mut wt = vec![0.0; c * k * k];
        for ch in 0..c {
            for tap in 0..k * k {
                wt[tap * c + ch] = weight[ch * k * k + tap];
            }
        }
        Self {
            wt,
            bias,
            k,
            stride,
        }
    }

    pub fn channels(&self) -> usize {
        self.bias.len()
    }
}

/// Largest depthwise kernel side [`dw_row`] takes.
pub(crate) const MAX_K: usize = 7;

/// One output row of a depthwise convolution + bias + ReLU6 from `rows` (its k zero-padded
/// input rows, each ≥ ((w_o − 1)s + k)·C floats): `out[j·C + c]` =
/// relu6($b_c + \sum_{u,v} W_{c,u,v}$ `rows[u][(s j + v)·C + c]`), for j < w_o, the sum taken
/// from zero in tap order (u, v) with fused multiply-adds where the CPU has FMA.
///
/// On x86-64 with AVX-512F or AVX2 + FMA and (k, s) ∈ {3, 5} × {1, 2}, runs [`crate::simd::depthwise_x86`]'s
/// kernel: 16 or 8 channels × 8 pixels of sums in registers, the K² taps unrolled; channels
/// beyond the last full vector, other CPUs and other (k, s) take the portable code (the same
/// operations in the same order when FMA is used, so every build gives the same values).
pub(crate) fn dw_row(rows: &[&[f32]], dw: &Depthwise, s: usize, wo: usize, out: &mut [f32]) {
    let c = dw.channels();
    assert!(
        rows.len() == dw.k
            && wo >= 1
            && rows.iter().all(|r| r.len() >= ((wo - 1) * s + dw.k) * c)
            && dw.wt.len() >= dw.k * dw.k * c
            && out.len() >= wo * c,
        "dw_row: k rows of the padded width, w_o·C outputs"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if depthwise_x86::dw_row(rows, &dw.wt, &dw.bias, dw.k, s, wo, out) {
            return;
        }
    }
    dw_row_ks::<false, 16, 4>(rows, dw, s, wo, out, 0);
}

/// [`dw_row`] with k and s constant for the (k, s) EfficientNet uses (the tap loops then
/// unroll and the sums stay in registers).
#[inline(always)]
pub(crate) fn dw_row_ks<const FMA: bool, const N: usize, const P: usize>(
    rows: &[&[f32]],
    dw: &Depthwise,
    s: usize,
    wo: usize,
    out: &mut [f32],
    c_from: usize,
) {
    let (wt, b) = (&dw.wt[..], &dw.bias[..]);
    match (dw.k, s) {
        (3, 1) => dw_row_k::<FMA, N, P, 3, 1>(rows, wt, b, wo, out, c_from),
        (3, 2) => dw_row_k::<FMA, N, P, 3, 2>(rows, wt, b, wo, out, c_from),
        (5, 1) => dw_row_k::<FMA, N, P, 5, 1>(rows, wt, b, wo, out, c_from),
        (5, 2) => dw_row_k::<FMA, N, P, 5, 2>(rows, wt, b, wo, out, c_from),
        (k, s) => dw_row_generic::<FMA>(rows, wt, b, k, s, wo, out),
    }
}
