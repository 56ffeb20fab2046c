//! A k×k convolution with "same" padding on a channel-first input, output channel-last
//! ([`conv_chw_input`], EfficientNet's stem): by im2col bands and a GEMM (or the packed
//! kernel), or with the AVX-512F kernel gathering the taps in place.

use crate::exec::bands::{band_rows, for_bands, rows_per_thread_band};
use crate::exec::scratch::{overwritable, recycle, with_scratch, zeroed};
use crate::exec::team::Team;
use crate::ops::activation::{bias_act_inplace, Act};
use crate::ops::conv::{Conv, SamePad};
use crate::ops::pointwise::{gather_available, pointwise, pointwise_gather};
use crate::ops::tensor::{view, view_mut, Hwc};
use crate::simd::tiles::Packed;
use fisherkit::linalg::{gemm, vectorized};
use ndarray::ArrayView3;

/// A k×k convolution with TF "same" padding and stride `conv.stride` on a CHW input `x`
/// (C, H, W), bias + `act`, output channel-last (⌈H/s⌉, ⌈W/s⌉, out): EfficientNet's stem.
///
/// With packed weights on a CPU with AVX-512F and stride 1 or 2, [`stem_gathered`]: the input is copied once
/// into a zero-bordered channel-first buffer, and the kernel reads each output pixel's k·k·C
/// taps from it in place. Otherwise [`stem_im2col`]. Both give bitwise the same output (the
/// same sums in the same order).
pub(crate) fn conv_chw_input(
    conv: &Conv,
    x: ArrayView3<'_, f32>,
    act: Act,
    team: &Team<'_>,
) -> Hwc {
    assert_eq!(x.dim().0, conv.in_ch, "conv: input channels");
    match &conv.packed {
        Some(pk) if gather_available(conv.stride) => stem_gathered(conv, pk, x, act, team),
        _ => stem_im2col(conv, x, act, team),
    }
}

/// [`conv_chw_input`] without an im2col copy: `x` (C, H, W) copied into a zero-bordered
/// (C, h_p, w_p) buffer, then per output row i one [`pointwise_gather`]
/// over its w_o pixels, pixel j's tap (u, v, c) at `(c·h_p + s·i + u)·w_p + s·j + v` (the
/// order of `conv.wt`'s rows). Bands of output rows spread over `team`.
pub(super) fn stem_gathered(
    conv: &Conv,
    pk: &Packed,
    x: ArrayView3<'_, f32>,
    act: Act,
    team: &Team<'_>,
) -> Hwc {
    let (c, h, w) = x.dim();
    let g = SamePad::new(h, w, conv.kh, conv.stride);
    let (k, st, n) = (conv.kh, conv.stride, conv.out_ch());
    let xp = pad_chw(x, &g, team);
    let offs: Vec<usize> = (0..k * k * c)
        .map(|q| {
            let (u, v, ch) = (q / (k * c), (q / c) % k, q % c);
            (ch * g.hp + u) * g.wp + v
        })
        .collect();
    let mut out = overwritable(g.ho * g.wo * n);
    let rows_per = rows_per_thread_band(g.ho, team.threads());
    let bias = conv.bias.as_slice().expect("contiguous bias");
    for_bands(&mut out, g.wo * n, rows_per, team, |r0, band, _| {
        for (i, orow) in band.chunks_exact_mut(g.wo * n).enumerate() {
            let a = &xp[(r0 + i) * st * g.wp..];
            let done = pointwise_gather(a, g.wo, st, &offs, pk, bias, act, orow, |j| j * n);
            assert!(
                done,
                "stem: the gathering kernel was available a moment ago"
            );
        }
    });
    recycle(xp);
    Hwc {
        h: g.ho,
        w: g.wo,
        c: n,
        data: out,
    }
}

/// `x` (C, H, W) in a (C, h_p, w_p) buffer: image row y at padded row y + p_t, column x at
/// x + p_l, zeros elsewhere (rows or columns beyond the padded sides are never read by a tap
/// and are left out). Bands of padded rows spread over `team`: done serially, the copy kept
/// the second thread idle; the stem took 183 → 173 µs (227 px) and 263 → 237 µs (256 px)
/// with two threads in an in-process A/B (docs/evidence/cnn-small-maps-2026-12-06.md).
fn pad_chw(x: ArrayView3<'_, f32>, g: &SamePad, team: &Team<'_>) -> Vec<f32> {
    let (c, h, w) = x.dim();
    let (hp, wp) = (g.hp, g.wp);
    let cols = w.min(wp - g.pl);
    let mut xp = overwritable(c * hp * wp);
    let rows_per = rows_per_thread_band(c * hp, team.threads());
    team.for_each_chunk(&mut xp, rows_per * wp, |bi, band| {
        for (i, dst) in band.chunks_exact_mut(wp).enumerate() {
            let pr = bi * rows_per + i;
            let (ch, y) = (pr / hp, (pr % hp).wrapping_sub(g.pt));
            if y >= h {
                dst.fill(0.0);
                continue;
            }
            dst[..g.pl].fill(0.0);
            dst[g.pl + cols..].fill(0.0);
            let src = x.slice(ndarray::s![ch, y, ..cols]);
            match src.as_slice() {
                Some(s) => dst[g.pl..g.pl + cols].copy_from_slice(s),
                None => dst[g.pl..g.pl + cols]
                    .iter_mut()
                    .zip(src.iter())
                    .for_each(|(d, &v)| *d = v),
            }
        }
    });
    xp
}

/// [`conv_chw_input`] by im2col: the input is copied once into a zero-bordered channel-last
/// buffer; bands of output rows are im2col'ed (k·k·C floats per pixel, k contiguous runs of
/// k·C) into scratch and multiplied by `conv.wt` in one GEMM (or packed-kernel call) each.
pub(super) fn stem_im2col(conv: &Conv, x: ArrayView3<'_, f32>, act: Act, team: &Team<'_>) -> Hwc {
    let (c, h, w) = x.dim();
    let (k, st) = (conv.kh, conv.stride);
    let SamePad {
        ho,
        wo,
        pt,
        pl,
        hp,
        wp,
    } = SamePad::new(h, w, k, st);
    let mut xp = zeroed(hp * wp * c);
    for ch in 0..c {
        for (iy, row) in x.index_axis(ndarray::Axis(0), ch).outer_iter().enumerate() {
            let base = ((iy + pt) * wp + pl) * c + ch;
            for (ix, &v) in row.iter().enumerate() {
                xp[base + ix * c] = v;
            }
        }
    }
    let n = conv.out_ch();
    let kk = k * k * c;
    let mut out = zeroed(ho * wo * n);
    let rows_per = band_rows(ho, wo, kk, team.threads());
    let bias = conv.bias.as_slice().expect("contiguous bias");
    for_bands(&mut out, wo * n, rows_per, team, |r0, band, ipar| {
        let nr = band.len() / (wo * n);
        let m = nr * wo;
        with_scratch(m * kk, |cols| {
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..wo {
                            let dst = &mut cols[(r * wo + j) * kk..(r * wo + j + 1) * kk];
                            for u in 0..k {
                                let src = (((r0 + r) * st + u) * wp + st * j) * c;
                                dst[u * k * c..(u + 1) * k * c]
                                    .copy_from_slice(&xp[src..src + k * c]);
                            }
                        }
                    }
                },
            );
            if let Some(pk) = &conv.packed {
                if pointwise(cols, m, pk, bias, act, None, band, |i| i * n) {
                    return;
                }
            }
            gemm(
                view_mut(band, m, n),
                false,
                view(cols, m, kk),
                conv.wt.view(),
                1.0,
                ipar,
            );
            vectorized(
                #[inline(always)]
                || bias_act_inplace(band, bias, act),
            );
        });
    });
    recycle(xp);
    Hwc {
        h: ho,
        w: wo,
        c: n,
        data: out,
    }
}
