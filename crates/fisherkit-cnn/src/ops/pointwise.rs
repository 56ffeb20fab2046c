//! A 1×1 convolution (pointwise) kernel for EfficientNet's expand, project and head layers:
//! $C_{i,:} = \mathrm{act}(b + \sum_{q<k} A_{i,q} W_{q,:}) \,[+\, R_{i,:}]$ for the rows (pixels)
//! i < m of a row-major A (m, k), the weights W (k, n) packed once at load time ([`Packed`]),
//! the bias, activation and residual applied in registers before the single store of each
//! output row, which may go anywhere in the destination (e.g. inside a zero-padded row).
//!
//! faer's GEMM packs the weights again on every call and returns the raw product, so each
//! band of pixels paid a weight copy plus a separate bias/activation pass; here the weights
//! stay packed, and each output element is written once. The sum over q runs from zero in
//! order q = 0, 1, …, k − 1 (fused multiply-adds) whatever m, the blocking or the thread count.
//!
//! Two builds exist, chosen at run time ([`pointwise`] returns `false` on CPUs with neither and
//! the caller uses faer):
//! - AVX-512F: 12 rows × 32 columns (two panels) of sums in 24 of the 32 `zmm` registers,
//!   broadcasting A and streaming the two packed panels: 24 FMAs per 2 panel loads and 12
//!   broadcasts. AMD Zen 4 executes a 512-bit FMA as two 256-bit halves, so the peak is the
//!   AVX2 one; the gain is in the larger register block (half the loads per FMA, 4× the sums
//!   per epilogue) and half the instructions;
//! - AVX2 + FMA: 6 rows × 16 columns of sums in 12 registers (the classic Haswell shape).
//!
//! Both add the same terms in the same order (fused multiply-adds from zero over q, then the
//! bias, the activation, the residual), so they give bitwise the same output.

//!
//! The kernels themselves are in [`crate::simd`]; this module checks the shapes and picks
//! the kernel the CPU runs.

use crate::ops::activation::Act;
use crate::simd::isa::Isa;
use crate::simd::tiles::Packed;
#[cfg(target_arch = "x86_64")]
use crate::simd::{pointwise_avx2, pointwise_avx512};

/// Whether [`pointwise`] runs on this CPU (AVX-512F, or AVX2 + FMA). Its row i depends only
/// on row i of A (the sums start from zero and run over q in order, whatever the register
/// block the row falls in), so callers may then cut the rows into any calls they like
/// without changing a bit of the output.
pub(crate) fn available() -> bool {
    Isa::best().is_some()
}

/// Rows i < m of $C = \mathrm{act}(A W + b) [+ R]$ (see the module docs), row i written to
/// `out[dst(i) .. dst(i) + n]`; A is `a` (m, k) row-major, `resid` (m, n) row-major.
/// Returns `false`, writing nothing, when the CPU has neither AVX-512F nor AVX2 + FMA (the
/// caller then uses faer).
/// Panics if a slice is too short for these shapes or a destination row falls outside `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise(
    a: &[f32],
    m: usize,
    w: &Packed,
    bias: &[f32],
    act: Act,
    resid: Option<&[f32]>,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    match Isa::best() {
        Some(isa) => pointwise_isa(isa, a, m, w, bias, act, resid, out, dst),
        None => false,
    }
}

/// [`pointwise`] with the kernel for `isa`; `false`, writing nothing, if this CPU lacks it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise_isa(
    isa: Isa,
    a: &[f32],
    m: usize,
    w: &Packed,
    bias: &[f32],
    act: Act,
    resid: Option<&[f32]>,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    if !isa.available() {
        return false;
    }
    assert!(
        a.len() >= m * w.k && bias.len() == w.n && resid.is_none_or(|r| r.len() >= m * w.n),
        "pointwise: shapes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has the instructions of `isa` (checked above); the slice bounds the
        // kernels rely on are asserted above (a, bias, resid) and, per row, inside them (out).
        unsafe {
            match isa {
                Isa::V4 => {
                    pointwise_avx512::pointwise_v4(a, m, None, w, bias, act, resid, out, &dst)
                }
                Isa::V3 => pointwise_avx2::pointwise_v3(a, m, w, bias, act, resid, out, &dst),
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, m, w, bias, act, resid, out, dst);
        false
    }
}

/// The row strides [`pointwise_gather`] has a kernel for.
const GATHER_STRIDES: [usize; 2] = [1, 2];

/// Whether [`pointwise_gather`] runs on this CPU (AVX-512F) with row stride `rs`.
pub(crate) fn gather_available(rs: usize) -> bool {
    Isa::V4.available() && GATHER_STRIDES.contains(&rs)
}

/// Rows i < m of $C = \mathrm{act}(A W + b)$ like [`pointwise`], but with A read in place from
/// a larger array instead of packed rows: $A_{i,q}$ = `a[i·rs + offs[q]]` (`offs.len()` = k).
/// A k×k convolution of stride s on a zero-padded channel-first image then needs no im2col
/// copy: for the pixels of one output row, `rs` = s and `offs` lists the k·k·C taps
/// (channel·H·W + u·W + v) in the weights' row order. The sums are the same operations in
/// the same order as [`pointwise`]'s on the gathered rows, so the output is bitwise the same.
/// AVX-512F and `rs` ∈ {1, 2} only: returns `false`, writing nothing, otherwise (the caller
/// then gathers the rows itself and calls [`pointwise`]).
/// Panics if a slice is too short for these shapes or a destination row falls outside `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise_gather(
    a: &[f32],
    m: usize,
    rs: usize,
    offs: &[usize],
    w: &Packed,
    bias: &[f32],
    act: Act,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    if !gather_available(rs) {
        return false;
    }
    if m == 0 {
        return true;
    }
    let last = offs.iter().max().map_or(0, |&o| (m - 1) * rs + o);
    assert!(
        offs.len() == w.k && last < a.len() && bias.len() == w.n,
        "pointwise_gather: shapes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX-512F (checked above); every A index i·rs + offs[q] (i < m)
        // is at most `last` < a.len() (asserted above), the output rows are checked per row.
        unsafe {
            pointwise_avx512::pointwise_v4(a, m, Some((rs, offs)), w, bias, act, None, out, &dst)
        };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, rs, offs, w, bias, act, out, dst);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::isa::Isa;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn pointwise_matches_naive_loops() {
        // Column counts with full and partial panels and half-panels, row counts hitting every
        // register-block height, scattered destination rows, residual on and off, weights
        // small (row blocks outer) and over 512 KB (panels outer).
        for (seed, &(m, k, n)) in [
            (1, 1, 1),
            (7, 16, 96),
            (13, 24, 40),
            (17, 96, 24),
            (9, 5, 33),
            (7, 300, 500),
            (29, 40, 80),
            (23, 1280, 1000),
            (12, 7, 48),
        ]
        .iter()
        .enumerate()
        {
            let mut rng = ChaCha8Rng::seed_from_u64(900 + seed as u64);
            let mut r = |len: usize| -> Vec<f32> {
                (0..len).map(|_| rng.random_range(-2.0f32..2.0)).collect()
            };
            let (a, wv, bias, res) = (r(m * k), r(k * n), r(n), r(m * n));
            let wt = ndarray::Array2::from_shape_vec((k, n), wv.clone()).unwrap();
            let packed = Packed::new(wt.view());
            for (act, resid) in [(Act::Relu6, None), (Act::None, Some(&res[..]))] {
                // Row i at offset (2i + 1)·(n + 3): gaps stay untouched.
                let stride = n + 3;
                let mut out = vec![-7.0f32; (2 * m + 2) * stride];
                let dst = |i: usize| (2 * i + 1) * stride;
                if !pointwise(&a, m, &packed, &bias, act, resid, &mut out, dst) {
                    return; // no AVX2 + FMA here: the faer path is tested by the mbconv tests
                }
                // Every kernel this CPU runs gives bitwise the same output.
                for isa in [Isa::V4, Isa::V3] {
                    let mut other = vec![-7.0f32; out.len()];
                    if pointwise_isa(isa, &a, m, &packed, &bias, act, resid, &mut other, dst) {
                        let same = out
                            .iter()
                            .zip(&other)
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "{m}x{k}x{n}: {isa:?} differs from {:?}", Isa::best());
                    }
                }
                for i in 0..m {
                    for j in 0..n {
                        let mut s = 0.0f64;
                        for q in 0..k {
                            s += a[i * k + q] as f64 * wv[q * n + j] as f64;
                        }
                        s += bias[j] as f64;
                        if act == Act::Relu6 {
                            s = s.clamp(0.0, 6.0);
                        }
                        if let Some(rr) = resid {
                            s += rr[i * n + j] as f64;
                        }
                        let g = out[dst(i) + j] as f64;
                        assert!(
                            (g - s).abs() <= 1e-4 * (1.0 + s.abs()),
                            "{m}x{k}x{n} [{i},{j}]"
                        );
                    }
                }
                for (idx, &v) in out.iter().enumerate() {
                    let (row, colm) = (idx / stride, idx % stride);
                    if row % 2 == 0 || colm >= n || row > 2 * m {
                        assert_eq!(v, -7.0, "{m}x{k}x{n}: wrote outside the rows at {idx}");
                    }
                }
            }
        }
    }
}
