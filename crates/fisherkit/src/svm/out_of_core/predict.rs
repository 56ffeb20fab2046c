//! Streamed prediction: decision values block by block from a [`RowSource`].

use super::source::RowSource;
use crate::linalg::{gemm, par_all};
use crate::svm::error::SvmError;
use crate::svm::model::{argmax, LinearSvc};
use ndarray::{Array2, ArrayView2};

/// Rows per block of a streamed prediction: what `block_bytes` holds.
fn predict_rows_per_block(block_bytes: usize, dim: usize) -> usize {
    (block_bytes / (4 * dim.max(1))).clamp(16, 4096)
}

/// The predicted class of each of the rows `rows` of `src`, streamed in
/// blocks of at most `block_bytes` bytes.
///
/// # Errors
/// A source of another width than the model's, a failing source.
pub fn predict_rows<S: RowSource>(
    model: &LinearSvc<f32>,
    src: &S,
    rows: &[usize],
    block_bytes: usize,
) -> Result<Vec<usize>, SvmError> {
    let mut out = Vec::with_capacity(rows.len());
    for_each_decision_block(model, src, rows, block_bytes, |f| {
        out.extend(f.outer_iter().map(|r| argmax(r.iter().map(|&v| v as f64))));
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with the decision values (B, K) of consecutive blocks of `rows`.
///
/// # Errors
/// A source of another width than the model's, a failing source, `f`'s error.
pub fn for_each_decision_block<S: RowSource>(
    model: &LinearSvc<f32>,
    src: &S,
    rows: &[usize],
    block_bytes: usize,
    mut f: impl FnMut(ArrayView2<'_, f32>) -> Result<(), SvmError>,
) -> Result<(), SvmError> {
    if src.dim() != model.input_dim() {
        return Err(SvmError::Source(format!(
            "rows of width {} for a model of width {}",
            src.dim(),
            model.input_dim()
        )));
    }
    let b = predict_rows_per_block(block_bytes.max(1), src.dim());
    let mut buf = Array2::<f32>::zeros((0, 0));
    for chunk in rows.chunks(b) {
        if buf.nrows() != chunk.len() {
            buf = Array2::zeros((chunk.len(), src.dim()));
        }
        src.read_rows(chunk, buf.view_mut())?;
        let mut d = Array2::<f32>::zeros((chunk.len(), model.n_classes()));
        gemm(
            d.view_mut(),
            false,
            buf.view(),
            model.coef.t(),
            1.0,
            par_all(),
        );
        for mut r in d.rows_mut() {
            r += &model.intercept;
        }
        f(d.view())?;
    }
    Ok(())
}
