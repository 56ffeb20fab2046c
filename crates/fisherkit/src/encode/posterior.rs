//! Sparse posteriors: the non-negligible $(i, k, q_{ik})$ triples of a chunk
//! of rows, computed in log space from the GMM's log-joint matrix.
//!
//! Shared by the Fisher vector and (soft-assignment) VLAD encoders.

use crate::float::Float;
use ndarray::{ArrayView2, ArrayViewMut2};

/// $e^t$ for $t \in [-745, 0]$ in `f64`, inline (no libm call): $t = n\ln 2 + r$,
/// $|r| \le \frac12\ln 2$, $e^r$ by its Taylor series to degree 13 (relative
/// error below $10^{-15}$), times $2^n$ assembled from the exponent bits.
#[inline]
fn exp_nonpositive(t: f64) -> f64 {
    // fdlibm's split of ln 2: LN2_HI has 21 trailing zero bits, so n·LN2_HI
    // is exact for |n| < 2^21.
    let ln2_hi = f64::from_bits(0x3fe6_2e42_fee0_0000);
    let ln2_lo = f64::from_bits(0x3dea_39ef_3579_3c76);
    let n = (t * std::f64::consts::LOG2_E).round();
    let r = (t - n * ln2_hi) - n * ln2_lo;
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    for c in [
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // n ∈ [-1075, 0]: split 2^n in two normal factors.
    let n = n as i64;
    let (a, b) = (n / 2, n - n / 2);
    let pow2 = |e: i64| f64::from_bits(((e + 1023) as u64) << 52);
    p * pow2(a) * pow2(b)
}

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
    /// The pairs grouped by component, rows ascending within a component:
    /// component k owns `pairs[start[k]..start[k+1]]`, each `(row, q)`.
    pub fn group_by_component(&self, k: usize, start: &mut Vec<usize>, pairs: &mut Vec<(u32, F)>) {
        start.clear();
        start.resize(k + 1, 0);
        for &c in &self.comp {
            start[c as usize + 1] += 1;
        }
        for j in 0..k {
            start[j + 1] += start[j];
        }
        pairs.clear();
        pairs.resize(self.q.len(), (0, F::zero()));
        let mut next = start[..k].to_vec();
        for (i, w) in self.start.windows(2).enumerate() {
            for j in w[0]..w[1] {
                let c = self.comp[j] as usize;
                pairs[next[c]] = (i as u32, self.q[j]);
                next[c] += 1;
            }
        }
    }

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

    fn fill<'a>(&mut self, rows: impl Iterator<Item = &'a [F]>, assign: Assign) {
        self.start.clear();
        self.comp.clear();
        self.q.clear();
        self.start.push(0);
        // exp(t) for t below this is subnormal or 0 in F: treated as exactly 0
        // (it also keeps exp_nonpositive in its range).
        let cutoff = F::min_positive_value().ln();
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

#[cfg(test)]
mod tests {
    use super::exp_nonpositive;

    #[test]
    fn inline_exp_matches_libm() {
        let mut t = 0.0f64;
        while t > -745.0 {
            let (a, b) = (exp_nonpositive(t), t.exp());
            if b >= f64::MIN_POSITIVE {
                assert!((a - b).abs() <= 4e-16 * b, "exp({t}): {a} vs {b}");
            }
            t -= 0.0137;
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
    }
}
