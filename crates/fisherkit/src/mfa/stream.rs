//! Out-of-core EM of a mixture of factor analysers over data streamed in
//! chunks (see [`crate::stream`]).

use super::fit::{MfaFit, MfaIteration, MfaParams};
use super::init::init_mfa;
use super::model::Mfa;
use super::stats::MfaStats;
use super::MfaError;
use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::stream::{DataPass, Reservoir};
use ndarray::{Array1, Array2, Array3};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Called after every iteration of [`MfaParams::fit_streaming`] with the
/// report and the new state; an error stops the fit.
pub type OnMfaIteration<'a, F, E> = dyn FnMut(&MfaIteration, &MfaEmState<F>) -> Result<(), E> + 'a;

/// Where a (streamed) MFA EM run stands after some iterations: what a
/// checkpoint holds, and all that [`MfaParams::fit_streaming`] needs to resume.
#[derive(Debug, Clone)]
pub struct MfaEmState<F: Float> {
    /// The model after the last completed M-step.
    pub model: Mfa<F>,
    /// Mean log-likelihood per row of each completed iteration (see [`MfaFit`]).
    pub log_likelihood: Vec<f64>,
    /// Whether the stopping rule was met at the last completed iteration.
    pub converged: bool,
}

impl<F: Float> MfaEmState<F> {
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
        Mfa::new(
            weights.clone(),
            means.clone(),
            loadings.clone(),
            psi.clone(),
        )?;
        if log_likelihood.is_empty() || log_likelihood.iter().any(|v| !v.is_finite()) {
            return Err(MfaError::InvalidHyperParameter {
                name: "resume",
                reason: "the log-likelihood history must be non-empty and finite".into(),
            });
        }
        Ok(Self {
            model: Mfa::from_valid(weights, means, loadings, psi)?,
            log_likelihood,
            converged,
        })
    }

    /// Number of completed EM iterations.
    pub fn n_iter(&self) -> usize {
        self.log_likelihood.len()
    }
}

impl MfaParams {
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
    /// of `pass`, stop the fit.
    pub fn fit_streaming<F: Float, E: From<MfaError>>(
        &self,
        pass: &mut DataPass<'_, F, E>,
        init_sample: usize,
        resume: Option<MfaEmState<F>>,
        on_iter: &mut OnMfaIteration<'_, F, E>,
    ) -> Result<MfaFit<F>, E> {
        let k = self.n_components;
        self.validate_hyper()?;
        if let Some(state) = resume {
            if self.n_init != 1 {
                return Err(MfaError::InvalidHyperParameter {
                    name: "n_init",
                    reason: "resuming a fit needs n_init = 1".into(),
                }
                .into());
            }
            let m = &state.model;
            if m.n_components() != k
                || m.n_factors() != self.n_factors
                || m.psi_mode() != self.psi_mode
            {
                return Err(MfaError::InvalidHyperParameter {
                    name: "resume",
                    reason: format!(
                        "the saved model has K = {}, R = {}, {:?} psi; expected K = {k}, R = {}, {:?} psi",
                        m.n_components(),
                        m.n_factors(),
                        m.psi_mode(),
                        self.n_factors,
                        self.psi_mode
                    ),
                }
                .into());
            }
            return self.stream_em(pass, state, 0, on_iter);
        }
        if init_sample < k {
            return Err(MfaError::InvalidHyperParameter {
                name: "init_sample",
                reason: format!("must be at least the number of components {k}, got {init_sample}"),
            }
            .into());
        }
        let mut sample = Reservoir::<F>::new(init_sample, self.seed);
        let mut dim = None;
        pass(&mut |x| {
            check_chunk(x, &mut dim).map_err(MfaError::from)?;
            sample.push(x);
            Ok(())
        })?;
        let n = sample.seen();
        let sample = sample.into_matrix();
        if n == 0 {
            return Err(MfaError::Data(DataError::Empty {
                what: "training data",
            })
            .into());
        }
        self.validate(n, sample.ncols())?;
        let mut best: Option<MfaFit<F>> = None;
        for restart in 0..self.n_init {
            let mut rng = ChaCha8Rng::seed_from_u64(
                self.seed
                    .wrapping_add((restart as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            );
            let model = init_mfa(
                sample.view(),
                self.n_components,
                self.n_factors,
                self.psi_mode,
                self.psi_floor,
                &mut rng,
            )?;
            let state = MfaEmState {
                model,
                log_likelihood: Vec::new(),
                converged: false,
            };
            let fit = self.stream_em(pass, state, restart, on_iter)?;
            let better = match &best {
                None => true,
                Some(b) => fit.log_likelihood.last() > b.log_likelihood.last(),
            };
            if better {
                best = Some(fit);
            }
        }
        Ok(best.expect("n_init >= 1"))
    }

    fn stream_em<F: Float, E: From<MfaError>>(
        &self,
        pass: &mut DataPass<'_, F, E>,
        mut state: MfaEmState<F>,
        restart: usize,
        on_iter: &mut OnMfaIteration<'_, F, E>,
    ) -> Result<MfaFit<F>, E> {
        let d = state.model.dim();
        while !state.converged && state.log_likelihood.len() < self.max_iter {
            let iter = state.log_likelihood.len();
            let model = &state.model;
            let mut total: Option<MfaStats> = None;
            let mut dim = Some(d);
            pass(&mut |x| {
                check_chunk(x, &mut dim).map_err(MfaError::from)?;
                if x.nrows() == 0 {
                    return Ok(());
                }
                let st = model.sufficient_statistics(x)?;
                match &mut total {
                    None => total = Some(st),
                    Some(t) => t.merge(&st)?,
                }
                Ok(())
            })?;
            let Some(st) = total else {
                return Err(MfaError::Data(DataError::Empty {
                    what: "training data",
                })
                .into());
            };
            let ll = st.log_likelihood() / st.n_rows() as f64;
            let rel = match state.log_likelihood.last() {
                None => f64::INFINITY,
                Some(prev) => (ll - prev).abs() / prev.abs().max(f64::MIN_POSITIVE),
            };
            state.model = state.model.update_from_statistics(&st, self.psi_floor)?;
            state.log_likelihood.push(ll);
            state.converged = rel <= self.tol;
            on_iter(
                &MfaIteration {
                    restart,
                    iter,
                    log_likelihood: ll,
                    rel_change: rel,
                },
                &state,
            )?;
        }
        Ok(MfaFit {
            model: state.model,
            n_iter: state.log_likelihood.len(),
            log_likelihood: state.log_likelihood,
            converged: state.converged,
        })
    }
}

/// Checks a chunk: width equal to the first chunk's, finite values.
fn check_chunk<F: Float>(
    x: ndarray::ArrayView2<'_, F>,
    dim: &mut Option<usize>,
) -> Result<(), DataError> {
    if x.nrows() == 0 {
        return Ok(());
    }
    check_matrix(x, *dim, "training data")?;
    *dim = Some(x.ncols());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mfa::PsiMode;
    use ndarray::Axis;
    use rand::Rng;

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
