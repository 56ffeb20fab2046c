//! The previous implementation of the network (CHW layout, im2col for every 3×3 layer,
//! separate ReLU passes), kept for tests only: the reference the fast channel-last path in
//! [`crate::ops`] and [`crate::blocks`] are compared against (`net::tests`).

use crate::net::SqueezeNet;
use crate::ops::conv::{same_geometry, Conv};
use crate::ops::pooling::{pool_out, POOL_K, POOL_S};
use fisherkit::linalg::{gemm, Par};
use ndarray::{Array1, Array2, Array3, ArrayView3, ArrayViewMut2, Axis};
use rayon::prelude::*;

fn out_size(conv: &Conv, h: usize, w: usize) -> (usize, usize) {
    (
        same_geometry(h, conv.kh, conv.stride).0,
        same_geometry(w, conv.kw, conv.stride).0,
    )
}

/// Adds the convolution of `x` (in_ch, H, W) without bias to `out` (out_ch, Ho·Wo),
/// row-major, which must already hold the bias in every row (see `bias_rows`), then
/// applies ReLU if `relu`. `par` parallelises the GEMM (and the im2col copy).
pub fn conv_forward_into(
    conv: &Conv,
    x: ArrayView3<'_, f32>,
    mut out: ArrayViewMut2<'_, f32>,
    relu: bool,
    par: Par,
) {
    let (c, h, w) = x.dim();
    assert_eq!(c, conv.in_ch, "conv: input channels");
    let (ho, wo) = out_size(conv, h, w);
    assert_eq!(out.dim(), (conv.out_ch(), ho * wo), "conv: output shape");
    if conv.kh == 1 && conv.kw == 1 && conv.stride == 1 {
        // A view (no copy) when `x` is already row-major, as every layer output is.
        let xs = x.as_standard_layout();
        let x2 = xs
            .view()
            .into_shape_with_order((c, h * w))
            .expect("standard layout");
        gemm(out.view_mut(), true, conv.weight.view(), x2, 1.0, par);
    } else {
        let cols = im2col(conv, x, !matches!(par, Par::Seq));
        gemm(
            out.view_mut(),
            true,
            conv.weight.view(),
            cols.view(),
            1.0,
            par,
        );
    }
    if relu {
        if matches!(par, Par::Seq) {
            out.mapv_inplace(|v| v.max(0.0));
        } else {
            out.par_mapv_inplace(|v| v.max(0.0));
        }
    }
}

/// Convolution of `x` (in_ch, H, W) → (out_ch, Ho, Wo).
pub fn conv_forward(conv: &Conv, x: ArrayView3<'_, f32>, relu: bool, par: Par) -> Array3<f32> {
    let (_, h, w) = x.dim();
    let (ho, wo) = out_size(conv, h, w);
    let mut out = bias_rows([&conv.bias], ho * wo);
    conv_forward_into(conv, x, out.view_mut(), relu, par);
    out.into_shape_with_order((conv.out_ch(), ho, wo))
        .expect("contiguous")
}

/// The im2col matrix (in_ch·kh·kw, Ho·Wo): row $(c, u, v)$, column $(i, j)$ holds
/// $x_{c, s i + u - p_t, s j + v - p_l}$ or 0 in the padding.
fn im2col(conv: &Conv, x: ArrayView3<'_, f32>, parallel: bool) -> Array2<f32> {
    let (c, h, w) = x.dim();
    let (ho, pt) = same_geometry(h, conv.kh, conv.stride);
    let (wo, pl) = same_geometry(w, conv.kw, conv.stride);
    let (kh, kw, st) = (conv.kh, conv.kw, conv.stride);
    let x = x.as_standard_layout();
    let mut cols = Array2::<f32>::zeros((c * kh * kw, ho * wo));
    let fill = |(r, mut row): (usize, ndarray::ArrayViewMut1<'_, f32>)| {
        let ch = r / (kh * kw);
        let u = (r / kw) % kh;
        let v = r % kw;
        let row = row.as_slice_mut().expect("row-major");
        let plane = x.index_axis(Axis(0), ch);
        for i in 0..ho {
            let iy = (i * st + u) as isize - pt as isize;
            if iy < 0 || iy >= h as isize {
                continue; // stays zero
            }
            let src = plane.row(iy as usize);
            let src = src.as_slice().expect("row-major input");
            let dst = &mut row[i * wo..(i + 1) * wo];
            // Valid outputs j satisfy 0 <= j*st + v - pl < w.
            let j0 = pl.saturating_sub(v).div_ceil(st);
            let j1 = ((w + pl).saturating_sub(v)).div_ceil(st).min(wo);
            if st == 1 {
                if j1 > j0 {
                    let a = j0 + v - pl;
                    dst[j0..j1].copy_from_slice(&src[a..a + (j1 - j0)]);
                }
            } else {
                for (j, d) in dst.iter_mut().enumerate().take(j1).skip(j0) {
                    *d = src[j * st + v - pl];
                }
            }
        }
    };
    if parallel {
        cols.axis_iter_mut(Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(fill);
    } else {
        cols.axis_iter_mut(Axis(0)).enumerate().for_each(fill);
    }
    cols
}

/// The (Σ len, n) array whose rows are the entries of the `biases`, in order, each repeated
/// `n` times: the initial value of a convolution's output (one pass, no zero-fill first).
pub(crate) fn bias_rows<'a>(
    biases: impl IntoIterator<Item = &'a Array1<f32>>,
    n: usize,
) -> Array2<f32> {
    let mut v = Vec::new();
    for b in biases {
        v.reserve(b.len() * n);
        for &bi in b {
            v.extend(std::iter::repeat_n(bi, n));
        }
    }
    let m = v.len() / n.max(1);
    Array2::from_shape_vec((m, n), v).expect("length m*n")
}

/// Max-pool 3×3, stride 2, no padding, floor mode (ndf's `MaxPooling2D((3, 3), (2, 2))`):
/// $y_{c,i,j} = \max_{0 \le u, v < 3} x_{c, 2i+u, 2j+v}$. Input (C, H, W) with H, W ≥ 3.
pub(crate) fn max_pool(x: ArrayView3<'_, f32>, parallel: bool) -> Array3<f32> {
    let (c, h, w) = x.dim();
    let x = x.as_standard_layout();
    let ho = pool_out(h).expect("max_pool: height >= 3");
    let wo = pool_out(w).expect("max_pool: width >= 3");
    let mut out = Array3::<f32>::zeros((c, ho, wo));
    let pool = |(mut o, xi): (
        ndarray::ArrayViewMut2<'_, f32>,
        ndarray::ArrayView2<'_, f32>,
    )| {
        let o = o.as_slice_mut().expect("row-major output");
        let xi = xi.as_slice().expect("row-major input");
        let mut colmax = vec![0.0f32; w];
        for i in 0..ho {
            // Vertical max of the three rows (contiguous, vectorisable), then horizontal.
            let r0 = &xi[(i * POOL_S) * w..(i * POOL_S + 1) * w];
            let r1 = &xi[(i * POOL_S + 1) * w..(i * POOL_S + 2) * w];
            let r2 = &xi[(i * POOL_S + 2) * w..(i * POOL_S + 3) * w];
            for (((m, &a), &b), &c) in colmax.iter_mut().zip(r0).zip(r1).zip(r2) {
                *m = a.max(b).max(c);
            }
            for (j, oj) in o[i * wo..(i + 1) * wo].iter_mut().enumerate() {
                let win = &colmax[j * POOL_S..j * POOL_S + POOL_K];
                *oj = win[0].max(win[1]).max(win[2]);
            }
        }
    };
    if parallel {
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(x.axis_iter(Axis(0)).into_par_iter())
            .for_each(pool);
    } else {
        out.axis_iter_mut(Axis(0))
            .zip(x.axis_iter(Axis(0)))
            .for_each(pool);
    }
    out
}

/// The previous `SqueezeNet::forward_unchecked`: conv1 → pool → fires (pools before fire 2, 4,
/// 6) → conv10, each layer a full CHW array.
pub(crate) fn forward(net: &SqueezeNet, input: ArrayView3<'_, f32>, par: Par) -> Array3<f32> {
    let parallel = !matches!(par, Par::Seq);
    let (conv1, fires, conv10) = net.layers();
    let mut x = conv_forward(conv1, input, true, par);
    for (i, (squeeze, expand1, expand3)) in fires.enumerate() {
        if i == 0 || i == 2 || i == 4 {
            x = max_pool(x.view(), parallel);
        }
        let (_, h, w) = x.dim();
        let sq = conv_forward(squeeze, x.view(), true, par);
        let (e1, e3) = (expand1.out_ch(), expand3.out_ch());
        let mut out = bias_rows([&expand1.bias, &expand3.bias], h * w);
        {
            let (a, b) = out.view_mut().split_at(Axis(0), e1);
            conv_forward_into(expand1, sq.view(), a, true, par);
            conv_forward_into(expand3, sq.view(), b, true, par);
        }
        x = out
            .into_shape_with_order((e1 + e3, h, w))
            .expect("contiguous");
    }
    conv_forward(conv10, x.view(), false, par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array1;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random3(shape: (usize, usize, usize), seed: u64) -> Array3<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array3::from_shape_simple_fn(shape, || rng.random_range(-1.0f32..1.0))
    }

    /// Direct 7-loop convolution with explicitly computed TF "same" padding.
    fn naive_conv(
        x: &Array3<f32>,
        w4: &ndarray::Array4<f32>,
        b: &Array1<f32>,
        stride: usize,
    ) -> Array3<f32> {
        let (c, h, w) = x.dim();
        let (o, _, kh, kw) = w4.dim();
        let ho = h.div_ceil(stride);
        let wo = w.div_ceil(stride);
        let pad_h = ((ho - 1) * stride + kh).saturating_sub(h);
        let pad_w = ((wo - 1) * stride + kw).saturating_sub(w);
        let (pt, pl) = (pad_h / 2, pad_w / 2);
        let mut y = Array3::<f32>::zeros((o, ho, wo));
        for oo in 0..o {
            for i in 0..ho {
                for j in 0..wo {
                    let mut acc = b[oo] as f64;
                    for cc in 0..c {
                        for u in 0..kh {
                            for v in 0..kw {
                                let iy = (i * stride + u) as isize - pt as isize;
                                let ix = (j * stride + v) as isize - pl as isize;
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                    acc += w4[[oo, cc, u, v]] as f64
                                        * x[[cc, iy as usize, ix as usize]] as f64;
                                }
                            }
                        }
                    }
                    y[[oo, i, j]] = acc as f32;
                }
            }
        }
        y
    }

    #[test]
    fn conv_matches_naive_loops() {
        // (in, out, k, stride, h, w): 3x3 stride 2 on odd and even sides, 3x3 stride 1, 1x1.
        let cases = [
            (3, 5, 3, 2, 9, 9),
            (3, 5, 3, 2, 8, 11),
            (4, 6, 3, 1, 7, 10),
            (5, 7, 1, 1, 6, 4),
            (2, 3, 3, 2, 1, 2),
        ];
        for (seed, &(ci, co, k, st, h, w)) in cases.iter().enumerate() {
            let x = random3((ci, h, w), seed as u64);
            let w4 = {
                let mut rng = ChaCha8Rng::seed_from_u64(100 + seed as u64);
                ndarray::Array4::from_shape_simple_fn((co, ci, k, k), || {
                    rng.random_range(-1.0f32..1.0)
                })
            };
            let b = Array1::from_shape_fn(co, |i| i as f32 * 0.1 - 0.2);
            let conv = Conv::new(w4.iter().copied().collect(), b.to_vec(), ci, k, st);
            let want = naive_conv(&x, &w4, &b, st);
            for par in [Par::Seq, Par::rayon(2)] {
                let got = conv_forward(&conv, x.view(), false, par);
                assert_eq!(got.dim(), want.dim(), "case {seed}");
                for (g, e) in got.iter().zip(want.iter()) {
                    assert!((g - e).abs() < 1e-5, "case {seed}: {g} vs {e}");
                }
                let got_relu = conv_forward(&conv, x.view(), true, par);
                for (g, e) in got_relu.iter().zip(want.iter()) {
                    assert!((g - e.max(0.0)).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn max_pool_matches_naive_loops() {
        for (seed, &(c, h, w)) in [(2, 7, 7), (3, 8, 10), (1, 3, 4), (4, 13, 27)]
            .iter()
            .enumerate()
        {
            let x = random3((c, h, w), 7 + seed as u64);
            let ho = (h - 3) / 2 + 1;
            let wo = (w - 3) / 2 + 1;
            let mut want = Array3::<f32>::zeros((c, ho, wo));
            for cc in 0..c {
                for i in 0..ho {
                    for j in 0..wo {
                        let mut m = f32::NEG_INFINITY;
                        for u in 0..3 {
                            for v in 0..3 {
                                m = m.max(x[[cc, 2 * i + u, 2 * j + v]]);
                            }
                        }
                        want[[cc, i, j]] = m;
                    }
                }
            }
            assert_eq!(max_pool(x.view(), false), want);
            assert_eq!(max_pool(x.view(), true), want);
        }
    }
}
