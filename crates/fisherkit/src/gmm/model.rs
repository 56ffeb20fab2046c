//! A diagonal GMM: its parameters, its log-space posterior kernel, and its
//! E-step statistics and M-step (the mergeable sums and the update are in
//! `stats.rs`, the E-step of a chunk of rows in `estep.rs`).

use super::estep::EStepLeaf;
use super::stats::{m_step, DiagMixture, GmmStats, VarianceFloor};
use super::GmmError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::kernels::diag_gauss::{log_joint_gemm, mixture_mean};
use crate::kernels::reduce::{reduce_rows, Pool};
use crate::kernels::screen::DiagScreen;
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

pub use crate::kernels::reduce::CHUNK_ROWS;

/// Tolerance on $|\sum_k w_k - 1|$ accepted by [`DiagGmm::new`].
pub const WEIGHT_SUM_TOL: f64 = 1e-4;

/// A diagonal-covariance Gaussian mixture with K components in D dimensions.
///
/// Besides the parameters it keeps the GEMM form of the log-densities
/// (docs/math.md §2.1): with $c$ a reference point (the mixture mean) and
/// $y = x - c$, $\mu'_k = \mu_k - c$,
/// $$\log w_k \mathcal N(x;\mu_k,\sigma_k^2) = b_k + \sum_d y_d^2 \,(-\tfrac{1}{2\sigma^2_{kd}}) + \sum_d y_d\, \frac{\mu'_{kd}}{\sigma^2_{kd}},$$
/// $b_k = \log w_k - \tfrac12 (D\log 2\pi + \sum_d \log\sigma^2_{kd} + \sum_d \mu'^2_{kd}/\sigma^2_{kd})$,
/// i.e. one product of the (n, 2D) matrix $[y^2, y]$ with a (2D, K) matrix.
/// Centring on $c$ keeps the expansion accurate in `f32` when the data sit far
/// from the origin.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagGmm<F: Float> {
    weights: Array1<F>,
    means: Array2<F>,
    variances: Array2<F>,
    center: Array1<F>,
    /// (2D, K): rows 0..D hold $-1/(2\sigma^2)$, rows D..2D hold $\mu'/\sigma^2$.
    gemm_weights: Array2<F>,
    /// (K): $b_k$ in `f64`.
    log_const: Array1<f64>,
    /// The screening bound and exact direct-form log-joints (docs/math.md
    /// §2.7); shared, as it is derived from the parameters and never changes.
    screen: std::sync::Arc<DiagScreen<F>>,
}

impl<F: Float> DiagGmm<F> {
    /// Builds a mixture from its parameters, validating them.
    ///
    /// * `weights`: (K), positive, summing to 1 within [`WEIGHT_SUM_TOL`]
    ///   (they are renormalised exactly);
    /// * `means`: (K, D), finite;
    /// * `variances`: (K, D), the diagonal $\sigma^2_{kd}$, finite and > 0.
    ///
    /// ```
    /// use fisherkit::gmm::DiagGmm;
    /// use ndarray::array;
    ///
    /// // Two unit-variance components at ±1 in D = 1: the midpoint is a tie.
    /// let g = DiagGmm::<f64>::new(array![0.5, 0.5], array![[-1.0], [1.0]], array![[1.0], [1.0]]).unwrap();
    /// let q = g.predict_proba(array![[0.0], [1.0]].view()).unwrap();
    /// assert!((q[[0, 0]] - 0.5).abs() < 1e-12);
    /// assert!((q[[1, 1]] - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-12);
    /// // weights that do not sum to 1 are an error
    /// assert!(DiagGmm::<f64>::new(array![0.5, 0.6], array![[-1.0], [1.0]], array![[1.0], [1.0]]).is_err());
    /// ```
    pub fn new(
        weights: Array1<F>,
        means: Array2<F>,
        variances: Array2<F>,
    ) -> Result<Self, GmmError> {
        let k = weights.len();
        if k == 0 {
            return Err(GmmError::InvalidModel(
                "the mixture has 0 components".into(),
            ));
        }
        let (km, d) = means.dim();
        if km != k {
            return Err(GmmError::InvalidModel(format!(
                "means have {km} rows but there are {k} weights"
            )));
        }
        if d == 0 {
            return Err(GmmError::InvalidModel("means have 0 columns".into()));
        }
        if variances.dim() != (k, d) {
            return Err(GmmError::InvalidModel(format!(
                "variances have shape {:?} but means have shape ({k}, {d})",
                variances.dim()
            )));
        }
        if let Some((i, w)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !(w.is_finite() && **w > F::zero()))
        {
            return Err(GmmError::InvalidModel(format!(
                "weight {i} is {w}; weights must be finite and > 0"
            )));
        }
        let sum: f64 = weights.iter().map(|w| w.as_f64()).sum();
        if (sum - 1.0).abs() > WEIGHT_SUM_TOL {
            return Err(GmmError::InvalidModel(format!(
                "weights sum to {sum}, not 1"
            )));
        }
        if let Some(((i, j), m)) = means.indexed_iter().find(|(_, m)| !m.is_finite()) {
            return Err(GmmError::InvalidModel(format!(
                "mean [{i}, {j}] is {m}; means must be finite"
            )));
        }
        if let Some(((i, j), v)) = variances
            .indexed_iter()
            .find(|(_, v)| !(v.is_finite() && **v > F::zero()))
        {
            return Err(GmmError::InvalidModel(format!(
                "variance [{i}, {j}] is {v}; variances must be finite and > 0"
            )));
        }
        let weights = weights.mapv(|w| F::from_f64_lossy(w.as_f64() / sum));
        Ok(Self::from_valid(weights, means, variances))
    }

    /// Builds the kernel for parameters already known to be valid.
    pub(crate) fn from_valid(weights: Array1<F>, means: Array2<F>, variances: Array2<F>) -> Self {
        // The centre is rounded to F first: the E-step subtracts it in F.
        let center = mixture_mean(weights.view(), means.view()).mapv(F::from_f64_lossy);
        let center64: Vec<f64> = center.iter().map(|c| c.as_f64()).collect();
        let joint = log_joint_gemm(
            weights.view(),
            means.view(),
            variances.view(),
            &center64,
            true,
        );
        let screen = std::sync::Arc::new(DiagScreen::new(
            weights.view(),
            means.view(),
            variances.view(),
            center.as_slice().expect("standard layout"),
        ));
        Self {
            weights,
            means,
            variances,
            center,
            gemm_weights: joint.weights,
            log_const: Array1::from(joint.bias),
            screen,
        }
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Dimension D of the descriptors.
    pub fn dim(&self) -> usize {
        self.means.ncols()
    }

    /// Mixture weights $w_k$, shape (K).
    pub fn weights(&self) -> ArrayView1<'_, F> {
        self.weights.view()
    }

    /// Means $\mu_k$, shape (K, D).
    pub fn means(&self) -> ArrayView2<'_, F> {
        self.means.view()
    }

    /// Diagonal variances $\sigma^2_k$, shape (K, D).
    pub fn variances(&self) -> ArrayView2<'_, F> {
        self.variances.view()
    }

    /// Reference point $c = \sum_k w_k \mu_k$ (D) of the GEMM form, rounded
    /// to `F`. [`DiagGmm::log_joint_into`] leaves $[y^2, y]$, $y = x - c$, in
    /// its scratch (n, 2D); the EM statistics reuse it.
    pub fn center(&self) -> ArrayView1<'_, F> {
        self.center.view()
    }

    /// The screening data of the posterior kernel (docs/math.md §2.7).
    pub(crate) fn screen(&self) -> &DiagScreen<F> {
        &self.screen
    }

    /// Consumes the model, returning `(weights, means, variances)`.
    pub fn into_parts(self) -> (Array1<F>, Array2<F>, Array2<F>) {
        (self.weights, self.means, self.variances)
    }

    /// The same mixture in another float type.
    pub fn cast<G: Float>(&self) -> DiagGmm<G> {
        let c = |v: &F| G::from_f64_lossy(v.as_f64());
        DiagGmm::from_valid(
            self.weights.map(c),
            self.means.map(c),
            self.variances.map(c),
        )
    }

    /// Writes $\log w_k \mathcal N(x_i; \mu_k, \sigma_k^2)$ for the rows of
    /// `x` (n, D) into `out` (n, K). `scratch` is resized to (n, 2D) as needed.
    ///
    /// The data are assumed validated (finite, D columns).
    pub fn log_joint_into(
        &self,
        x: ArrayView2<'_, F>,
        mut out: ArrayViewMut2<'_, F>,
        scratch: &mut Array2<F>,
        par: Par,
    ) {
        let (n, d) = x.dim();
        debug_assert_eq!(d, self.dim());
        if scratch.dim() != (n, 2 * d) {
            *scratch = Array2::zeros((n, 2 * d));
        }
        let center = self.center.as_slice().expect("standard layout");
        for (mut yr, xr) in scratch.rows_mut().into_iter().zip(x.rows()) {
            let yr = yr.as_slice_mut().expect("standard layout");
            let (sq, lin) = yr.split_at_mut(d);
            // simple loops over contiguous slices: each vectorises
            match xr.as_slice() {
                Some(xs) => lin
                    .iter_mut()
                    .zip(xs)
                    .zip(center)
                    .for_each(|((y, &x), &c)| *y = x - c),
                None => lin
                    .iter_mut()
                    .zip(xr.iter())
                    .zip(center)
                    .for_each(|((y, &x), &c)| *y = x - c),
            }
            sq.iter_mut().zip(&*lin).for_each(|(q, &l)| *q = l * l);
        }
        gemm(
            out.view_mut(),
            false,
            scratch.view(),
            self.gemm_weights.view(),
            F::one(),
            par,
        );
        let log_const = self.log_const.as_slice().expect("standard layout");
        for mut row in out.rows_mut() {
            match row.as_slice_mut() {
                Some(r) => r
                    .iter_mut()
                    .zip(log_const)
                    .for_each(|(o, &b)| *o = F::from_f64_lossy(o.as_f64() + b)),
                None => row
                    .iter_mut()
                    .zip(log_const)
                    .for_each(|(o, &b)| *o = F::from_f64_lossy(o.as_f64() + b)),
            }
        }
    }

    /// Turns a (n, K) matrix of log-joints into posteriors in place
    /// ($q_{ik} = \exp(\ell_{ik} - \operatorname{logsumexp}_j \ell_{ij})$) and
    /// writes each row's log-likelihood $\log p(x_i)$ to `loglik` (n).
    pub fn log_joint_to_posteriors(lp: ArrayViewMut2<'_, F>, loglik: &mut [f64]) {
        // The flushed, vectorised softmax of the E-step (see its docs): terms
        // below the type's precision relative to the row maximum become exact 0.
        crate::kernels::softmax::log_joint_to_posteriors_flushed(lp, loglik);
    }

    /// Posteriors of the rows of `x` (n, D) into `q` (n, K) and their
    /// log-likelihoods into `loglik` (n), sequentially (call from parallel code).
    pub fn posteriors_into(
        &self,
        x: ArrayView2<'_, F>,
        mut q: ArrayViewMut2<'_, F>,
        loglik: &mut [f64],
        scratch: &mut Array2<F>,
    ) {
        self.log_joint_into(x, q.view_mut(), scratch, Par::Seq);
        Self::log_joint_to_posteriors(q, loglik);
    }

    /// Posterior probabilities $q_{ik}$ of the components, shape (N, K).
    /// `x`: (N, D). Parallel over chunks of rows.
    pub fn predict_proba(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, GmmError> {
        check_matrix(x, Some(self.dim()), "data")?;
        let n = x.nrows();
        let mut q = Array2::<F>::zeros((n, self.n_components()));
        let mut ll = vec![0.0f64; n];
        q.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS)
            .into_par_iter()
            .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
            .zip(ll.par_chunks_mut(CHUNK_ROWS))
            .for_each_init(
                || Array2::<F>::zeros((0, 0)),
                |scratch, ((qc, xc), llc)| self.posteriors_into(xc, qc, llc, scratch),
            );
        Ok(q)
    }

    /// Log-likelihood $\log p(x_i)$ of each row of `x` (N, D), shape (N).
    pub fn score_samples(&self, x: ArrayView2<'_, F>) -> Result<Array1<f64>, GmmError> {
        check_matrix(x, Some(self.dim()), "data")?;
        let n = x.nrows();
        let k = self.n_components();
        let mut ll = vec![0.0f64; n];
        x.axis_chunks_iter(Axis(0), CHUNK_ROWS)
            .into_par_iter()
            .zip(ll.par_chunks_mut(CHUNK_ROWS))
            .for_each_init(
                || (Array2::<F>::zeros((0, 0)), Array2::<F>::zeros((0, 0))),
                |(scratch, q), (xc, llc)| {
                    if q.dim() != (xc.nrows(), k) {
                        *q = Array2::zeros((xc.nrows(), k));
                    }
                    self.posteriors_into(xc, q.view_mut(), llc, scratch)
                },
            );
        Ok(Array1::from(ll))
    }

    /// Mean log-likelihood per row of `x` (N, D), in nats.
    pub fn score(&self, x: ArrayView2<'_, F>) -> Result<f64, GmmError> {
        let ll = self.score_samples(x)?;
        Ok(ll.sum() / ll.len() as f64)
    }
}

impl<F: Float> DiagGmm<F> {
    /// E-step sums over the rows of `x` (N, D) about the model's mixture mean
    /// $c = \sum_k w_k \mu_k$ (see [`GmmStats`]).
    ///
    /// Per chunk of [`CHUNK_ROWS`] rows, first the screened kernel
    /// (docs/math.md §2.7): when few components per row can have a posterior
    /// above $e^{-50}$ of the row's largest, only those are evaluated, exactly
    /// (centred direct form in `f64`), and their sums are added in `f64`.
    /// Otherwise: log-space posteriors $Q$ (n, K)
    /// from [`DiagGmm::log_joint_into`] (terms below $10^{-19}$ of a row's
    /// largest in `f32`, $10^{-154}$ in `f64`, flushed to 0), then one GEMM
    /// $Q^\top [y^2, y]$ (K, 2D) in `F`, added into `f64` totals — or, when at
    /// most a tenth of $Q$ is non-zero (typical at large D), a sparse sum
    /// directly in `f64`; $n_k$ and the log-likelihood are summed in `f64`.
    /// Memory O(chunk·(K + D) + K·D) per thread. Chunks run in parallel; the
    /// result does not depend on the number of threads.
    ///
    /// Errors: a matrix that is empty, of the wrong width, or non-finite.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, GmmStats};
    /// use ndarray::{array, s, Array2, Axis};
    ///
    /// let g = DiagGmm::new(array![0.4, 0.6], array![[-2.0, 0.0], [2.0, 1.0]], array![[1.0, 0.5], [2.0, 1.0]])?;
    /// let x = Array2::from_shape_fn((40, 2), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 2.0 - 2.5);
    /// let whole = g.sufficient_statistics(x.view())?;
    /// let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + b.abs());
    /// // n_k = Σ_i q_ik, Σ_i q_ik x_i and Σ_i log p(x_i), with q (N, K) the posteriors
    /// let q = g.predict_proba(x.view())?;
    /// assert!(whole.resp_sums().iter().zip(&q.sum_axis(Axis(0))).all(|(a, b)| close(*a, *b)));
    /// assert!(whole.sum_x().iter().zip(&q.t().dot(&x)).all(|(a, b)| close(*a, *b)));
    /// assert!(close(whole.log_likelihood(), g.score_samples(x.view())?.sum()));
    /// // the statistics of two shards, summed, are the batch's
    /// let shards = [
    ///     g.sufficient_statistics(x.slice(s![..15, ..]))?,
    ///     g.sufficient_statistics(x.slice(s![15.., ..]))?,
    /// ];
    /// let sum = GmmStats::sum(&shards)?;
    /// assert_eq!(sum.n_rows(), 40.0);
    /// assert!(close(sum.log_likelihood(), whole.log_likelihood()));
    /// assert!(sum.resp_sums().iter().zip(&whole.resp_sums()).all(|(a, b)| close(*a, *b)));
    /// for (a, b) in [(sum.sum_y(), whole.sum_y()), (sum.sum_y2(), whole.sum_y2())] {
    ///     assert!(a.iter().zip(&b).all(|(u, v)| close(*u, *v)));
    /// }
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn sufficient_statistics(&self, x: ArrayView2<'_, F>) -> Result<GmmStats, GmmError> {
        check_matrix(x, Some(self.dim()), "data")?;
        Ok(self.statistics_unchecked(x))
    }

    pub(crate) fn statistics_unchecked(&self, x: ArrayView2<'_, F>) -> GmmStats {
        self.statistics_with(x, true)
    }

    /// [`DiagGmm::sufficient_statistics`] with the screening of
    /// docs/math.md §2.7 on (the default) or off (the dense GEMM path for
    /// every chunk; tests compare the two).
    pub(crate) fn statistics_with(&self, x: ArrayView2<'_, F>, screening: bool) -> GmmStats {
        let center = self.center().mapv(|v| v.as_f64());
        let (buffers, stats) = (Pool::new(), Pool::new());
        reduce_rows(
            x.nrows(),
            &|r| {
                let mut leaf = buffers.take(|| EStepLeaf::new(self));
                let st = stats.take(|| GmmStats::zeros(self.n_components(), center.clone()));
                let st = self.leaf_statistics(&mut leaf, st, x.slice(s![r, ..]), screening);
                buffers.give(leaf);
                st
            },
            &|mut a, b| {
                a.add_same_center(&b);
                stats.give(b);
                a
            },
        )
    }

    /// The statistics of one reduction leaf, the rows `x` (n, D), chunk by chunk on the
    /// buffers of `leaf`, added to `st` once it is cleared.
    pub(super) fn leaf_statistics(
        &self,
        leaf: &mut EStepLeaf<F>,
        st: GmmStats,
        x: ArrayView2<'_, F>,
        screening: bool,
    ) -> GmmStats {
        leaf.start(st);
        for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
            if !(screening && leaf.screened_chunk(self, xc)) {
                leaf.dense_chunk(self, xc);
            }
        }
        leaf.finish()
    }

    /// The M-step from (merged) statistics `st` of K components in D
    /// dimensions: a new model (see [`GmmStats`] and the module doc for the
    /// formulas; starved components are re-seeded by splitting the heaviest).
    ///
    /// Errors: K or D different from this model's, no rows, invalid `floor`.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, VarianceFloor};
    /// use ndarray::{array, Array2};
    ///
    /// let g = DiagGmm::new(array![0.5, 0.5], array![[-1.0, 0.0], [1.0, 0.0]], array![[1.0, 1.0], [1.0, 1.0]])?;
    /// // two clusters, around -3 and +3 on both axes
    /// let x = Array2::from_shape_fn((60, 2), |(i, j)| {
    ///     ((i * 7 + j * 3) % 11) as f64 / 5.0 - 1.0 + if i % 2 == 0 { 3.0 } else { -3.0 }
    /// });
    /// let st = g.sufficient_statistics(x.view())?;
    /// let next = g.update_from_statistics(&st, VarianceFloor::default())?;
    /// // w_k = n_k / N and μ_k = Σ_i q_ik x_i / n_k
    /// let (nk, sx) = (st.resp_sums(), st.sum_x());
    /// for k in 0..2 {
    ///     assert!((next.weights()[k] - nk[k] / 60.0).abs() < 1e-12);
    ///     for d in 0..2 {
    ///         assert!((next.means()[[k, d]] - sx[[k, d]] / nk[k]).abs() < 1e-9);
    ///     }
    /// }
    /// // an EM step does not lower the mean log-likelihood
    /// assert!(next.score(x.view())? >= g.score(x.view())? - 1e-12);
    /// // statistics of K = 2 components do not fit a model of K = 1
    /// let one = DiagGmm::new(array![1.0], array![[0.0, 0.0]], array![[1.0, 1.0]])?;
    /// assert!(one.update_from_statistics(&st, VarianceFloor::default()).is_err());
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn update_from_statistics(
        &self,
        st: &GmmStats,
        floor: VarianceFloor,
    ) -> Result<DiagGmm<F>, GmmError> {
        if st.n_components() != self.n_components() || st.dim() != self.dim() {
            return Err(GmmError::InvalidStatistics(format!(
                "statistics of {} components in dimension {} do not fit a model of {} components in dimension {}",
                st.n_components(),
                st.dim(),
                self.n_components(),
                self.dim()
            )));
        }
        Self::from_statistics(st, floor)
    }

    /// A model from statistics alone (the M-step; see
    /// [`DiagGmm::update_from_statistics`]).
    pub fn from_statistics(st: &GmmStats, floor: VarianceFloor) -> Result<DiagGmm<F>, GmmError> {
        Ok(m_step(st, floor)?.model)
    }

    /// [`DiagGmm::from_statistics`], also returning how many starved
    /// components were re-seeded: EM has not converged while it re-seeds
    /// ([`crate::stream::em_stopping_rule`]), so a driver outside the library
    /// (the Python bindings) needs the count.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, VarianceFloor};
    /// use ndarray::{array, Array2};
    ///
    /// // the third component is far from every row: n_3 = 0, it starves
    /// let g = DiagGmm::new(array![0.4, 0.4, 0.2], array![[-3.0], [3.0], [1000.0]], array![[1.0], [1.0], [1.0]])?;
    /// let x = Array2::from_shape_fn((50, 1), |(i, _)| (i % 5) as f64 * 0.1 + if i % 2 == 0 { -3.0 } else { 3.0 });
    /// let st = g.sufficient_statistics(x.view())?;
    /// assert_eq!(st.resp_sums()[2], 0.0);
    /// let floor = VarianceFloor::default();
    /// let (next, reseeded) = DiagGmm::<f64>::from_statistics_reseeded(&st, floor)?;
    /// assert_eq!(reseeded, 1);
    /// assert!(next.means()[[2, 0]].abs() < 10.0); // re-seeded among the data
    /// // the model is `from_statistics`'s
    /// assert_eq!(next, DiagGmm::from_statistics(&st, floor)?);
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn from_statistics_reseeded(
        st: &GmmStats,
        floor: VarianceFloor,
    ) -> Result<(DiagGmm<F>, usize), GmmError> {
        let m = m_step(st, floor)?;
        Ok((m.model, m.reseeded))
    }
}

impl<F: Float> DiagMixture<F> for DiagGmm<F> {
    fn n_components(&self) -> usize {
        DiagGmm::n_components(self)
    }
    fn dim(&self) -> usize {
        DiagGmm::dim(self)
    }
    fn screen(&self) -> &DiagScreen<F> {
        DiagGmm::screen(self)
    }
    fn log_joint_into(
        &self,
        x: ArrayView2<'_, F>,
        out: ArrayViewMut2<'_, F>,
        scratch: &mut Array2<F>,
        par: Par,
    ) {
        DiagGmm::log_joint_into(self, x, out, scratch, par)
    }
    fn from_valid(weights: Array1<F>, means: Array2<F>, variances: Array2<F>) -> Self {
        DiagGmm::from_valid(weights, means, variances)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// Direct evaluation of log w_k N(x; mu_k, var_k), in f64.
    fn direct(g: &DiagGmm<f64>, x: ArrayView1<f64>) -> Vec<f64> {
        (0..g.n_components())
            .map(|k| {
                let mut acc = 0.0;
                for d in 0..g.dim() {
                    let v = g.variances()[[k, d]];
                    let z = x[d] - g.means()[[k, d]];
                    acc += (2.0 * std::f64::consts::PI * v).ln() + z * z / v;
                }
                g.weights()[k].ln() - 0.5 * acc
            })
            .collect()
    }

    fn model() -> DiagGmm<f64> {
        DiagGmm::new(
            array![0.2, 0.5, 0.3],
            array![[0.0, 1.0], [2.0, -1.0], [100.0, 50.0]],
            array![[1.0, 2.0], [0.5, 0.25], [3.0, 1.5]],
        )
        .unwrap()
    }

    #[test]
    fn log_joint_matches_direct_formula() {
        let g = model();
        let x = array![[0.1, 0.2], [1.9, -1.3], [99.0, 51.0], [-3.0, 4.0]];
        let mut out = Array2::zeros((4, 3));
        let mut scratch = Array2::zeros((0, 0));
        g.log_joint_into(x.view(), out.view_mut(), &mut scratch, Par::Seq);
        for i in 0..4 {
            let want = direct(&g, x.row(i));
            for k in 0..3 {
                assert!((out[[i, k]] - want[k]).abs() < 1e-9 * (1.0 + want[k].abs()));
            }
        }
    }

    #[test]
    fn posteriors_sum_to_one_and_loglik_is_logsumexp() {
        let g = model();
        let x = array![[0.1, 0.2], [1.9, -1.3], [99.0, 51.0]];
        let q = g.predict_proba(x.view()).unwrap();
        let ll = g.score_samples(x.view()).unwrap();
        for i in 0..3 {
            assert!((q.row(i).sum() - 1.0).abs() < 1e-12);
            let lj = direct(&g, x.row(i));
            let m = lj.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + lj.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            assert!((ll[i] - lse).abs() < 1e-9);
        }
    }

    #[test]
    fn f32_kernel_is_accurate_far_from_origin() {
        let g64 = DiagGmm::new(
            array![0.5, 0.5],
            array![[1.0e4, 1.0e4], [1.0e4 + 1.0, 1.0e4]],
            array![[1.0, 1.0], [1.0, 1.0]],
        )
        .unwrap();
        let g32: DiagGmm<f32> = g64.cast();
        let x = array![[1.0e4 + 0.25, 1.0e4 - 0.5]];
        let q64 = g64.predict_proba(x.view()).unwrap();
        let q32 = g32.predict_proba(x.mapv(|v| v as f32).view()).unwrap();
        assert!((q64[[0, 0]] - q32[[0, 0]] as f64).abs() < 1e-5);
    }

    #[test]
    fn invalid_parameters_are_rejected_with_a_reason() {
        let bad = |w: Array1<f64>, m: Array2<f64>, v: Array2<f64>| {
            DiagGmm::new(w, m, v).unwrap_err().to_string()
        };
        assert!(
            bad(array![0.5, 0.6], array![[0.0], [1.0]], array![[1.0], [1.0]]).contains("sum to")
        );
        assert!(
            bad(array![0.5, 0.5], array![[0.0], [1.0]], array![[1.0], [0.0]])
                .contains("variance [1, 0]")
        );
        assert!(bad(array![1.0], array![[0.0, 1.0]], array![[1.0]]).contains("shape"));
        assert!(bad(
            array![1.5, -0.5],
            array![[0.0], [1.0]],
            array![[1.0], [1.0]]
        )
        .contains("weight 1"));
    }

    #[test]
    fn dimension_mismatch_and_nan_are_errors() {
        let g = model();
        let e = g.predict_proba(array![[1.0, 2.0, 3.0]].view()).unwrap_err();
        assert!(e.to_string().contains("3 columns"));
        let e = g
            .score(array![[1.0, 2.0], [f64::NAN, 0.0]].view())
            .unwrap_err();
        assert!(e.to_string().contains("row 1"));
    }
}
