//! Writing whole (N, D) arrays as `.npy` files, atomically.

use super::dtype::{Element, Matrix};
use super::header::npy_header;
use crate::atomic::write_atomically;
use crate::error::Result;
use ndarray::ArrayView2;
use ndarray_npy::WriteNpyExt;
use std::io;
use std::path::Path;

/// Writes `a` (N, D) as a C-order little-endian `.npy` file, atomically: the
/// data go to a temporary file in the same directory, which is synced and then
/// renamed over `path`. On error nothing is left behind.
pub fn write_npy<F: Element>(path: impl AsRef<Path>, a: ArrayView2<'_, F>) -> Result<()> {
    let path = path.as_ref();
    if a.is_empty() {
        // ndarray-npy 0.10 panics on arrays with a zero-length axis: the
        // header alone is the whole file (numpy format 1.0).
        let header = npy_header(F::DTYPE.npy_descr(), &[a.nrows(), a.ncols()]);
        return write_atomically(path, |w| io::Write::write_all(w, &header));
    }
    let a = a.as_standard_layout();
    write_atomically(path, |w| a.write_npy(w).map_err(io::Error::other))
}

/// Writes a [`Matrix`] with [`write_npy`].
pub fn write_matrix(path: impl AsRef<Path>, m: &Matrix) -> Result<()> {
    match m {
        Matrix::F32(a) => write_npy(path, a.view()),
        Matrix::F64(a) => write_npy(path, a.view()),
    }
}
