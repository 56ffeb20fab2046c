//! [`NpyBlockWriter`]: an f32 `.npy` file written a column block or a row at
//! a time, for matrices too large to hold.

use super::dtype::Dtype;
use super::header::npy_header;
use crate::error::{IoError, Result};
use ndarray::ArrayView2;
use std::path::Path;

/// Writes a C-order f32 `.npy` file of shape (rows, cols) one column block at
/// a time, for matrices too large to hold: the file is a temporary beside
/// `path`, sized up front, filled with positioned writes by
/// [`NpyBlockWriter::write_columns`], and renamed over `path` by
/// [`NpyBlockWriter::finish`] once synced. Dropped unfinished, it removes the
/// temporary file: a reader never sees a partial matrix.
pub struct NpyBlockWriter {
    path: std::path::PathBuf,
    tmp: Option<tempfile::NamedTempFile>,
    header_len: u64,
    rows: usize,
    cols: usize,
}

impl NpyBlockWriter {
    /// Starts `path` for a (rows, cols) f32 matrix.
    ///
    /// # Errors
    /// The folder cannot hold the temporary file, or the disk is full.
    pub fn create(path: impl AsRef<Path>, rows: usize, cols: usize) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".npy-block.")
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| IoError::os(&path, e))?;
        let header = npy_header(Dtype::F32.npy_descr(), &[rows, cols]);
        use std::os::unix::fs::FileExt;
        tmp.as_file()
            .write_all_at(&header, 0)
            .and_then(|_| {
                tmp.as_file()
                    .set_len(header.len() as u64 + (rows * cols * 4) as u64)
            })
            .map_err(|e| IoError::os(&path, e))?;
        Ok(Self {
            header_len: header.len() as u64,
            path,
            tmp: Some(tmp),
            rows,
            cols,
        })
    }

    /// Writes the block `x` (rows, w) at columns `first..first + w`.
    ///
    /// # Errors
    /// A block of the wrong height or beyond the last column, a failed write.
    pub fn write_columns(&mut self, first: usize, x: ArrayView2<'_, f32>) -> Result<()> {
        if x.nrows() != self.rows || first + x.ncols() > self.cols {
            return Err(IoError::format(
                &self.path,
                format!(
                    "block ({}, {}) at column {first} does not fit a ({}, {}) matrix",
                    x.nrows(),
                    x.ncols(),
                    self.rows,
                    self.cols
                ),
            ));
        }
        use std::os::unix::fs::FileExt;
        let f = self.tmp.as_ref().expect("open until finished").as_file();
        let mut buf = Vec::with_capacity(x.ncols() * 4);
        for (i, row) in x.rows().into_iter().enumerate() {
            buf.clear();
            buf.extend(row.iter().flat_map(|v| v.to_le_bytes()));
            let at = self.header_len + ((i * self.cols + first) * 4) as u64;
            f.write_all_at(&buf, at)
                .map_err(|e| IoError::os(&self.path, e))?;
        }
        Ok(())
    }

    /// Writes row `i` (all its columns).
    ///
    /// # Errors
    /// A row of the wrong length or beyond the last row, a failed write.
    pub fn write_row(&mut self, i: usize, row: &[f32]) -> Result<()> {
        if i >= self.rows || row.len() != self.cols {
            return Err(IoError::format(
                &self.path,
                format!(
                    "row {i} of {} values does not fit a ({}, {}) matrix",
                    row.len(),
                    self.rows,
                    self.cols
                ),
            ));
        }
        use std::os::unix::fs::FileExt;
        let f = self.tmp.as_ref().expect("open until finished").as_file();
        let buf: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_all_at(&buf, self.header_len + (i * self.cols * 4) as u64)
            .map_err(|e| IoError::os(&self.path, e))
    }

    /// Syncs the file and renames it over the target.
    ///
    /// # Errors
    /// A failed sync or rename (the temporary file is removed).
    pub fn finish(mut self) -> Result<()> {
        let tmp = self.tmp.take().expect("open until finished");
        tmp.as_file()
            .sync_all()
            .map_err(|e| IoError::os(&self.path, e))?;
        tmp.persist(&self.path)
            .map_err(|e| IoError::os(&self.path, e.error))?;
        Ok(())
    }
}
