//! The AVX2 + FMA pointwise kernel (x86-64-v3): 6 rows × 16 columns of sums in 12 registers.

use crate::ops::activation::Act;
use crate::simd::tiles::{for_each_tile, row_blocks, row_offsets, Packed, NR};
use std::arch::x86_64::*;

/// Rows (pixels) per register block.
const MR: usize = 6;

/// Lane mask (all ones in lanes < `lanes`) for AVX2's masked loads and stores.
#[target_feature(enable = "avx2,fma")]
unsafe fn lane_mask(lanes: usize) -> __m256i {
    let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), idx)
}

/// # Safety
/// The CPU has AVX2 and FMA; `a.len() ≥ m·k`, `bias.len() = n`, `resid` (if any) ≥ m·n
/// floats.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn pointwise_v3<F: Fn(usize) -> usize>(
    a: &[f32],
    m: usize,
    w: &Packed,
    bias: &[f32],
    act: Act,
    resid: Option<&[f32]>,
    out: &mut [f32],
    dst: &F,
) {
    let (k, n) = (w.k, w.n);
    let panels = n.div_ceil(NR);
    let offsets = row_offsets(m, n, out.len(), dst);
    // Per panel: lane masks and bias vectors.
    let heads: Vec<([__m256i; 2], [__m256; 2])> = (0..panels)
        .map(|p| {
            let col = p * NR;
            let lanes = |h: usize| (n - col).saturating_sub(8 * h).min(8);
            // SAFETY: AVX2 (this function's contract); the masked loads read only lanes
            // below n − col of the n-float bias (masked-off lanes are not accessed).
            unsafe {
                let masks = [lane_mask(lanes(0)), lane_mask(lanes(1))];
                let second = if lanes(1) > 0 {
                    _mm256_maskload_ps(bias.as_ptr().add(col + 8), masks[1])
                } else {
                    _mm256_setzero_ps()
                };
                (
                    masks,
                    [_mm256_maskload_ps(bias.as_ptr().add(col), masks[0]), second],
                )
            }
        })
        .collect();
    let blocks = row_blocks(m, MR);
    let job = Job {
        a,
        w,
        act,
        resid,
        heads: &heads,
        offsets: &offsets,
    };
    let panel_list: Vec<usize> = (0..panels).collect();
    for_each_tile(k, n, &blocks, &panel_list, |p, (i0, rows)| {
        // SAFETY: as for this function; `run` gets in-range panels and blocks.
        unsafe { run(&job, p, i0, rows, out) }
    });
}

/// What every register block of one [`pointwise_v3`] call shares.
struct Job<'a> {
    a: &'a [f32],
    w: &'a Packed,
    act: Act,
    resid: Option<&'a [f32]>,
    heads: &'a [([__m256i; 2], [__m256; 2])],
    offsets: &'a [usize],
}

/// Rows `i0 .. i0 + rows` (≤ 6) × panel `p`.
///
/// # Safety
/// As for [`pointwise_v3`]; p < panels, i0 + rows ≤ m, every offset checked.
#[target_feature(enable = "avx2,fma")]
unsafe fn run(j: &Job<'_>, p: usize, i0: usize, rows: usize, out: &mut [f32]) {
    let (k, n) = (j.w.k, j.w.n);
    let col = p * NR;
    let mut offs = [0usize; MR];
    offs[..rows].copy_from_slice(&j.offsets[i0..i0 + rows]);
    let (masks, bias) = j.heads[p];
    let blk = Blk {
        a: &j.a[i0 * k..(i0 + rows) * k],
        k,
        panel: &j.w.data[p * k * NR..(p + 1) * k * NR],
        col,
        masks,
        bias,
        act: j.act,
        resid: j.resid.map(|r| &r[i0 * n..(i0 + rows) * n]),
        n,
    };
    // SAFETY: as for this function; `blk`'s slices have the lengths `block` needs
    // (rows·k, k·NR, rows·n) and the `rows` offsets were checked by the caller.
    unsafe {
        if n - col > 8 {
            block_rows::<2>(rows, &blk, out, &offs)
        } else {
            // At most 8 columns left: one vector (the second is all padding).
            block_rows::<1>(rows, &blk, out, &offs)
        }
    }
}

/// One register block's inputs: `a` (R, k) rows, the panel (k, 16), the epilogue.
struct Blk<'a> {
    a: &'a [f32],
    k: usize,
    panel: &'a [f32],
    col: usize,
    masks: [__m256i; 2],
    bias: [__m256; 2],
    act: Act,
    resid: Option<&'a [f32]>,
    n: usize,
}

/// [`block`] for `rows` ≤ 6 rows.
///
/// # Safety
/// As for [`block`] with R = `rows`.
#[target_feature(enable = "avx2,fma")]
unsafe fn block_rows<const H: usize>(
    rows: usize,
    b: &Blk<'_>,
    out: &mut [f32],
    offs: &[usize; MR],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match rows {
            6 => block::<6, H>(b, out, offs),
            5 => block::<5, H>(b, out, offs),
            4 => block::<4, H>(b, out, offs),
            3 => block::<3, H>(b, out, offs),
            2 => block::<2, H>(b, out, offs),
            _ => block::<1, H>(b, out, offs),
        }
    }
}

/// R rows × the panel's first H vectors (H = 1 when the panel has ≤ 8 columns).
///
/// # Safety
/// AVX2 + FMA; `b.a.len() ≥ R·k`, `b.panel.len() ≥ k·NR`, `b.resid` ≥ R·n floats,
/// `offs[r] + n ≤ out.len()` for r < R, `b.col < n`, `b.masks` cover only lanes below
/// n − col (and n − col − 8).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::needless_range_loop)] // h also enters the column arithmetic
unsafe fn block<const R: usize, const H: usize>(b: &Blk<'_>, out: &mut [f32], offs: &[usize; MR]) {
    let k = b.k;
    let zero = _mm256_setzero_ps();
    let mut acc = [[zero; H]; R];
    let (ap, pp) = (b.a.as_ptr(), b.panel.as_ptr());
    // SAFETY: q < k, r < R, h < H ≤ 2: A index r·k + q < R·k; panel index
    // q·16 + 8h + 7 < k·NR.
    unsafe {
        for q in 0..k {
            let mut w = [zero; H];
            for (h, wh) in w.iter_mut().enumerate() {
                *wh = _mm256_loadu_ps(pp.add(q * NR + 8 * h));
            }
            // As in the AVX-512F kernel (`x86v4::sums`): with each 64-byte row of this
            // panel, the same row of the next panel (past the end: a mere hint). Forced
            // onto this kernel on an AVX-512 machine: 2–7 % faster than no prefetch at
            // 227–256 px (64 rows ahead), level with 64 rows ahead (−0.9 to +0.6 %).
            // Computed with `wrapping_add`: the hint may point past the weights' end.
            _mm_prefetch::<_MM_HINT_T0>(pp.wrapping_add((k + q) * NR).cast());
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*ap.add(r * k + q));
                for h in 0..H {
                    acc_r[h] = _mm256_fmadd_ps(x, w[h], acc_r[h]);
                }
            }
        }
    }
    let six = _mm256_set1_ps(6.0);
    let op = out.as_mut_ptr();
    for (r, acc_r) in acc.iter().enumerate() {
        for h in 0..H {
            let c = b.col + 8 * h;
            if c >= b.n {
                continue;
            }
            let mut v = _mm256_add_ps(acc_r[h], b.bias[h]);
            if b.act == Act::Relu6 {
                v = _mm256_min_ps(_mm256_max_ps(v, zero), six);
            }
            // SAFETY: the lanes accessed (all 8 when c + 8 ≤ n, else the masked ones) are
            // below n − c: residual index r·n + c + t < R·n, output index
            // offs[r] + c + t < offs[r] + n ≤ out.len(); masked-off lanes are not accessed.
            // Full vectors use plain loads and stores (AMD runs the masked ones slowly).
            let full = c + 8 <= b.n;
            unsafe {
                if let Some(res) = b.resid {
                    let rp = res.as_ptr().add(r * b.n + c);
                    let rv = if full {
                        _mm256_loadu_ps(rp)
                    } else {
                        _mm256_maskload_ps(rp, b.masks[h])
                    };
                    v = _mm256_add_ps(v, rv);
                }
                if full {
                    _mm256_storeu_ps(op.add(offs[r] + c), v);
                } else {
                    _mm256_maskstore_ps(op.add(offs[r] + c), b.masks[h], v);
                }
            }
        }
    }
}
