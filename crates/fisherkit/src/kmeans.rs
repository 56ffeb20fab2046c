//! k-means clustering: greedy k-means++ seeding and Lloyd iterations
//! (`docs/math.md` §8).
//!
//! Minimises the inertia $\sum_i \min_k \lVert x_i - c_k \rVert^2$ over the
//! centroids $c_k$. The squared distances of a chunk of rows to all centroids
//! are one GEMM, $\lVert y \rVert^2 - 2\, y \cdot c'_k + \lVert c'_k \rVert^2$
//! with $y = x - m$, $c' = c - m$ and $m$ the data mean (centring keeps the
//! expansion accurate in `f32` when the data sit far from the origin). Chunks
//! run in parallel with rayon; sums are reduced in an order that does not
//! depend on the number of threads, so a seed fixes the result bit for bit.

use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::kernels::reduce::{reduce_rows, CHUNK_ROWS};
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis, Zip};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Errors of the [`crate::kmeans`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KMeansError {
    /// A hyper-parameter out of range.
    #[error("invalid k-means hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Fewer rows than clusters.
    #[error("cannot make {n_clusters} clusters from {n_rows} rows: k-means needs at least as many rows as clusters")]
    TooFewRows { n_rows: usize, n_clusters: usize },
    /// Bad data.
    #[error(transparent)]
    Data(#[from] DataError),
}

/// Hyper-parameters of k-means.
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansParams {
    n_clusters: usize,
    max_iter: usize,
    tol: f64,
    n_init: usize,
    seed: u64,
    n_local_trials: Option<usize>,
}

/// The defaults of [`KMeansParams`], written once (the CLI's `kmeans fit`
/// flags use them too).
pub mod kmeans_defaults {
    /// Most Lloyd updates per run.
    pub const MAX_ITER: usize = 100;
    /// Relative decrease of the inertia below which Lloyd stops.
    pub const TOL: f64 = 1e-4;
    /// Runs (the lowest inertia wins).
    pub const N_INIT: usize = 1;
    /// Seed of the k-means++ seeding.
    pub const SEED: u64 = 0;
}

impl KMeansParams {
    /// `n_clusters` clusters with the [`kmeans_defaults`] (`max_iter` 100,
    /// `tol` 1e-4, `n_init` 1, `seed` 0) and `n_local_trials` `None` (greedy
    /// k-means++ with [`default_local_trials`] candidates per centroid).
    pub fn new(n_clusters: usize) -> Self {
        Self {
            n_clusters,
            max_iter: kmeans_defaults::MAX_ITER,
            tol: kmeans_defaults::TOL,
            n_init: kmeans_defaults::N_INIT,
            seed: kmeans_defaults::SEED,
            n_local_trials: None,
        }
    }

    /// Candidates drawn per centroid by the k-means++ seeding (≥ 1); the one
    /// that lowers the potential most is kept. `None`: $2 + \lfloor\ln K\rfloor$
    /// (greedy k-means++, scikit-learn's default); `Some(1)`: plain k-means++.
    pub fn n_local_trials(mut self, n_local_trials: Option<usize>) -> Self {
        self.n_local_trials = n_local_trials;
        self
    }

    /// Maximum number of Lloyd updates per run (≥ 1).
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.max_iter = max_iter;
        self
    }

    /// Stop when the relative decrease of the inertia,
    /// $(J_{t-1} - J_t)/J_{t-1}$, is at most `tol` (≥ 0).
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }

    /// Number of independently seeded runs; the lowest inertia wins (≥ 1).
    pub fn n_init(mut self, n_init: usize) -> Self {
        self.n_init = n_init;
        self
    }

    /// Seed of the k-means++ seeding.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Number of clusters K.
    pub fn n_clusters(&self) -> usize {
        self.n_clusters
    }

    /// Checks every setting that does not depend on the data — K ≥ 1,
    /// `max_iter` ≥ 1, `tol` finite and ≥ 0, `n_init` ≥ 1, `n_local_trials`
    /// ≥ 1 when given — in that order, and returns the checked parameters,
    /// which every fit runs on. K ≤ N is checked against the data when fitting.
    ///
    /// ```
    /// use fisherkit::kmeans::{KMeansError, KMeansParams};
    /// assert!(KMeansParams::new(8).n_init(3).check().is_ok());
    /// let e = KMeansParams::new(8).tol(f64::NAN).check().unwrap_err();
    /// assert!(matches!(e, KMeansError::InvalidHyperParameter { name: "tol", .. }));
    /// assert!(e.to_string().contains("tol"));
    /// ```
    pub fn check(&self) -> Result<ValidKMeansParams, KMeansError> {
        let bad = |name, reason: &str| {
            Err(KMeansError::InvalidHyperParameter {
                name,
                reason: reason.to_string(),
            })
        };
        if self.n_clusters == 0 {
            return bad("n_clusters", "must be at least 1, got 0");
        }
        if self.max_iter == 0 {
            return bad("max_iter", "must be at least 1, got 0");
        }
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return bad("tol", &format!("must be finite and >= 0, got {}", self.tol));
        }
        if self.n_init == 0 {
            return bad("n_init", "must be at least 1, got 0");
        }
        if self.n_local_trials == Some(0) {
            return bad("n_local_trials", "must be at least 1, got 0");
        }
        Ok(ValidKMeansParams(self.clone()))
    }

    /// [`KMeansParams::check`], then [`ValidKMeansParams::fit`]: clusters
    /// the rows of `x` (N, D).
    ///
    /// Each of the `n_init` runs seeds with greedy k-means++ (one random
    /// stream for all runs, from `seed`; see [`kmeans_plus_plus`]) then alternates assignment and centroid update
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

/// [`KMeansParams`] that passed [`KMeansParams::check`]; only `check` makes
/// one, so its fit checks the data but never the settings again (linfa's
/// params → checked params → fit). Reads as the parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidKMeansParams(KMeansParams);

impl std::ops::Deref for ValidKMeansParams {
    type Target = KMeansParams;
    fn deref(&self) -> &KMeansParams {
        &self.0
    }
}

impl ValidKMeansParams {
    /// The check against data of `n_rows` rows: K ≤ N.
    fn check_rows(&self, n_rows: usize) -> Result<(), KMeansError> {
        if self.n_clusters > n_rows {
            return Err(KMeansError::TooFewRows {
                n_rows,
                n_clusters: self.n_clusters,
            });
        }
        Ok(())
    }

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

/// A fitted k-means model.
#[derive(Debug, Clone, PartialEq)]
pub struct KMeans<F: Float> {
    centroids: Array2<F>,
    labels: Array1<usize>,
    inertia: f64,
    inertia_history: Vec<f64>,
    n_iter: usize,
    converged: bool,
}

impl<F: Float> KMeans<F> {
    /// Centroids $c_k$, shape (K, D).
    pub fn centroids(&self) -> ArrayView2<'_, F> {
        self.centroids.view()
    }

    /// Consumes the model, returning the centroids (K, D).
    pub fn into_centroids(self) -> Array2<F> {
        self.centroids
    }

    /// Number of clusters K.
    pub fn n_clusters(&self) -> usize {
        self.centroids.nrows()
    }

    /// Cluster of each training row (N), for the returned centroids.
    pub fn labels(&self) -> ArrayView1<'_, usize> {
        self.labels.view()
    }

    /// $\sum_i \lVert x_i - c_{l_i} \rVert^2$ over the training rows, in `f64`
    /// (each distance computed directly, not by the GEMM expansion).
    pub fn inertia(&self) -> f64 {
        self.inertia
    }

    /// Inertia after the seeding and after each Lloyd update of the kept run
    /// (length `n_iter() + 1`); non-increasing up to rounding.
    pub fn inertia_history(&self) -> &[f64] {
        &self.inertia_history
    }

    /// Number of Lloyd updates of the kept run.
    pub fn n_iter(&self) -> usize {
        self.n_iter
    }

    /// Whether the kept run stopped on `tol` rather than `max_iter`.
    pub fn converged(&self) -> bool {
        self.converged
    }

    /// Index of the nearest centroid of each row of `x` (N, D).
    pub fn predict(&self, x: ArrayView2<'_, F>) -> Result<Array1<usize>, KMeansError> {
        check_matrix(x, Some(self.centroids.ncols()), "data")?;
        let center = data_mean(x);
        let (labels, _) = assign(x, &center, self.centroids.view());
        Ok(Array1::from(labels))
    }
}

/// Mean of the rows of `x` (N, D), accumulated in `f64`, rounded to `F`.
fn data_mean<F: Float>(x: ArrayView2<'_, F>) -> Array1<F> {
    let d = x.ncols();
    let sum = reduce_rows(
        x.nrows(),
        &|r| {
            let mut acc = Array1::<f64>::zeros(d);
            for row in x.slice(s![r, ..]).rows() {
                Zip::from(&mut acc)
                    .and(&row)
                    .for_each(|a, &v| *a += v.as_f64());
            }
            acc
        },
        &|a, b| a + b,
    );
    let n = x.nrows().max(1) as f64;
    sum.mapv(|v| F::from_f64_lossy(v / n))
}

/// $\lVert a - b \rVert^2$ in `f64`, with 8 independent partial sums so that
/// the loop vectorises (a single running sum is latency-bound).
#[inline]
fn sq_dist<F: Float>(a: ArrayView1<'_, F>, b: ArrayView1<'_, F>) -> f64 {
    match (a.as_slice(), b.as_slice()) {
        (Some(a), Some(b)) => sq_dist_slices(a, b),
        _ => {
            let mut acc = 0.0f64;
            Zip::from(&a).and(&b).for_each(|&u, &v| {
                let t = u.as_f64() - v.as_f64();
                acc += t * t;
            });
            acc
        }
    }
}

#[inline]
fn sq_dist_slices<F: Float>(a: &[F], b: &[F]) -> f64 {
    const L: usize = 8;
    let mut acc = [0.0f64; L];
    let (ac, at) = a.split_at(a.len() - a.len() % L);
    let (bc, bt) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(L).zip(bc.chunks_exact(L)) {
        for l in 0..L {
            let t = x[l].as_f64() - y[l].as_f64();
            acc[l] += t * t;
        }
    }
    let mut tail = 0.0;
    for (x, y) in at.iter().zip(bt) {
        let t = x.as_f64() - y.as_f64();
        tail += t * t;
    }
    acc.iter().sum::<f64>() + tail
}

/// $\lVert a \rVert^2$ in `f64` (vectorised like [`sq_dist`]).
#[inline]
fn sq_norm<F: Float>(a: ArrayView1<'_, F>) -> f64 {
    match a.as_slice() {
        Some(s) => {
            const L: usize = 8;
            let mut acc = [0.0f64; L];
            let (c, t) = s.split_at(s.len() - s.len() % L);
            for x in c.chunks_exact(L) {
                for l in 0..L {
                    acc[l] += x[l].as_f64() * x[l].as_f64();
                }
            }
            acc.iter().sum::<f64>() + t.iter().map(|v| v.as_f64() * v.as_f64()).sum::<f64>()
        }
        None => a.iter().map(|v| v.as_f64() * v.as_f64()).sum(),
    }
}

/// Squared Euclidean distances of every row of `x` (N, D) to every row of
/// `centroids` (K, D), shape (N, K), by the GEMM expansion
/// $\lVert y_i\rVert^2 - 2 y_i\cdot c'_k + \lVert c'_k\rVert^2$ about the data
/// mean (clamped at 0). Parallel over chunks of rows.
///
/// Errors: an empty or non-finite `x` or `centroids`, or different widths.
pub fn squared_distances<F: Float>(
    x: ArrayView2<'_, F>,
    centroids: ArrayView2<'_, F>,
) -> Result<Array2<F>, KMeansError> {
    check_matrix(centroids, None, "centroids")?;
    check_matrix(x, Some(centroids.ncols()), "data")?;
    let center = data_mean(x);
    let prep = Prepared::new(centroids, &center);
    let mut out = Array2::<F>::zeros((x.nrows(), centroids.nrows()));
    out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS)
        .into_par_iter()
        .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
        .for_each_init(
            || (Array2::zeros((0, 0)), Array2::zeros((0, 0))),
            |(y, g), (mut o, xc)| {
                prep.distances(xc, &center, y, g, |i, k, dist| {
                    o[[i, k]] = F::from_f64_lossy(dist)
                })
            },
        );
    Ok(out)
}

/// Centroids prepared for the GEMM distance: $c' = c - m$ and $\lVert c'\rVert^2$.
struct Prepared<F: Float> {
    /// (K, D)
    shifted: Array2<F>,
    /// (K)
    norms: Vec<f64>,
}

impl<F: Float> Prepared<F> {
    fn new(centroids: ArrayView2<'_, F>, center: &Array1<F>) -> Self {
        let shifted = &centroids - &center.view().insert_axis(Axis(0));
        let norms = shifted.rows().into_iter().map(sq_norm).collect();
        Self { shifted, norms }
    }

    /// Calls `f(i, k, ‖x_i − c_k‖²)` for the rows of the chunk `xc` (n, D).
    /// `y` and `g` are scratch buffers.
    fn distances(
        &self,
        xc: ArrayView2<'_, F>,
        center: &Array1<F>,
        y: &mut Array2<F>,
        g: &mut Array2<F>,
        mut f: impl FnMut(usize, usize, f64),
    ) {
        let (n, d) = xc.dim();
        let k = self.shifted.nrows();
        if y.dim() != (n, d) {
            *y = Array2::zeros((n, d));
        }
        if g.dim() != (n, k) {
            *g = Array2::zeros((n, k));
        }
        Zip::from(y.rows_mut())
            .and(xc.rows())
            .for_each(|mut yr, xr| {
                Zip::from(&mut yr)
                    .and(&xr)
                    .and(center)
                    .for_each(|y, &x, &c| *y = x - c)
            });
        gemm(
            g.view_mut(),
            false,
            y.view(),
            self.shifted.t(),
            F::one(),
            Par::Seq,
        );
        for (i, (yr, gr)) in y.rows().into_iter().zip(g.rows()).enumerate() {
            let yn = sq_norm(yr);
            for (kk, (&gv, &cn)) in gr.iter().zip(&self.norms).enumerate() {
                f(i, kk, (yn - 2.0 * gv.as_f64() + cn).max(0.0));
            }
        }
    }
}

/// Nearest centroid of each row (first index on ties) and the exact squared
/// distance to it, in `f64`.
fn assign<F: Float>(
    x: ArrayView2<'_, F>,
    center: &Array1<F>,
    centroids: ArrayView2<'_, F>,
) -> (Vec<usize>, Vec<f64>) {
    let n = x.nrows();
    let prep = Prepared::new(centroids, center);
    let mut labels = vec![0usize; n];
    let mut dist = vec![0.0f64; n];
    labels
        .par_chunks_mut(CHUNK_ROWS)
        .zip(dist.par_chunks_mut(CHUNK_ROWS))
        .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
        .for_each_init(
            || (Array2::zeros((0, 0)), Array2::zeros((0, 0))),
            |(y, g), ((lab, dst), xc)| {
                let mut best = vec![(f64::INFINITY, 0usize); xc.nrows()];
                prep.distances(xc, center, y, g, |i, k, d| {
                    if d < best[i].0 {
                        best[i] = (d, k);
                    }
                });
                for (i, (l, dd)) in lab.iter_mut().zip(dst.iter_mut()).enumerate() {
                    *l = best[i].1;
                    *dd = sq_dist(xc.row(i), centroids.row(*l));
                }
            },
        );
    (labels, dist)
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

fn plus_plus_unchecked<F: Float>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, StandardNormal};

    /// `k` planted clusters of `per` rows in `d` dims, centres 20 apart per axis.
    fn planted(k: usize, per: usize, d: usize, seed: u64) -> (Array2<f64>, Array2<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let centres = Array2::from_shape_fn((k, d), |_| {
            let z: f64 = StandardNormal.sample(&mut rng);
            20.0 * z
        });
        let mut x = Array2::zeros((k * per, d));
        for i in 0..k * per {
            for j in 0..d {
                let z: f64 = StandardNormal.sample(&mut rng);
                x[[i, j]] = centres[[i % k, j]] + z;
            }
        }
        (x, centres)
    }

    #[test]
    fn gemm_distances_equal_direct_ones() {
        let (x, _) = planted(3, 200, 7, 1);
        let x = x.mapv(|v| v + 1000.0);
        let c = x.slice(s![..5, ..]).to_owned() + 0.5;
        let g = squared_distances(x.view(), c.view()).unwrap();
        for i in 0..x.nrows() {
            for k in 0..5 {
                let want = sq_dist(x.row(i), c.row(k));
                assert!((g[[i, k]] - want).abs() < 1e-9 * (1.0 + want), "{i} {k}");
            }
        }
        // f32: relative to the spread of the data, not its offset from 0
        let x32 = x.mapv(|v| v as f32);
        let c32 = c.mapv(|v| v as f32);
        let g32 = squared_distances(x32.view(), c32.view()).unwrap();
        let m = x32.mean_axis(Axis(0)).unwrap();
        for i in 0..x.nrows() {
            for k in 0..5 {
                let want = sq_dist(x32.row(i), c32.row(k));
                // rounding of the expansion is relative to ‖x − m‖² + ‖c − m‖²
                let scale = sq_dist(x32.row(i), m.view()) + sq_dist(c32.row(k), m.view());
                assert!((g32[[i, k]] as f64 - want).abs() < 1e-6 * scale, "{i} {k}");
                // and far below the 1e-3 relative error of the uncentred form
                assert!((g32[[i, k]] as f64 - want).abs() < 1e-3 * (1.0 + want));
            }
        }
    }

    #[test]
    fn planted_clusters_are_recovered() {
        let (x, centres) = planted(5, 100, 4, 2);
        let km = KMeansParams::new(5)
            .n_init(3)
            .seed(7)
            .fit(x.view())
            .unwrap();
        // every true cluster is one found cluster, centroid within 0.5
        for (i, l) in km.labels().iter().enumerate() {
            assert_eq!(*l, km.labels()[i % 5], "row {i}");
        }
        for t in 0..5 {
            let c = km.centroids().row(km.labels()[t]).to_owned();
            assert!(sq_dist(c.view(), centres.row(t)).sqrt() < 0.5);
        }
        assert!(km.converged());
        let direct: f64 = (0..x.nrows())
            .map(|i| sq_dist(x.row(i), km.centroids().row(km.labels()[i])))
            .sum();
        assert!((direct - km.inertia()).abs() < 1e-9 * direct);
    }

    #[test]
    fn inertia_never_increases() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let x = Array2::from_shape_fn((1500, 6), |_| rng.random::<f64>());
        let km = KMeansParams::new(20)
            .tol(0.0)
            .max_iter(50)
            .fit(x.view())
            .unwrap();
        let h = km.inertia_history();
        assert_eq!(h.len(), km.n_iter() + 1);
        assert!(h.len() > 3);
        for w in h.windows(2) {
            assert!(w[1] <= w[0] * (1.0 + 1e-12), "{} -> {}", w[0], w[1]);
        }
        assert_eq!(km.inertia(), *h.last().unwrap());
        // predict on the training data gives the training labels
        assert_eq!(km.predict(x.view()).unwrap(), km.labels());
    }

    #[test]
    fn same_seed_same_result_for_any_thread_count() {
        let (x, _) = planted(4, 300, 5, 4);
        let x = x.mapv(|v| v as f32);
        let run = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| {
                    KMeansParams::new(6)
                        .seed(11)
                        .n_init(2)
                        .fit(x.view())
                        .unwrap()
                })
        };
        assert_eq!(run(1), run(3));
    }

    /// Greedy k-means++ written from its definition, without the
    /// triangle-inequality pruning and the parallel reductions: `trials`
    /// candidates per step, each scored by the full potential.
    fn naive_plus_plus(
        x: ArrayView2<f64>,
        k: usize,
        trials: usize,
        rng: &mut ChaCha8Rng,
    ) -> Array2<f64> {
        let n = x.nrows();
        let mut out = Array2::zeros((k, x.ncols()));
        let first = rng.random_range(0..n);
        out.row_mut(0).assign(&x.row(first));
        let mut d2: Vec<f64> = (0..n).map(|i| sq_dist(x.row(i), x.row(first))).collect();
        for j in 1..k {
            let total: f64 = d2.iter().sum();
            let mut best: Option<(f64, usize)> = None;
            for _ in 0..trials {
                let target = rng.random::<f64>() * total;
                let mut acc = 0.0;
                let cand = (0..n)
                    .find(|&i| {
                        acc += d2[i];
                        acc > target && d2[i] > 0.0
                    })
                    .unwrap();
                let pot: f64 = (0..n)
                    .map(|i| d2[i].min(sq_dist(x.row(i), x.row(cand))))
                    .sum();
                if best.is_none_or(|(b, _)| pot < b) {
                    best = Some((pot, cand));
                }
            }
            let pick = best.unwrap().1;
            out.row_mut(j).assign(&x.row(pick));
            for (i, v) in d2.iter_mut().enumerate() {
                *v = v.min(sq_dist(x.row(i), x.row(pick)));
            }
        }
        out
    }

    #[test]
    fn pruned_seeding_equals_its_definition() {
        let (x, _) = planted(12, 40, 5, 9);
        assert_eq!(default_local_trials(12), 4);
        for trials in [1, 2, default_local_trials(12)] {
            for seed in 0..5 {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let a = kmeans_plus_plus_with_trials(x.view(), 12, trials, &mut rng).unwrap();
                let b = naive_plus_plus(x.view(), 12, trials, &mut ChaCha8Rng::seed_from_u64(seed));
                // the potentials are summed in another order: equal seeds
                // unless two candidates tie to rounding (not on these data)
                assert_eq!(a, b, "trials {trials}, seed {seed}");
            }
        }
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let g = kmeans_plus_plus(x.view(), 12, &mut rng).unwrap();
        let b = naive_plus_plus(x.view(), 12, 4, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(g, b, "the default is greedy with 2 + floor(ln K) trials");
    }

    #[test]
    fn default_local_trials_is_two_plus_floor_ln_k() {
        for (k, want) in [
            (1, 2),
            (2, 2),
            (3, 3),
            (7, 3),
            (8, 4),
            (20, 4),
            (21, 5),
            (32, 5),
            (256, 7),
        ] {
            assert_eq!(default_local_trials(k), want, "K = {k}");
        }
    }

    #[test]
    fn greedy_seeding_is_the_same_for_any_thread_count() {
        // enough rows for several leaves of the reduction tree
        let (x, _) = planted(16, 2000, 6, 5);
        let x = x.mapv(|v| v as f32);
        let run = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| {
                    kmeans_plus_plus(x.view(), 16, &mut ChaCha8Rng::seed_from_u64(3)).unwrap()
                })
        };
        assert_eq!(run(1), run(2));
        assert_eq!(run(1), run(4));
    }

    #[test]
    fn fewer_distinct_points_than_clusters() {
        let x = ndarray::array![[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0], [3.0, 4.0]];
        let km = KMeansParams::new(4).fit(x.view()).unwrap();
        assert_eq!(km.inertia(), 0.0);
        assert!(km.centroids().iter().all(|v: &f64| v.is_finite()));
        assert_eq!(km.labels()[0], km.labels()[1]);
        assert_ne!(km.labels()[0], km.labels()[2]);
    }

    #[test]
    fn invalid_inputs_are_clear_errors() {
        let x = Array2::<f64>::zeros((3, 2));
        let e = KMeansParams::new(0).fit(x.view()).unwrap_err();
        assert!(e.to_string().contains("n_clusters"));
        let e = KMeansParams::new(4).fit(x.view()).unwrap_err();
        assert!(e.to_string().contains("4 clusters from 3 rows"), "{e}");
        let e = KMeansParams::new(2).max_iter(0).fit(x.view()).unwrap_err();
        assert!(e.to_string().contains("max_iter"));
        let e = KMeansParams::new(2).tol(-1.0).fit(x.view()).unwrap_err();
        assert!(e.to_string().contains("tol"));
        let mut y = x.clone();
        y[[2, 1]] = f64::INFINITY;
        let e = KMeansParams::new(2).fit(y.view()).unwrap_err();
        assert!(e.to_string().contains("row 2"), "{e}");
        let km = KMeansParams::new(2).fit(x.view()).unwrap();
        assert!(km.predict(Array2::<f64>::zeros((2, 3)).view()).is_err());
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert!(kmeans_plus_plus(x.view(), 5, &mut rng).is_err());
        let e = KMeansParams::new(2)
            .n_local_trials(Some(0))
            .fit(x.view())
            .unwrap_err();
        assert!(e.to_string().contains("n_local_trials"), "{e}");
        assert!(kmeans_plus_plus_with_trials(x.view(), 2, 0, &mut rng).is_err());
    }
}
