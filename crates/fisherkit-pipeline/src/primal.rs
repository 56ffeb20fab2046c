//! The primal classifier path (docs/pipeline.md §4b): the encoder's final
//! features read row block by row block from the stores
//! ([`FeatureRows`], a [`RowSource`]) and the one-vs-rest SVM trained out of
//! core on them ([`fisherkit::svm::OutOfCoreSvmParams`]), for runs whose
//! (n, n) training kernels would not fit in memory.
//!
//! A feature set is the concatenation of term parts (a term's columns of one
//! store at one scale), each transformed as in [`crate::kernel`]: whitening
//! $g_{ij}/\sqrt{F_j}$, signed power, then its own L2 norm,
//! $x_i = p_i / \|p_i\|$. The norms and the whitening's $F$ need every row
//! (resp. every training row) once, so they are computed first, column block
//! by column block as the kernels are, and kept per part ([`PartNorms`]: N
//! floats and a part width of floats), shared by every row of the report that
//! uses the part. Memory: one row block of the SVM (its `block_bytes`), the
//! weights (K, D) and these vectors — nothing N × N.

use crate::kernel::{block_cols, TermColumns};
use crate::PipelineError;
use fisherkit::svm::{RowSource, SvmError};
use ndarray::{s, Array1, ArrayViewMut2};
use std::sync::Arc;

/// Columns per read of one part inside a row block (bounds the temporary).
const READ_COLS: usize = 16_384;

/// What a part's transform needs beyond its columns: the per-column
/// whitening scale (if whitened), the Fisher-information estimate it came
/// from, and $1/\|p_i\|$ per row of the run (in the order of the run's rows).
#[derive(Debug, Clone)]
pub(crate) struct PartNorms {
    pub scale: Option<Array1<f32>>,
    pub fim: Option<Array1<f32>>,
    pub inv_norm: Arc<Vec<f64>>,
}

impl PartNorms {
    /// Streams the part's columns of `rows` (train rows first, `n_train` of
    /// them) once for the whitening (training rows) and once for the norms.
    ///
    /// # Errors
    /// A failed read of a store.
    pub(crate) fn compute(
        cols: &TermColumns<'_>,
        rows: &[usize],
        n_train: usize,
    ) -> Result<Self, PipelineError> {
        let fim = if cols.whiten {
            Some(cols.fisher_information(&rows[..n_train])?)
        } else {
            None
        };
        let scale = fim.as_ref().map(TermColumns::white_scale);
        let mut sq = vec![0.0f64; rows.len()];
        for (range, off) in cols.blocks(block_cols(rows.len())) {
            let mut x = cols.read(rows, range.clone())?;
            let sc = scale
                .as_ref()
                .map(|s| &s.as_slice().expect("contiguous")[off..off + range.len()]);
            cols.transform(&mut x, sc);
            for (acc, row) in sq.iter_mut().zip(x.rows()) {
                *acc += row.iter().map(|&v| v as f64 * v as f64).sum::<f64>();
            }
        }
        let inv_norm = sq
            .iter()
            .map(|&s| crate::classifier::inv_norm(s, cols.norm.l2))
            .collect();
        Ok(Self {
            scale,
            fim,
            inv_norm: Arc::new(inv_norm),
        })
    }
}

/// The final features of a set of parts, row i = the run's row `rows[i]`.
pub(crate) struct FeatureRows<'a> {
    parts: Vec<(TermColumns<'a>, PartNorms)>,
    rows: &'a [usize],
    dim: usize,
}

impl<'a> FeatureRows<'a> {
    pub(crate) fn new(parts: Vec<(TermColumns<'a>, PartNorms)>, rows: &'a [usize]) -> Self {
        let dim = parts.iter().map(|(c, _)| c.width()).sum();
        Self { parts, rows, dim }
    }
}

impl RowSource for FeatureRows<'_> {
    fn n_rows(&self) -> usize {
        self.rows.len()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn read_rows(&self, pos: &[usize], mut out: ArrayViewMut2<'_, f32>) -> Result<(), SvmError> {
        let store_rows: Vec<usize> = pos.iter().map(|&p| self.rows[p]).collect();
        let mut base = 0;
        for (cols, norms) in &self.parts {
            for (range, off) in cols.blocks(READ_COLS) {
                let mut x = cols
                    .read(&store_rows, range.clone())
                    .map_err(|e| SvmError::Source(e.to_string()))?;
                let sc = norms
                    .scale
                    .as_ref()
                    .map(|s| &s.as_slice().expect("contiguous")[off..off + range.len()]);
                cols.transform(&mut x, sc);
                for (mut row, &p) in x.rows_mut().into_iter().zip(pos) {
                    let inv = norms.inv_norm[p] as f32;
                    row.mapv_inplace(|v| v * inv);
                }
                out.slice_mut(s![.., base + off..base + off + range.len()])
                    .assign(&x);
            }
            base += cols.width();
        }
        Ok(())
    }
}
