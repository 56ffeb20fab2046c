//! Sparse posteriors: the non-negligible $(i, k, q_{ik})$ triples of a chunk
//! of rows, computed in log space from the GMM's log-joint matrix.
//!
//! Shared by the Fisher vector and (soft-assignment) VLAD encoders.

use crate::float::Float;
use crate::kernels::exp::exp_nonpositive;
use crate::kernels::softmax::{flush_cutoff_in, row_max, softmax_rows_flushed};
use ndarray::{ArrayView2, ArrayViewMut2};

/// Posteriors in place, vectorised: `lp` (n, K) holds log-joints up to the
/// per-component `bias` (K), which is added first; on return it holds
/// $q_{ik}$, with the terms below [`flush_cutoff_in`] exactly 0 and NaN entries
/// 0. Returns the number of non-zero posteriors, or `None` (and `lp` holds
/// the log-joints with the bias added) if some row's largest log-joint is not
/// finite: the caller then takes [`SparsePosteriors::fill_from_log_joint`],
/// which hard-assigns such rows.
pub(crate) fn posteriors_in_place<F: Float>(
    mut lp: ArrayViewMut2<'_, F>,
    bias: &[F],
) -> Option<usize> {
    let mut maxima = Vec::with_capacity(lp.nrows());
    for mut r in lp.rows_mut() {
        let r = r.as_slice_mut().expect("standard layout");
        r.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
        let m = row_max(r);
        if !m.is_finite() {
            return None;
        }
        maxima.push(m.as_f64());
    }
    let mut loglik = vec![0.0; lp.nrows()];
    Some(softmax_rows_flushed(lp, &mut loglik, Some(&maxima)))
}

/// How the posteriors of a chunk are turned into the triples used by the
/// accumulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Assign {
    /// Exact posteriors; entries below $10^{-19}$ (`f32`; $10^{-154}$ in
    /// `f64`) of the row's largest, invisible at the type's precision, are
    /// exactly 0 and dropped.
    Soft,
    /// Exact posteriors, then VLFeat's skip: entries $q_{ik} < $ `threshold` dropped.
    SoftSkip(f64),
    /// Hard assignment: $q_{ik} = 1$ for the first arg-max component.
    Hard,
}

/// The non-zero posteriors of a chunk of n rows in CSR form: row `i` owns
/// `comp[start[i]..start[i+1]]` and `q[start[i]..start[i+1]]`.
#[derive(Debug, Default)]
pub(crate) struct SparsePosteriors<F> {
    pub start: Vec<usize>,
    pub comp: Vec<u32>,
    pub q: Vec<F>,
}

impl<F: Float> SparsePosteriors<F> {
    /// Number of stored (i, k) pairs.
    pub fn nnz(&self) -> usize {
        self.q.len()
    }

    /// Fills `self` from the log-joints `lp` (n, K): $q_{ik} = \exp(\ell_{ik} -
    /// \operatorname{logsumexp}_j \ell_{ij})$, computed with the row maximum
    /// subtracted.
    ///
    /// A row whose largest log-joint is not finite (|x| so large that the GEMM
    /// form overflows) is hard-assigned to that entry, or to component 0 if
    /// no entry is a number. NaN entries are dropped.
    pub fn fill_from_log_joint(&mut self, lp: ArrayView2<'_, F>, assign: Assign) {
        self.fill(
            lp.rows()
                .into_iter()
                .map(|r| r.to_slice().expect("standard layout")),
            assign,
        );
    }

    /// As [`Self::fill_from_log_joint`] for the log-joints `lp + bias` (bias
    /// (K) added to every row of `lp` (n, K) in place first).
    pub fn fill_from_scores(&mut self, mut lp: ArrayViewMut2<'_, F>, bias: &[F], assign: Assign) {
        for mut r in lp.rows_mut() {
            let r = r.as_slice_mut().expect("standard layout");
            r.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
        }
        self.fill(
            lp.rows()
                .into_iter()
                .map(|r| r.to_slice().expect("standard layout")),
            assign,
        );
    }

    /// The non-zero entries of the posterior matrix `q` (n, K).
    pub fn fill_from_dense(&mut self, q: ArrayView2<'_, F>) {
        self.start.clear();
        self.comp.clear();
        self.q.clear();
        self.start.push(0);
        for row in q.rows() {
            for (k, &v) in row.iter().enumerate() {
                if v != F::zero() {
                    self.comp.push(k as u32);
                    self.q.push(v);
                }
            }
            self.start.push(self.q.len());
        }
    }

    fn fill<'a>(&mut self, rows: impl Iterator<Item = &'a [F]>, assign: Assign) {
        self.start.clear();
        self.comp.clear();
        self.q.clear();
        self.start.push(0);
        let cutoff = flush_cutoff_in::<F>();
        let mut buf: Vec<(u32, f64)> = Vec::new();
        for row in rows {
            let m = row_max(row);
            if assign == Assign::Hard || !m.is_finite() {
                // First arg-max; component 0 if no entry is finite.
                let arg = row.iter().position(|&v| v == m).unwrap_or(0);
                self.comp.push(arg as u32);
                self.q.push(F::one());
                self.start.push(self.q.len());
                continue;
            }
            buf.clear();
            let mut sum = 0.0f64;
            // Blocks of 8 entries all far below the maximum are skipped with
            // one vectorised test (the loose bound only pre-filters).
            let loose = m + cutoff - F::one();
            for (b, blk) in row.chunks(8).enumerate() {
                if blk.iter().fold(false, |a, &v| a | (v >= loose)) {
                    for (j, &v) in blk.iter().enumerate() {
                        let t = v - m;
                        if t >= cutoff {
                            let e = exp_nonpositive(t.as_f64());
                            sum += e;
                            buf.push(((8 * b + j) as u32, e));
                        }
                    }
                }
            }
            let inv = 1.0 / sum;
            let thr = match assign {
                Assign::SoftSkip(t) => t,
                _ => 0.0,
            };
            for &(k, e) in &buf {
                // Compared after rounding to F, as VLFeat compares its stored posteriors.
                let q = F::from_f64_lossy(e * inv);
                let qf = q.as_f64();
                if qf > 0.0 && qf >= thr {
                    self.comp.push(k);
                    self.q.push(q);
                }
            }
            self.start.push(self.q.len());
        }
    }
}
