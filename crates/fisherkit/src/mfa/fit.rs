//! EM fitting of a mixture of factor analysers.

use super::init::init_mfa;
use super::model::{Mfa, PsiMode};
use super::MfaError;
use crate::float::Float;
use crate::stream::{fit_in_memory, EmTol};
use ndarray::ArrayView2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Hyper-parameters of MFA EM. Build with [`MfaParams::new`] and the setters,
/// then call [`MfaParams::fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct MfaParams {
    pub(super) n_components: usize,
    pub(super) n_factors: usize,
    pub(super) psi_mode: PsiMode,
    pub(super) max_iter: usize,
    pub(super) tol: EmTol,
    pub(super) n_init: usize,
    pub(super) seed: u64,
    pub(super) psi_floor: f64,
}

/// Progress report of one EM iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MfaIteration {
    /// Restart index (0-based, `< n_init`).
    pub restart: usize,
    /// Iteration index within the restart (0-based).
    pub iter: usize,
    /// Mean log-likelihood per row of the model before this iteration's M-step.
    pub log_likelihood: f64,
    /// The change of the stopping rule ([`EmTol::change`]): $|\ell_t -
    /// \ell_{t-1}|$ for [`EmTol::Absolute`], that over $\max(|\ell_{t-1}|, 1)$
    /// for [`EmTol::Relative`] (infinite at the first iteration).
    pub change: f64,
}

/// Result of [`MfaParams::fit`]: the best restart.
#[derive(Debug, Clone)]
pub struct MfaFit<F: Float> {
    /// The fitted model (after the last M-step).
    pub model: Mfa<F>,
    /// Mean log-likelihood per row before each M-step of the best restart.
    pub log_likelihood: Vec<f64>,
    /// Number of EM iterations (E-step + M-step) of the best restart.
    pub n_iter: usize,
    /// Whether the change of the `tol` rule fell below it before `max_iter`.
    pub converged: bool,
}

impl<F: Float> From<crate::stream::EmState<Mfa<F>>> for MfaFit<F> {
    fn from(state: crate::stream::EmState<Mfa<F>>) -> Self {
        Self {
            model: state.model,
            n_iter: state.log_likelihood.len(),
            log_likelihood: state.log_likelihood,
            converged: state.converged,
        }
    }
}

/// Default relative floor of $\psi_d$: [`PSI_FLOOR`] times the variance of
/// dimension d (docs/math.md §4.5).
pub const PSI_FLOOR: f64 = 1e-3;

impl MfaParams {
    /// K components with R factors each; defaults: shared $\Psi$, `max_iter` 100,
    /// `tol` `Absolute(1e-3)` (scikit-learn's rule and default), `n_init` 1,
    /// `seed` 0 ([`crate::stream::em_defaults`]),
    /// `psi_floor` [`PSI_FLOOR`] (1e-3).
    pub fn new(n_components: usize, n_factors: usize) -> Self {
        Self {
            n_components,
            n_factors,
            psi_mode: PsiMode::Shared,
            max_iter: crate::stream::em_defaults::MAX_ITER,
            tol: EmTol::default(),
            n_init: crate::stream::em_defaults::N_INIT,
            seed: crate::stream::em_defaults::SEED,
            psi_floor: PSI_FLOOR,
        }
    }

    /// Shared (default) or per-component $\Psi$.
    pub fn psi_mode(mut self, mode: PsiMode) -> Self {
        self.psi_mode = mode;
        self
    }

    /// Maximum EM iterations per restart (≥ 1).
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.max_iter = max_iter;
        self
    }

    /// Stop when the change of the mean log-likelihood per row (see
    /// [`EmTol`], [`MfaIteration::change`]) is below the tolerance (≥ 0; 0
    /// runs `max_iter`): a number is an absolute change (`.tol(1e-3)`, the
    /// default), `.tol(EmTol::Relative(1e-6))` a relative one.
    pub fn tol(mut self, tol: impl Into<EmTol>) -> Self {
        self.tol = tol.into();
        self
    }

    /// Number of restarts (≥ 1); the one with the highest final log-likelihood wins.
    pub fn n_init(mut self, n_init: usize) -> Self {
        self.n_init = n_init;
        self
    }

    /// Seed of every random choice (k-means++ seeding).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Floor of $\psi_d$ relative to the variance of dimension d (≥ 0).
    pub fn psi_floor(mut self, psi_floor: f64) -> Self {
        self.psi_floor = psi_floor;
        self
    }

    /// Checks every setting that does not depend on the data — K ≥ 1,
    /// R ≥ 1, `max_iter` ≥ 1, `n_init` ≥ 1, `tol` finite and ≥ 0,
    /// `psi_floor` finite and ≥ 0 — in that order, and returns the checked
    /// parameters, which every fit runs on. K ≤ N and R < D are checked
    /// against the data when fitting.
    ///
    /// ```
    /// use fisherkit::mfa::{MfaError, MfaParams};
    /// assert!(MfaParams::new(4, 2).tol(1e-4).check().is_ok());
    /// let e = MfaParams::new(4, 2).psi_floor(-1.0).check().unwrap_err();
    /// assert!(matches!(e, MfaError::InvalidHyperParameter { name: "psi_floor", .. }));
    /// assert!(e.to_string().contains("psi_floor"));
    /// ```
    pub fn check(&self) -> Result<ValidMfaParams, MfaError> {
        let err = |name, reason: String| Err(MfaError::InvalidHyperParameter { name, reason });
        if self.n_components == 0 {
            return err("n_components", "must be >= 1".into());
        }
        if self.n_factors == 0 {
            return err(
                "n_factors",
                format!("must satisfy 0 < R < D, got R = {}", self.n_factors),
            );
        }
        if self.max_iter == 0 {
            return err("max_iter", "must be >= 1".into());
        }
        if self.n_init == 0 {
            return err("n_init", "must be >= 1".into());
        }
        if let Some(reason) = self.tol.invalid() {
            return err("tol", reason);
        }
        if !(self.psi_floor.is_finite() && self.psi_floor >= 0.0) {
            return err(
                "psi_floor",
                format!("must be finite and >= 0, got {}", self.psi_floor),
            );
        }
        Ok(ValidMfaParams(self.clone()))
    }

    /// [`MfaParams::check`], then [`ValidMfaParams::fit`]: fits by EM on
    /// `x` (N, D); see [`MfaParams::fit_with_progress`].
    ///
    /// ```
    /// use fisherkit::mfa::MfaParams;
    /// use ndarray::Array2;
    /// // points near a line in 3-D: one factor explains them
    /// let x = Array2::from_shape_fn((300, 3), |(i, j)| {
    ///     let t = (i as f64 / 30.0).sin() * 5.0;
    ///     t * [1.0, 2.0, -1.0][j] + ((i * 31 + j * 17) % 7) as f64 / 70.0
    /// });
    /// let fit = MfaParams::new(1, 1).seed(0).fit(x.view()).unwrap();
    /// let l = fit.model.loadings();
    /// let (a, b) = (l[[0, 0, 0]], l[[0, 1, 0]]);
    /// assert!((b / a - 2.0).abs() < 0.05, "loading along (1, 2, -1)");
    /// ```
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<MfaFit<F>, MfaError> {
        self.check()?.fit(x)
    }

    /// [`MfaParams::check`], then [`ValidMfaParams::fit_with_progress`]:
    /// fits by EM on `x` (N, D), calling `on_iter` after every E-step.
    ///
    /// Each restart initialises with k-means (at most
    /// [`super::INIT_KMEANS_MAX_ITER`] Lloyd updates) + PPCA, then iterates E-step
    /// (statistics and log-likelihood $\ell_t$) and M-step until
    /// [`crate::stream::em_stopping_rule`] holds or after `max_iter`
    /// iterations; the restart with the highest final log-likelihood is kept.
    /// The loop is the library's one EM driver (the streamed fit's, over the
    /// data as one chunk). Same seed, same data → same bits (also across
    /// thread counts).
    pub fn fit_with_progress<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut dyn FnMut(&MfaIteration),
    ) -> Result<MfaFit<F>, MfaError> {
        self.check()?.fit_with_progress(x, on_iter)
    }

    /// The starting model of restart `restart` on `x` (n, D): k-means + PPCA,
    /// seeded with `seed + restart · 0x9E3779B97F4A7C15` (wrapping).
    pub(super) fn initial_model<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        restart: usize,
    ) -> Result<Mfa<F>, MfaError> {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed
                .wrapping_add((restart as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        init_mfa(
            x,
            self.n_components,
            self.n_factors,
            self.psi_mode,
            self.psi_floor,
            &mut rng,
        )
    }
}

/// [`MfaParams`] that passed [`MfaParams::check`]; only `check` makes one,
/// so the fits below (in memory and streamed) check the data but never the
/// settings again (linfa's params → checked params → fit). Reads as the
/// parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidMfaParams(MfaParams);

impl std::ops::Deref for ValidMfaParams {
    type Target = MfaParams;
    fn deref(&self) -> &MfaParams {
        &self.0
    }
}

impl ValidMfaParams {
    /// Fits by EM on `x` (N, D); see [`MfaParams::fit_with_progress`].
    /// Errors: those of the data only (empty or non-finite, K > N, R ≥ D).
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<MfaFit<F>, MfaError> {
        self.fit_with_progress(x, &mut |_| {})
    }

    /// [`ValidMfaParams::fit`], calling `on_iter` after every E-step.
    pub fn fit_with_progress<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut dyn FnMut(&MfaIteration),
    ) -> Result<MfaFit<F>, MfaError> {
        let mut report = |it: &MfaIteration, _: &crate::stream::EmState<Mfa<F>>| {
            on_iter(it);
            Ok::<(), MfaError>(())
        };
        Ok(fit_in_memory(self, x, &mut report)?.into())
    }

    /// [`ValidMfaParams::fit`], calling `on_iter` after every iteration with
    /// its report and the new state; an error of `on_iter` stops the fit and
    /// is returned (how a caller cancels a fit: Ctrl-C in the Python module).
    pub fn fit_with_callback<F: Float, E: From<MfaError>>(
        &self,
        x: ArrayView2<'_, F>,
        on_iter: &mut crate::stream::OnIteration<'_, MfaIteration, Mfa<F>, E>,
    ) -> Result<MfaFit<F>, E> {
        Ok(fit_in_memory(self, x, on_iter)?.into())
    }

    /// The checks against data of N rows in dimension D: K ≤ N, R < D.
    pub(super) fn check_data(&self, n: usize, d: usize) -> Result<(), MfaError> {
        let err = |name, reason: String| Err(MfaError::InvalidHyperParameter { name, reason });
        if self.n_components > n {
            return err(
                "n_components",
                format!(
                    "{} components need at least as many rows, the data have {n}",
                    self.n_components
                ),
            );
        }
        if self.n_factors >= d {
            return err(
                "n_factors",
                format!("must satisfy 0 < R < D = {d}, got R = {}", self.n_factors),
            );
        }
        Ok(())
    }
}
