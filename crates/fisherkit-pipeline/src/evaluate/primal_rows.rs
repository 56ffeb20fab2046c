//! The primal path's report rows (docs/pipeline.md §4b): per scale and all
//! scales, each kept in the run folder when finished.

use super::{result_row, row_line, Classes, Trained};
use crate::primal::PartNorms;
use crate::report::ResultRow;
use crate::spec::EncoderSpec;
use crate::stages::ModelKind;
use crate::{PipelineError, Progress};
use fisherkit::svm::{LinearSvc, OutOfCoreSvmParams, RowSource};
use std::time::Instant;

/// The result rows of one encoder on the primal path: per scale (with
/// several scales), then all scales; and the all-scale row's SVM when the
/// run needs it (for the output folder and the saved classifier).
pub(super) fn evaluate_primal(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<(Vec<ResultRow>, Option<Trained>), PipelineError> {
    let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
    // The parts' norms: computed when a row is trained or written out, not for rows a killed run finished.
    let mut norms: Option<(Vec<PartNorms>, f64)> = None;
    let (mut rows, mut trained) = (Vec::new(), None);
    for scale in c.report_scales(spec) {
        let key = c.finished_key(spec, whiten, scale);
        let with_model = c.row_with_model(spec, scale);
        let (row, svm) = match c.finished.load(&key, with_model) {
            Some(done) => {
                progress.note(&row_line(&name, &done.0, ", primal, from the run folder"));
                done
            }
            None => {
                let (row, svm) =
                    primal_row(c, spec, whiten, kinds, scale, &mut norms, timings, progress)?;
                (row, Some(svm))
            }
        };
        if let (true, Some(svm)) = (with_model, svm) {
            if norms.is_none() {
                norms = Some((c.part_norms(spec, kinds, whiten, timings)?, 0.0));
            }
            let (n, _) = norms.as_ref().expect("computed above");
            let parts = c.norm_parts(spec, n);
            trained = Some(Trained {
                row: rows.len(),
                model: svm,
                parts,
            });
        }
        rows.push(row);
    }
    Ok((rows, trained))
}

/// Trains one report row of `spec` at `scale` on the primal path and keeps
/// it (and its SVM when the run needs it) in the run folder: the unit of the
/// primal path, in [`evaluate_primal`] and in a classifier task of another
/// process alike. `norms`: the parts' norms and the seconds they took,
/// computed here when `None`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn primal_row(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    scale: Option<usize>,
    norms: &mut Option<(Vec<PartNorms>, f64)>,
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<(ResultRow, LinearSvc<f32>), PipelineError> {
    let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
    if norms.is_none() {
        let t = Instant::now();
        let n = c.part_norms(spec, kinds, whiten, timings)?;
        *norms = Some((n, t.elapsed().as_secs_f64()));
    }
    let (n, norm_seconds) = norms.as_ref().expect("computed above");
    let (row, svm) = train_primal(
        c,
        spec,
        whiten,
        kinds,
        n,
        *norm_seconds,
        scale,
        timings,
        progress,
    )?;
    let classes = c.inputs.classes.as_slice();
    let with_model = c.row_with_model(spec, scale);
    let key = c.finished_key(spec, whiten, scale);
    let svm = c
        .finished
        .save(&key, &row, Some(svm), with_model.then_some(classes))?
        .expect("handed back");
    progress.note(&row_line(&name, &row, ", primal"));
    Ok((row, svm))
}

/// Trains and evaluates one report row of `spec` on the primal path.
#[allow(clippy::too_many_arguments)]
pub(super) fn train_primal(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    norms: &[PartNorms],
    norm_seconds: f64,
    scale: Option<usize>,
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<(ResultRow, LinearSvc<f32>), PipelineError> {
    let n_classes = c.inputs.classes.len();
    let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
    let src = c.feature_rows(spec, kinds, whiten, norms, scale);
    let t = Instant::now();
    let (svm, cc, cv, pred) = c.classify_primal(&src)?;
    let svm_seconds = t.elapsed().as_secs_f64();
    timings.push((
        format!(
            "primal SVM {name}{}",
            scale
                .map(|s| format!(" scale {}", c.inputs.scale_names[s]))
                .unwrap_or_default()
        ),
        svm_seconds,
    ));
    let passes = svm.n_iter();
    progress.note(&format!(
        "{name}: {svm_seconds:.1} s, outer passes at C = {cc}: mean {:.1}, max {}",
        passes.iter().sum::<usize>() as f64 / passes.len().max(1) as f64,
        passes.iter().max().copied().unwrap_or(0)
    ));
    let stopped = svm.converged().iter().filter(|&&v| !v).count();
    if stopped > 0 {
        progress.warn(&format!(
            "{name}: {stopped} of {n_classes} one-vs-rest SVMs stopped at the cap of {} passes before the stopping rule",
            OutOfCoreSvmParams::DEFAULT_MAX_PASSES
        ));
    }
    let seconds = (norm_seconds, svm_seconds);
    let row = result_row(c, spec, whiten, scale, src.dim(), &pred, (cc, cv), seconds)?;
    Ok((row, svm))
}
