//! Data that arrive in chunks of rows: the interface of out-of-core EM.
//!
//! The library never reads files. A caller that holds more rows than fit in
//! memory passes a *pass* closure: called with a visitor, it feeds the
//! visitor every row of the data set, in consecutive chunks (n_c, D), in the
//! same order at every call, and returns the visitor's first error. The
//! streamed fits ([`crate::gmm::GmmParams::fit_streaming`],
//! [`crate::mfa::MfaParams::fit_streaming`]) make one pass per EM iteration,
//! summing the mergeable E-step statistics of the chunks, so their memory is
//! O(chunk · (K + D) + K · D) whatever N. The chunking is the caller's: the
//! same chunks give the same bits.
//!
//! This is also the library's only EM loop: the in-memory fits run it with
//! the data as one chunk, the `fit_from_statistics` of both models (and
//! through them the Python module's distributed fits) run it with
//! statistics computed elsewhere, and every fit stops by
//! [`em_stopping_rule`].

use crate::data::{check_matrix, DataError};
use crate::float::Float;
use ndarray::{Array2, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The defaults of every EM fit, written once: [`crate::gmm::GmmParams::new`],
/// [`crate::mfa::MfaParams::new`] and the CLI's `gmm fit` / `mfa fit` flags take them from here.
pub mod em_defaults {
    /// Most EM iterations per restart.
    pub const MAX_ITER: usize = 100;
    /// Absolute change of the mean log-likelihood per row below which EM
    /// stops ([`super::EmTol::Absolute`], scikit-learn's `GaussianMixture`
    /// rule and default).
    pub const TOL: f64 = 1e-3;
    /// EM restarts (the best log-likelihood wins).
    pub const N_INIT: usize = 1;
    /// Seed of every random choice.
    pub const SEED: u64 = 0;
}

/// The visitor a pass feeds with chunks (n_c, D) of rows.
pub type ChunkVisitor<'a, F, E> = dyn FnMut(ArrayView2<'_, F>) -> Result<(), E> + 'a;

/// A pass over the data: calls the visitor on every chunk, in a fixed order,
/// stopping at (and returning) its first error.
pub type DataPass<'a, F, E> = dyn FnMut(&mut ChunkVisitor<'_, F, E>) -> Result<(), E> + 'a;

/// The ChaCha8 stream of the initialisation sample (restart r of EM uses stream r).
pub(crate) const SAMPLE_STREAM: u64 = u64::MAX;

/// A uniform sample without replacement of at most `cap` rows of a stream
/// (Vitter's algorithm R): row $i$ (0-based) replaces a random slot with
/// probability $\mathrm{cap}/(i+1)$ once the reservoir is full. While the
/// stream has at most `cap` rows the sample is all of them, in order, and no
/// random number is drawn.
pub(crate) struct Reservoir<F: Float> {
    cap: usize,
    dim: usize,
    seen: u64,
    rows: Vec<F>,
    rng: ChaCha8Rng,
}

impl<F: Float> Reservoir<F> {
    pub fn new(cap: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(SAMPLE_STREAM);
        Self {
            cap,
            dim: 0,
            seen: 0,
            rows: Vec::new(),
            rng,
        }
    }

    /// Offers the rows of `x` (n, D); D is the same for every call (checked by the caller).
    pub fn push(&mut self, x: ArrayView2<'_, F>) {
        self.dim = x.ncols();
        for row in x.rows() {
            let i = self.seen;
            self.seen += 1;
            if (i as usize) < self.cap {
                self.rows.extend(row.iter().copied());
            } else {
                let j = self.rng.random_range(0..=i) as usize;
                if j < self.cap {
                    let d = self.dim;
                    self.rows[j * d..(j + 1) * d]
                        .iter_mut()
                        .zip(row.iter())
                        .for_each(|(a, &b)| *a = b);
                }
            }
        }
    }

    /// Number of rows offered.
    pub fn seen(&self) -> usize {
        self.seen as usize
    }

    /// The sample (min(cap, seen), D).
    pub fn into_matrix(self) -> Array2<F> {
        let n = self.rows.len().checked_div(self.dim).unwrap_or(0);
        Array2::from_shape_vec((n, self.dim), self.rows).expect("whole rows")
    }
}

/// Where a streamed EM run stands after some iterations: what a checkpoint
/// holds, and all that a streamed fit needs to resume. `M` is the model
/// ([`crate::gmm::DiagGmm`] for [`crate::gmm::GmmEmState`],
/// [`crate::mfa::Mfa`] for [`crate::mfa::MfaEmState`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EmState<M> {
    /// The model after the last completed M-step.
    pub model: M,
    /// Mean log-likelihood per row $\ell_t$ of each completed iteration $t$
    /// (of the parameters entering it).
    pub log_likelihood: Vec<f64>,
    /// Whether the stopping rule was met at the last completed iteration.
    pub converged: bool,
}

impl<M> EmState<M> {
    /// Number of completed EM iterations.
    pub fn n_iter(&self) -> usize {
        self.log_likelihood.len()
    }

    /// A saved state to resume, the model built by `model` (the model's own
    /// checks) once its history is known to be resumable: non-empty and
    /// finite. `bad_history(reason)` is the model's error for a history that
    /// is not.
    pub(crate) fn resumed<E>(
        log_likelihood: Vec<f64>,
        converged: bool,
        bad_history: impl FnOnce(String) -> E,
        model: impl FnOnce() -> Result<M, E>,
    ) -> Result<Self, E> {
        let model = model()?;
        if log_likelihood.is_empty() || log_likelihood.iter().any(|v| !v.is_finite()) {
            return Err(bad_history(
                "the log-likelihood history must be non-empty and finite".into(),
            ));
        }
        Ok(Self {
            model,
            log_likelihood,
            converged,
        })
    }
}

/// Called after every iteration of a streamed fit with the iteration's
/// report `R` and the new state; an error stops the fit.
pub type OnIteration<'a, R, M, E> = dyn FnMut(&R, &EmState<M>) -> Result<(), E> + 'a;

/// When EM has converged: a tolerance on the change of the mean
/// log-likelihood per row between two iterations, $\ell_{t-1}$ and $\ell_t$
/// (docs/math.md §2.6). A bare number is an absolute tolerance
/// (`GmmParams::new(3).tol(1e-4)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EmTol {
    /// $|\ell_t - \ell_{t-1}| < \mathrm{tol}$: scikit-learn's
    /// `GaussianMixture` rule, and the default with
    /// [`em_defaults::TOL`] = 1e-3. Depends on the scale of the data (ℓ grows
    /// with the dimension D).
    Absolute(f64),
    /// $|\ell_t - \ell_{t-1}| / \max(|\ell_{t-1}|, 1) < \mathrm{tol}$: free
    /// of the scale of ℓ (the floor 1 makes it absolute for |ℓ| < 1). The
    /// strict setting `Relative(1e-6)` was the library's default before
    /// `Absolute(1e-3)`; it often runs to the iteration cap.
    Relative(f64),
}

impl Default for EmTol {
    /// `Absolute(`[`em_defaults::TOL`]`)`.
    fn default() -> Self {
        Self::Absolute(em_defaults::TOL)
    }
}

impl From<f64> for EmTol {
    /// A bare tolerance is absolute.
    fn from(tol: f64) -> Self {
        Self::Absolute(tol)
    }
}

impl EmTol {
    /// The tolerance, whichever the rule.
    pub fn value(&self) -> f64 {
        match *self {
            Self::Absolute(v) | Self::Relative(v) => v,
        }
    }

    /// The rule's name: `"absolute"` or `"relative"` (the Python module's
    /// `tol_mode`, the command line's `--tol-mode`, the model files' `tol_mode`).
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Absolute(_) => "absolute",
            Self::Relative(_) => "relative",
        }
    }

    /// The rule called `mode` (see [`EmTol::mode`]) with tolerance `tol`;
    /// an unknown mode is an error naming it.
    ///
    /// ```
    /// use fisherkit::stream::EmTol;
    /// assert_eq!(EmTol::with_mode("relative", 1e-6), Ok(EmTol::Relative(1e-6)));
    /// assert!(EmTol::with_mode("rel", 1e-6).unwrap_err().contains("\"rel\""));
    /// ```
    pub fn with_mode(mode: &str, tol: f64) -> Result<Self, String> {
        match mode {
            "absolute" => Ok(Self::Absolute(tol)),
            "relative" => Ok(Self::Relative(tol)),
            _ => Err(format!(
                "tol_mode must be \"absolute\" or \"relative\", got {mode:?}"
            )),
        }
    }

    /// The change that is compared with the tolerance, from $\ell_{t-1}$ =
    /// `prev` to $\ell_t$ = `ll`.
    pub fn change(&self, prev: f64, ll: f64) -> f64 {
        match self {
            Self::Absolute(_) => (ll - prev).abs(),
            Self::Relative(_) => (ll - prev).abs() / prev.abs().max(1.0),
        }
    }

    /// The reason a tolerance is refused (not finite or negative), if it is.
    pub(crate) fn invalid(&self) -> Option<String> {
        let v = self.value();
        (!(v.is_finite() && v >= 0.0))
            .then(|| format!("must be finite and >= 0, got {v} ({} change)", self.mode()))
    }
}

/// The stopping rule of every EM fit of the library — in memory, streamed,
/// resumed, GMM and MFA — and of the Python module's `update_from_statistics`
/// (docs/math.md §2.6): after the history $\ell_0 … \ell_{t-1}$ of mean
/// log-likelihoods per row, the new value $\ell_t$ has the change $c_t$ of
/// the rule `tol` ([`EmTol::change`]: $|\ell_t - \ell_{t-1}|$ for
/// [`EmTol::Absolute`], that over $\max(|\ell_{t-1}|, 1)$ for
/// [`EmTol::Relative`]; infinite for the first iteration), and the fit has
/// converged when $c_t$ < tol and the M-step re-seeded no component
/// (`reseeded` = 0). So a tolerance of 0 runs `max_iter` iterations.
/// Returns $(c_t, \text{converged})$.
///
/// ```
/// use fisherkit::stream::{em_stopping_rule, EmTol};
/// assert_eq!(em_stopping_rule(&[], -3.0, EmTol::Absolute(1e-3), 0), (f64::INFINITY, false));
/// let (c, done) = em_stopping_rule(&[-200.0], -200.0005, EmTol::Absolute(1e-3), 0);
/// assert!((c - 5e-4).abs() < 1e-9 && done);
/// let (r, done) = em_stopping_rule(&[-200.0], -200.0005, EmTol::Relative(1e-6), 0);
/// assert!((r - 2.5e-6).abs() < 1e-12 && !done);
/// // a re-seeded component keeps the fit going
/// assert!(!em_stopping_rule(&[-200.0], -200.0, EmTol::Absolute(1e-3), 1).1);
/// ```
pub fn em_stopping_rule(history: &[f64], ll: f64, tol: EmTol, reseeded: usize) -> (f64, bool) {
    let change = match history.last() {
        Some(&prev) => tol.change(prev, ll),
        None => f64::INFINITY,
    };
    (change, change < tol.value() && reseeded == 0)
}

/// The error of a pass that fed no rows.
pub(crate) fn no_rows() -> DataError {
    DataError::Empty {
        what: "training data",
    }
}

/// What the streamed driver needs of the hyper-parameters: K (the sample
/// must hold at least K rows), the number of restarts, the iteration cap and
/// the seed of the initialisation sample.
pub(crate) struct EmSchedule {
    pub n_components: usize,
    pub n_init: usize,
    pub max_iter: usize,
    pub seed: u64,
}

/// The outcome of one EM iteration, from the statistics of all rows: the
/// model after the M-step, the mean log-likelihood of the model entering the
/// iteration, whether the stopping rule is met, and the caller's report.
pub(crate) struct EmStep<M, R> {
    pub model: M,
    pub log_likelihood: f64,
    pub converged: bool,
    pub report: R,
}

/// The model-specific half of out-of-core EM (diagonal GMM, MFA): checks,
/// initialisation, the mergeable E-step statistics and the M-step.
/// [`fit_streaming`] holds the rest — sampling, restarts, resumption,
/// the passes and the callback — once for both.
pub(crate) trait StreamedEm<F: Float> {
    /// The fitted model.
    type Model;
    /// The E-step statistics summed over the chunks of a pass.
    type Stats;
    /// The per-iteration report.
    type Report;
    /// The module's error.
    type Error: From<DataError>;

    fn schedule(&self) -> EmSchedule;
    /// An invalid hyper-parameter `name`, for `reason`.
    fn hyper_error(name: &'static str, reason: String) -> Self::Error;
    /// Checks a given model (a saved one to resume, `name` = "resume", or
    /// a starting one, `name` = "start") against the hyper-parameters.
    fn check_model(&self, model: &Self::Model, name: &'static str) -> Result<(), Self::Error>;
    /// Checks statistics computed outside the driver's passes (see
    /// [`fit_from_statistics`]) against the model they were computed under.
    fn check_stats(model: &Self::Model, stats: &Self::Stats) -> Result<(), Self::Error>;
    /// Checks the data once counted: N rows, of which `sample` (n, D) is the
    /// initialisation sample.
    fn check_sample(&self, n_rows: usize, sample: ArrayView2<'_, F>) -> Result<(), Self::Error>;
    /// The starting model of restart `restart`, from the sample (n, D).
    fn start_model(
        &self,
        sample: ArrayView2<'_, F>,
        restart: usize,
    ) -> Result<Self::Model, Self::Error>;
    /// The dimension D of a model.
    fn model_dim(model: &Self::Model) -> usize;
    /// The statistics of no rows under `model`.
    fn stats_zero(&self, model: &Self::Model) -> Self::Stats;
    /// Adds the statistics of the checked chunk `x` (n_c, D) under `model`.
    fn stats_add(
        model: &Self::Model,
        stats: &mut Self::Stats,
        x: ArrayView2<'_, F>,
    ) -> Result<(), Self::Error>;
    /// The M-step and stopping rule after the iterations of `state`, for
    /// iteration `state.n_iter()` of restart `restart`.
    fn em_step(
        &self,
        state: &EmState<Self::Model>,
        stats: Self::Stats,
        restart: usize,
    ) -> Result<EmStep<Self::Model, Self::Report>, Self::Error>;
}

/// EM over data streamed by `pass`, for either model (see the public
/// `fit_streaming` of [`crate::gmm::GmmParams`] and [`crate::mfa::MfaParams`]).
///
/// Without `resume`: one pass counts and checks the rows and keeps a seeded
/// uniform sample of at most `init_sample` rows ([`Reservoir`]); then
/// [`fit_restarts`] on that sample. With `resume` (needs one restart) the
/// saved state is continued.
pub(crate) fn fit_streaming<F, P, E>(
    p: &P,
    pass: &mut DataPass<'_, F, E>,
    init_sample: usize,
    resume: Option<EmState<P::Model>>,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    let sched = p.schedule();
    let k = sched.n_components;
    if let Some(state) = resume {
        if sched.n_init != 1 {
            return Err(P::hyper_error("n_init", "resuming a fit needs n_init = 1".into()).into());
        }
        p.check_model(&state.model, "resume")?;
        return stream_em(p, pass, true, state, 0, sched.max_iter, on_iter);
    }
    if init_sample < k {
        return Err(P::hyper_error(
            "init_sample",
            format!("must be at least the number of components {k}, got {init_sample}"),
        )
        .into());
    }
    let mut sample = Reservoir::<F>::new(init_sample, sched.seed);
    let mut dim = None;
    pass(&mut |x| {
        check_chunk(x, &mut dim).map_err(P::Error::from)?;
        sample.push(x);
        Ok(())
    })?;
    let n = sample.seen();
    let sample = sample.into_matrix();
    p.check_sample(n, sample.view())?;
    fit_restarts(p, pass, true, sample.view(), on_iter)
}

/// EM on the rows of `x` (N, D) held in memory: the streamed driver with the
/// data as its one chunk and its own initialisation sample (no copy). This is
/// what the in-memory `fit` of both models runs, so an in-memory fit and a
/// streamed one over a single chunk with `init_sample` ≥ N are the same
/// computation, bit for bit.
pub(crate) fn fit_in_memory<F, P, E>(
    p: &P,
    x: ArrayView2<'_, F>,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    check_matrix(x, None, "training data").map_err(P::Error::from)?;
    p.check_sample(x.nrows(), x)?;
    // checked once above: the passes need not check the same rows again
    fit_restarts(p, &mut |visit| visit(x), false, x, on_iter)
}

/// The restarts of a fit: restart r starts from [`StreamedEm::start_model`]
/// on the initialisation `sample` (n, D) and runs [`stream_em`]; the state
/// with the highest last mean log-likelihood is kept (first on ties). Each
/// iteration is one pass summing the chunks' statistics in chunk order, then
/// [`StreamedEm::em_step`], then `on_iter`; with `check_chunks` every
/// pass checks its chunks (a caller's pass may read other data each time).
fn fit_restarts<F, P, E>(
    p: &P,
    pass: &mut DataPass<'_, F, E>,
    check_chunks: bool,
    sample: ArrayView2<'_, F>,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    let sched = p.schedule();
    let mut best: Option<EmState<P::Model>> = None;
    for restart in 0..sched.n_init {
        let state = EmState {
            model: p.start_model(sample, restart)?,
            log_likelihood: Vec::new(),
            converged: false,
        };
        let fit = stream_em(
            p,
            pass,
            check_chunks,
            state,
            restart,
            sched.max_iter,
            on_iter,
        )?;
        if best
            .as_ref()
            .is_none_or(|b| fit.log_likelihood.last() > b.log_likelihood.last())
        {
            best = Some(fit);
        }
    }
    Ok(best.expect("n_init >= 1"))
}

/// The EM iterations of one restart, from `state` until convergence or
/// `max_iter` completed iterations, each one pass of `pass` summing the
/// chunks' statistics (chunks checked as for [`fit_restarts`]), then
/// [`em_iterations`].
fn stream_em<F, P, E>(
    p: &P,
    pass: &mut DataPass<'_, F, E>,
    check_chunks: bool,
    state: EmState<P::Model>,
    restart: usize,
    max_iter: usize,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    let mut statistics_of = |model: &P::Model| -> Result<P::Stats, E> {
        let mut stats = p.stats_zero(model);
        let mut dim = Some(P::model_dim(model));
        pass(&mut |x| {
            if check_chunks {
                check_chunk(x, &mut dim).map_err(P::Error::from)?;
            }
            P::stats_add(model, &mut stats, x)?;
            Ok(())
        })?;
        Ok(stats)
    };
    em_iterations(p, state, restart, max_iter, &mut statistics_of, on_iter)
}

/// Where the statistics of an EM iteration come from: called with the model
/// entering the iteration, it returns the merged E-step statistics of every
/// row under that model (a pass over chunks, or a cluster's map-reduce).
pub type StatisticsOf<'a, M, S, E> = dyn FnMut(&M) -> Result<S, E> + 'a;

/// The library's one EM loop: from `state`, until the stopping rule is met
/// or `max_iter` iterations are completed, each iteration asks
/// `statistics_of` for the statistics under the current model, runs
/// [`StreamedEm::em_step`] (M-step and [`em_stopping_rule`]) and reports to
/// `on_iter`.
fn em_iterations<F, P, E>(
    p: &P,
    mut state: EmState<P::Model>,
    restart: usize,
    max_iter: usize,
    statistics_of: &mut StatisticsOf<'_, P::Model, P::Stats, E>,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    while !state.converged && state.log_likelihood.len() < max_iter {
        let stats = statistics_of(&state.model)?;
        let step = p.em_step(&state, stats, restart)?;
        state.model = step.model;
        state.log_likelihood.push(step.log_likelihood);
        state.converged = step.converged;
        on_iter(&step.report, &state)?;
    }
    Ok(state)
}

/// EM whose E-step runs outside the library (see the public
/// `fit_from_statistics` of [`crate::gmm::GmmParams`] and
/// [`crate::mfa::MfaParams`]): from `start` (checked against the
/// hyper-parameters), the iterations of [`em_iterations`] with the
/// statistics `statistics_of` returns, each checked against the model it
/// was asked for. One restart; `n_init` and the seed play no part.
pub(crate) fn fit_from_statistics<F, P, E>(
    p: &P,
    start: P::Model,
    statistics_of: &mut StatisticsOf<'_, P::Model, P::Stats, E>,
    on_iter: &mut OnIteration<'_, P::Report, P::Model, E>,
) -> Result<EmState<P::Model>, E>
where
    F: Float,
    P: StreamedEm<F>,
    E: From<P::Error>,
{
    p.check_model(&start, "start")?;
    let state = EmState {
        model: start,
        log_likelihood: Vec::new(),
        converged: false,
    };
    let mut checked = |model: &P::Model| -> Result<P::Stats, E> {
        let stats = statistics_of(model)?;
        P::check_stats(model, &stats)?;
        Ok(stats)
    };
    em_iterations(p, state, 0, p.schedule().max_iter, &mut checked, on_iter)
}

/// Checks a chunk: width equal to the first chunk's, finite values (an empty
/// chunk passes).
fn check_chunk<F: Float>(x: ArrayView2<'_, F>, dim: &mut Option<usize>) -> Result<(), DataError> {
    if x.nrows() == 0 {
        return Ok(());
    }
    check_matrix(x, *dim, "training data")?;
    *dim = Some(x.ncols());
    Ok(())
}

/// The public entry points of a streamed EM, for a parameter type
/// (`GmmParams`, `MfaParams`) and its checked form (`ValidGmmParams`,
/// `ValidMfaParams`): `fit_streaming` and `fit_from_statistics` on both, the
/// unchecked ones checking first (`check()`), the checked ones running
/// [`fit_streaming`] / [`fit_from_statistics`] of this module. Each method
/// takes its documentation from the invocation; `stats_of` lifts the
/// statistics a caller computes to the driver's (the identity for the GMM,
/// `Some` for the MFA).
macro_rules! streamed_em_api {
    (
        impl[$($ig:tt)*] $params:ty => $valid:ty, fn[$($mg:tt)*] {
            model: $model:ty, stats: $stats:ty, report: $report:ty, fit: $fit:ident<$fF:ty>,
            stats_of: $lift:expr,
        }
        $(#[$sdoc:meta])* fn fit_streaming;
        $(#[$fdoc:meta])* fn fit_from_statistics;
        $(#[$vsdoc:meta])* valid fn fit_streaming;
        $(#[$vfdoc:meta])* valid fn fit_from_statistics;
    ) => {
        impl<$($ig)*> $params {
            $(#[$sdoc])*
            pub fn fit_streaming<$($mg)*>(
                &self,
                pass: &mut $crate::stream::DataPass<'_, F, E>,
                init_sample: usize,
                resume: Option<$crate::stream::EmState<$model>>,
                on_iter: &mut $crate::stream::OnIteration<'_, $report, $model, E>,
            ) -> Result<$fit<$fF>, E> {
                self.check()?
                    .fit_streaming(pass, init_sample, resume, on_iter)
            }

            $(#[$fdoc])*
            pub fn fit_from_statistics<$($mg)*>(
                &self,
                start: $model,
                statistics_of: &mut $crate::stream::StatisticsOf<'_, $model, $stats, E>,
                on_iter: &mut $crate::stream::OnIteration<'_, $report, $model, E>,
            ) -> Result<$fit<$fF>, E> {
                self.check()?
                    .fit_from_statistics(start, statistics_of, on_iter)
            }
        }

        impl<$($ig)*> $valid {
            $(#[$vsdoc])*
            pub fn fit_streaming<$($mg)*>(
                &self,
                pass: &mut $crate::stream::DataPass<'_, F, E>,
                init_sample: usize,
                resume: Option<$crate::stream::EmState<$model>>,
                on_iter: &mut $crate::stream::OnIteration<'_, $report, $model, E>,
            ) -> Result<$fit<$fF>, E> {
                $crate::stream::fit_streaming(self, pass, init_sample, resume, on_iter)
                    .map($fit::from)
            }

            $(#[$vfdoc])*
            pub fn fit_from_statistics<$($mg)*>(
                &self,
                start: $model,
                statistics_of: &mut $crate::stream::StatisticsOf<'_, $model, $stats, E>,
                on_iter: &mut $crate::stream::OnIteration<'_, $report, $model, E>,
            ) -> Result<$fit<$fF>, E> {
                let mut given = |m: &$model| statistics_of(m).map($lift);
                $crate::stream::fit_from_statistics(self, start, &mut given, on_iter)
                    .map($fit::from)
            }
        }
    };
}
pub(crate) use streamed_em_api;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservoir_keeps_everything_below_cap_and_is_uniform_above() {
        let x = Array2::from_shape_fn((10, 2), |(i, j)| (i * 2 + j) as f64);
        let mut r = Reservoir::new(10, 0);
        r.push(x.slice(ndarray::s![..4, ..]));
        r.push(x.slice(ndarray::s![4.., ..]));
        assert_eq!(r.into_matrix(), x);
        // inclusion frequencies of 100 rows in samples of 10: each ≈ 0.1
        let y = Array2::from_shape_fn((100, 1), |(i, _)| i as f64);
        let mut hits = [0usize; 100];
        let trials = 2000;
        for s in 0..trials {
            let mut r = Reservoir::new(10, s);
            for c in y.axis_chunks_iter(ndarray::Axis(0), 7) {
                r.push(c);
            }
            assert_eq!(r.seen(), 100);
            let m = r.into_matrix();
            assert_eq!(m.nrows(), 10);
            for v in m.column(0) {
                hits[*v as usize] += 1;
            }
        }
        // binomial(2000, 0.1): sd ≈ 13.4; 6 sd bounds
        for (i, h) in hits.iter().enumerate() {
            assert!((120..=280).contains(h), "row {i} sampled {h} times");
        }
    }
}
