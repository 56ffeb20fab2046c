//! Out-of-core EM of a mixture of factor analysers over data streamed in
//! chunks (see [`crate::stream`]): the MFA half of [`StreamedEm`].

use super::fit::{MfaFit, MfaIteration, MfaParams, ValidMfaParams};
use super::model::Mfa;
use super::stats::MfaStats;
use super::MfaError;
use crate::float::Float;
use crate::stream::{
    em_stopping_rule, no_rows, streamed_em_api, EmSchedule, EmState, EmStep, OnIteration,
    StreamedEm,
};
use ndarray::{Array1, Array2, Array3, ArrayView2};

/// Called after every iteration of [`MfaParams::fit_streaming`] with the
/// report and the new state; an error stops the fit.
pub type OnMfaIteration<'a, F, E> = OnIteration<'a, MfaIteration, Mfa<F>, E>;

/// Where a (streamed) MFA EM run stands after some iterations: what a
/// checkpoint holds, and all that [`MfaParams::fit_streaming`] needs to
/// resume (see [`EmState`]; the history is as in [`MfaFit`]).
pub type MfaEmState<F> = EmState<Mfa<F>>;

impl<F: Float> EmState<Mfa<F>> {
    /// Rebuilds a state from saved parameters — weights (K), means (K, D),
    /// loadings (K, D, R), psi (1, D) or (K, D), validated as by [`Mfa::new`]
    /// — keeping the weights bit for bit (no renormalisation) so that a
    /// resumed fit continues exactly. The history must be non-empty and finite.
    pub fn from_parts(
        weights: Array1<F>,
        means: Array2<F>,
        loadings: Array3<F>,
        psi: Array2<F>,
        log_likelihood: Vec<f64>,
        converged: bool,
    ) -> Result<Self, MfaError> {
        let reason = |reason| MfaError::InvalidHyperParameter {
            name: "resume",
            reason,
        };
        Self::resumed(log_likelihood, converged, reason, || {
            Mfa::new(
                weights.clone(),
                means.clone(),
                loadings.clone(),
                psi.clone(),
            )?;
            Mfa::from_valid(weights, means, loadings, psi)
        })
    }
}

streamed_em_api! {
    impl[] MfaParams => ValidMfaParams, fn[F: Float, E: From<MfaError>] {
        model: Mfa<F>, stats: MfaStats, report: MfaIteration, fit: MfaFit<F>,
        stats_of: Some,
    }
    /// EM over data too large for memory, streamed by `pass` (see
    /// [`crate::stream`]), as [`crate::gmm::GmmParams::fit_streaming`]: one
    /// pass to count and check the rows and draw a seeded uniform sample of at
    /// most `init_sample` rows (all of them, in order, when N ≤ `init_sample`)
    /// on which each restart is initialised as by [`MfaParams::fit`]
    /// (k-means + PPCA); then one pass per iteration summing the chunks'
    /// [`MfaStats`], the M-step ([`Mfa::update_from_statistics`]) and the
    /// stopping rule of [`MfaParams::fit`]. `resume` (needs `n_init` = 1)
    /// continues a saved run bit for bit; `on_iter` is called after every
    /// M-step with the report and the new state, and its errors, like those
    /// of `pass`, stop the fit. The settings are checked first
    /// ([`MfaParams::check`], then [`ValidMfaParams::fit_streaming`]).
    ///
    /// ```
    /// use fisherkit::mfa::{MfaError, MfaParams};
    /// use fisherkit::stream::ChunkVisitor;
    /// use ndarray::{s, Array2};
    /// // 200 rows in 3-D, two clusters
    /// let x = Array2::from_shape_fn((200, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f64 + 20.0 * (i % 2) as f64);
    /// let p = MfaParams::new(2, 1).max_iter(10).tol(0.0);
    /// // every pass: two chunks, of 150 and 50 rows
    /// let mut pass = |v: &mut ChunkVisitor<'_, f64, MfaError>| {
    ///     v(x.slice(s![..150, ..]))?;
    ///     v(x.slice(s![150.., ..]))
    /// };
    /// // init_sample ≥ N: initialised on all rows, in order, as the in-memory fit
    /// let streamed = p.fit_streaming(&mut pass, 200, None, &mut |_, _| Ok(())).unwrap();
    /// let in_memory = p.fit(x.view()).unwrap();
    /// // the same iterations; the chunks only group the E-step sums differently
    /// assert_eq!(streamed.n_iter, in_memory.n_iter);
    /// for (a, b) in streamed.log_likelihood.iter().zip(&in_memory.log_likelihood) {
    ///     assert!((a - b).abs() < 1e-12 * b.abs(), "{a} vs {b}");
    /// }
    /// for (a, b) in streamed.model.means().iter().zip(in_memory.model.means()) {
    ///     assert!((a - b).abs() < 1e-10 * (1.0 + b.abs()), "{a} vs {b}");
    /// }
    /// // the data as one chunk: the in-memory fit, bit for bit
    /// let one = p.fit_streaming::<f64, MfaError>(&mut |v| v(x.view()), 200, None, &mut |_, _| Ok(())).unwrap();
    /// assert_eq!(one.model, in_memory.model);
    /// assert_eq!(one.log_likelihood, in_memory.log_likelihood);
    /// ```
    fn fit_streaming;

    /// EM whose E-step runs elsewhere (a cluster's map-reduce over shards),
    /// as [`crate::gmm::GmmParams::fit_from_statistics`]: from the model
    /// `start` (K, R and Ψ mode as these parameters; the initialisation
    /// settings play no part), each iteration calls `statistics_of(model)`
    /// for the merged [`Mfa::sufficient_statistics`] of every row under
    /// `model`, then runs the M-step ([`Mfa::update_from_statistics`], which
    /// refuses statistics of another model) and the stopping rule of
    /// [`MfaParams::fit`], until convergence or `max_iter` iterations. The
    /// settings are checked first ([`MfaParams::check`], then
    /// [`ValidMfaParams::fit_from_statistics`]).
    ///
    /// ```
    /// use fisherkit::mfa::{MfaError, MfaParams};
    /// use ndarray::{s, Array2};
    /// let x = Array2::from_shape_fn((200, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f64 + 20.0 * (i % 2) as f64);
    /// let p = MfaParams::new(2, 1).max_iter(10).tol(0.0);
    /// let start = p.clone().max_iter(1).fit(x.view()).unwrap().model;
    /// let fit = p
    ///     .fit_from_statistics::<f64, MfaError>(
    ///         start,
    ///         &mut |m| {
    ///             let mut st = m.sufficient_statistics(x.slice(s![..120, ..]))?;
    ///             st.merge(&m.sufficient_statistics(x.slice(s![120.., ..]))?)?;
    ///             Ok(st)
    ///         },
    ///         &mut |_, _| Ok(()),
    ///     )
    ///     .unwrap();
    /// assert_eq!(fit.n_iter, 10);
    /// // EM never lowers the likelihood
    /// assert!(fit.log_likelihood.windows(2).all(|w| w[1] >= w[0] - 1e-9));
    /// ```
    fn fit_from_statistics;

    /// EM over data streamed by `pass`; see [`MfaParams::fit_streaming`].
    /// Errors: those of the data, the passes, `init_sample` < K and
    /// `resume` (a saved model of another K, R or Ψ mode, or `n_init` > 1).
    valid fn fit_streaming;

    /// EM with the E-step's statistics computed elsewhere; see
    /// [`MfaParams::fit_from_statistics`]. Errors: a starting model of
    /// another K, R or Ψ mode, statistics of another model, and those of
    /// `statistics_of` and `on_iter`.
    valid fn fit_from_statistics;
}

impl<F: Float> StreamedEm<F> for ValidMfaParams {
    type Model = Mfa<F>;
    /// `None` until a non-empty chunk was seen.
    type Stats = Option<MfaStats>;
    type Report = MfaIteration;
    type Error = MfaError;

    fn schedule(&self) -> EmSchedule {
        EmSchedule {
            n_components: self.n_components,
            n_init: self.n_init,
            max_iter: self.max_iter,
            seed: self.seed,
        }
    }

    fn hyper_error(name: &'static str, reason: String) -> MfaError {
        MfaError::InvalidHyperParameter { name, reason }
    }

    fn check_model(&self, m: &Mfa<F>, name: &'static str) -> Result<(), MfaError> {
        if m.n_components() != self.n_components
            || m.n_factors() != self.n_factors
            || m.psi_mode() != self.psi_mode
        {
            return Err(MfaError::InvalidHyperParameter {
                name,
                reason: format!(
                    "the {} model has K = {}, R = {}, {:?} psi; expected K = {}, R = {}, {:?} psi",
                    if name == "resume" { "saved" } else { "given" },
                    m.n_components(),
                    m.n_factors(),
                    m.psi_mode(),
                    self.n_components,
                    self.n_factors,
                    self.psi_mode
                ),
            });
        }
        Ok(())
    }

    /// Nothing to check here: the M-step ([`Mfa::update_from_statistics`])
    /// refuses statistics of another shape, Ψ mode or reference point.
    fn check_stats(_: &Mfa<F>, _: &Option<MfaStats>) -> Result<(), MfaError> {
        Ok(())
    }

    fn check_sample(&self, n_rows: usize, sample: ArrayView2<'_, F>) -> Result<(), MfaError> {
        if n_rows == 0 {
            return Err(no_rows().into());
        }
        self.check_data(n_rows, sample.ncols())
    }

    fn start_model(&self, sample: ArrayView2<'_, F>, restart: usize) -> Result<Mfa<F>, MfaError> {
        self.initial_model(sample, restart)
    }

    fn model_dim(model: &Mfa<F>) -> usize {
        model.dim()
    }

    fn stats_zero(&self, _: &Mfa<F>) -> Option<MfaStats> {
        None
    }

    fn stats_add(
        model: &Mfa<F>,
        stats: &mut Option<MfaStats>,
        x: ArrayView2<'_, F>,
    ) -> Result<(), MfaError> {
        if x.nrows() == 0 {
            return Ok(());
        }
        let st = model.sufficient_statistics(x)?;
        match stats {
            None => *stats = Some(st),
            Some(t) => t.merge(&st)?,
        }
        Ok(())
    }

    /// [`Mfa::update_from_statistics`] with the psi floor; stops by
    /// [`em_stopping_rule`] with the M-step's count of re-seeded components.
    fn em_step(
        &self,
        state: &MfaEmState<F>,
        stats: Option<MfaStats>,
        restart: usize,
    ) -> Result<EmStep<Mfa<F>, MfaIteration>, MfaError> {
        let Some(st) = stats else {
            return Err(no_rows().into());
        };
        let ll = st.log_likelihood() / st.n_rows() as f64;
        let (model, reseeded) = state
            .model
            .update_from_statistics_reseeded(&st, self.psi_floor)?;
        let (change, converged) = em_stopping_rule(&state.log_likelihood, ll, self.tol, reseeded);
        Ok(EmStep {
            model,
            log_likelihood: ll,
            converged,
            report: MfaIteration {
                restart,
                iter: state.n_iter(),
                log_likelihood: ll,
                change,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mfa::PsiMode;
    use ndarray::Axis;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn data(n: usize, d: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |(i, j)| {
            rng.random::<f64>() + 2.0 * ((i % 3) * (j % 2)) as f64
        })
    }

    fn streamed(
        p: &MfaParams,
        x: &Array2<f64>,
        chunk: usize,
        init_sample: usize,
        resume: Option<MfaEmState<f64>>,
        on_iter: &mut OnMfaIteration<'_, f64, MfaError>,
    ) -> Result<MfaFit<f64>, MfaError> {
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

    fn same(a: &Mfa<f64>, b: &Mfa<f64>, tol: f64) {
        for (u, v) in a.means().iter().zip(b.means()) {
            assert!((u - v).abs() <= tol * (1.0 + u.abs()), "{u} vs {v}");
        }
        for (u, v) in a.loadings().iter().zip(b.loadings()) {
            assert!((u - v).abs() <= tol * (1.0 + u.abs()), "{u} vs {v}");
        }
        for (u, v) in a.psi().iter().zip(b.psi()) {
            assert!((u - v).abs() <= tol * u.abs(), "{u} vs {v}");
        }
    }

    #[test]
    fn statistics_from_elsewhere_continue_a_fit_bit_for_bit() {
        let x = data(500, 4, 6);
        for mode in [PsiMode::Shared, PsiMode::PerComponent] {
            let p = MfaParams::new(3, 2)
                .psi_mode(mode)
                .max_iter(8)
                .tol(0.0)
                .seed(3);
            let mut states = Vec::new();
            let full = streamed(&p, &x, 500, 1000, None, &mut |_, s| {
                states.push(s.clone());
                Ok(())
            })
            .unwrap();
            // from the model after iteration 1, seven iterations with the
            // whole data as the one "shard" give the uninterrupted run's model
            let ours = p
                .clone()
                .max_iter(7)
                .fit_from_statistics::<f64, MfaError>(
                    states[0].model.clone(),
                    &mut |m| m.sufficient_statistics(x.view()),
                    &mut |_, _| Ok(()),
                )
                .unwrap();
            assert_eq!(ours.model, full.model);
            assert_eq!(ours.log_likelihood[..], full.log_likelihood[1..]);
            // two shards: the same sums grouped differently
            let sharded = p
                .clone()
                .max_iter(7)
                .fit_from_statistics::<f64, MfaError>(
                    states[0].model.clone(),
                    &mut |m| {
                        let mut st = m.sufficient_statistics(x.slice(ndarray::s![..123, ..]))?;
                        st.merge(&m.sufficient_statistics(x.slice(ndarray::s![123.., ..]))?)?;
                        Ok(st)
                    },
                    &mut |_, _| Ok(()),
                )
                .unwrap();
            same(&sharded.model, &full.model, 1e-9);
        }
    }

    #[test]
    fn statistics_from_elsewhere_must_come_from_the_model_asked() {
        let x = data(300, 4, 7);
        let p = MfaParams::new(2, 1).max_iter(5);
        let start = p.fit(x.view()).unwrap().model;
        let other = MfaParams::new(2, 1)
            .seed(9)
            .max_iter(2)
            .fit(x.view())
            .unwrap()
            .model;
        let e = p
            .fit_from_statistics::<f64, MfaError>(
                start.clone(),
                &mut |_| other.sufficient_statistics(x.view()),
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(matches!(e, MfaError::StatisticsMismatch(_)), "{e}");
        let e = MfaParams::new(2, 2)
            .fit_from_statistics::<f64, MfaError>(
                start,
                &mut |m| m.sufficient_statistics(x.view()),
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("`start`")
                && e.to_string().contains("given model has K = 2, R = 1"),
            "{e}"
        );
    }

    #[test]
    fn streamed_fit_matches_the_in_memory_fit() {
        let x = data(600, 5, 1);
        for mode in [PsiMode::Shared, PsiMode::PerComponent] {
            let p = MfaParams::new(3, 2).psi_mode(mode).max_iter(10).seed(4);
            let a = p.fit(x.view()).unwrap();
            for chunk in [600, 97] {
                let b = streamed(&p, &x, chunk, 1000, None, &mut |_, _| Ok(())).unwrap();
                assert_eq!(a.n_iter, b.n_iter);
                same(&a.model, &b.model, 1e-9);
                for (u, v) in a.log_likelihood.iter().zip(&b.log_likelihood) {
                    assert!((u - v).abs() < 1e-11 * u.abs(), "{u} vs {v}");
                }
            }
        }
    }

    #[test]
    fn resuming_gives_the_same_model() {
        let x = data(500, 4, 2);
        let p = MfaParams::new(2, 1).max_iter(8).tol(0.0).seed(3);
        let mut states = Vec::new();
        let full = streamed(&p, &x, 64, 200, None, &mut |_, s| {
            states.push(s.clone());
            Ok(())
        })
        .unwrap();
        assert_eq!(states.len(), 8);
        for s in [&states[0], &states[4]] {
            let (w, m, l, ps) = s.model.clone().into_parts();
            let st =
                MfaEmState::from_parts(w, m, l, ps, s.log_likelihood.clone(), s.converged).unwrap();
            let r = streamed(&p, &x, 64, 200, Some(st), &mut |_, _| Ok(())).unwrap();
            assert_eq!(r.model, full.model);
            assert_eq!(r.log_likelihood, full.log_likelihood);
        }
        let e = streamed(&p, &x, 64, 1, None, &mut |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("init_sample"), "{e}");
    }
}
