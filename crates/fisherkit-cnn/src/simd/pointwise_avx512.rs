//! The AVX-512F pointwise kernel (x86-64-v4): 12 rows × two 16-column panels per register
//! block.

use crate::ops::activation::Act;
use crate::simd::tiles::{for_each_tile, row_blocks, row_offsets, Packed, NR};
use std::arch::x86_64::*;

/// Rows (pixels) per register block: 12 × 2 accumulators + 2 panel vectors + 1 broadcast
/// = 27 of the 32 registers.
const MR4: usize = 12;

/// `gather`: `None` for packed rows (A row i at `a[i·k ..]`), or `Some((rs, offs))` for
/// $A_{i,q}$ = `a[i·rs + offs[q]]` ([`crate::ops::pointwise::pointwise_gather`]).
///
/// # Safety
/// The CPU has AVX-512F; `a.len() ≥ m·k` (packed rows) or `a.len() > (m − 1)·rs + offs[q]`
/// for every q and `offs.len() = k` (gathered), `bias.len() = n`, `resid` (if any) ≥ m·n
/// floats.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn pointwise_v4<F: Fn(usize) -> usize>(
    a: &[f32],
    m: usize,
    gather: Option<(usize, &[usize])>,
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
    let blocks = row_blocks(m, MR4);
    // Panels in pairs (p, count, half), the last one alone when their number is odd;
    // `half`: the group's last panel is the matrix's last and has at most 8 columns.
    let last_half = n - (panels - 1) * NR <= NR / 2;
    let pairs: Vec<(usize, usize, bool)> = (0..panels)
        .step_by(2)
        .map(|p| {
            let np = (panels - p).min(2);
            (p, np, last_half && p + np == panels)
        })
        .collect();
    let job = Job {
        a,
        gather,
        w,
        bias,
        act,
        resid,
        offsets: &offsets,
    };
    for_each_tile(k, n, &blocks, &pairs, |(p, np, half), (i0, rows)| {
        // SAFETY: as for this function; p + np ≤ panels, i0 + rows ≤ m, offsets checked.
        unsafe { run(&job, p, np, half, i0, rows, out) }
    });
}

/// What every register block of one [`pointwise_v4`] call shares.
struct Job<'a> {
    a: &'a [f32],
    /// `Some((rs, offs))`: $A_{i,q}$ = `a[i·rs + offs[q]]`; `None`: `a[i·k + q]`.
    gather: Option<(usize, &'a [usize])>,
    w: &'a Packed,
    bias: &'a [f32],
    act: Act,
    resid: Option<&'a [f32]>,
    offsets: &'a [usize],
}

/// Rows `i0 .. i0 + rows` (1 ≤ rows ≤ 12) × panels `p .. p + np` (np ∈ {1, 2}); `half`:
/// the last of them has at most 8 columns (its sums then take 8-lane instructions).
///
/// # Safety
/// As for [`pointwise_v4`]; p + np ≤ panels, i0 + rows ≤ m, every offset checked.
#[target_feature(enable = "avx512f")]
unsafe fn run(
    j: &Job<'_>,
    p: usize,
    np: usize,
    half: bool,
    i0: usize,
    rows: usize,
    out: &mut [f32],
) {
    macro_rules! dispatch {
        ($h:literal, $half:literal) => {
            match rows {
                12 => block::<12, $h, $half>(j, p, i0, out),
                11 => block::<11, $h, $half>(j, p, i0, out),
                10 => block::<10, $h, $half>(j, p, i0, out),
                9 => block::<9, $h, $half>(j, p, i0, out),
                8 => block::<8, $h, $half>(j, p, i0, out),
                7 => block::<7, $h, $half>(j, p, i0, out),
                6 => block::<6, $h, $half>(j, p, i0, out),
                5 => block::<5, $h, $half>(j, p, i0, out),
                4 => block::<4, $h, $half>(j, p, i0, out),
                3 => block::<3, $h, $half>(j, p, i0, out),
                2 => block::<2, $h, $half>(j, p, i0, out),
                _ => block::<1, $h, $half>(j, p, i0, out),
            }
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        match (np, half) {
            (2, false) => dispatch!(2, false),
            (2, true) => dispatch!(2, true),
            (_, false) => dispatch!(1, false),
            (_, true) => dispatch!(1, true),
        }
    }
}

/// The R × H register block of sums $\sum_{q<k} A_{r,q} W_{q, 16h + t}$ from zero in order
/// of q, for R rows of A from `ap` and H consecutive packed panels at `pp`. `G` = 0: packed
/// rows, $A_{r,q}$ = `ap[r·k + q]` (`offs` unused); `G` ∈ {1, 2}: gathered,
/// $A_{r,q}$ = `ap[r·G + offs[q]]` ([`crate::ops::pointwise::pointwise_gather`]). The gathered row stride
/// is a constant so that each row's load is one instruction with a fixed displacement
/// (with a run-time stride LLVM kept the row addresses in registers and spilled sums to
/// the stack). Not inlined: in a function of its own the block provably stays in
/// registers for the whole loop (inlined, LLVM kept a copy of every sum on the stack,
/// storing it after each multiply-add).
///
/// Prefetch: it asks for the weights of the next register block while it multiplies: with
/// each 64-byte row of its H panels it prefetches the same row of the next H panels, so
/// the next block (the next panels of a row block's sweep, or of the first row block's
/// sweep when the panels are outermost) finds them in L1. A pass touches ~19 MB of
/// weights once each, more than this VM's share of L3 keeps between passes, so each
/// layer's weights arrive from memory, and the hardware prefetcher, which stops at every
/// 4 KB page, left the multiply-adds waiting: the 8×8 blocks ran 25 % slower than the
/// same block with its weights in L3. In-process A/B (pass by pass), 227 px: no prefetch
/// / 64 rows ahead in the stream / the next block's rows: one thread 6.92 / 6.58 / 6.39
/// ms, two threads 5.32 / 4.92 / 4.66 ms (a slow phase of the VM); the next block's rows
/// against 64 rows ahead: 0.7–2.4 % faster at 227–454 px, −1.0 / +1.8 % at 907 px with
/// one / two threads (docs/evidence/cnn-small-maps-2026-12-06.md).
///
/// `HALF`: only lanes t < 8 of the last panel's sums are wanted (a last panel of at most 8
/// columns, e.g. 24 = 16 + 8 or 40 = 32 + 8 outputs): they are computed by 8-lane fused
/// multiply-adds on the low halves, lane by lane the same operations as the 16-lane ones
/// (so the same bits), at half the cost on a CPU that runs a 16-lane FMA as two 8-lane
/// halves (AMD Zen 4); lanes 8–15 of that panel are then unspecified.
///
/// # Safety
/// AVX-512F; `pp .. pp + H·k·16` lies inside a live `f32` slice, and so do
/// `ap .. ap + R·k` (G = 0) or, with `offs` holding k offsets, every `ap + r·G + offs[q]`
/// for r < R, q < k (G > 0).
#[target_feature(enable = "avx512f")]
#[inline(never)]
#[allow(clippy::needless_range_loop)] // h also enters the address arithmetic
unsafe fn sums<const R: usize, const H: usize, const HALF: bool, const G: usize>(
    ap: *const f32,
    offs: *const usize,
    pp: *const f32,
    k: usize,
) -> [[__m512; H]; R] {
    let zero = _mm512_setzero_ps();
    let mut acc = [[zero; H]; R];
    let rs = if G == 0 { k } else { G };
    // SAFETY: q < k, r < R, h < H: the A and panel offsets are bounded by the contract.
    unsafe {
        for q in 0..k {
            let mut wv = [zero; H];
            for h in 0..H {
                wv[h] = _mm512_loadu_ps(pp.add((h * k + q) * NR));
                // The same row of the next register block's panels (the next H panels
                // of the stream); `wrapping_add`, as the hint may point past the
                // weights' end (a prefetch never faults).
                let ahead = pp.wrapping_add(((H + h) * k + q) * NR);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            }
            let base = if G == 0 {
                ap.add(q)
            } else {
                ap.add(*offs.add(q))
            };
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*base.add(r * rs));
                for h in 0..H {
                    acc_r[h] = if HALF && h == H - 1 {
                        _mm512_castps256_ps512(_mm256_fmadd_ps(
                            _mm512_castps512_ps256(x),
                            _mm512_castps512_ps256(wv[h]),
                            _mm512_castps512_ps256(acc_r[h]),
                        ))
                    } else {
                        _mm512_fmadd_ps(x, wv[h], acc_r[h])
                    };
                }
            }
        }
    }
    acc
}

/// R rows from `i0` × H panels from `p`: the sums over q, then bias, activation, residual
/// and one (masked where the panel is partial) store per row and panel. `HALF`: the last
/// panel has at most 8 columns (see [`sums`]; its masked store writes only those lanes).
///
/// # Safety
/// AVX-512F; p + H ≤ panels, i0 + R ≤ m, `j.offsets[i0 + r] + n ≤ out.len()` for r < R,
/// `j.a.len() ≥ m·k`, `j.resid` (if any) ≥ m·n floats, `j.bias.len() = n`.
#[target_feature(enable = "avx512f")]
#[allow(clippy::needless_range_loop)] // h and r also enter the address arithmetic
unsafe fn block<const R: usize, const H: usize, const HALF: bool>(
    j: &Job<'_>,
    p: usize,
    i0: usize,
    out: &mut [f32],
) {
    let (k, n) = (j.w.k, j.w.n);
    let zero = _mm512_setzero_ps();
    // SAFETY: A rows i0 .. i0 + R hold R·k floats from (i0·k), or (gathered) every
    // i·rs + offs[q] with i < m is inside `a`; panels p .. p + H hold H·k·16 floats from
    // p·k·16 (the caller's contract).
    let acc = unsafe {
        let pp = j.w.data.as_ptr().add(p * k * NR);
        match j.gather {
            None => sums::<R, H, HALF, 0>(j.a.as_ptr().add(i0 * k), std::ptr::null(), pp, k),
            Some((rs, offs)) => {
                let ap = j.a.as_ptr().add(i0 * rs);
                match rs {
                    1 => sums::<R, H, HALF, 1>(ap, offs.as_ptr(), pp, k),
                    _ => sums::<R, H, HALF, 2>(ap, offs.as_ptr(), pp, k),
                }
            }
        }
    };
    let six = _mm512_set1_ps(6.0);
    let op = out.as_mut_ptr();
    for h in 0..H {
        let c = (p + h) * NR;
        let lanes = (n - c).min(NR);
        let full = lanes == NR;
        let mask: __mmask16 = if full { !0 } else { (1u16 << lanes) - 1 };
        // SAFETY: only lanes t < n − c are accessed (masked-off lanes are not): bias index
        // c + t < n, residual index (i0 + r)·n + c + t < m·n, output index
        // offsets[i0 + r] + c + t < offsets[i0 + r] + n ≤ out.len().
        unsafe {
            let b = _mm512_maskz_loadu_ps(mask, j.bias.as_ptr().add(c));
            for r in 0..R {
                let mut v = _mm512_add_ps(acc[r][h], b);
                if j.act == Act::Relu6 {
                    v = _mm512_min_ps(_mm512_max_ps(v, zero), six);
                }
                if let Some(res) = j.resid {
                    let rp = res.as_ptr().add((i0 + r) * n + c);
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, rp));
                }
                let o = op.add(j.offsets[i0 + r] + c);
                if full {
                    _mm512_storeu_ps(o, v);
                } else {
                    _mm512_mask_storeu_ps(o, mask, v);
                }
            }
        }
    }
}
