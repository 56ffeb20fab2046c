//! Fitting a diagonal GMM by expectation-maximisation.

use super::model::DiagGmm;
use super::stats::{data_mean_var, m_step, GmmStats, VarianceFloor};
use super::GmmError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::kmeans::{kmeans_plus_plus, KMeansError, KMeansParams};
use crate::stream::{fit_in_memory, EmTol};
use ndarray::{Array1, Array2, ArrayView2};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Lloyd updates of the k-means initialisation ([`GmmInit::KMeans`]) by
/// default: [`GmmParams::new`]'s `kmeans_max_iter`, written once (the Python
/// module's `GaussianMixture` reads it from `defaults()`).
pub const INIT_KMEANS_MAX_ITER: usize = 20;

/// How EM is initialised.
// `Given` is large, but one `GmmInit` lives per fit: boxing would only burden callers.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum GmmInit<F: Float> {
    /// k-means (k-means++ seeding, `kmeans_max_iter` Lloyd updates), then one
    /// M-step from the hard assignments. The default.
    KMeans,
    /// k-means++ seeds as means, the global per-dimension data variance
    /// (floored) for every component, uniform weights.
    Random,
    /// Start from this model (then `n_init` is ignored: one run).
    Given(DiagGmm<F>),
}

/// Progress report of one EM iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmIteration {
    /// Index of the restart (0-based).
    pub restart: usize,
    /// Index of the iteration within the restart (0-based).
    pub iter: usize,
    /// Mean log-likelihood per row of the parameters entering this iteration.
    pub log_likelihood: f64,
    /// The change of the stopping rule ([`EmTol::change`]): $|\ell_t -
    /// \ell_{t-1}|$ for [`EmTol::Absolute`], that over $\max(|\ell_{t-1}|, 1)$
    /// for [`EmTol::Relative`] (infinite at iteration 0).
    pub change: f64,
    /// Number of starved components re-seeded by this iteration's M-step.
    pub reseeded: usize,
}

/// A fitted mixture and the trace of its EM run.
#[derive(Debug, Clone, PartialEq)]
pub struct GmmFit<F: Float> {
    /// The model after the last M-step.
    pub model: DiagGmm<F>,
    /// Mean log-likelihood per row, one per iteration, of the parameters
    /// entering that iteration (as scikit-learn's `lower_bound_`); the
    /// returned model's own log-likelihood is at least the last entry.
    pub log_likelihood: Vec<f64>,
    /// Number of EM iterations run (E-step + M-step each).
    pub n_iter: usize,
    /// Whether the change of the `tol` rule fell below it before `max_iter`.
    pub converged: bool,
}

impl<F: Float> From<crate::stream::EmState<DiagGmm<F>>> for GmmFit<F> {
    fn from(state: crate::stream::EmState<DiagGmm<F>>) -> Self {
        Self {
            model: state.model,
            n_iter: state.log_likelihood.len(),
            log_likelihood: state.log_likelihood,
            converged: state.converged,
        }
    }
}

/// Hyper-parameters of diagonal-GMM EM.
#[derive(Debug, Clone, PartialEq)]
pub struct GmmParams<F: Float> {
    pub(super) n_components: usize,
    pub(super) max_iter: usize,
    pub(super) tol: EmTol,
    pub(super) n_init: usize,
    pub(super) seed: u64,
    pub(super) init: GmmInit<F>,
    pub(super) variance_floor: VarianceFloor,
    pub(super) kmeans_max_iter: usize,
}

impl<F: Float> GmmParams<F> {
    /// K components; `max_iter` 100, `tol` `Absolute(1e-3)` (scikit-learn's
    /// rule and default), `n_init` 1, `seed` 0 ([`crate::stream::em_defaults`]),
    /// `init` [`GmmInit::KMeans`], `variance_floor` `Relative(1e-3)`,
    /// `kmeans_max_iter` [`INIT_KMEANS_MAX_ITER`] (20).
    pub fn new(n_components: usize) -> Self {
        Self {
            n_components,
            max_iter: crate::stream::em_defaults::MAX_ITER,
            tol: EmTol::default(),
            n_init: crate::stream::em_defaults::N_INIT,
            seed: crate::stream::em_defaults::SEED,
            init: GmmInit::KMeans,
            variance_floor: VarianceFloor::default(),
            kmeans_max_iter: INIT_KMEANS_MAX_ITER,
        }
    }

    /// Maximum number of EM iterations per restart (≥ 1).
    pub fn max_iter(mut self, v: usize) -> Self {
        self.max_iter = v;
        self
    }

    /// Stop when the change of the mean log-likelihood per row (see
    /// [`EmTol`], [`EmIteration::change`]) is below the tolerance (≥ 0; 0
    /// runs `max_iter`): a number is an absolute change
    /// (`.tol(1e-3)`, the default), `.tol(EmTol::Relative(1e-6))` a relative one.
    pub fn tol(mut self, v: impl Into<EmTol>) -> Self {
        self.tol = v.into();
        self
    }

    /// Number of restarts; the best final log-likelihood wins (≥ 1).
    pub fn n_init(mut self, v: usize) -> Self {
        self.n_init = v;
        self
    }

    /// Seed of every random choice (restart r uses stream r of ChaCha8).
    pub fn seed(mut self, v: u64) -> Self {
        self.seed = v;
        self
    }

    /// Initialisation.
    pub fn init(mut self, v: GmmInit<F>) -> Self {
        self.init = v;
        self
    }

    /// Variance floor of the M-step.
    pub fn variance_floor(mut self, v: VarianceFloor) -> Self {
        self.variance_floor = v;
        self
    }

    /// Lloyd updates of the k-means initialisation (≥ 1).
    pub fn kmeans_max_iter(mut self, v: usize) -> Self {
        self.kmeans_max_iter = v;
        self
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.n_components
    }

    /// Checks every setting that does not depend on the data — K ≥ 1,
    /// `max_iter` ≥ 1, `tol` finite and ≥ 0, `n_init` ≥ 1,
    /// `kmeans_max_iter` ≥ 1, a variance floor finite and > 0 — in that
    /// order, and returns the checked parameters, which every fit runs on.
    /// The shape of a [`GmmInit::Given`] model, (K, D), is checked against
    /// the data when fitting.
    ///
    /// ```
    /// use fisherkit::gmm::{GmmError, GmmParams};
    /// assert!(GmmParams::<f64>::new(3).max_iter(10).check().is_ok());
    /// let e = GmmParams::<f64>::new(3).n_init(0).check().unwrap_err();
    /// assert!(matches!(e, GmmError::InvalidHyperParameter { name: "n_init", .. }));
    /// assert!(e.to_string().contains("n_init"));
    /// ```
    pub fn check(&self) -> Result<ValidGmmParams<F>, GmmError> {
        let bad = |name, reason: String| Err(GmmError::InvalidHyperParameter { name, reason });
        if self.n_components == 0 {
            return bad("n_components", "must be at least 1, got 0".into());
        }
        if self.max_iter == 0 {
            return bad("max_iter", "must be at least 1, got 0".into());
        }
        if let Some(reason) = self.tol.invalid() {
            return bad("tol", reason);
        }
        if self.n_init == 0 {
            return bad("n_init", "must be at least 1, got 0".into());
        }
        if self.kmeans_max_iter == 0 {
            return bad("kmeans_max_iter", "must be at least 1, got 0".into());
        }
        self.variance_floor.validate()?;
        Ok(ValidGmmParams(self.clone()))
    }

    /// [`GmmParams::check`], then [`ValidGmmParams::fit`]: fits the mixture
    /// to the rows of `x` (N, D) by EM.
    ///
    /// Each iteration: E-step sums ([`DiagGmm::sufficient_statistics`]),
    /// M-step ([`DiagGmm::update_from_statistics`]). Stops by
    /// [`crate::stream::em_stopping_rule`] (change of the mean log-likelihood
    /// below `tol`, absolute by default, nothing re-seeded) or after `max_iter`
    /// iterations. With `n_init` > 1 the run with the highest final
    /// log-likelihood is kept (first on ties). The loop is the library's one
    /// EM driver (the streamed fit's, over the data as one chunk).
    ///
    /// Errors: K = 0, K > N, `max_iter` = 0, `n_init` = 0, `tol` < 0, a floor
    /// ≤ 0, a given model of the wrong shape, an empty matrix or a
    /// non-finite value (its row and column are named).
    ///
    /// ```
    /// use fisherkit::gmm::GmmParams;
    /// use ndarray::Array2;
    /// // two clusters in 2-D, around (0, 0) and (10, 10)
    /// let x = Array2::from_shape_fn((200, 2), |(i, j)| 10.0 * (i % 2) as f64 + ((i * 13 + j * 7) % 10) as f64 / 10.0);
    /// let fit = GmmParams::new(2).seed(0).fit(x.view()).unwrap();
    /// assert!(fit.converged);
    /// let mut centres: Vec<f64> = fit.model.means().column(0).to_vec();
    /// centres.sort_by(f64::total_cmp);
    /// assert!((centres[0] - 0.45).abs() < 0.1 && (centres[1] - 10.45).abs() < 0.1);
    /// ```
    pub fn fit(&self, x: ArrayView2<'_, F>) -> Result<GmmFit<F>, GmmError> {
        self.check()?.fit(x)
    }

    /// [`GmmParams::check`], then [`ValidGmmParams::fit_with_progress`].
    pub fn fit_with_progress(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut dyn FnMut(&EmIteration),
    ) -> Result<GmmFit<F>, GmmError> {
        self.check()?.fit_with_progress(x, on_iter)
    }

    /// The random stream of restart `r`: stream r of the seed.
    pub(super) fn restart_rng(&self, r: usize) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(r as u64);
        rng
    }

    /// The starting model of one restart.
    pub(crate) fn initial_model(
        &self,
        x: ArrayView2<'_, F>,
        rng: &mut ChaCha8Rng,
    ) -> Result<DiagGmm<F>, GmmError> {
        let k = self.n_components;
        match &self.init {
            GmmInit::Given(m) => Ok(m.clone()),
            GmmInit::KMeans => {
                let km = KMeansParams::new(k)
                    .max_iter(self.kmeans_max_iter)
                    .seed(rng.next_u64())
                    .fit(x)
                    .map_err(kmeans_error)?;
                let (mean, _) = data_mean_var(x);
                let st = GmmStats::from_labels(x, km.labels(), k, mean);
                Ok(m_step(&st, self.variance_floor)?.model)
            }
            GmmInit::Random => {
                let means = kmeans_plus_plus(x, k, rng).map_err(kmeans_error)?;
                let (_, var) = data_mean_var(x);
                let min_var = F::min_positive_value().as_f64().sqrt();
                let fl = self.variance_floor.per_dim(&var);
                let v: Array1<F> = ndarray::Zip::from(&var)
                    .and(&fl)
                    .map_collect(|&v, &f| F::from_f64_lossy(v.max(f).max(min_var)));
                let variances = Array2::from_shape_fn((k, x.ncols()), |(_, d)| v[d]);
                let weights = Array1::from_elem(k, F::from_f64_lossy(1.0 / k as f64));
                Ok(DiagGmm::from_valid(weights, means, variances))
            }
        }
    }
}

/// [`GmmParams`] that passed [`GmmParams::check`]; only `check` makes one,
/// so the fits below (in memory and streamed) check the data but never the
/// settings again (linfa's params → checked params → fit). Reads as the
/// parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidGmmParams<F: Float>(GmmParams<F>);

impl<F: Float> std::ops::Deref for ValidGmmParams<F> {
    type Target = GmmParams<F>;
    fn deref(&self) -> &GmmParams<F> {
        &self.0
    }
}

impl<F: Float> ValidGmmParams<F> {
    /// Fits the mixture to the rows of `x` (N, D) by EM; see
    /// [`GmmParams::fit`]. Errors: those of the data only (K > N, a given
    /// model of the wrong shape, an empty matrix, a non-finite value).
    pub fn fit(&self, x: ArrayView2<'_, F>) -> Result<GmmFit<F>, GmmError> {
        self.fit_with_progress(x, &mut |_| {})
    }

    /// [`ValidGmmParams::fit`], calling `on_iter` after every iteration.
    pub fn fit_with_progress(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut dyn FnMut(&EmIteration),
    ) -> Result<GmmFit<F>, GmmError> {
        let mut report = |it: &EmIteration, _: &crate::stream::EmState<DiagGmm<F>>| {
            on_iter(it);
            Ok::<(), GmmError>(())
        };
        Ok(fit_in_memory(self, x, &mut report)?.into())
    }

    /// [`ValidGmmParams::fit`], calling `on_iter` after every iteration with
    /// its report and the new state; an error of `on_iter` stops the fit and
    /// is returned (how a caller cancels a fit: Ctrl-C in the Python module).
    pub fn fit_with_callback<E: From<GmmError>>(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut crate::stream::OnIteration<'_, EmIteration, DiagGmm<F>, E>,
    ) -> Result<GmmFit<F>, E> {
        Ok(fit_in_memory(self, x, on_iter)?.into())
    }

    /// The checks of the data `x` (N, D) (the training data, or the
    /// initialisation sample of a streamed fit): non-empty and finite,
    /// N ≥ K, and a [`GmmInit::Given`] model of shape (K, D).
    pub(super) fn check_data(&self, x: ArrayView2<'_, F>) -> Result<(), GmmError> {
        check_matrix(x, None, "training data")?;
        if self.n_components > x.nrows() {
            return Err(GmmError::TooFewRows {
                n_rows: x.nrows(),
                n_components: self.n_components,
            });
        }
        if let GmmInit::Given(m) = &self.init {
            if m.n_components() != self.n_components || m.dim() != x.ncols() {
                return Err(GmmError::InvalidHyperParameter {
                    name: "init",
                    reason: format!(
                        "the given model has {} components in dimension {}, expected {} components in dimension {}",
                        m.n_components(),
                        m.dim(),
                        self.n_components,
                        x.ncols()
                    ),
                });
            }
        }
        Ok(())
    }
}

fn kmeans_error(e: KMeansError) -> GmmError {
    match e {
        KMeansError::Data(d) => GmmError::Data(d),
        other => GmmError::InvalidHyperParameter {
            name: "init",
            reason: format!("k-means initialisation failed: {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Axis};
    use rand::Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// A planted mixture: K components in D dims, weights `w`, means 8 apart
    /// per axis on average, standard deviations in [0.5, 1.5].
    fn planted(
        n: usize,
        w: &[f64],
        d: usize,
        seed: u64,
    ) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
        let k = w.len();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let means = Array2::from_shape_fn((k, d), |_| {
            let z: f64 = StandardNormal.sample(&mut rng);
            8.0 * z
        });
        let sd = Array2::from_shape_fn((k, d), |_| 0.5 + rng.random::<f64>());
        let mut x = Array2::zeros((n, d));
        for i in 0..n {
            let u: f64 = rng.random();
            let mut c = 0;
            let mut acc = w[0];
            while u > acc && c + 1 < k {
                c += 1;
                acc += w[c];
            }
            for j in 0..d {
                let z: f64 = StandardNormal.sample(&mut rng);
                x[[i, j]] = means[[c, j]] + sd[[c, j]] * z;
            }
        }
        (x, means, sd.mapv(|s| s * s))
    }

    fn uniform(n: usize, d: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |_| rng.random::<f64>())
    }

    #[test]
    fn planted_mixture_is_recovered() {
        let w = [0.1, 0.2, 0.3, 0.4];
        let (x, means, vars) = planted(4000, &w, 8, 1);
        let fit = GmmParams::new(4).seed(3).fit(x.view()).unwrap();
        assert!(fit.converged);
        let g = &fit.model;
        for t in 0..4 {
            // match by nearest mean
            let k = (0..4)
                .min_by(|&a, &b| {
                    let da: f64 = (&g.means().row(a) - &means.row(t)).mapv(|v| v * v).sum();
                    let db: f64 = (&g.means().row(b) - &means.row(t)).mapv(|v| v * v).sum();
                    da.total_cmp(&db)
                })
                .unwrap();
            assert!((g.weights()[k] - w[t]).abs() < 0.03, "weight {t}");
            for j in 0..8 {
                assert!(
                    (g.means()[[k, j]] - means[[t, j]]).abs() < 0.25,
                    "mean {t} {j}"
                );
                assert!(
                    (g.variances()[[k, j]] / vars[[t, j]] - 1.0).abs() < 0.35,
                    "var {t} {j}"
                );
            }
        }
    }

    fn check_monotone<F: Float>(x: ArrayView2<F>, init: GmmInit<F>, slack: f64) {
        let fit = GmmParams::new(6)
            .init(init)
            .max_iter(30)
            .tol(0.0)
            .fit(x)
            .unwrap();
        assert_eq!(fit.n_iter, 30);
        for (t, w) in fit.log_likelihood.windows(2).enumerate() {
            assert!(
                w[1] >= w[0] - slack * w[0].abs().max(1.0),
                "{} iteration {t}: {} -> {}",
                F::NAME,
                w[0],
                w[1]
            );
        }
        let first = fit.log_likelihood[0];
        assert!(*fit.log_likelihood.last().unwrap() > first);
    }

    fn standard_normal(n: usize, d: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |_| StandardNormal.sample(&mut rng))
    }

    #[test]
    fn default_rule_converges_on_unstructured_data() {
        // Issue 30 item 7: K = 3 on 1 000 × 5 standard normal data ran to the
        // cap of 100 iterations under the old default (relative 1e-6); the
        // default rule, an absolute change below 1e-3 as scikit-learn's,
        // stops where the mean log-likelihood has flattened out.
        let x = standard_normal(1000, 5, 0);
        let fit = GmmParams::new(3).seed(0).fit(x.view()).unwrap();
        assert!(
            fit.converged && fit.n_iter < 30,
            "{} iterations",
            fit.n_iter
        );
        let ll = &fit.log_likelihood;
        assert!((ll[ll.len() - 1] - ll[ll.len() - 2]).abs() < 1e-3);
        // the strict rule stays available and runs on much longer
        let strict = GmmParams::new(3)
            .seed(0)
            .tol(EmTol::Relative(1e-6))
            .fit(x.view())
            .unwrap();
        assert!(
            strict.n_iter > 2 * fit.n_iter,
            "{} vs {}",
            strict.n_iter,
            fit.n_iter
        );
        // and gains little: under 1e-2 nats per row (the true density gives −7.09)
        let (a, b) = (
            fit.log_likelihood[fit.n_iter - 1],
            strict.log_likelihood[strict.n_iter - 1],
        );
        assert!(b - a < 1e-2 && b >= a - 1e-9, "{a} vs {b}");
    }

    #[test]
    fn a_callback_error_stops_the_fit() {
        // how the Python module cancels a fit on Ctrl-C
        let x = standard_normal(500, 3, 1);
        let p = GmmParams::new(3).tol(0.0).max_iter(50).check().unwrap();
        let mut seen = 0;
        let r = p.fit_with_callback(x.view(), &mut |it, state| {
            seen += 1;
            assert_eq!(state.n_iter(), it.iter + 1);
            if it.iter == 4 {
                Err(GmmError::InvalidStatistics("stop".into()))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(GmmError::InvalidStatistics(m)) if m == "stop"));
        assert_eq!(seen, 5);
        // and with a callback that never fails, the same fit as `fit`
        let all = p
            .fit_with_callback(x.view(), &mut |_, _| Ok::<(), GmmError>(()))
            .unwrap();
        assert_eq!(all, p.fit(x.view()).unwrap());
    }

    #[test]
    fn log_likelihood_never_decreases() {
        let x = uniform(1500, 5, 2);
        check_monotone(x.view(), GmmInit::KMeans, 1e-10);
        check_monotone(x.view(), GmmInit::Random, 1e-10);
        let x32 = x.mapv(|v| v as f32);
        // f32 posteriors and GEMMs: rounding of order 1e-7 per row
        check_monotone(x32.view(), GmmInit::KMeans, 1e-6);
        check_monotone(x32.view(), GmmInit::Random, 1e-6);
    }

    #[test]
    fn f32_and_f64_fits_agree() {
        let (x, _, _) = planted(3000, &[0.3, 0.3, 0.4], 6, 5);
        let x = x.mapv(|v| v + 50.0);
        let f64fit = GmmParams::new(3)
            .max_iter(15)
            .tol(0.0)
            .fit(x.view())
            .unwrap();
        let x32 = x.mapv(|v| v as f32);
        let f32fit = GmmParams::new(3)
            .max_iter(15)
            .tol(0.0)
            .fit(x32.view())
            .unwrap();
        for (a, b) in f64fit.log_likelihood.iter().zip(&f32fit.log_likelihood) {
            assert!((a - b).abs() < 1e-5 * a.abs(), "{a} vs {b}");
        }
        let (g, h) = (&f64fit.model, &f32fit.model);
        for (a, b) in g.means().iter().zip(h.means()) {
            assert!((a - *b as f64).abs() < 1e-4 * (1.0 + a.abs()));
        }
        for (a, b) in g.variances().iter().zip(h.variances()) {
            assert!((a - *b as f64).abs() < 1e-3 * a);
        }
    }

    #[test]
    fn em_step_equals_update_from_statistics() {
        let x = uniform(800, 3, 6);
        let init: DiagGmm<f64> = GmmParams::new(4)
            .initial_model(x.view(), &mut ChaCha8Rng::seed_from_u64(1))
            .unwrap();
        let fit = GmmParams::new(4)
            .init(GmmInit::Given(init.clone()))
            .max_iter(1)
            .fit(x.view())
            .unwrap();
        let st = init.sufficient_statistics(x.view()).unwrap();
        let by_hand = init
            .update_from_statistics(&st, VarianceFloor::default())
            .unwrap();
        assert_eq!(fit.model, by_hand);
        assert_eq!(fit.log_likelihood.len(), 1);
        let want = init.score(x.view()).unwrap();
        assert!((fit.log_likelihood[0] - want).abs() < 1e-13 * want.abs());
    }

    #[test]
    fn same_seed_same_model_for_any_thread_count() {
        let x = uniform(3000, 4, 7).mapv(|v| v as f32);
        let run = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| {
                    GmmParams::new(5)
                        .n_init(2)
                        .max_iter(10)
                        .fit(x.view())
                        .unwrap()
                })
        };
        let a = run(1);
        assert_eq!(a, run(3));
        let other = GmmParams::new(5)
            .n_init(2)
            .max_iter(10)
            .seed(1)
            .fit(x.view())
            .unwrap();
        assert_ne!(a.model, other.model);
    }

    #[test]
    fn progress_reports_every_iteration() {
        let x = uniform(300, 2, 8);
        let mut seen = Vec::new();
        let fit = GmmParams::new(3)
            .n_init(2)
            .max_iter(5)
            .tol(0.0)
            .fit_with_progress(x.view(), &mut |it| seen.push(*it))
            .unwrap();
        assert_eq!(seen.len(), 10);
        assert_eq!((seen[7].restart, seen[7].iter), (1, 2));
        assert!(seen[0].change.is_infinite());
        assert_eq!(fit.n_iter, 5);
    }

    #[test]
    fn degenerate_data_give_finite_models() {
        // duplicated points, a constant column, fewer distinct points than components
        let x: Array2<f64> = array![
            [1.0, 7.0, 0.0],
            [1.0, 7.0, 0.0],
            [2.0, 7.0, 1.0],
            [2.0, 7.0, 1.0],
            [2.0, 7.0, 1.0],
            [1.0, 7.0, 0.0]
        ];
        for init in [GmmInit::KMeans, GmmInit::Random] {
            for k in 1..=5 {
                let fit = GmmParams::new(k).init(init.clone()).fit(x.view()).unwrap();
                let g = &fit.model;
                assert!(fit.log_likelihood.iter().all(|v| v.is_finite()));
                assert!(g.weights().iter().all(|v| v.is_finite() && *v > 0.0));
                assert!(g.means().iter().all(|v| v.is_finite()));
                assert!(g.variances().iter().all(|v| v.is_finite() && *v > 0.0));
                assert!((g.weights().sum() - 1.0).abs() < 1e-12);
                // the constant column's mean is exact
                assert!(g.means().column(1).iter().all(|&m| (m - 7.0).abs() < 1e-12));
                assert!(g.score(x.view()).unwrap().is_finite());
            }
        }
        // all rows identical
        let same = Array2::from_elem((4, 2), 3.0f32);
        let fit = GmmParams::new(2).fit(same.view()).unwrap();
        assert!(fit
            .model
            .variances()
            .iter()
            .all(|v| v.is_finite() && *v > 0.0));
        assert!(fit.model.means().iter().all(|&m| (m - 3.0).abs() < 1e-2));
    }

    #[test]
    fn starved_component_is_reseeded_during_fit() {
        let x = uniform(500, 3, 10);
        // component 2 sits far from every row: its responsibilities vanish
        let init = DiagGmm::new(
            array![0.4, 0.4, 0.2],
            array![[0.3, 0.5, 0.5], [0.7, 0.5, 0.5], [1e3, 1e3, 1e3]],
            Array2::from_elem((3, 3), 0.05),
        )
        .unwrap();
        let mut events = Vec::new();
        let fit = GmmParams::new(3)
            .init(GmmInit::Given(init))
            .max_iter(20)
            .fit_with_progress(x.view(), &mut |it| events.push(it.reseeded))
            .unwrap();
        assert_eq!(events[0], 1);
        assert!(events[1..].iter().all(|&r| r == 0));
        let g = &fit.model;
        assert!(g.means().iter().all(|&m| (-0.1..1.1).contains(&m)));
        assert!(g.weights().iter().all(|&w| w > 0.05));
        assert!(fit.log_likelihood.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn invalid_inputs_are_clear_errors() {
        let x = uniform(10, 2, 9);
        let msg = |p: GmmParams<f64>, x: ArrayView2<f64>| p.fit(x).unwrap_err().to_string();
        assert!(msg(GmmParams::new(0), x.view()).contains("n_components"));
        assert!(msg(GmmParams::new(11), x.view()).contains("11 components to 10 rows"));
        assert!(msg(GmmParams::new(2).max_iter(0), x.view()).contains("max_iter"));
        assert!(msg(GmmParams::new(2).tol(-1e-3), x.view()).contains("tol"));
        assert!(msg(GmmParams::new(2).n_init(0), x.view()).contains("n_init"));
        assert!(msg(
            GmmParams::new(2).variance_floor(VarianceFloor::Relative(0.0)),
            x.view()
        )
        .contains("variance_floor"));
        assert!(msg(
            GmmParams::new(2).variance_floor(VarianceFloor::Absolute(-1.0)),
            x.view()
        )
        .contains("variance_floor"));
        let mut y = x.clone();
        y[[4, 1]] = f64::NAN;
        assert!(msg(GmmParams::new(2), y.view()).contains("row 4"));
        let g = DiagGmm::new(
            array![1.0],
            array![[0.0, 0.0, 0.0]],
            array![[1.0, 1.0, 1.0]],
        )
        .unwrap();
        assert!(msg(GmmParams::new(1).init(GmmInit::Given(g)), x.view()).contains("dimension 3"));
        assert!(msg(GmmParams::new(1), x.slice(ndarray::s![..0, ..])).contains("empty"));
        let _ = Axis(0);
    }
}
