//! Sparse posteriors: the non-negligible $(i, k, q_{ik})$ triples of a chunk
//! of rows, computed in log space from the GMM's log-joint matrix.
//!
//! Shared by the Fisher vector and (soft-assignment) VLAD encoders.

use crate::float::Float;
use ndarray::ArrayView2;

/// Maximum of a non-empty row ignoring NaN (−∞ if none is a number), in
/// 8 independent lanes so that it vectorises.
fn row_max<F: Float>(row: &[F]) -> F {
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

/// How the posteriors of a chunk are turned into the triples used by the
/// accumulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Assign {
    /// Exact posteriors; entries whose `exp` underflows (below the smallest
    /// normal number of `F` relative to the row maximum) are exactly 0 and
    /// dropped.
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
        self.start.clear();
        self.comp.clear();
        self.q.clear();
        self.start.push(0);
        // exp(t) for t below this is subnormal or 0 in F: treated as exactly 0.
        let cutoff = F::min_positive_value().ln();
        let mut buf: Vec<(u32, F)> = Vec::new();
        for row in lp.rows() {
            let row = row.to_slice().expect("log-joints are standard layout");
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
            for (k, &v) in row.iter().enumerate() {
                let t = v - m;
                if t >= cutoff {
                    let e = t.exp();
                    sum += e.as_f64();
                    buf.push((k as u32, e));
                }
            }
            let inv = 1.0 / sum;
            let thr = match assign {
                Assign::SoftSkip(t) => t,
                _ => 0.0,
            };
            for &(k, e) in &buf {
                // Compared after rounding to F, as VLFeat compares its stored posteriors.
                let q = F::from_f64_lossy(e.as_f64() * inv);
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
