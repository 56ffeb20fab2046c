//! Row softmax of log-joint matrices with posterior flushing, shared by the
//! GMM E-step and the encoders' sparse posteriors, and its column form for the
//! MFA E-step's component-major log-joints (`docs/math.md` §2.2). Knows nothing
//! of models: it maps an (n, K) (or (K, n)) matrix of log-joints to posteriors
//! and row log-likelihoods.

use super::exp::exp_nonpositive;
use crate::float::Float;
use ndarray::ArrayViewMut2;

/// $\ln$ of the smallest posterior kept relative to a row's largest,
/// $\tfrac12\ln(\text{smallest normal of } F)$: −43.7 in `f32` ($10^{-19}$),
/// −354 in `f64` ($10^{-154}$). Smaller terms are flushed to exactly 0.
pub(crate) fn flush_cutoff<F: Float>() -> f64 {
    0.5 * F::min_positive_value().as_f64().ln()
}

/// [`flush_cutoff`] rounded to `F`, for comparisons with log-joints held in `F`
/// (the row softmax here and the encoders' sparse posteriors). Besides being
/// invisible at the type's precision, the flushed terms would make products
/// $q z$ subnormal, and on x86 each such operation takes a microcode assist.
pub(crate) fn flush_cutoff_in<F: Float>() -> F {
    F::from_f64_lossy(flush_cutoff::<F>())
}

/// [`crate::gmm::DiagGmm::log_joint_to_posteriors`] that flushes to exactly 0 the terms
/// with $\ell_{ik} - \max_j \ell_{ij} < \tfrac12 \ln(\text{smallest normal})$
/// (−43.7 in `f32`, −354 in `f64`): their posteriors, below $10^{-19}$
/// (resp. $10^{-154}$) of the largest, are invisible at the type's precision,
/// and flushing them avoids the slow underflow path of `exp` and denormal
/// arithmetic. The exponentials use a branch-free polynomial `exp` that vectorises
/// (the libm call made this step several times slower than the GEMM).
/// Returns the number of non-zero posteriors. `lp` (n, K), `loglik` (n).
pub fn log_joint_to_posteriors_flushed<F: Float>(
    mut lp: ArrayViewMut2<'_, F>,
    loglik: &mut [f64],
) -> usize {
    let contiguous_rows = lp.ncols() <= 1 || lp.strides()[1] == 1;
    if contiguous_rows {
        softmax_rows_flushed(lp, loglik, None)
    } else {
        let mut owned = lp.as_standard_layout().into_owned();
        let nnz = softmax_rows_flushed(owned.view_mut(), loglik, None);
        lp.assign(&owned);
        nnz
    }
}

/// Each row $\ell$ of `lp` (n, K, rows contiguous) becomes its posteriors
/// $q_j = e^{\ell_j - m}/\sum_i e^{\ell_i - m}$, $m = \max_i \ell_i$ (given
/// in `maxima` (n) when the caller has them), with the terms below
/// $e^{-43.7}$ (`f32`; $e^{-354}$ in `f64`) of the largest flushed to 0 and NaN
/// entries 0; `loglik[i]` $= m + \ln \sum_j e^{\ell_j - m}$. Returns the number
/// of non-zero posteriors. Shared by the EM's E-step and the encoders.
///
/// The loop is compiled for the CPU's widest vectors (AVX2 + FMA when
/// present; [`pulp`]'s dispatch, as faer's kernels): the exponentials are
/// most of the non-GEMM time of an E-step.
pub(crate) fn softmax_rows_flushed<F: Float>(
    lp: ArrayViewMut2<'_, F>,
    loglik: &mut [f64],
    maxima: Option<&[f64]>,
) -> usize {
    pulp::Arch::new().dispatch(SoftmaxRows { lp, loglik, maxima })
}

/// Maximum of a non-empty row ignoring NaN (−∞ if none is a number), in
/// 8 independent lanes so that it vectorises.
pub(crate) fn row_max<F: Float>(row: &[F]) -> F {
    let mut lanes = [F::neg_infinity(); 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = l.max(v);
        }
    }
    let mut m = chunks
        .remainder()
        .iter()
        .fold(F::neg_infinity(), |a, &v| a.max(v));
    for l in lanes {
        m = m.max(l);
    }
    m
}

struct SoftmaxRows<'a, 'b, F> {
    lp: ArrayViewMut2<'a, F>,
    loglik: &'b mut [f64],
    maxima: Option<&'b [f64]>,
}

impl<F: Float> pulp::WithSimd for SoftmaxRows<'_, '_, F> {
    type Output = usize;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(mut self, _simd: S) -> usize {
        const L: usize = 8;
        let cutoff = flush_cutoff_in::<F>();
        let mut nnz = 0;
        for (i, (mut row, ll)) in self
            .lp
            .rows_mut()
            .into_iter()
            .zip(self.loglik.iter_mut())
            .enumerate()
        {
            let r = row.as_slice_mut().expect("rows are contiguous");
            // In `F`: the exponentials of `f32` log-joints run on 8 lanes with
            // a degree-7 polynomial (their posteriors are stored in `f32`).
            let m = F::from_f64_lossy(match self.maxima {
                Some(mx) => mx[i],
                None => row_max(r).as_f64(),
            });
            // L independent lanes, branch-free: vectorises.
            let mut sums = [0.0f64; L];
            let mut counts = [0u32; L];
            let mut ch = r.chunks_exact_mut(L);
            for c in &mut ch {
                for ((v, s), n) in c.iter_mut().zip(&mut sums).zip(&mut counts) {
                    let t = *v - m;
                    // NaN fails the test: dropped; the max keeps exp in range
                    let keep = t >= cutoff;
                    let e = t.max(cutoff).exp_nonpositive();
                    let e = if keep { e } else { F::zero() };
                    *s += e.as_f64();
                    *n += keep as u32;
                    *v = e;
                }
            }
            let mut sum = 0.0;
            let mut count = 0usize;
            for v in ch.into_remainder() {
                let t = *v - m;
                let e = if t >= cutoff {
                    t.max(cutoff).exp_nonpositive()
                } else {
                    F::zero()
                };
                count += (e > F::zero()) as usize;
                sum += e.as_f64();
                *v = e;
            }
            sum += sums.iter().sum::<f64>();
            count += counts.iter().map(|&c| c as usize).sum::<usize>();
            nnz += count;
            let inv = F::from_f64_lossy(1.0 / sum);
            r.iter_mut().for_each(|v| *v *= inv);
            *ll = m.as_f64() + sum.ln();
        }
        nnz
    }
}

/// The column softmax of `lj` (K, n) in place, `f64` log-joints of n rows
/// stored component-major (the MFA E-step's layout): each column becomes its
/// posteriors $h_k = e^{\ell_k - m}/\sum_j e^{\ell_j - m}$, $m = \max_j \ell_j$,
/// with the terms more than `cutoff` (< 0, [`flush_cutoff`]) below the column's
/// maximum flushed to exactly 0, and `loglik[i]` (n) $= m + \ln\sum_j e^{\ell_j - m}$.
/// `mx`, `sx` are scratch (resized to n). The loops run along rows, so they
/// vectorise over the n columns.
#[inline(always)]
pub(crate) fn softmax_columns_flushed(
    mut lj: ArrayViewMut2<'_, f64>,
    cutoff: f64,
    loglik: &mut [f64],
    mx: &mut Vec<f64>,
    sx: &mut Vec<f64>,
) {
    let n = lj.ncols();
    mx.clear();
    mx.resize(n, f64::NEG_INFINITY);
    sx.clear();
    sx.resize(n, 0.0);
    for row in lj.rows() {
        let row = row.to_slice().expect("contiguous");
        // an unconditional select, not a conditional store, so the loop
        // vectorises instead of branching on every element
        for (m, &v) in mx.iter_mut().zip(row) {
            *m = if v > *m { v } else { *m };
        }
    }
    for mut row in lj.rows_mut() {
        let row = row.as_slice_mut().expect("contiguous");
        for ((v, &m), s) in row.iter_mut().zip(mx.iter()).zip(sx.iter_mut()) {
            let t = *v - m;
            let e = if t >= cutoff {
                exp_nonpositive(t.max(cutoff))
            } else {
                0.0
            };
            *v = e;
            *s += e;
        }
    }
    for ((l, m), s) in loglik.iter_mut().zip(mx.iter()).zip(sx.iter_mut()) {
        *l = m + s.ln();
        *s = 1.0 / *s;
    }
    for mut row in lj.rows_mut() {
        for (v, &inv) in row.iter_mut().zip(sx.iter()) {
            *v *= inv;
        }
    }
}

/// The flushed softmax against the textbook log-sum-exp (this test sat in
/// `gmm/stats.rs`, against `DiagGmm::log_joint_to_posteriors`, which is a
/// call of this kernel).
#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2};

    /// Posteriors $e^{\ell_k - m} / \sum_j e^{\ell_j - m}$ and log-likelihoods
    /// $m + \log \sum_j e^{\ell_j - m}$ ($m$ the row's largest) of each row of
    /// `lp`, by `f64::exp`, nothing flushed.
    fn textbook(lp: &Array2<f64>) -> (Array2<f64>, Vec<f64>) {
        let mut q = lp.clone();
        let mut ll = Vec::new();
        for mut row in q.rows_mut() {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            row.mapv_inplace(|v| (v - m).exp());
            let s = row.sum();
            row.mapv_inplace(|v| v / s);
            ll.push(m + s.ln());
        }
        (q, ll)
    }

    #[test]
    fn flushed_posteriors_equal_the_reference_kernel() {
        let mut lp = array![
            [-1.0, -2.0, -3000.0],
            [5.0, 5.0, 4.0],
            [-50.0, -10.0, -10.0]
        ];
        let (want, ll2) = textbook(&lp);
        let mut ll = [0.0; 3];
        let nnz = log_joint_to_posteriors_flushed(lp.view_mut(), &mut ll);
        assert_eq!(nnz, 8);
        for (a, b) in lp.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-15 * b.max(1e-300));
        }
        for (a, b) in ll.iter().zip(&ll2) {
            assert!((a - b).abs() < 1e-14);
        }
        // a column-major (non-contiguous rows) view takes the copying path
        let mut t = want.t().to_owned();
        let mut tt = t.view_mut().reversed_axes();
        tt.assign(&array![
            [-1.0, -2.0, -3000.0],
            [5.0, 5.0, 4.0],
            [-50.0, -10.0, -10.0]
        ]);
        log_joint_to_posteriors_flushed(tt.view_mut(), &mut ll);
        for (a, b) in tt.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-15 * b.max(1e-300));
        }
    }
}
