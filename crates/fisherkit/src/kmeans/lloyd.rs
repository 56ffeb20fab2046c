//! Lloyd iterations from seeded centroids, and the fit: [`KMeansParams::fit`]
//! (`n_init` seeded runs, the lowest inertia wins).

use super::distances::{assign, data_mean};
use super::error::KMeansError;
use super::model::KMeans;
use super::params::{KMeansParams, ValidKMeansParams};
use super::seeding::{default_local_trials, plus_plus_unchecked};
use crate::data::check_matrix;
use crate::float::Float;
use crate::kernels::reduce::reduce_rows;
use ndarray::{Array1, Array2, ArrayView2, Zip};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

impl KMeansParams {
    /// [`KMeansParams::check`], then [`ValidKMeansParams::fit`]: clusters
    /// the rows of `x` (N, D).
    ///
    /// Each of the `n_init` runs seeds with greedy k-means++ (one random
    /// stream for all runs, from `seed`; see [`kmeans_plus_plus`](super::kmeans_plus_plus)) then alternates assignment and centroid update
    /// until the relative inertia decrease is ≤ `tol` or `max_iter` updates.
    /// A cluster left empty by an update is moved onto the row farthest from
    /// its centroid (the next farthest for the next empty cluster).
    ///
    /// Errors: K = 0, K > N, `max_iter` = 0, `n_init` = 0, `tol` < 0,
    /// `n_local_trials` = 0, an empty matrix or a non-finite value (its row
    /// and column are named).
    ///
    /// ```
    /// use fisherkit::kmeans::KMeansParams;
    /// use ndarray::array;
    /// let x = array![[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]];
    /// let km = KMeansParams::new(2).seed(3).fit(x.view()).unwrap();
    /// let l = km.labels();
    /// assert!(l[0] == l[1] && l[2] == l[3] && l[0] != l[2]);
    /// assert_eq!(km.predict(array![[4.9, 5.2]].view()).unwrap()[0], l[2]);
    /// ```
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<KMeans<F>, KMeansError> {
        self.check()?.fit(x)
    }
}

impl ValidKMeansParams {
    /// Clusters the rows of `x` (N, D); see [`KMeansParams::fit`]. Errors:
    /// those of the data only (K > N, an empty matrix, a non-finite value).
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<KMeans<F>, KMeansError> {
        check_matrix(x, None, "training data")?;
        self.check_rows(x.nrows())?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let center = data_mean(x);
        let trials = self
            .n_local_trials
            .unwrap_or_else(|| default_local_trials(self.n_clusters));
        let mut best: Option<KMeans<F>> = None;
        for _ in 0..self.n_init {
            let seeds = plus_plus_unchecked(x, self.n_clusters, trials, &mut rng);
            let run = lloyd(x, &center, seeds, self.max_iter, self.tol);
            if best.as_ref().is_none_or(|b| run.inertia < b.inertia) {
                best = Some(run);
            }
        }
        Ok(best.expect("n_init >= 1"))
    }
}

/// Per-cluster sums of $x - m$ (K, D), counts (K) and the inertia.
fn cluster_sums<F: Float>(
    x: ArrayView2<'_, F>,
    center: &Array1<F>,
    labels: &[usize],
    dist: &[f64],
    k: usize,
) -> (Array2<f64>, Vec<f64>, f64) {
    let d = x.ncols();
    reduce_rows(
        x.nrows(),
        &|r| {
            let mut sums = Array2::<f64>::zeros((k, d));
            let mut counts = vec![0.0f64; k];
            let mut inertia = 0.0f64;
            for i in r {
                let l = labels[i];
                counts[l] += 1.0;
                inertia += dist[i];
                Zip::from(sums.row_mut(l))
                    .and(x.row(i))
                    .and(center)
                    .for_each(|s, &v, &c| *s += v.as_f64() - c.as_f64());
            }
            (sums, counts, inertia)
        },
        &|(mut s1, mut c1, i1), (s2, c2, i2)| {
            s1 += &s2;
            c1.iter_mut().zip(&c2).for_each(|(a, b)| *a += b);
            (s1, c1, i1 + i2)
        },
    )
}

/// Lloyd iterations from the given seeds.
fn lloyd<F: Float>(
    x: ArrayView2<'_, F>,
    center: &Array1<F>,
    mut centroids: Array2<F>,
    max_iter: usize,
    tol: f64,
) -> KMeans<F> {
    let k = centroids.nrows();
    let (mut labels, mut dist) = assign(x, center, centroids.view());
    let (mut sums, mut counts, mut inertia) = cluster_sums(x, center, &labels, &dist, k);
    let mut history = vec![inertia];
    let mut n_iter = 0;
    let mut converged = false;
    while n_iter < max_iter {
        // update step
        let mut empty = Vec::new();
        for (kk, &count) in counts.iter().enumerate() {
            if count > 0.0 {
                let inv = 1.0 / count;
                Zip::from(centroids.row_mut(kk))
                    .and(sums.row(kk))
                    .and(center)
                    .for_each(|c, &s, &m| *c = F::from_f64_lossy(m.as_f64() + s * inv));
            } else {
                empty.push(kk);
            }
        }
        if !empty.is_empty() {
            reseed_empty(x, &mut centroids, &empty, &dist);
        }
        n_iter += 1;
        (labels, dist) = assign(x, center, centroids.view());
        let prev = inertia;
        (sums, counts, inertia) = cluster_sums(x, center, &labels, &dist, k);
        history.push(inertia);
        if empty.is_empty() && prev - inertia <= tol * prev {
            converged = true;
            break;
        }
    }
    KMeans {
        centroids,
        labels: Array1::from(labels),
        inertia,
        inertia_history: history,
        n_iter,
        converged,
    }
}

/// Moves each empty cluster onto the row farthest from its centroid (distinct
/// rows, ties broken by index); rows at distance 0 are never used, so with
/// fewer distinct rows than clusters some centroids stay duplicated.
fn reseed_empty<F: Float>(
    x: ArrayView2<'_, F>,
    centroids: &mut Array2<F>,
    empty: &[usize],
    dist: &[f64],
) {
    let mut order: Vec<usize> = (0..dist.len()).filter(|&i| dist[i] > 0.0).collect();
    order.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(a.cmp(&b)));
    for (&kk, &i) in empty.iter().zip(&order) {
        centroids.row_mut(kk).assign(&x.row(i));
    }
}
