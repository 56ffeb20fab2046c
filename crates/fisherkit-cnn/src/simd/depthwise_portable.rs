//! The portable depthwise row code (any CPU, any (k, s)): channel blocks of N with P pixels
//! of sums in registers, the taps in order (u, v) from zero, fused multiply-adds when `FMA`
//! (then the same operations in the same order as the x86 kernels, hence the same bits).

use crate::ops::activation::Act;

/// Channels `c_from ..` of [`dw_row`] by the portable code with fused multiply-adds (the
/// channels after the vector kernels' last full vector).
#[inline(always)]
pub(crate) fn dw_tail<const K: usize, const S: usize>(
    rows: &[&[f32]],
    wt: &[f32],
    bias: &[f32],
    wo: usize,
    out: &mut [f32],
    c_from: usize,
) {
    let rows: &[&[f32]; K] = rows.try_into().expect("K rows");
    for c0 in c_from..bias.len() {
        dw_cols::<true, 1, 1, K, S>(rows, wt, bias, wo, c0, out);
    }
}

/// Channel blocks of N (registers), then 8, then single channels.
#[inline(always)]
pub(crate) fn dw_row_k<
    const FMA: bool,
    const N: usize,
    const P: usize,
    const K: usize,
    const S: usize,
>(
    rows: &[&[f32]],
    wt: &[f32],
    bias: &[f32],
    wo: usize,
    out: &mut [f32],
    c_from: usize,
) {
    let rows: &[&[f32]; K] = rows.try_into().expect("K rows");
    let c = bias.len();
    let mut c0 = c_from;
    while c0 + N <= c {
        dw_cols::<FMA, N, P, K, S>(rows, wt, bias, wo, c0, out);
        c0 += N;
    }
    while c0 + 8 <= c {
        dw_cols::<FMA, 8, P, K, S>(rows, wt, bias, wo, c0, out);
        c0 += 8;
    }
    while c0 < c {
        dw_cols::<FMA, 1, P, K, S>(rows, wt, bias, wo, c0, out);
        c0 += 1;
    }
}

/// Any (k, s): one channel and one pixel at a time.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn dw_row_generic<const FMA: bool>(
    rows: &[&[f32]],
    wt: &[f32],
    bias: &[f32],
    k: usize,
    s: usize,
    wo: usize,
    out: &mut [f32],
) {
    let c = bias.len();
    for j in 0..wo {
        for ch in 0..c {
            let mut a = 0.0f32;
            for (u, r) in rows.iter().enumerate() {
                for v in 0..k {
                    a = madd::<FMA>(a, r[(j * s + v) * c + ch], wt[(u * k + v) * c + ch]);
                }
            }
            out[j * c + ch] = Act::Relu6.apply(a + bias[ch]);
        }
    }
}

/// $a + x w$, fused (one rounding) when `FMA`.
#[inline(always)]
fn madd<const FMA: bool>(a: f32, x: f32, w: f32) -> f32 {
    if FMA {
        x.mul_add(w, a)
    } else {
        a + x * w
    }
}

/// Channels `c0 .. c0 + N` of a whole output row ([`dw_row`]): blocks of `P` pixels with
/// their P·N sums in registers over the K² taps, then single pixels.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // u, v and t also enter the index arithmetic
fn dw_cols<const FMA: bool, const N: usize, const P: usize, const K: usize, const S: usize>(
    rows: &[&[f32]; K],
    wt: &[f32],
    bias: &[f32],
    wo: usize,
    c0: usize,
    out: &mut [f32],
) {
    let c = bias.len();
    // Every index below is in bounds given these (checked once here, not per load): an input
    // index ((j·S + v)·C + c0 + t) with j < w_o, v < K, c0 + t < C is below
    // ((w_o − 1)·S + K)·C ≤ rows[u].len(); a tap index ((u·K + v)·C + c0 + t) is below
    // K²·C ≤ wt.len(); an output index (j·C + c0 + t) is below w_o·C ≤ out.len().
    assert!(
        c0 + N <= c
            && wo >= 1
            && rows.iter().all(|r| r.len() >= ((wo - 1) * S + K) * c)
            && wt.len() >= K * K * c
            && out.len() >= wo * c,
        "dw_cols: bounds"
    );
    let b: [f32; N] = bias[c0..c0 + N].try_into().expect("N floats");
    let rp: [*const f32; K] = std::array::from_fn(|u| rows[u].as_ptr());
    let wp = wt.as_ptr();
    // SAFETY (every `load` below): the index is one of those bounded by the assertion above.
    let mut j0 = 0;
    while j0 + P <= wo {
        let mut acc = [[0.0f32; N]; P];
        for u in 0..K {
            for v in 0..K {
                let wv = unsafe { load::<N>(wp, (u * K + v) * c + c0) };
                for (p, a) in acc.iter_mut().enumerate() {
                    let xv = unsafe { load::<N>(rp[u], ((j0 + p) * S + v) * c + c0) };
                    for t in 0..N {
                        a[t] = madd::<FMA>(a[t], xv[t], wv[t]);
                    }
                }
            }
        }
        for (p, a) in acc.iter().enumerate() {
            let o = (j0 + p) * c + c0;
            let o: &mut [f32; N] = (&mut out[o..o + N]).try_into().expect("N floats");
            for t in 0..N {
                o[t] = Act::Relu6.apply(a[t] + b[t]);
            }
        }
        j0 += P;
    }
    while j0 < wo {
        let mut a = [0.0f32; N];
        for u in 0..K {
            for v in 0..K {
                let wv = unsafe { load::<N>(wp, (u * K + v) * c + c0) };
                let xv = unsafe { load::<N>(rp[u], (j0 * S + v) * c + c0) };
                for t in 0..N {
                    a[t] = madd::<FMA>(a[t], xv[t], wv[t]);
                }
            }
        }
        let o = j0 * c + c0;
        for t in 0..N {
            out[o + t] = Act::Relu6.apply(a[t] + b[t]);
        }
        j0 += 1;
    }
}

/// The N floats at `p + i`.
///
/// # Safety
/// `p + i .. p + i + N` lies inside one live `f32` slice. (`[f32; N]` has the alignment of
/// `f32`, so the read is aligned.)
#[inline(always)]
unsafe fn load<const N: usize>(p: *const f32, i: usize) -> [f32; N] {
    // SAFETY: the caller's contract.
    unsafe { p.add(i).cast::<[f32; N]>().read() }
}
