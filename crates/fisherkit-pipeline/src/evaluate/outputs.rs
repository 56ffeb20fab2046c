//! The output folder's SVMs, whitened MFA files and encodings, and the
//! whitening of a trained encoder's parts.

use super::{Classes, Fims};
use crate::kernel::TermKernel;
use crate::output::OutputDir;
use crate::spec::{EncoderSpec, Term};
use crate::stages::{Fitted, ModelKind, ModelSpec};
use crate::PipelineError;
use fisherkit::svm::LinearSvc;

/// The trained SVM `model` of one encoder (its `f32` weights over the
/// parts, formed by the primal path's solver or by the kernel path's test
/// pass) and the whitening of each part; with an output folder, also writes
/// the SVM, the whitened MFA files and, if asked, the encodings there.
#[allow(clippy::too_many_arguments)]
pub(super) fn outputs(
    c: &Classes<'_>,
    out: Option<&OutputDir>,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    parts: &[(usize, usize, TermKernel)],
    model: LinearSvc<f32>,
    cost: f64,
) -> Result<(LinearSvc<f32>, Fims), PipelineError> {
    let nt = c.n_train;
    let (train_rows, test_rows) = c.rows.split_at(nt);
    let dim: usize = parts
        .iter()
        .map(|(ti, s, _)| c.columns(&spec.terms[*ti], *s, kinds, whiten).width())
        .sum();
    if model.input_dim() != dim {
        return Err(PipelineError::at(
            "SVM",
            format!(
                "weights of width {} for parts of width {dim}",
                model.input_dim()
            ),
        ));
    }
    let stem = format!("{}{}", spec.name(), if whiten { "-whitened" } else { "" });
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
        // Rows are read only to write the encodings.
        if let Some((tr, te)) = writers.as_mut() {
            let start = off;
            cols.for_each_block(train_rows, k, inv_tr, |x| {
                tr.write_columns(off, x)
                    .map_err(|e| PipelineError::at("output", e))?;
                off += x.ncols();
                Ok(())
            })?;
            let mut toff = start;
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
    let fims = parts.iter().map(|(_, _, k)| k.fim.clone()).collect();
    let model = match out {
        Some(out) => out.svm(&stem, model, &c.inputs.classes, cost)?,
        None => model,
    };
    Ok((model, fims))
}
