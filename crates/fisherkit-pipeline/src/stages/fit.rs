//! The model stage: each background model fitted by EM on its scale's
//! sample ([`fit_model`]), and what each fit did ([`EmRecord`]).

use super::models::{FitSettings, Fitted, ModelKind, ModelSpec};
use crate::{PipelineError, Progress};
use fisherkit::gmm::GmmParams;
use fisherkit::mfa::MfaParams;
use fisherkit::stream::EmTol;
use ndarray::Array2;
use std::time::Instant;

/// What one EM fit did: iterations run, whether the stopping rule was met
/// before the cap, the last mean log-likelihood per row and every
/// iteration's (empty for a model file written before histories were kept).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmRecord {
    pub iterations: usize,
    pub max_iter: usize,
    pub converged: bool,
    pub log_likelihood: f64,
    pub history: Vec<f64>,
}

impl EmRecord {
    fn new(iterations: usize, max_iter: usize, converged: bool, history: &[f64]) -> Self {
        Self {
            iterations,
            max_iter,
            converged,
            log_likelihood: history.last().copied().unwrap_or(f64::NAN),
            history: history.to_vec(),
        }
    }

    /// The one-line summary shown when the model's stage ends, in words a
    /// newcomer reads: converged, or stopped at the iteration cap with the
    /// last change of the log-likelihood (what a fit at its cap means is
    /// said once for the run, by [`cap_note`]).
    pub(crate) fn summary(&self, history: &[f64], tol: EmTol) -> String {
        let head = format!(
            "{} iterations, log-likelihood {:.4}",
            self.iterations, self.log_likelihood
        );
        if self.converged {
            return format!("{head}, converged");
        }
        let last = match history {
            [.., a, b] => format!(", last {} change {:.1e}", tol.mode(), tol.change(*a, *b)),
            _ => String::new(),
        };
        format!("{head} (at the cap{last})")
    }
}

/// One line for the run when some of its background models stopped at their
/// iteration cap: how many, what it means and what to change. `None` when
/// every fit converged.
pub(crate) fn cap_note(records: &[&EmRecord], tol: EmTol) -> Option<String> {
    let capped = records.iter().filter(|r| !r.converged).count();
    (capped > 0).then(|| {
        format!(
            "{capped} of {} background models stopped at their iteration cap before the {} \
             change of their mean log-likelihood fell below {:.0e}: they are usable, and more \
             iterations (--gmm-max-iter, --mfa-max-iter) may fit them better; the report's \
             `models` lists each fit",
            records.len(),
            tol.mode(),
            tol.value()
        )
    })
}

/// How a background model's EM stops early: its own error, or the run was
/// cancelled ([`Progress::cancelled`]) between two iterations.
enum FitStop<E> {
    Model(E),
    Cancelled,
}

impl<E> From<E> for FitStop<E> {
    fn from(e: E) -> Self {
        FitStop::Model(e)
    }
}

impl<E: std::fmt::Display> FitStop<E> {
    fn into_error(self, stage: &'static str) -> PipelineError {
        match self {
            FitStop::Model(e) => PipelineError::at(stage, e),
            FitStop::Cancelled => PipelineError::Cancelled,
        }
    }
}

/// After each EM iteration: one step of progress, and a stop if the run was cancelled.
fn each_iteration<E>(progress: &dyn Progress) -> Result<(), FitStop<E>> {
    progress.inc(1);
    if progress.cancelled() {
        Err(FitStop::Cancelled)
    } else {
        Ok(())
    }
}

/// Fits one model on its scale's sample with the run's seed and
/// [`crate::defaults::EM_TOL`].
pub(crate) fn fit_model(
    spec: &ModelSpec,
    x: &Array2<f32>,
    s: &FitSettings,
    scale_name: &str,
    progress: &dyn Progress,
) -> Result<(Fitted, EmRecord, f64), PipelineError> {
    let t = Instant::now();
    let tol = crate::defaults::EM_TOL;
    let (fitted, record) = match spec.kind {
        ModelKind::Gmm { k } => {
            let k = k.min(x.nrows());
            progress.start(
                &format!("GMM K={k} (scale {scale_name})"),
                s.gmm_max_iter as u64,
            );
            let fit = GmmParams::<f32>::new(k)
                .max_iter(s.gmm_max_iter)
                .tol(tol)
                .seed(s.seed)
                .check()
                .map_err(PipelineError::stage("GMM training"))?
                .fit_with_callback(x.view(), &mut |_, _| each_iteration(progress))
                .map_err(|e| e.into_error("GMM training"))?;
            let r = EmRecord::new(
                fit.n_iter,
                s.gmm_max_iter,
                fit.converged,
                &fit.log_likelihood,
            );
            progress.finish(&r.summary(&fit.log_likelihood, tol));
            (Fitted::Gmm(Box::new(fit.model)), r)
        }
        ModelKind::Mfa { k, r } => {
            let d = x.ncols();
            if r >= d {
                return Err(PipelineError::Config(format!(
                    "MFA factors R = {r} must be below the descriptor dimension {d} after PCA"
                )));
            }
            let k = k.min(x.nrows());
            progress.start(
                &format!("MFA K={k} R={r} (scale {scale_name})"),
                s.mfa_max_iter as u64,
            );
            let fit = MfaParams::new(k, r)
                .max_iter(s.mfa_max_iter)
                .tol(tol)
                .seed(s.seed)
                .check()
                .map_err(PipelineError::stage("MFA training"))?
                .fit_with_callback(x.view(), &mut |_, _| each_iteration(progress))
                .map_err(|e| e.into_error("MFA training"))?;
            let rec = EmRecord::new(
                fit.n_iter,
                s.mfa_max_iter,
                fit.converged,
                &fit.log_likelihood,
            );
            progress.finish(&rec.summary(&fit.log_likelihood, tol));
            (Fitted::Mfa(Box::new(fit.model)), rec)
        }
    };
    Ok((fitted, record, t.elapsed().as_secs_f64()))
}
