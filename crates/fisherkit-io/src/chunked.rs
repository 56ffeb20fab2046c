//! Reading (N, D) `.npy` data in blocks of rows, for out-of-core training.
//!
//! [`NpyInfo::open`] parses and validates a header (2-D, float32/float64,
//! little-endian, C order) and checks the size it claims against the file
//! length before anything is allocated. [`NpySource`] is one or several such
//! files of the same width and dtype, read as one long matrix: its blocks hold
//! `chunk_rows` rows each (the last one fewer) whatever the file boundaries,
//! so the same rows split over several files give exactly the same blocks.
//! Memory is O(`chunk_rows`·D) whatever N.

use crate::error::{IoError, Result};
use crate::npy::{read_header, Dtype, Element, MatrixLayout};
use ndarray::{s, Array2, ArrayView2};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes read from the file per `read` call.
const READ_BYTES: usize = 1 << 22;

/// What the header of one `.npy` data file says, after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyInfo {
    /// The file.
    pub path: PathBuf,
    /// Element type.
    pub dtype: Dtype,
    /// Number of rows N.
    pub n_rows: usize,
    /// Number of columns D.
    pub dim: usize,
    /// Offset of the first data byte.
    pub data_offset: u64,
}

impl NpyInfo {
    /// Reads and validates the header of `path`: an (N, D) little-endian
    /// float32/float64 C-order array whose data bytes are exactly those the
    /// header claims (a truncated file or trailing bytes are errors naming
    /// the file).
    ///
    /// ```
    /// use fisherkit_io::{write_npy, Dtype, NpyInfo};
    /// use ndarray::Array2;
    ///
    /// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npyinfo-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("x.npy");
    /// write_npy(&path, Array2::<f32>::zeros((3, 2)).view())?;
    /// let info = NpyInfo::open(&path)?;
    /// assert_eq!((info.dtype, info.n_rows, info.dim), (Dtype::F32, 3, 2));
    /// // a file cut short is refused from its header, before any data is read
    /// let bytes = std::fs::read(&path)?;
    /// std::fs::write(&path, &bytes[..bytes.len() - 4])?;
    /// assert!(NpyInfo::open(&path).unwrap_err().to_string().contains("x.npy"));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| IoError::os(path, e))?;
        let meta = file.metadata().map_err(|e| IoError::os(path, e))?;
        if meta.is_dir() {
            return Err(IoError::format(path, "is a directory, not an .npy file"));
        }
        let mut r = BufReader::new(file);
        let header = read_header(&mut r).map_err(|e| IoError::format(path, e))?;
        let layout: MatrixLayout = header
            .matrix_layout()
            .map_err(|e| IoError::format(path, e))?;
        layout
            .check_available(meta.len().saturating_sub(header.data_offset as u64))
            .map_err(|e| IoError::format(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            dtype: layout.dtype,
            n_rows: layout.n,
            dim: layout.d,
            data_offset: header.data_offset as u64,
        })
    }
}

/// One or several (N_i, D) `.npy` files read as their row-wise concatenation,
/// block by block (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct NpySource {
    files: Vec<NpyInfo>,
}

impl NpySource {
    /// Opens the headers of `paths` (at least one), checking that every file
    /// has the dtype and the number of columns of the first; an error names
    /// the file that differs.
    ///
    /// ```
    /// use fisherkit_io::{write_npy, IoError, NpySource};
    /// use ndarray::{concatenate, Array2, Axis};
    ///
    /// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npysource-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let a = Array2::from_shape_fn((3, 2), |(i, j)| (10 * i + j) as f64);
    /// let b = Array2::from_shape_fn((2, 2), |(i, j)| (100 + 10 * i + j) as f64);
    /// let (pa, pb) = (dir.join("a.npy"), dir.join("b.npy"));
    /// write_npy(&pa, a.view())?;
    /// write_npy(&pb, b.view())?;
    /// let src = NpySource::open(&[&pa, &pb])?;
    /// assert_eq!((src.n_rows(), src.dim()), (5, 2));
    /// // blocks of 2 rows across the two files: their rows are the files' in order
    /// let mut rows = Vec::new();
    /// src.for_each_block::<f64, IoError>(2, &mut |block| {
    ///     assert!(block.nrows() <= 2);
    ///     rows.extend(block.iter().copied());
    ///     Ok(())
    /// })?;
    /// assert_eq!(rows, concatenate![Axis(0), a, b].into_raw_vec_and_offset().0);
    /// // a file of another width is named
    /// write_npy(&pb, Array2::<f64>::zeros((2, 3)).view())?;
    /// let e = NpySource::open(&[&pa, &pb]).unwrap_err().to_string();
    /// assert!(e.contains("b.npy") && e.contains("has 3 columns"), "{e}");
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<Self> {
        let Some(first) = paths.first() else {
            return Err(IoError::format(Path::new("-"), "no input files"));
        };
        let first = NpyInfo::open(first)?;
        let mut files = vec![first];
        for p in &paths[1..] {
            let info = NpyInfo::open(p)?;
            let f0 = &files[0];
            if info.dtype != f0.dtype {
                return Err(IoError::format(
                    &info.path,
                    format!(
                        "holds {} but {} holds {}; every input must have the same dtype",
                        info.dtype,
                        f0.path.display(),
                        f0.dtype
                    ),
                ));
            }
            if info.dim != f0.dim {
                return Err(IoError::format(
                    &info.path,
                    format!(
                        "has {} columns but {} has {}; every input must have the same width",
                        info.dim,
                        f0.path.display(),
                        f0.dim
                    ),
                ));
            }
            files.push(info);
        }
        Ok(Self { files })
    }

    /// The files, in reading order.
    pub fn files(&self) -> &[NpyInfo] {
        &self.files
    }

    /// Total number of rows N (the sum of the headers').
    pub fn n_rows(&self) -> usize {
        self.files.iter().map(|f| f.n_rows).sum()
    }

    /// Number of columns D.
    pub fn dim(&self) -> usize {
        self.files[0].dim
    }

    /// Element type.
    pub fn dtype(&self) -> Dtype {
        self.files[0].dtype
    }

    /// Calls `visit` on consecutive blocks of rows, each of `chunk_rows` rows
    /// (≥ 1) except the last, in file order, with buffered reads; stops at the
    /// first error of `visit` and returns it. `F` must be the files' dtype.
    /// Every value is checked to be finite: a NaN or infinity is an error
    /// naming the file, row and column. Rows with D = 0 or files with N = 0
    /// contribute no block.
    pub fn for_each_block<F: Element, E: From<IoError>>(
        &self,
        chunk_rows: usize,
        visit: &mut dyn FnMut(ArrayView2<'_, F>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let d = self.dim();
        if F::DTYPE != self.dtype() {
            return Err(IoError::format(
                &self.files[0].path,
                format!("holds {} but {} was requested", self.dtype(), F::DTYPE),
            )
            .into());
        }
        let chunk_rows = chunk_rows.max(1);
        if d == 0 || self.n_rows() == 0 {
            return Ok(());
        }
        let block_rows = chunk_rows.min(self.n_rows());
        let mut block = Array2::<F>::zeros((block_rows, d));
        let mut filled = 0usize;
        let size = F::DTYPE.size();
        let row_bytes = d * size;
        let mut bytes = vec![0u8; READ_BYTES.max(row_bytes).div_ceil(row_bytes) * row_bytes];
        for info in &self.files {
            let path = &info.path;
            let mut file = File::open(path).map_err(|e| IoError::os(path, e))?;
            file.seek(SeekFrom::Start(info.data_offset))
                .map_err(|e| IoError::os(path, e))?;
            let mut r = BufReader::with_capacity(1 << 16, file);
            let mut row_in_file = 0usize;
            while row_in_file < info.n_rows {
                let rows = (info.n_rows - row_in_file)
                    .min(block_rows - filled)
                    .min(bytes.len() / row_bytes);
                let buf = &mut bytes[..rows * row_bytes];
                r.read_exact(buf).map_err(|e| {
                    IoError::format(
                        path,
                        format!(
                            "cannot read rows {row_in_file}..{}: {e}",
                            row_in_file + rows
                        ),
                    )
                })?;
                {
                    let dst = block
                        .as_slice_mut()
                        .expect("standard layout")
                        .get_mut(filled * d..(filled + rows) * d)
                        .expect("within the block");
                    for (o, b) in dst.iter_mut().zip(buf.chunks_exact(size)) {
                        *o = F::from_le(b);
                    }
                    if let Some(pos) = dst.iter().position(|v| !v.is_finite()) {
                        return Err(IoError::format(
                            path,
                            format!(
                                "non-finite value ({}) at row {}, column {}",
                                dst[pos],
                                row_in_file + pos / d,
                                pos % d
                            ),
                        )
                        .into());
                    }
                }
                filled += rows;
                row_in_file += rows;
                if filled == block_rows {
                    visit(block.view())?;
                    filled = 0;
                }
            }
        }
        if filled > 0 {
            visit(block.slice(s![..filled, ..]))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npy::write_npy;
    use ndarray::{concatenate, Axis};

    fn data(n: usize, d: usize, off: f32) -> Array2<f32> {
        Array2::from_shape_fn((n, d), |(i, j)| off + i as f32 * 10.0 + j as f32)
    }

    fn blocks(src: &NpySource, chunk: usize) -> Vec<Array2<f32>> {
        let mut out = Vec::new();
        src.for_each_block::<f32, IoError>(chunk, &mut |b| {
            out.push(b.to_owned());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn blocks_ignore_file_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let x = data(23, 3, 0.5);
        let whole = dir.path().join("x.npy");
        write_npy(&whole, x.view()).unwrap();
        let mut parts: Vec<PathBuf> = [(0, 5), (5, 6), (6, 23)]
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| {
                let p = dir.path().join(format!("p{i}.npy"));
                write_npy(&p, x.slice(s![a..b, ..])).unwrap();
                p
            })
            .collect();
        // an empty (0, 3) file in the middle contributes nothing
        let empty = dir.path().join("empty.npy");
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }";
        std::fs::write(&empty, raw_npy(dict, &[])).unwrap();
        parts.insert(2, empty);
        let one = NpySource::open(&[&whole]).unwrap();
        let many = NpySource::open(&parts).unwrap();
        assert_eq!(many.n_rows(), 23);
        assert_eq!(many.dim(), 3);
        for chunk in [1, 4, 7, 23, 100] {
            let a = blocks(&one, chunk);
            let b = blocks(&many, chunk);
            assert_eq!(a, b, "chunk {chunk}");
            assert!(a.iter().rev().skip(1).all(|m| m.nrows() == chunk.min(23)));
            let views: Vec<_> = a.iter().map(|m| m.view()).collect();
            assert_eq!(concatenate(Axis(0), &views).unwrap(), x);
        }
    }

    #[test]
    fn mismatched_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.npy");
        let b = dir.path().join("b.npy");
        let c = dir.path().join("c.npy");
        write_npy(&a, data(4, 3, 0.0).view()).unwrap();
        write_npy(&b, data(4, 2, 0.0).view()).unwrap();
        write_npy(&c, data(4, 3, 0.0).mapv(f64::from).view()).unwrap();
        let e = NpySource::open(&[&a, &b]).unwrap_err().to_string();
        assert!(e.contains("b.npy") && e.contains("2 columns"), "{e}");
        let e = NpySource::open(&[&a, &c]).unwrap_err().to_string();
        assert!(e.contains("c.npy") && e.contains("float64"), "{e}");
        let src = NpySource::open(&[&c]).unwrap();
        let e = src
            .for_each_block::<f32, IoError>(2, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("float32 was requested"), "{e}");
    }

    /// An .npy file with this header dict followed by `data`.
    fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn corrupt_headers_are_refused_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000000000, 3), }";
        std::fs::write(&p, raw_npy(huge, &[0u8; 48])).unwrap();
        let e = NpyInfo::open(&p).unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains("truncated"), "{e}");
        let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }";
        std::fs::write(&p, raw_npy(ok, &[0u8; 49])).unwrap();
        let e = NpyInfo::open(&p).unwrap_err().to_string();
        assert!(e.contains("trailing"), "{e}");
        std::fs::write(&p, raw_npy(ok, &[0u8; 48])).unwrap();
        assert_eq!(NpyInfo::open(&p).unwrap().n_rows, 4);
        let ints = "{'descr': '<i8', 'fortran_order': False, 'shape': (4, 3), }";
        std::fs::write(&p, raw_npy(ints, &[0u8; 96])).unwrap();
        let e = NpyInfo::open(&p).unwrap_err().to_string();
        assert!(e.contains("int64"), "{e}");
        let cube = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 3), }";
        std::fs::write(&p, raw_npy(cube, &[0u8; 48])).unwrap();
        let e = NpyInfo::open(&p).unwrap_err().to_string();
        assert!(e.contains("2-D"), "{e}");
        std::fs::write(&p, b"not numpy").unwrap();
        assert!(NpyInfo::open(&p).is_err());
    }

    #[test]
    fn non_finite_values_name_file_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.npy");
        let b = dir.path().join("b.npy");
        write_npy(&a, data(5, 3, 0.0).view()).unwrap();
        let mut y = data(6, 3, 0.0);
        y[[4, 2]] = f32::NAN;
        write_npy(&b, y.view()).unwrap();
        let src = NpySource::open(&[&a, &b]).unwrap();
        let mut seen = 0;
        let e = src
            .for_each_block::<f32, IoError>(3, &mut |blk| {
                seen += blk.nrows();
                Ok(())
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.npy") && e.contains("row 4, column 2"), "{e}");
        assert!(seen <= 9);
    }

    #[test]
    fn visitor_errors_stop_the_pass() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.npy");
        write_npy(&a, data(10, 2, 0.0).view()).unwrap();
        let src = NpySource::open(&[&a]).unwrap();
        let mut calls = 0;
        let r = src.for_each_block::<f32, IoError>(3, &mut |_| {
            calls += 1;
            Err(IoError::format(Path::new("stop"), "stop"))
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
