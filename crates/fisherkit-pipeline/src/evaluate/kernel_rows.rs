//! The kernel path's report rows (docs/pipeline.md §4): an encoder's
//! training kernels per scale and in all, an SVM on each, the test images
//! scored through the term columns, the compact variant.

use super::{result_row, row_summary, Classes, Trained};
use crate::kernel::{kernel_pca, load_gram, TermKernel};
use crate::progress::stop_if_cancelled;
use crate::report::ResultRow;
use crate::spec::{EncoderSpec, Term};
use crate::stages::ModelKind;
use crate::trained::{self, Candidate};
use crate::{PipelineError, Progress};
use fisherkit::svm::LinearSvc;
use ndarray::Array2;
use std::time::Instant;

/// One evaluated encoder: where its training kernels are and what the
/// outputs and the test rows need.
pub(crate) struct SpecKernels {
    /// (scale, run-folder kernel name) of each local part (not `cnn-global`),
    /// in part order: a row's kernel is the sum of its scales' parts, read
    /// back one at a time ([`SpecKernels::row_kernel`]).
    pub(super) local: Vec<(usize, String)>,
    /// The kernel of a `cnn-global` term (one per image, not per scale),
    /// held: it joins every row.
    pub(super) global: Option<Array2<f32>>,
    /// (term index, scale, kernel without the Gram) in output order, for
    /// the test rows' decision values, the weights and the encodings.
    pub(super) parts: Vec<(usize, usize, TermKernel)>,
}

impl SpecKernels {
    /// The training kernel of the row at `scale` (`None`: all scales): the
    /// local parts of that scale (of every scale, in scale order), each read
    /// from the run folder and added in place, then the `cnn-global` one
    /// (moved out for the all-scale row, the last to need it). In memory at
    /// once: the sum, one part being added and the global kernel.
    ///
    /// # Errors
    /// A part's kernel file unreadable (removed or damaged under the run).
    pub(super) fn row_kernel(
        &mut self,
        c: &Classes<'_>,
        scale: Option<usize>,
    ) -> Result<Array2<f32>, PipelineError> {
        self.row_kernel_in(&c.kernel_dir, c.n_train, c.progress, scale)
    }

    /// [`Self::row_kernel`] with the part kernels in `dir`, (n_train, n_train) each.
    fn row_kernel_in(
        &mut self,
        dir: &std::path::Path,
        n_train: usize,
        progress: &dyn Progress,
        scale: Option<usize>,
    ) -> Result<Array2<f32>, PipelineError> {
        let mut g = None;
        for (s, name) in &self.local {
            if scale.is_none_or(|want| want == *s) {
                stop_if_cancelled(progress)?;
                add_kernel(&mut g, load_gram(dir, name, n_train)?);
            }
        }
        let global = if scale.is_none() {
            self.global.take()
        } else {
            self.global.clone()
        };
        if let Some(k) = global {
            add_kernel(&mut g, k);
        }
        Ok(g.expect("an encoder has at least one part"))
    }
}

/// `acc += g`, `g` moved in when `acc` is empty (no (N, N) copy).
pub(super) fn add_kernel(acc: &mut Option<Array2<f32>>, g: Array2<f32>) {
    match acc {
        Some(a) => *a += &g,
        None => *acc = Some(g),
    }
}

/// An encoder's rows, their one-line summaries and its trained all-scale row.
pub(super) type EncoderRows = (Vec<ResultRow>, Vec<String>, Option<Trained>);

/// The kernel path's rows of `spec`: per scale, then all scales, each an
/// SVM on the row's training kernel with the test rows scored through the
/// term columns, each kept in the run folder when finished (a killed run
/// started again, or the driver after a cluster's row tasks, reads it
/// instead of training it); the compact variant when asked. Returns the
/// rows, their one-line summaries and the all-scale row's SVM when formed
/// (for the output folder and the saved classifier).
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate_kernel(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    timings: &mut Vec<(String, f64)>,
    best: &Option<Candidate>,
) -> Result<EncoderRows, PipelineError> {
    let cfg = c.cfg;
    // The part kernels: computed (or read) when a row is trained, not for rows already finished.
    let mut ks: Option<(SpecKernels, f64)> = None;
    let (mut results, mut summary) = (Vec::new(), Vec::new());
    let mut trained_row = None;
    for scale in c.report_scales(spec) {
        // The weights of a row that cannot win are not formed.
        let want =
            |cv: f64| scale.is_none() && trained::wanted(cfg, spec) && trained::improves(best, cv);
        let keep = |cv: f64| scale.is_none() && (c.out.is_some() || want(cv));
        let compact = match (scale, cfg.compact_dim, spec.uses_mfa()) {
            (None, Some(d), true) => Some(d),
            _ => None,
        };
        let key = c.finished_key(spec, whiten, scale);
        let (row, formed, mut g, note) = match finished_row(c, &key, &keep) {
            Some((row, model)) => (row, model, None, ", from the run folder"),
            None => {
                let (ks, seconds) = spec_kernels(c, &mut ks, spec, kinds, whiten, timings)?;
                let (row, model, g) =
                    kernel_row(c, spec, whiten, kinds, ks, *seconds, scale, &keep)?;
                (row, model, compact.map(|_| g), "")
            }
        };
        if let Some(model) = formed {
            trained_row = Some((results.len(), model));
        }
        summary.push(row_summary(&row, note));
        let seconds = row.encode_seconds;
        results.push(row);
        if let Some(d) = compact {
            let (ks, _) = spec_kernels(c, &mut ks, spec, kinds, whiten, timings)?;
            let g = match g.take() {
                Some(g) => g,
                None => ks.row_kernel(c, None)?,
            };
            let row = compact_row(c, spec, whiten, kinds, &ks.parts, &g, d, seconds)?;
            summary.push(format!(
                "+ PCA ({}) {:.2} %",
                row.compact.unwrap_or(0),
                100.0 * row.accuracy
            ));
            results.push(row);
        }
    }
    // The parts' norms and whitening for the outputs: the kernels' when
    // computed here, else read from the stores.
    let trained = match trained_row {
        Some((row, model)) => {
            let parts = match ks {
                Some((ks, _)) => ks.parts,
                None => c.norm_parts(spec, &c.part_norms(spec, kinds, whiten, timings)?),
            };
            Some(Trained { row, model, parts })
        }
        None => None,
    };
    Ok((results, summary, trained))
}

/// The part kernels of `spec` in `ks` and the seconds they took, computed
/// (or read from the run folder) on first use.
fn spec_kernels<'k>(
    c: &Classes<'_>,
    ks: &'k mut Option<(SpecKernels, f64)>,
    spec: &EncoderSpec,
    kinds: (ModelKind, ModelKind),
    whiten: bool,
    timings: &mut Vec<(String, f64)>,
) -> Result<&'k mut (SpecKernels, f64), PipelineError> {
    if ks.is_none() {
        let t = Instant::now();
        let k = c.kernels(spec, kinds, whiten, timings)?;
        *ks = Some((k, t.elapsed().as_secs_f64()));
    }
    Ok(ks.as_mut().expect("computed above"))
}

/// The row kept in the run folder under `key`, with its SVM when
/// `keep(its cross-validated accuracy)` asks for it (a row kept without
/// its SVM then counts as not finished).
fn finished_row(
    c: &Classes<'_>,
    key: &str,
    keep: &dyn Fn(f64) -> bool,
) -> Option<(ResultRow, Option<LinearSvc<f32>>)> {
    let (row, _) = c.finished.load(key, false)?;
    if !keep(trained::cv_score(&row)) {
        return Some((row, None));
    }
    match c.finished.load(key, true)? {
        (row, Some(model)) => Some((row, Some(model))),
        _ => None,
    }
}

/// A trained kernel-path row: the row, the SVM's weights if formed, the
/// row's training kernel.
pub(crate) type KernelRow = (ResultRow, Option<LinearSvc<f32>>, Array2<f32>);

/// Trains one report row of `spec` at `scale` on the kernel path and keeps
/// it in the run folder, with the SVM's weights when `keep(cross-validated
/// accuracy)` asks for them: the unit of the kernel path, in
/// [`evaluate_kernel`] and in a classifier task of another process alike.
/// `ks`: the spec's part kernels, which took `kernel_seconds`. Returns the
/// row, the weights if formed and the row's training kernel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn kernel_row(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    ks: &mut SpecKernels,
    kernel_seconds: f64,
    scale: Option<usize>,
    keep: &dyn Fn(f64) -> bool,
) -> Result<KernelRow, PipelineError> {
    let g = ks.row_kernel(c, scale)?;
    let t = Instant::now();
    let (dim, cc, cv, pred, formed) =
        c.classify(&g, spec, kinds, whiten, &ks.parts, scale, keep)?;
    let seconds = (kernel_seconds, t.elapsed().as_secs_f64());
    let row = result_row(c, spec, whiten, scale, dim, &pred, (cc, cv), seconds)?;
    let key = c.finished_key(spec, whiten, scale);
    let classes = c.inputs.classes.as_slice();
    let formed = c.finished.save(&key, &row, formed, Some(classes))?;
    Ok((row, formed, g))
}

/// The parts of `spec` that the row at `scale` holds: the local terms at
/// that scale (all scales: `None`) and `cnn-global`.
pub(super) fn row_parts<'k>(
    spec: &EncoderSpec,
    parts: &'k [(usize, usize, TermKernel)],
    scale: Option<usize>,
) -> Vec<(usize, usize, &'k TermKernel)> {
    parts
        .iter()
        .filter(|(ti, sc, _)| scale.is_none_or(|s| *sc == s || spec.terms[*ti] == Term::CnnGlobal))
        .map(|(ti, sc, k)| (*ti, *sc, k))
        .collect()
}

/// The compact variant of the all-scale row: kernel PCA of the training
/// kernel `g` to `dim` components, the test rows projected through their
/// test × train kernel, an SVM on the projections' kernel.
#[allow(clippy::too_many_arguments)]
pub(super) fn compact_row(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    parts: &[(usize, usize, TermKernel)],
    g: &Array2<f32>,
    dim: usize,
    kernel_seconds: f64,
) -> Result<ResultRow, PipelineError> {
    let t = Instant::now();
    let cross = c.cross_kernel(spec, kinds, whiten, parts, None)?;
    let (ktr, kte, kept) = kernel_pca(g.mapv(f64::from).view(), cross.view(), dim)?;
    let (svm, cc, cv) = c.fit_kernel(ktr.view())?;
    let pred = svm
        .predict(kte.view())
        .map_err(PipelineError::stage("SVM"))?;
    let seconds = (kernel_seconds, t.elapsed().as_secs_f64());
    let mut row = result_row(c, spec, whiten, None, kept, &pred, (cc, cv), seconds)?;
    row.compact = Some(kept);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::save_kernel;
    use crate::NoProgress;
    use ndarray::{Array1, Array2};

    fn part(seed: f32, n: usize) -> TermKernel {
        TermKernel {
            gram: Array2::from_shape_fn((n, n), |(i, j)| seed + (i * n + j) as f32),
            inv_norm: Array1::ones(n + 1),
            fim: None,
        }
    }

    #[test]
    fn a_rows_kernel_is_the_sum_of_its_scales_parts_and_the_global_one() {
        let dir = tempfile::tempdir().unwrap();
        let n = 3;
        // parts at scales 0, 1, 0 (a two-term encoder) and a global kernel
        let (p0, p1, p2, glob) = (part(1.0, n), part(10.0, n), part(100.0, n), part(1000.0, n));
        for (name, k) in [("a", &p0), ("b", &p1), ("c", &p2)] {
            save_kernel(dir.path(), name, k).unwrap();
        }
        let mut ks = SpecKernels {
            local: vec![(0, "a".into()), (1, "b".into()), (0, "c".into())],
            global: Some(glob.gram.clone()),
            parts: Vec::new(),
        };
        let mut row = |s| ks.row_kernel_in(dir.path(), n, &NoProgress, s).unwrap();
        assert_eq!(row(Some(0)), &p0.gram + &p2.gram + &glob.gram);
        assert_eq!(row(Some(1)), &p1.gram + &glob.gram);
        assert_eq!(row(None), &p0.gram + &p1.gram + &p2.gram + &glob.gram);
        assert!(
            ks.global.is_none(),
            "the all-scale row, last, takes the global kernel"
        );
        // a part file that went missing is an error naming it, not a panic
        std::fs::remove_file(dir.path().join("b.gram32.npy")).unwrap();
        ks.global = None;
        let e = ks
            .row_kernel_in(dir.path(), n, &NoProgress, Some(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.gram32.npy"), "{e}");
        // of another size: named too
        let e = ks
            .row_kernel_in(dir.path(), n + 1, &NoProgress, Some(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(4, 4)"), "{e}");
    }
}
