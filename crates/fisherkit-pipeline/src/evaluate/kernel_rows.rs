//! The kernel path's report rows (docs/pipeline.md §4): an encoder's
//! training kernels per scale and in all, an SVM on each, the test images
//! scored through the term columns, the compact variant.

use super::outputs::outputs;
use super::{candidate, result_row, row_summary, Classes};
use crate::kernel::{kernel_pca, TermKernel};
use crate::report::ResultRow;
use crate::spec::{EncoderSpec, Term};
use crate::stages::ModelKind;
use crate::trained::{self, Candidate};
use crate::PipelineError;
use ndarray::Array2;
use std::time::Instant;

/// One evaluated encoder: its training kernel per scale and what the
/// outputs and the test rows need.
pub(super) struct SpecKernels {
    /// Σ over the local terms of the term kernels, per scale (`None` without local terms).
    pub(super) per_scale: Vec<Option<Array2<f32>>>,
    /// The kernel of a `cnn-global` term (one per image, not per scale).
    pub(super) global: Option<Array2<f32>>,
    /// (term index, scale, kernel without the Gram) in output order, for
    /// the test rows' decision values, the weights and the encodings.
    pub(super) parts: Vec<(usize, usize, TermKernel)>,
}

/// `acc += g`, `g` moved in when `acc` is empty (no (N, N) copy).
pub(super) fn add_kernel(acc: &mut Option<Array2<f32>>, g: Array2<f32>) {
    match acc {
        Some(a) => *a += &g,
        None => *acc = Some(g),
    }
}

/// The kernel path's rows of `spec`: its training kernels (per scale, all
/// scales), an SVM on each, the test rows scored through the term columns;
/// the output folder's files and the saved-model candidate for the
/// all-scale row; the compact variant when asked. Returns the rows and their
/// one-line summaries.
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate_kernel(
    c: &Classes<'_>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    yte: &[usize],
    timings: &mut Vec<(String, f64)>,
    best: &mut Option<Candidate>,
) -> Result<(Vec<ResultRow>, Vec<String>), PipelineError> {
    let cfg = c.cfg;
    let n_classes = c.inputs.classes.len();
    let t = Instant::now();
    let mut ks = c.kernels(spec, kinds, whiten, timings)?;
    let kernel_seconds = t.elapsed().as_secs_f64();
    let scales = c.report_scales(spec);
    let mut total = total_kernel(&mut ks, scales.len() > 1);
    let (mut results, mut summary) = (Vec::new(), Vec::new());
    // Per-scale rows first, each kernel moved out (not copied): at most the
    // scales' kernels, the total and the global one are held (n_train² f32 each).
    for scale in scales {
        let g = match scale {
            Some(s) => {
                let mut g = ks.per_scale[s]
                    .take()
                    .expect("a per-scale row has local terms");
                if let Some(k) = &ks.global {
                    g += k;
                }
                g
            }
            None => total.take().expect("the total is used once, last"),
        };
        let t = Instant::now();
        // The weights of a row that cannot win are not formed.
        let want =
            |cv: f64| scale.is_none() && trained::wanted(cfg, spec) && trained::improves(best, cv);
        let keep = |cv: f64| scale.is_none() && (c.out.is_some() || want(cv));
        let (dim, cc, cv, pred, formed) =
            c.classify(&g, spec, kinds, whiten, &ks.parts, scale, &keep)?;
        let mut row = result_row(
            spec,
            whiten,
            dim,
            n_classes,
            yte,
            &pred,
            cc,
            cv,
            kernel_seconds,
            t.elapsed().as_secs_f64(),
        )?;
        row.scale = scale.map(|s| c.inputs.scale_names[s].clone());
        if let Some(model) = formed {
            let want = want(trained::cv_score(&row));
            let (model, fims) = outputs(c, c.out, spec, whiten, kinds, &ks.parts, model, cc)?;
            if want {
                let cand = candidate(spec, whiten, model, fims, &row);
                trained::consider(best, cand);
            }
        }
        summary.push(row_summary(&row, ""));
        results.push(row);
        if let (None, Some(d), true) = (scale, cfg.compact_dim, spec.uses_mfa()) {
            let row = compact_row(
                c,
                spec,
                whiten,
                kinds,
                &ks.parts,
                &g,
                d,
                yte,
                kernel_seconds,
            )?;
            summary.push(format!(
                "+ PCA ({}) {:.2} %",
                row.compact.unwrap_or(0),
                100.0 * row.accuracy
            ));
            results.push(row);
        }
    }
    Ok((results, summary))
}

/// The all-scale kernel of `spec`: the sum of the per-scale ones and the
/// global one, copied when the per-scale rows still need theirs
/// (`keep_scales`), moved out of `ks` otherwise.
pub(super) fn total_kernel(ks: &mut SpecKernels, keep_scales: bool) -> Option<Array2<f32>> {
    let mut total = None;
    for k in ks.per_scale.iter_mut() {
        let g = if keep_scales { k.clone() } else { k.take() };
        if let Some(g) = g {
            add_kernel(&mut total, g);
        }
    }
    if let Some(g) = &ks.global {
        let g = if keep_scales {
            g.clone()
        } else {
            ks.global.take().expect("checked above")
        };
        add_kernel(&mut total, g);
    }
    total
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
    yte: &[usize],
    kernel_seconds: f64,
) -> Result<ResultRow, PipelineError> {
    let t = Instant::now();
    let cross = c.cross_kernel(spec, kinds, whiten, parts, None)?;
    let (ktr, kte, kept) = kernel_pca(g.mapv(f64::from).view(), cross.view(), dim)?;
    let (svm, cc, cv) = c.fit_kernel(ktr.view())?;
    let pred = svm
        .predict(kte.view())
        .map_err(PipelineError::stage("SVM"))?;
    let mut row = result_row(
        spec,
        whiten,
        kept,
        c.inputs.classes.len(),
        yte,
        &pred,
        cc,
        cv,
        kernel_seconds,
        t.elapsed().as_secs_f64(),
    )?;
    row.compact = Some(kept);
    Ok(row)
}
