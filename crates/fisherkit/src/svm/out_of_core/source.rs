//! Where the out-of-core solver's rows come from: [`RowSource`].

use crate::svm::error::SvmError;
use ndarray::{ArrayView2, ArrayViewMut2};

/// Rows of a data set read on demand, block by block (what
/// [`ValidOutOfCoreSvmParams`](super::ValidOutOfCoreSvmParams) trains on).
pub trait RowSource: Sync {
    /// Number of rows N.
    fn n_rows(&self) -> usize;
    /// Width D of a row.
    fn dim(&self) -> usize;
    /// Writes the rows `rows` (indices in `0..N`) into `out` (`rows.len()`, D).
    ///
    /// # Errors
    /// Whatever reading the rows can fail with, as [`SvmError::Source`].
    fn read_rows(&self, rows: &[usize], out: ArrayViewMut2<'_, f32>) -> Result<(), SvmError>;
}

impl RowSource for ArrayView2<'_, f32> {
    fn n_rows(&self) -> usize {
        self.nrows()
    }
    fn dim(&self) -> usize {
        self.ncols()
    }
    fn read_rows(&self, rows: &[usize], mut out: ArrayViewMut2<'_, f32>) -> Result<(), SvmError> {
        for (mut o, &r) in out.rows_mut().into_iter().zip(rows) {
            o.assign(&self.row(r));
        }
        Ok(())
    }
}
