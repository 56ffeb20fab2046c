//! Greedy k-means++ seeding (`docs/math.md` §8.1).

use super::distances::sq_dist;
use super::error::KMeansError;
use super::params::KMeansParams;
use crate::data::check_matrix;
use crate::float::Float;
use crate::kernels::reduce::{reduce_rows, CHUNK_ROWS};
use ndarray::{s, Array2, ArrayView2, Axis};
use rand::Rng;
use rayon::prelude::*;

/// Number of candidates greedy k-means++ draws per centre for `k` clusters:
/// $2 + \lfloor \ln k \rfloor$, scikit-learn's `kmeans_plusplus` default.
pub fn default_local_trials(k: usize) -> usize {
    2 + (k.max(1) as f64).ln().floor() as usize
}

/// Greedy k-means++ seeding (`docs/math.md` §8.1): the first centroid is a
/// uniformly random row of `x` (N, D); for each next one,
/// [`default_local_trials`]`(k)` candidate rows are drawn with probability
/// $\propto D(x)^2$ (the squared distance to the nearest chosen centroid) and
/// the candidate that lowers the potential $\sum_i D(x_i)^2$ most is kept
/// (the first on ties). Returns (k, D) rows of `x`. When every remaining row
/// coincides with a chosen centroid, the next one is drawn uniformly.
///
/// Errors: k = 0, k > N, an empty or non-finite `x`.
pub fn kmeans_plus_plus<F: Float>(
    x: ArrayView2<'_, F>,
    k: usize,
    rng: &mut impl Rng,
) -> Result<Array2<F>, KMeansError> {
    kmeans_plus_plus_with_trials(x, k, default_local_trials(k), rng)
}

/// k-means++ seeding with `n_local_trials` candidates per centroid (≥ 1):
/// 1 is plain k-means++ (Arthur & Vassilvitskii 2007), which draws each next
/// centroid with probability $\propto D(x)^2$ and keeps it.
///
/// Errors: those of [`kmeans_plus_plus`], and `n_local_trials` = 0.
pub fn kmeans_plus_plus_with_trials<F: Float>(
    x: ArrayView2<'_, F>,
    k: usize,
    n_local_trials: usize,
    rng: &mut impl Rng,
) -> Result<Array2<F>, KMeansError> {
    check_matrix(x, None, "training data")?;
    KMeansParams::new(k)
        .n_local_trials(Some(n_local_trials))
        .check()?
        .check_rows(x.nrows())?;
    Ok(plus_plus_unchecked(x, k, n_local_trials, rng))
}

/// Draws a row with probability $\propto$ `d2` given the running sums `cum`
/// of `d2` (`target` uniform in [0, total)): the first row whose running sum
/// exceeds `target`, which has `d2 > 0`.
fn draw_weighted(cum: &[f64], d2: &[f64], target: f64) -> usize {
    let i = cum.partition_point(|&c| c <= target);
    if i < cum.len() {
        i
    } else {
        // rounding can leave `target` just above the last partial sum
        d2.iter().rposition(|&v| v > 0.0).unwrap_or(0)
    }
}

/// Triangle inequality: if ‖c − c_a‖ ≥ 2‖x − c_a‖, with c_a the nearest chosen
/// centre of x, then ‖x − c‖ ≥ ‖x − c_a‖ and the row need not be read (the
/// passes are memory-bound). `between` = ‖c − c_a‖², `d2` = ‖x − c_a‖²; the
/// margin keeps the test conservative under rounding.
#[inline]
fn cannot_be_closer(between: f64, d2: f64) -> bool {
    between >= 4.0 * (1.0 + 1e-6) * d2
}

pub(super) fn plus_plus_unchecked<F: Float>(
    x: ArrayView2<'_, F>,
    k: usize,
    n_local_trials: usize,
    rng: &mut impl Rng,
) -> Array2<F> {
    let (n, d) = x.dim();
    let mut out = Array2::<F>::zeros((k, d));
    let first = rng.random_range(0..n);
    out.row_mut(0).assign(&x.row(first));
    let mut d2 = vec![0.0f64; n];
    // index of the nearest chosen centre of each row
    let mut owner = vec![0usize; n];
    d2.par_chunks_mut(CHUNK_ROWS)
        .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
        .for_each(|(dc, xc)| {
            for (v, r) in dc.iter_mut().zip(xc.rows()) {
                *v = sq_dist(r, x.row(first));
            }
        });
    let mut cum = vec![0.0f64; n];
    for j in 1..k {
        // running sums in row order: the same bits for any thread count
        let mut total = 0.0;
        for (c, &v) in cum.iter_mut().zip(&d2) {
            total += v;
            *c = total;
        }
        let pick = if total > 0.0 && total.is_finite() {
            let cands: Vec<usize> = (0..n_local_trials)
                .map(|_| draw_weighted(&cum, &d2, rng.random::<f64>() * total))
                .collect();
            if cands.len() == 1 {
                cands[0]
            } else {
                best_candidate(x, out.slice(s![..j, ..]), &d2, &owner, &cands)
            }
        } else {
            rng.random_range(0..n)
        };
        out.row_mut(j).assign(&x.row(pick));
        let c = x.row(pick);
        let between: Vec<f64> = (0..j).map(|a| sq_dist(out.row(a), c)).collect();
        d2.par_chunks_mut(CHUNK_ROWS)
            .zip(owner.par_chunks_mut(CHUNK_ROWS))
            .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
            .for_each(|((dc, oc), xc)| {
                for ((v, o), r) in dc.iter_mut().zip(oc.iter_mut()).zip(xc.rows()) {
                    if cannot_be_closer(between[*o], *v) {
                        continue;
                    }
                    let t = sq_dist(r, c);
                    if t < *v {
                        *v = t;
                        *o = j;
                    }
                }
            });
    }
    out
}

/// The candidate row (index into `x`) whose addition to `chosen` gives the
/// lowest potential $\sum_i \min(D(x_i)^2, \lVert x_i - c\rVert^2)$, the first
/// on ties. One parallel pass over the rows for all candidates; the sums are
/// reduced in a thread-independent order.
fn best_candidate<F: Float>(
    x: ArrayView2<'_, F>,
    chosen: ArrayView2<'_, F>,
    d2: &[f64],
    owner: &[usize],
    cands: &[usize],
) -> usize {
    let m = cands.len();
    // between[l][a] = ‖candidate l − chosen centre a‖²
    let between: Vec<Vec<f64>> = cands
        .iter()
        .map(|&c| {
            chosen
                .rows()
                .into_iter()
                .map(|a| sq_dist(a, x.row(c)))
                .collect()
        })
        .collect();
    let potentials = reduce_rows(
        x.nrows(),
        &|r| {
            let mut acc = vec![0.0f64; m];
            for i in r {
                let (v, o) = (d2[i], owner[i]);
                for (l, a) in acc.iter_mut().enumerate() {
                    *a += if cannot_be_closer(between[l][o], v) {
                        v
                    } else {
                        v.min(sq_dist(x.row(i), x.row(cands[l])))
                    };
                }
            }
            acc
        },
        &|mut a, b| {
            a.iter_mut().zip(&b).for_each(|(u, v)| *u += v);
            a
        },
    );
    let mut best = 0;
    for l in 1..m {
        if potentials[l] < potentials[best] {
            best = l;
        }
    }
    cands[best]
}
