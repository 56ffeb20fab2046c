//! Out-of-core EM of a diagonal GMM over data streamed in chunks
//! (see [`crate::stream`]).

use super::fit::{EmIteration, GmmFit, GmmParams};
use super::model::DiagGmm;
use super::stats::{m_step, GmmStats};
use super::GmmError;
use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::stream::{DataPass, Reservoir};
use ndarray::{Array1, Array2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Called after every iteration of [`GmmParams::fit_streaming`] with the
/// report and the new state; an error stops the fit.
pub type OnGmmIteration<'a, F, E> = dyn FnMut(&EmIteration, &GmmEmState<F>) -> Result<(), E> + 'a;

/// Where a (streamed) EM run stands after some iterations: what a checkpoint
/// holds, and all that [`GmmParams::fit_streaming`] needs to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct GmmEmState<F: Float> {
    /// The model after the last completed M-step.
    pub model: DiagGmm<F>,
    /// Mean log-likelihood per row of each completed iteration (see [`GmmFit`]).
    pub log_likelihood: Vec<f64>,
    /// Whether the stopping rule was met at the last completed iteration.
    pub converged: bool,
}

impl<F: Float> GmmEmState<F> {
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
        DiagGmm::new(weights.clone(), means.clone(), variances.clone())?;
        if log_likelihood.is_empty() || log_likelihood.iter().any(|v| !v.is_finite()) {
            return Err(GmmError::InvalidHyperParameter {
                name: "resume",
                reason: "the log-likelihood history must be non-empty and finite".into(),
            });
        }
        Ok(Self {
            model: DiagGmm::from_valid(weights, means, variances),
            log_likelihood,
            converged,
        })
    }

    /// Number of completed EM iterations.
    pub fn n_iter(&self) -> usize {
        self.log_likelihood.len()
    }
}

impl<F: Float> GmmParams<F> {
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
    /// returned. Errors of the fit itself are converted with `E: From<GmmError>`.
    pub fn fit_streaming<E: From<GmmError>>(
        &self,
        pass: &mut DataPass<'_, F, E>,
        init_sample: usize,
        resume: Option<GmmEmState<F>>,
        on_iter: &mut OnGmmIteration<'_, F, E>,
    ) -> Result<GmmFit<F>, E> {
        let k = self.n_components();
        self.validate_hyper()?;
        if let Some(state) = resume {
            if self.n_init != 1 {
                return Err(GmmError::InvalidHyperParameter {
                    name: "n_init",
                    reason: "resuming a fit needs n_init = 1".into(),
                }
                .into());
            }
            if state.model.n_components() != k {
                return Err(GmmError::InvalidHyperParameter {
                    name: "resume",
                    reason: format!(
                        "the saved model has {} components, expected {k}",
                        state.model.n_components()
                    ),
                }
                .into());
            }
            return self.stream_em(pass, state, 0, on_iter);
        }
        if init_sample < k {
            return Err(GmmError::InvalidHyperParameter {
                name: "init_sample",
                reason: format!("must be at least the number of components {k}, got {init_sample}"),
            }
            .into());
        }
        let mut sample = Reservoir::<F>::new(init_sample, self.seed);
        let mut dim = None;
        pass(&mut |x| {
            check_chunk(x, &mut dim).map_err(GmmError::from)?;
            sample.push(x);
            Ok(())
        })?;
        let n = sample.seen();
        if n < k {
            return Err(GmmError::TooFewRows {
                n_rows: n,
                n_components: k,
            }
            .into());
        }
        let sample = sample.into_matrix();
        self.validate(sample.view())?;
        let mut best: Option<GmmFit<F>> = None;
        for r in 0..self.n_init {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(r as u64);
            let init = self.initial_model(sample.view(), &mut rng)?;
            let state = GmmEmState {
                model: init,
                log_likelihood: Vec::new(),
                converged: false,
            };
            let fit = self.stream_em(pass, state, r, on_iter)?;
            let last = |f: &GmmFit<F>| *f.log_likelihood.last().expect("max_iter >= 1");
            if best.as_ref().is_none_or(|b| last(&fit) > last(b)) {
                best = Some(fit);
            }
        }
        Ok(best.expect("n_init >= 1"))
    }

    fn stream_em<E: From<GmmError>>(
        &self,
        pass: &mut DataPass<'_, F, E>,
        mut state: GmmEmState<F>,
        restart: usize,
        on_iter: &mut OnGmmIteration<'_, F, E>,
    ) -> Result<GmmFit<F>, E> {
        let (k, d) = (state.model.n_components(), state.model.dim());
        while !state.converged && state.log_likelihood.len() < self.max_iter {
            let iter = state.log_likelihood.len();
            let model = &state.model;
            let center = model.center().mapv(|v| v.as_f64());
            let mut st = GmmStats::zeros(k, center);
            let mut dim = Some(d);
            pass(&mut |x| {
                check_chunk(x, &mut dim).map_err(GmmError::from)?;
                st.merge(&model.statistics_unchecked(x))?;
                Ok(())
            })?;
            if st.n_rows() == 0.0 {
                return Err(GmmError::Data(DataError::Empty {
                    what: "training data",
                })
                .into());
            }
            let ll = st.mean_log_likelihood();
            let m = m_step(&st, self.variance_floor)?;
            let rel_change = match state.log_likelihood.last() {
                Some(&prev) => (ll - prev).abs() / prev.abs().max(1.0),
                None => f64::INFINITY,
            };
            state.model = m.model;
            state.log_likelihood.push(ll);
            state.converged = rel_change < self.tol && m.reseeded == 0;
            on_iter(
                &EmIteration {
                    restart,
                    iter,
                    log_likelihood: ll,
                    rel_change,
                    reseeded: m.reseeded,
                },
                &state,
            )?;
        }
        Ok(GmmFit {
            model: state.model,
            n_iter: state.log_likelihood.len(),
            log_likelihood: state.log_likelihood,
            converged: state.converged,
        })
    }
}

/// Checks a chunk: non-empty width equal to the first chunk's, finite values.
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
    use crate::gmm::GmmInit;
    use ndarray::{s, Axis};
    use rand::Rng;

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
