//! The output folder's SVMs, whitened MFA files and encodings, and the
//! f32 weights of a trained encoder (formed block by block on the kernel path).

use super::{Classes, Fims, Trained};
use crate::error::zeros_checked;
use crate::kernel::TermKernel;
use crate::output::OutputDir;
use crate::spec::{EncoderSpec, Term};
use crate::stages::{Fitted, ModelKind, ModelSpec};
use crate::PipelineError;
use fisherkit::svm::LinearSvc;
use ndarray::{s, Array2};

/// The trained SVM of one encoder as f32 weights over its parts (formed
/// block by block from the training rows on the kernel path) and the
/// whitening of each part; with an output folder, also writes the SVM, the
/// whitened MFA files and, if asked, the encodings there.
#[allow(clippy::too_many_arguments)]
pub(super) fn outputs(
    c: &Classes<'_>,
    out: Option<&OutputDir>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    parts: &[(usize, usize, TermKernel)],
    trained: Trained<'_>,
    cost: f64,
) -> Result<(LinearSvc<f32>, Fims), PipelineError> {
    let nt = c.n_train;
    let (train_rows, test_rows) = c.rows.split_at(nt);
    let n_classes = match &trained {
        Trained::Gram(svm) => svm.n_classes(),
        Trained::Primal(svm) => svm.n_classes(),
    };
    let dim: usize = parts
        .iter()
        .map(|(ti, s, _)| c.columns(&spec.terms[*ti], *s, kinds, whiten).width())
        .sum();
    let stem = format!("{}{}", spec.name(), if whiten { "-whitened" } else { "" });
    // The Gram path forms its weights block by block below; the primal path has them.
    let mut weights = match &trained {
        // classes × dimension: gigabytes at SUN397's size
        Trained::Gram(_) => zeros_checked::<f64>(
            n_classes,
            dim,
            "SVM",
            "SVM weights",
            "fewer encoders or a smaller encoder (--encoders) lower it",
        )?,
        Trained::Primal(_) => Array2::<f64>::zeros((0, 0)),
    };
    let mut writers = match out {
        Some(out) if out.encodings => Some((
            out.encoding_writer(&stem, "train", nt, dim)?,
            out.encoding_writer(&stem, "test", test_rows.len(), dim)?,
        )),
        _ => None,
    };
    let mut off = 0;
    for (ti, s, k) in parts {
        let cols = c.columns(&spec.terms[*ti], *s, kinds, whiten);
        let (inv_tr, inv_te) = k.inv_norm.as_slice().expect("contiguous").split_at(nt);
        // The primal path has its weights: rows are read only to write the encodings.
        let needs_rows = matches!(trained, Trained::Gram(_)) || writers.is_some();
        cols.for_each_block(if needs_rows { train_rows } else { &[] }, k, inv_tr, |x| {
            if let Trained::Gram(svm) = &trained {
                let w = svm.weights_block(x).map_err(PipelineError::stage("SVM"))?;
                weights.slice_mut(s![.., off..off + x.ncols()]).assign(&w);
            }
            if let Some((tr, _)) = writers.as_mut() {
                tr.write_columns(off, x)
                    .map_err(|e| PipelineError::at("output", e))?;
            }
            off += x.ncols();
            Ok(())
        })?;
        if let Some((_, te)) = writers.as_mut() {
            let mut toff = off - cols.width();
            cols.for_each_block(test_rows, k, inv_te, |x| {
                te.write_columns(toff, x)
                    .map_err(|e| PipelineError::at("output", e))?;
                toff += x.ncols();
                Ok(())
            })?;
        }
        if let (Some(out), Term::MfaFs(parts), Some(fim)) = (out, &spec.terms[*ti], &k.fim) {
            let Fitted::Mfa(m) = &c.learned.models[&ModelSpec {
                scale: *s,
                kind: kinds.1,
            }] else {
                unreachable!("an MFA spec holds an MFA")
            };
            out.mfa_whitened(&c.inputs.scale_names[*s], m, parts, fim)?;
        }
    }
    if let Some((tr, te)) = writers {
        tr.finish().map_err(|e| PipelineError::at("output", e))?;
        te.finish().map_err(|e| PipelineError::at("output", e))?;
    }
    let model = match trained {
        Trained::Gram(svm) => LinearSvc::from_parts(
            weights.mapv(|v| v as f32),
            svm.intercept().mapv(|v| v as f32),
        )
        .map_err(PipelineError::stage("SVM"))?,
        Trained::Primal(svm) => svm,
    };
    let fims = parts.iter().map(|(_, _, k)| k.fim.clone()).collect();
    let model = match out {
        Some(out) => out.svm(&stem, model, &c.inputs.classes, cost)?,
        None => model,
    };
    Ok((model, fims))
}
