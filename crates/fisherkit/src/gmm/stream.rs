//! Out-of-core EM of a diagonal GMM over data streamed in chunks
//! (see [`crate::stream`]): the GMM half of [`StreamedEm`].

use super::fit::{EmIteration, GmmFit, GmmInit, GmmParams, ValidGmmParams};
use super::model::DiagGmm;
use super::stats::{m_step, GmmStats};
use super::GmmError;
use crate::float::Float;
use crate::stream::{
    em_stopping_rule, no_rows, streamed_em_api, EmSchedule, EmState, EmStep, OnIteration,
    StreamedEm,
};
use ndarray::{Array1, Array2, ArrayView2};

/// Called after every iteration of [`GmmParams::fit_streaming`] with the
/// report and the new state; an error stops the fit.
pub type OnGmmIteration<'a, F, E> = OnIteration<'a, EmIteration, DiagGmm<F>, E>;

/// Where a (streamed) EM run of a diagonal GMM stands after some iterations:
/// what a checkpoint holds, and all that [`GmmParams::fit_streaming`] needs
/// to resume (see [`EmState`]; the history is as in [`GmmFit`]).
pub type GmmEmState<F> = EmState<DiagGmm<F>>;

impl<F: Float> EmState<DiagGmm<F>> {
    /// Rebuilds a state from saved parameters — weights (K), means (K, D),
    /// variances (K, D), validated as by [`DiagGmm::new`] — but keeps the
    /// weights bit for bit (no renormalisation), so that a resumed fit
    /// continues exactly as the interrupted one would have. The history must
    /// be finite and non-empty.
    pub fn from_parts(
        weights: Array1<F>,
        means: Array2<F>,
        variances: Array2<F>,
        log_likelihood: Vec<f64>,
        converged: bool,
    ) -> Result<Self, GmmError> {
        let reason = |reason| GmmError::InvalidHyperParameter {
            name: "resume",
            reason,
        };
        Self::resumed(log_likelihood, converged, reason, || {
            DiagGmm::new(weights.clone(), means.clone(), variances.clone())?;
            Ok(DiagGmm::from_valid(weights, means, variances))
        })
    }
}

streamed_em_api! {
    impl[F: Float] GmmParams<F> => ValidGmmParams<F>, fn[E: From<GmmError>] {
        model: DiagGmm<F>, stats: GmmStats, report: EmIteration, fit: GmmFit<F>,
        stats_of: |s| s,
    }
    /// EM over data too large for memory, streamed by `pass` (see
    /// [`crate::stream`]: every call feeds the visitor all rows, in chunks
    /// (n_c, D), in the same order).
    ///
    /// 1. Unless resuming: one pass counts the rows N, checks them, and keeps
    ///    a uniform sample of at most `init_sample` rows (reservoir sampling,
    ///    seeded; all rows, in order, when N ≤ `init_sample`). Each restart is
    ///    initialised on the sample exactly as [`GmmParams::fit`] initialises
    ///    on the data (k-means or random).
    /// 2. Each EM iteration is one pass: the statistics of the chunks
    ///    ([`DiagGmm::sufficient_statistics`]) are merged in chunk order, then
    ///    the M-step; the mean log-likelihood and the stopping rule are those
    ///    of [`GmmParams::fit`] (the variance floor's data variance comes from
    ///    the merged statistics, i.e. from all N rows). So with
    ///    `init_sample` ≥ N and a single chunk the result equals
    ///    [`GmmParams::fit`]'s bit for bit; with several chunks the sums are
    ///    only grouped differently.
    ///
    /// `resume`: continue a run from a saved [`GmmEmState`] (requires
    /// `n_init` = 1); with the same data, chunks and parameters the final
    /// model is bit-identical to the uninterrupted run's. `on_iter` is called
    /// after every iteration with the report and the new state (to save
    /// checkpoints); an error from it, or from `pass`, stops the fit and is
    /// returned. Errors of the fit itself are converted with `E: From<GmmError>`;
    /// the settings are checked first ([`GmmParams::check`], then
    /// [`ValidGmmParams::fit_streaming`]).
    ///
    /// ```
    /// use fisherkit::gmm::{GmmError, GmmParams};
    /// use fisherkit::stream::ChunkVisitor;
    /// use ndarray::{s, Array2};
    /// // 120 rows in two clusters, near (0.5, 0.5) and (6.5, 6.5)
    /// let x = Array2::from_shape_fn((120, 2), |(i, j)| 6.0 * (i % 2) as f64 + ((i * 7 + j * 3) % 11) as f64 / 11.0);
    /// let p = GmmParams::new(2).max_iter(20).tol(0.0);
    /// // every pass: two chunks, of 80 and 40 rows
    /// let mut pass = |v: &mut ChunkVisitor<'_, f64, GmmError>| {
    ///     v(x.slice(s![..80, ..]))?;
    ///     v(x.slice(s![80.., ..]))
    /// };
    /// // init_sample ≥ N: initialised on all rows, in order, as the in-memory fit
    /// let streamed = p.fit_streaming(&mut pass, 120, None, &mut |_, _| Ok(())).unwrap();
    /// let in_memory = p.fit(x.view()).unwrap();
    /// // the same iterations; the chunks only group the E-step sums differently
    /// assert_eq!(streamed.n_iter, in_memory.n_iter);
    /// for (a, b) in streamed.model.means().iter().zip(in_memory.model.means()) {
    ///     assert!((a - b).abs() < 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
    /// }
    /// // the data as one chunk: the in-memory fit, bit for bit
    /// let one = p.fit_streaming::<GmmError>(&mut |v| v(x.view()), 120, None, &mut |_, _| Ok(())).unwrap();
    /// assert_eq!(one, in_memory);
    /// ```
    fn fit_streaming;

    /// EM whose E-step runs elsewhere — a cluster's map-reduce over shards,
    /// a database — from the model `start` (K components as these
    /// parameters; `init`, `n_init` and `seed` play no part): each iteration
    /// calls `statistics_of(model)` for the merged
    /// [`DiagGmm::sufficient_statistics`] of every row under `model`, then
    /// runs the M-step and the stopping rule of [`GmmParams::fit`], until
    /// convergence or `max_iter` iterations. Statistics of the wrong K or D
    /// are an error. `on_iter` is called after every iteration; its errors,
    /// like those of `statistics_of`, stop the fit. The settings are checked
    /// first ([`GmmParams::check`], then [`ValidGmmParams::fit_from_statistics`]).
    ///
    /// ```
    /// use fisherkit::gmm::{GmmError, GmmParams};
    /// use ndarray::{array, s, Axis};
    /// let x = array![[0.0f64, 0.1], [0.2, 0.0], [0.1, 0.3], [5.0, 5.1], [5.2, 4.9], [4.9, 5.0]];
    /// let p = GmmParams::new(2).max_iter(20);
    /// let start = p.fit(x.slice(s![..4, ..])).unwrap().model; // any starting model
    /// // the E-step over two shards, merged
    /// let fit = p
    ///     .fit_from_statistics::<GmmError>(
    ///         start.clone(),
    ///         &mut |m| {
    ///             let mut st = m.sufficient_statistics(x.slice(s![..3, ..]))?;
    ///             st.merge(&m.sufficient_statistics(x.slice(s![3.., ..]))?)?;
    ///             Ok(st)
    ///         },
    ///         &mut |_, _| Ok(()),
    ///     )
    ///     .unwrap();
    /// // the same iterations as in-memory EM from the same start
    /// let whole = p.clone().init(fisherkit::gmm::GmmInit::Given(start)).fit(x.view()).unwrap();
    /// assert_eq!(fit.n_iter, whole.n_iter);
    /// for (a, b) in fit.model.means().iter().zip(whole.model.means()) {
    ///     assert!((a - b).abs() < 1e-12);
    /// }
    /// ```
    fn fit_from_statistics;

    /// EM over data streamed by `pass`; see [`GmmParams::fit_streaming`].
    /// Errors: those of the data, the passes, `init_sample` < K and
    /// `resume` (a saved model of another K, or `n_init` > 1).
    valid fn fit_streaming;

    /// EM with the E-step's statistics computed elsewhere; see
    /// [`GmmParams::fit_from_statistics`]. Errors: a starting model of
    /// another K, statistics of another K or D, and those of `statistics_of`
    /// and `on_iter`.
    valid fn fit_from_statistics;
}

impl<F: Float> StreamedEm<F> for ValidGmmParams<F> {
    type Model = DiagGmm<F>;
    type Stats = GmmStats;
    type Report = EmIteration;
    type Error = GmmError;

    fn schedule(&self) -> EmSchedule {
        EmSchedule {
            n_components: self.n_components(),
            // a given starting model makes every restart the same
            n_init: match self.init {
                GmmInit::Given(_) => 1,
                _ => self.n_init,
            },
            max_iter: self.max_iter,
            seed: self.seed,
        }
    }

    fn hyper_error(name: &'static str, reason: String) -> GmmError {
        GmmError::InvalidHyperParameter { name, reason }
    }

    fn check_model(&self, model: &DiagGmm<F>, name: &'static str) -> Result<(), GmmError> {
        let k = self.n_components();
        if model.n_components() != k {
            return Err(GmmError::InvalidHyperParameter {
                name,
                reason: format!(
                    "the {} model has {} components, expected {k}",
                    if name == "resume" { "saved" } else { "given" },
                    model.n_components()
                ),
            });
        }
        Ok(())
    }

    fn check_stats(model: &DiagGmm<F>, stats: &GmmStats) -> Result<(), GmmError> {
        let (k, d) = (model.n_components(), model.dim());
        if (stats.n_components(), stats.dim()) != (k, d) {
            return Err(GmmError::InvalidStatistics(format!(
                "statistics of {} components in dimension {} do not fit a model of {k} components in dimension {d}",
                stats.n_components(),
                stats.dim()
            )));
        }
        Ok(())
    }

    fn check_sample(&self, n_rows: usize, sample: ArrayView2<'_, F>) -> Result<(), GmmError> {
        let k = self.n_components();
        if n_rows < k {
            return Err(GmmError::TooFewRows {
                n_rows,
                n_components: k,
            });
        }
        self.check_data(sample)
    }

    /// As [`GmmParams::fit`]: restart r draws from stream r of the seed.
    fn start_model(
        &self,
        sample: ArrayView2<'_, F>,
        restart: usize,
    ) -> Result<DiagGmm<F>, GmmError> {
        self.initial_model(sample, &mut self.restart_rng(restart))
    }

    fn model_dim(model: &DiagGmm<F>) -> usize {
        model.dim()
    }

    /// Statistics centred on the model's mixture mean, as in [`GmmParams::fit`].
    fn stats_zero(&self, model: &DiagGmm<F>) -> GmmStats {
        GmmStats::zeros(model.n_components(), model.center().mapv(|v| v.as_f64()))
    }

    fn stats_add(
        model: &DiagGmm<F>,
        stats: &mut GmmStats,
        x: ArrayView2<'_, F>,
    ) -> Result<(), GmmError> {
        stats.merge(&model.statistics_unchecked(x))
    }

    /// The M-step with the variance floor; stops by [`em_stopping_rule`] with
    /// the M-step's count of re-seeded components.
    fn em_step(
        &self,
        state: &GmmEmState<F>,
        stats: GmmStats,
        restart: usize,
    ) -> Result<EmStep<DiagGmm<F>, EmIteration>, GmmError> {
        if stats.n_rows() == 0.0 {
            return Err(no_rows().into());
        }
        let ll = stats.mean_log_likelihood();
        let m = m_step(&stats, self.variance_floor)?;
        let (change, converged) = em_stopping_rule(&state.log_likelihood, ll, self.tol, m.reseeded);
        Ok(EmStep {
            model: m.model,
            log_likelihood: ll,
            converged,
            report: EmIteration {
                restart,
                iter: state.n_iter(),
                log_likelihood: ll,
                change,
                reseeded: m.reseeded,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gmm::GmmInit;
    use ndarray::{s, Axis};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn data(n: usize, d: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |(i, _)| rng.random::<f64>() + 3.0 * (i % 4) as f64)
    }

    fn streamed(
        p: &GmmParams<f64>,
        x: &Array2<f64>,
        chunk: usize,
        init_sample: usize,
        resume: Option<GmmEmState<f64>>,
        on_iter: &mut OnGmmIteration<'_, f64, GmmError>,
    ) -> Result<GmmFit<f64>, GmmError> {
        p.fit_streaming(
            &mut |v| {
                for c in x.axis_chunks_iter(Axis(0), chunk) {
                    v(c)?;
                }
                Ok(())
            },
            init_sample,
            resume,
            on_iter,
        )
    }

    #[test]
    fn one_chunk_equals_the_in_memory_fit_bit_for_bit() {
        let x = data(700, 3, 1);
        for init in [GmmInit::KMeans, GmmInit::Random] {
            let p = GmmParams::new(4).init(init).n_init(2).max_iter(15).seed(5);
            let a = p.fit(x.view()).unwrap();
            let b = streamed(&p, &x, 700, 700, None, &mut |_, _| Ok(())).unwrap();
            assert_eq!(a, b);
            // many chunks: the same sums grouped differently (one restart:
            // restarts reaching the same optimum may tie up to rounding)
            let p = p.n_init(1);
            let a = p.fit(x.view()).unwrap();
            let c = streamed(&p, &x, 64, 10_000, None, &mut |_, _| Ok(())).unwrap();
            assert_eq!(a.n_iter, c.n_iter);
            for (u, v) in a.model.means().iter().zip(c.model.means()) {
                assert!((u - v).abs() < 1e-9 * (1.0 + u.abs()), "{u} vs {v}");
            }
            for (u, v) in a.log_likelihood.iter().zip(&c.log_likelihood) {
                assert!((u - v).abs() < 1e-11 * u.abs(), "{u} vs {v}");
            }
        }
    }

    #[test]
    fn statistics_from_elsewhere_run_the_same_em_as_the_in_memory_fit() {
        let x = data(600, 3, 4);
        let p = GmmParams::new(4).max_iter(30).seed(2);
        let start = p.clone().max_iter(1).fit(x.view()).unwrap().model;
        let whole = p
            .clone()
            .init(GmmInit::Given(start.clone()))
            .fit(x.view())
            .unwrap();
        // the whole data as one "shard": the same computation, bit for bit
        let mut calls = 0;
        let one = p
            .fit_from_statistics::<GmmError>(
                start.clone(),
                &mut |m| {
                    calls += 1;
                    m.sufficient_statistics(x.view())
                },
                &mut |_, _| Ok(()),
            )
            .unwrap();
        assert_eq!(one, whole);
        assert_eq!(calls, whole.n_iter);
        // three shards merged: the same sums grouped differently
        let sharded = p
            .fit_from_statistics::<GmmError>(
                start.clone(),
                &mut |m| {
                    let mut st = m.sufficient_statistics(x.slice(s![..100, ..]))?;
                    st.merge(&m.sufficient_statistics(x.slice(s![100..350, ..]))?)?;
                    st.merge(&m.sufficient_statistics(x.slice(s![350.., ..]))?)?;
                    Ok(st)
                },
                &mut |_, _| Ok(()),
            )
            .unwrap();
        assert_eq!(sharded.n_iter, whole.n_iter);
        for (u, v) in sharded.model.means().iter().zip(whole.model.means()) {
            assert!((u - v).abs() < 1e-10 * (1.0 + u.abs()), "{u} vs {v}");
        }
    }

    #[test]
    fn statistics_from_elsewhere_are_checked_and_errors_stop_the_fit() {
        let x = data(300, 2, 5);
        let p = GmmParams::new(3).max_iter(10).tol(0.0);
        let start = p.fit(x.view()).unwrap().model;
        // statistics of another model's K
        let other = GmmParams::new(2).fit(x.view()).unwrap().model;
        let e = p
            .fit_from_statistics::<GmmError>(
                start.clone(),
                &mut |_| other.sufficient_statistics(x.view()),
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(matches!(e, GmmError::InvalidStatistics(_)), "{e}");
        assert!(e.to_string().contains("2 components in dimension 2"), "{e}");
        // a starting model of the wrong K
        let e = GmmParams::new(2)
            .fit_from_statistics::<GmmError>(
                start.clone(),
                &mut |m| m.sufficient_statistics(x.view()),
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("`start`") && e.to_string().contains("given model has 3"),
            "{e}"
        );
        // the E-step's error, on the fourth call, is returned as it is
        let mut calls = 0;
        let e = p
            .fit_from_statistics::<GmmError>(
                start,
                &mut |m| {
                    calls += 1;
                    if calls == 4 {
                        return Err(GmmError::InvalidStatistics("shard 7 lost".into()));
                    }
                    m.sufficient_statistics(x.view())
                },
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(e.to_string().contains("shard 7 lost"), "{e}");
        assert_eq!(calls, 4);
    }

    #[test]
    fn resuming_from_any_iteration_gives_the_same_model() {
        let x = data(900, 2, 2);
        let p = GmmParams::new(3).max_iter(12).tol(0.0).seed(1);
        let mut states = Vec::new();
        let full = streamed(&p, &x, 100, 300, None, &mut |_, s| {
            states.push(s.clone());
            Ok(())
        })
        .unwrap();
        assert_eq!(states.len(), 12);
        for s in [&states[0], &states[6], &states[11]] {
            let (w, m, v) = s.model.clone().into_parts();
            let st =
                GmmEmState::from_parts(w, m, v, s.log_likelihood.clone(), s.converged).unwrap();
            let resumed = streamed(&p, &x, 100, 300, Some(st), &mut |_, _| Ok(())).unwrap();
            assert_eq!(resumed, full);
        }
    }

    #[test]
    fn interruption_and_errors_propagate() {
        let x = data(300, 2, 3);
        let p = GmmParams::new(3).max_iter(50).tol(0.0);
        let mut n = 0;
        let e = streamed(&p, &x, 50, 300, None, &mut |it, _| {
            n += 1;
            if it.iter == 2 {
                Err(GmmError::InvalidStatistics("stop".into()))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(n, 3);
        assert!(e.to_string().contains("stop"));
        let mut y = x.clone();
        y[[250, 1]] = f64::INFINITY;
        let e = streamed(&p, &y, 50, 300, None, &mut |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("non-finite"), "{e}");
        let e = streamed(&p, &x, 50, 2, None, &mut |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("init_sample"), "{e}");
        let e = streamed(
            &GmmParams::new(3),
            &x.slice(s![..2, ..]).to_owned(),
            50,
            10,
            None,
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(e.to_string().contains("3 components to 2 rows"), "{e}");
        // chunks of different widths
        let e = p
            .fit_streaming(
                &mut |v: &mut crate::stream::ChunkVisitor<'_, f64, GmmError>| {
                    v(x.slice(s![..10, ..]))?;
                    v(x.slice(s![10..20, ..1]))
                },
                100,
                None,
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(e.to_string().contains("1 columns"), "{e}");
    }
}
