//! The Figure-1 sweep: GMM-FV(σ) over K and MFA-FS(Λ) over R, all scales.

use super::Classes;
use crate::config::RunConfig;
use crate::kernel::KernelUses;
use crate::progress::stop_if_cancelled;
use crate::report::SweepPoint;
use crate::spec::{EncoderSpec, Term};
use crate::stages::ModelKind;
use crate::{PipelineError, Progress};
use fisherkit::encode::{FvPart, MfaPart};
use fisherkit::metrics::mean_per_class_accuracy;

/// The series of the Figure-1 sweep: (term, its model, the one-term
/// encoder, the run's model kinds with that model in place).
pub(crate) fn sweep_series(
    cfg: &RunConfig,
    kinds: (ModelKind, ModelKind),
) -> Vec<(Term, ModelKind, EncoderSpec, (ModelKind, ModelKind))> {
    cfg.sweep_gmm_components
        .iter()
        .map(|&k| (Term::GmmFv(vec![FvPart::Var]), ModelKind::Gmm { k }))
        .chain(cfg.sweep_mfa_factors.iter().map(|&r| {
            (
                Term::MfaFs(vec![MfaPart::Loading]),
                ModelKind::Mfa {
                    k: cfg.mfa_components,
                    r,
                },
            )
        }))
        .map(|(term, kind)| {
            let k = match kind {
                ModelKind::Gmm { .. } => (kind, kinds.1),
                ModelKind::Mfa { .. } => (kinds.0, kind),
            };
            let spec = EncoderSpec {
                terms: vec![term.clone()],
            };
            (term, kind, spec, k)
        })
        .collect()
}

/// The Figure-1 sweep: GMM-FV(σ) over K and MFA-FS(Λ) over R, all scales.
pub(super) fn sweep(
    c: &Classes<'_>,
    kinds: (ModelKind, ModelKind),
    yte: &[usize],
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
    uses: &KernelUses,
) -> Result<Vec<SweepPoint>, PipelineError> {
    let n_classes = c.inputs.classes.len();
    let mut out = Vec::new();
    for (term, kind, spec, k) in sweep_series(c.cfg, kinds) {
        stop_if_cancelled(progress)?;
        let pred = c.predict_spec(&spec, k, timings)?;
        uses.step_done();
        let accuracy = mean_per_class_accuracy(yte, &pred, n_classes)
            .map_err(PipelineError::stage("metrics"))?;
        let dim: usize = (0..c.inputs.scale_names.len())
            .map(|s| c.columns(&term, s, k, false).width())
            .sum();
        let (components, factors) = match kind {
            ModelKind::Gmm { k } => (k, None),
            ModelKind::Mfa { k, r } => (k, Some(r)),
        };
        progress.note(&format!(
            "sweep {} K={components}{}: {:.2} % (dim {dim})",
            term.name(),
            factors.map(|r| format!(" R={r}")).unwrap_or_default(),
            100.0 * accuracy
        ));
        out.push(SweepPoint {
            series: term.name(),
            components,
            factors,
            dim,
            accuracy,
        });
    }
    Ok(out)
}
