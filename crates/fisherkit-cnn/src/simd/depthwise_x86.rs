//! The depthwise row kernels (x86-64) with explicit AVX-512F or AVX2 + FMA intrinsics (LLVM's
//! auto-vectoriser picked the pixel axis, with gathers, for the portable code): the same
//! code on 16- or 8-float vectors, the same operations in the same order per channel, so
//! both (and the portable code with FMA) give the same bits.

use crate::simd::depthwise_portable::dw_tail;
use std::arch::x86_64::*;

/// [`crate::ops::depthwise::dw_row`] by the AVX2 + FMA kernel; `false` (nothing written) if
/// the CPU lacks them or (k, s) has no kernel. Bounds are checked by the caller.
pub(crate) fn dw_row(
    rows: &[&[f32]],
    wt: &[f32],
    bias: &[f32],
    k: usize,
    s: usize,
    wo: usize,
    out: &mut [f32],
) -> bool {
    let v4 = is_x86_feature_detected!("avx512f");
    let v3 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    macro_rules! go {
        ($k:literal, $s:literal) => {{
            let r: &[&[f32]; $k] = rows.try_into().expect("k rows");
            // SAFETY: the CPU has the features `v4_row` / `v3_row` is compiled for
            // (checked above); the caller checked every slice bound the kernel relies on.
            if v4 {
                unsafe { v4_row::<$k, $s>(r, wt, bias, wo, out) }
            } else if v3 {
                unsafe { v3_row::<$k, $s>(r, wt, bias, wo, out) }
            } else {
                return false;
            }
            true
        }};
    }
    match (k, s) {
        (3, 1) => go!(3, 1),
        (3, 2) => go!(3, 2),
        (5, 1) => go!(5, 1),
        (5, 2) => go!(5, 2),
        _ => false,
    }
}

/// Input pixels a block of 8 stride-2 outputs reads per row: (8 − 1)·2 + K for K ≤ 5.
const S2_PIXELS: usize = 19;

macro_rules! kernel {
    ($name:ident, $feat:literal, $v:ty, $lanes:literal, $zero:ident, $set1:ident,
     $load:ident, $store:ident, $fma:ident, $add:ident, $max:ident, $min:ident) => {
        /// Blocks of 8 pixels × one vector of channels, their sums in registers; a row
        /// whose width is not a multiple of 8 ends with a block over its last 8 pixels,
        /// overlapping the one before (those pixels are computed twice, identically),
        /// since a lone pixel's K² multiply-adds form one dependency chain that runs at a
        /// fraction of the FMA rate; rows narrower than 8 pixel by pixel. The remaining
        /// channels by the portable code with FMA.
        ///
        /// # Safety
        /// The CPU must have the target features; `rows[u].len() ≥ ((w_o − 1)S + K)·C`,
        /// `wt.len() ≥ K²·C`, `out.len() ≥ w_o·C` with C = `bias.len()`, `w_o ≥ 1`.
        #[target_feature(enable = $feat)]
        unsafe fn $name<const K: usize, const S: usize>(
            rows: &[&[f32]; K],
            wt: &[f32],
            bias: &[f32],
            wo: usize,
            out: &mut [f32],
        ) {
            const P: usize = 8;
            let c = bias.len();
            let cv = c / $lanes * $lanes;
            let rp: [*const f32; K] = std::array::from_fn(|u| rows[u].as_ptr());
            let (wp, bp, op) = (wt.as_ptr(), bias.as_ptr(), out.as_mut_ptr());
            let (zero, six) = ($zero(), $set1(6.0));
            // SAFETY (every load and store below): an input index ((j·S + v)·C + c0 + t)
            // with j < w_o, v < K, c0 + t < C is below ((w_o − 1)S + K)·C ≤ rows[u].len();
            // a tap index ((u·K + v)·C + c0 + t) below K²·C ≤ wt.len(); an output index
            // (j·C + c0 + t) below w_o·C ≤ out.len(); bias indices below C (caller's
            // contract). The loads and stores are unaligned ones.
            unsafe {
                // Pixel blocks outside, channel vectors inside: the taps then change in
                // the inner loop, so LLVM cannot hoist the K² weight vectors out of it
                // into registers (for K = 5, with channels outside, that left too few
                // registers for the sums, which went to the stack), and each pixel's
                // channels are read in address order.
                let mut j0 = 0;
                while j0 < wo && wo >= P {
                    // The last block of a row whose width is not a multiple of P overlaps
                    // the previous one (see above).
                    let jb = j0.min(wo - P);
                    for c0 in (0..cv).step_by($lanes) {
                        let bv = $load(bp.add(c0));
                        let mut acc: [$v; P] = [zero; P];
                        if S == 2 {
                            // The (P − 1)·2 + K input pixels of each row loaded once, by
                            // a pointer stepping one pixel at a time: with the offsets
                            // ((j·2 + v)·C) written out, LLVM kept 19 of them in
                            // general registers, spilled and reloaded them around every
                            // multiply-add, and ran at half the stride-1 rate. Stride 1
                            // keeps the direct loads: the stepping pointer was 1–6 %
                            // slower there (12 offsets fit in registers).
                            for u in 0..K {
                                let mut xs: [$v; S2_PIXELS] = [zero; S2_PIXELS];
                                let mut ptr = rp[u].add(jb * S * c + c0);
                                for x in xs.iter_mut().take((P - 1) * S + K) {
                                    *x = $load(ptr);
                                    ptr = ptr.add(c);
                                }
                                for v in 0..K {
                                    let wv = $load(wp.add((u * K + v) * c + c0));
                                    for (p, a) in acc.iter_mut().enumerate() {
                                        *a = $fma(xs[p * S + v], wv, *a);
                                    }
                                }
                            }
                        } else {
                            for u in 0..K {
                                for v in 0..K {
                                    let wv = $load(wp.add((u * K + v) * c + c0));
                                    for (p, a) in acc.iter_mut().enumerate() {
                                        let x = $load(rp[u].add(((jb + p) * S + v) * c + c0));
                                        *a = $fma(x, wv, *a);
                                    }
                                }
                            }
                        }
                        for (p, a) in acc.iter().enumerate() {
                            let y = $min($max($add(*a, bv), zero), six);
                            $store(op.add((jb + p) * c + c0), y);
                        }
                    }
                    j0 += P;
                }
                while j0 < wo {
                    for c0 in (0..cv).step_by($lanes) {
                        let bv = $load(bp.add(c0));
                        let mut a = zero;
                        for u in 0..K {
                            for v in 0..K {
                                let wv = $load(wp.add((u * K + v) * c + c0));
                                let x = $load(rp[u].add((j0 * S + v) * c + c0));
                                a = $fma(x, wv, a);
                            }
                        }
                        $store(op.add(j0 * c + c0), $min($max($add(a, bv), zero), six));
                    }
                    j0 += 1;
                }
            }
            if cv < c {
                let dw_rows: &[&[f32]] = rows;
                dw_tail::<K, S>(dw_rows, wt, bias, wo, out, cv);
            }
        }
    };
}

kernel!(
    v4_row,
    "avx512f",
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_max_ps,
    _mm512_min_ps
);

kernel!(
    v3_row,
    "avx2,fma",
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_max_ps,
    _mm256_min_ps
);
