//! SqueezeNet's layers: `conv1` + ReLU fused with the max-pool after it ([`conv1_pool`]), and
//! the fire module ([`fire`]): squeeze 1×1 + ReLU, then [expand1x1 + ReLU ‖ expand3x3 +
//! ReLU] concatenated along channels, the 3×3 one by im2col bands; faer GEMMs throughout.

use crate::exec::bands::{band_rows, for_bands};
use crate::exec::scratch::{recycle, with_scratch, zeroed};
use crate::exec::team::Team;
use crate::ops::activation::bias_relu;
use crate::ops::conv::{same_geometry, Conv};
use crate::ops::pooling::{pool_out, pool_rows};
use crate::ops::tensor::{view, view_mut, Hwc};
use fisherkit::linalg::{gemm, vectorized};
use ndarray::ArrayView3;

/// `conv1` (3×3 stride 2, "same", 3 → 64 channels) + ReLU, then the 3×3/2 max-pool, on a CHW
/// input `x` (3, H, W); returns the pooled (h, w, 64) tensor. Bands of pooled rows are computed
/// from the conv rows they need (one shared conv row between neighbouring bands is computed
/// twice), so the full-resolution conv output never exists in memory.
pub(crate) fn conv1_pool(conv: &Conv, x: ArrayView3<'_, f32>, team: &Team<'_>) -> Hwc {
    let (c, h, w) = x.dim();
    assert_eq!(
        (c, conv.kh, conv.kw, conv.stride),
        (conv.in_ch, 3, 3, 2),
        "conv1 geometry"
    );
    let (ho, pt) = same_geometry(h, 3, 2);
    let (wo, pl) = same_geometry(w, 3, 2);
    let (hp, wp) = ((ho - 1) * 2 + 3, (wo - 1) * 2 + 3);
    // Zero-padded channel-last copy of the input.
    let mut xp = zeroed(hp * wp * c);
    for ch in 0..c {
        for (iy, row) in x.index_axis(ndarray::Axis(0), ch).outer_iter().enumerate() {
            let base = ((iy + pt) * wp + pl) * c + ch;
            for (ix, &v) in row.iter().enumerate() {
                xp[base + ix * c] = v;
            }
        }
    }
    let (ph, pw) = (
        pool_out(ho).expect("conv1 rows"),
        pool_out(wo).expect("conv1 cols"),
    );
    let n = conv.out_ch();
    let k = 9 * c;
    let mut out = zeroed(ph * pw * n);
    let rows_per = band_rows(ph, 2 * wo, k + n, team.threads());
    for_bands(&mut out, pw * n, rows_per, team, |q0, band, ipar| {
        let nq = band.len() / (pw * n);
        let nr = 2 * nq + 1; // conv rows 2 q0 .. 2 (q0 + nq) + 1
        let r0 = 2 * q0;
        let m = nr * wo;
        with_scratch(m * (k + n), |buf| {
            let (cols, acc) = buf.split_at_mut(m * k);
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..wo {
                            let dst = &mut cols[(r * wo + j) * k..(r * wo + j + 1) * k];
                            for u in 0..3 {
                                let src = ((2 * (r0 + r) + u) * wp + 2 * j) * c;
                                dst[u * 3 * c..(u + 1) * 3 * c]
                                    .copy_from_slice(&xp[src..src + 3 * c]);
                            }
                        }
                    }
                },
            );
            gemm(
                view_mut(acc, m, n),
                false,
                view(cols, m, k),
                conv.wt.view(),
                1.0,
                ipar,
            );
            let bias = conv.bias.as_slice().expect("contiguous bias");
            vectorized(
                #[inline(always)]
                || {
                    for px in acc.chunks_exact_mut(n) {
                        for (v, &b) in px.iter_mut().zip(bias) {
                            *v = (*v + b).max(0.0);
                        }
                    }
                    pool_rows(acc, wo, n, band, pw);
                },
            );
        });
    });
    recycle(xp);
    Hwc {
        h: ph,
        w: pw,
        c: n,
        data: out,
    }
}

/// A fire module: squeeze 1×1 + ReLU, then [expand1x1 + ReLU ‖ expand3x3 + ReLU]
/// concatenated along channels (expand1x1's first).
pub(crate) fn fire(
    squeeze: &Conv,
    expand1: &Conv,
    expand3: &Conv,
    x: &Hwc,
    team: &Team<'_>,
) -> Hwc {
    let (h, w, cin) = (x.h, x.w, x.c);
    let s = squeeze.out_ch();
    assert_eq!(cin, squeeze.in_ch, "fire: input channels");
    assert_eq!(
        (expand1.in_ch, expand3.in_ch),
        (s, s),
        "fire: squeeze channels"
    );
    assert_eq!(
        (expand1.kh, expand3.kh, expand3.kw, expand3.stride),
        (1, 3, 3, 1)
    );
    let sq = squeeze_padded(squeeze, x, team);
    let (out, e) = expand(expand1, expand3, &sq, (h, w, s), team);
    recycle(sq);
    Hwc {
        h,
        w,
        c: e,
        data: out,
    }
}

/// A fire module's squeeze 1×1 + ReLU of `x` (h, w, in) into the interior of an
/// (h + 2, w + 2, s) zero-bordered buffer: the border is expand3x3's "same" padding.
fn squeeze_padded(squeeze: &Conv, x: &Hwc, team: &Team<'_>) -> Vec<f32> {
    let (h, w, cin) = (x.h, x.w, x.c);
    let s = squeeze.out_ch();
    let threads = team.threads();
    let wp = w + 2;
    let mut sq = zeroed((h + 2) * wp * s);
    let sb = squeeze.bias.as_slice().expect("contiguous bias");
    let rows_per = band_rows(h, w, s, threads);
    for_bands(
        &mut sq[wp * s..(h + 1) * wp * s],
        wp * s,
        rows_per,
        team,
        |r0, band, ipar| {
            let nr = band.len() / (wp * s);
            let m = nr * w;
            with_scratch(m * s, |acc| {
                gemm(
                    view_mut(acc, m, s),
                    false,
                    view(&x.data[r0 * w * cin..(r0 + nr) * w * cin], m, cin),
                    squeeze.wt.view(),
                    1.0,
                    ipar,
                );
                vectorized(
                    #[inline(always)]
                    || {
                        for (drow, arow) in
                            band.chunks_exact_mut(wp * s).zip(acc.chunks_exact(w * s))
                        {
                            for (d, a) in drow[s..(w + 1) * s]
                                .chunks_exact_mut(s)
                                .zip(arow.chunks_exact(s))
                            {
                                bias_relu(d, a, sb);
                            }
                        }
                    },
                );
            });
        },
    );
    sq
}

/// A fire module's [expand1x1 + ReLU ‖ expand3x3 + ReLU] of the zero-bordered squeeze
/// output `sq` ((h + 2, w + 2, s), from [`squeeze_padded`]): the (h, w, e) output data and e.
fn expand(
    expand1: &Conv,
    expand3: &Conv,
    sq: &[f32],
    (h, w, s): (usize, usize, usize),
    team: &Team<'_>,
) -> (Vec<f32>, usize) {
    let threads = team.threads();
    let wp = w + 2;
    let (e1, e3) = (expand1.out_ch(), expand3.out_ch());
    let e = e1 + e3;
    let k3 = 9 * s;
    let (b1, b3) = (
        expand1.bias.as_slice().expect("contiguous bias"),
        expand3.bias.as_slice().expect("contiguous bias"),
    );
    let mut out = zeroed(h * w * e);
    let rows_per = band_rows(h, w, k3 + e + 2 * e1 / w.max(1), threads);
    for_bands(&mut out, w * e, rows_per, team, |r0, band, ipar| {
        let nr = band.len() / (w * e);
        let (m1, m3) = (nr * wp, nr * w);
        with_scratch(m1 * e1 + m3 * (k3 + e3), |buf| {
            let (acc1, rest) = buf.split_at_mut(m1 * e1);
            let (cols, acc3) = rest.split_at_mut(m3 * k3);
            // expand1x1 over whole padded rows (the two border pixels are computed and dropped:
            // the band is then one contiguous matrix).
            gemm(
                view_mut(acc1, m1, e1),
                false,
                view(&sq[(r0 + 1) * wp * s..(r0 + nr + 1) * wp * s], m1, s),
                expand1.wt.view(),
                1.0,
                ipar,
            );
            // im2col: pixel (i, j) takes padded rows i..i+3, columns j..j+3 (3·s floats each).
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..w {
                            let dst = &mut cols[(r * w + j) * k3..(r * w + j + 1) * k3];
                            for u in 0..3 {
                                let src = ((r0 + r + u) * wp + j) * s;
                                dst[u * 3 * s..(u + 1) * 3 * s]
                                    .copy_from_slice(&sq[src..src + 3 * s]);
                            }
                        }
                    }
                },
            );
            gemm(
                view_mut(acc3, m3, e3),
                false,
                view(cols, m3, k3),
                expand3.wt.view(),
                1.0,
                ipar,
            );
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..w {
                            let px = r * w + j;
                            let (d1, d3) = band[px * e..(px + 1) * e].split_at_mut(e1);
                            let a1 = &acc1[(r * wp + j + 1) * e1..(r * wp + j + 2) * e1];
                            bias_relu(d1, a1, b1);
                            bias_relu(d3, &acc3[px * e3..(px + 1) * e3], b3);
                        }
                    }
                },
            );
        });
    });
    (out, e)
}
