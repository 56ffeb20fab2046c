//! Reading (N, D) float32/float64 `.npy` arrays: from a file ([`read_npy`],
//! [`read_npy_as`]), from bytes ([`read_npy_bytes`]), and the data after a
//! header ([`read_values`], [`read_matrix_data`]) for `.npz` entries and
//! descriptor files.

use super::dtype::{Dtype, Element, Matrix};
use super::header::{read_header, read_up_to};
use super::layout::MatrixLayout;
use crate::error::{IoError, Result};
use ndarray::Array2;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// Reads `n·d` values of type `F` from `r` into an (n, d) array.
/// `trusted_len`: the byte count was checked against the file length, so the
/// whole buffer can be allocated up front; otherwise it grows as data arrive.
pub(crate) fn read_values<F: Element, R: Read>(
    r: &mut R,
    layout: &MatrixLayout,
    trusted_len: bool,
) -> Result<Array2<F>, String> {
    let count = layout.n * layout.d;
    let size = F::DTYPE.size();
    // Reserved fallibly: an array larger than memory (a deflated entry
    // cannot be read in parts) is this error, not an allocation abort.
    let too_large = || {
        format!(
            "its {}×{} {} values ({} bytes) cannot be held in memory",
            layout.n, layout.d, layout.dtype, layout.nbytes
        )
    };
    let mut out: Vec<F> = Vec::new();
    out.try_reserve_exact(if trusted_len {
        count
    } else {
        count.min(1 << 20)
    })
    .map_err(|_| too_large())?;
    let mut buf = vec![0u8; layout.nbytes.min((1 << 16) * size)];
    let mut remaining = layout.nbytes;
    while remaining > 0 {
        let chunk = remaining.min(buf.len());
        let got = read_up_to(r, &mut buf[..chunk]).map_err(|e| format!("cannot read: {e}"))?;
        if got < chunk {
            let have = layout.nbytes - remaining + got;
            return Err(format!(
                "file is truncated: header says {}×{} {} ({} bytes) but {} bytes follow",
                layout.n, layout.d, layout.dtype, layout.nbytes, have
            ));
        }
        out.try_reserve(chunk / size).map_err(|_| too_large())?;
        out.extend(buf[..chunk].chunks_exact(size).map(F::from_le));
        remaining -= chunk;
    }
    Array2::from_shape_vec((layout.n, layout.d), out).map_err(|e| format!("internal error: {e}"))
}

/// Reads the data described by `layout` in its own dtype.
pub(crate) fn read_matrix_data<R: Read>(
    r: &mut R,
    layout: &MatrixLayout,
    trusted_len: bool,
) -> Result<Matrix, String> {
    Ok(match layout.dtype {
        Dtype::F32 => Matrix::F32(read_values(r, layout, trusted_len)?),
        Dtype::F64 => Matrix::F64(read_values(r, layout, trusted_len)?),
    })
}

/// Reads an (N, D) float32 or float64 `.npy` file.
///
/// Errors name the file and the problem: another dtype, another rank,
/// Fortran order, big-endian data, a truncated file or one that is not
/// `.npy` at all. The data size the header claims is checked against the
/// file length before anything is allocated.
///
/// ```
/// use fisherkit_io::{read_npy, write_npy, Matrix};
/// use ndarray::array;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.npy");
/// let x = array![[1.0f32, 2.0], [3.0, 4.0]];
/// write_npy(&path, x.view())?;
/// assert!(matches!(read_npy(&path)?, Matrix::F32(y) if y == x));
/// std::fs::write(&path, b"not an array")?;
/// let e = read_npy(&path).unwrap_err().to_string();
/// assert!(e.contains("x.npy"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy(path: impl AsRef<Path>) -> Result<Matrix> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let file_len = file.metadata().map_err(|e| IoError::os(path, e))?.len();
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(IoError::format(path, "is a directory, not an .npy file"));
    }
    let mut r = BufReader::new(file);
    let header = read_header(&mut r).map_err(|e| IoError::format(path, e))?;
    let layout = header
        .matrix_layout()
        .map_err(|e| IoError::format(path, e))?;
    layout
        .check_available(file_len.saturating_sub(header.data_offset as u64))
        .map_err(|e| IoError::format(path, e))?;
    read_matrix_data(&mut r, &layout, true).map_err(|e| IoError::format(path, e))
}

/// Reads an (N, D) float32 or float64 `.npy` array from the bytes of a file
/// (for example one received over the network, or a fuzzer's input); `name`
/// stands for the file in error messages. Same checks as [`read_npy`]: the
/// data size the header claims is compared with `bytes.len()` before
/// anything is allocated.
///
/// ```
/// use fisherkit_io::{read_npy_bytes, write_npy, Matrix};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npybytes-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("x.npy");
/// let x = array![[1.0, 2.0, 3.0]];
/// write_npy(&path, x.view())?;
/// let bytes = std::fs::read(&path)?;
/// assert!(matches!(read_npy_bytes(&bytes, "sent.npy")?, Matrix::F64(y) if y == x));
/// // a header that claims more data than there is: refused, nothing allocated
/// let e = read_npy_bytes(&bytes[..bytes.len() - 8], "sent.npy").unwrap_err();
/// assert!(e.to_string().starts_with("sent.npy: "), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy_bytes(bytes: &[u8], name: impl AsRef<Path>) -> Result<Matrix> {
    let path = name.as_ref();
    let mut r = bytes;
    let header = read_header(&mut r).map_err(|e| IoError::format(path, e))?;
    let layout = header
        .matrix_layout()
        .map_err(|e| IoError::format(path, e))?;
    layout
        .check_available((bytes.len() as u64).saturating_sub(header.data_offset as u64))
        .map_err(|e| IoError::format(path, e))?;
    read_matrix_data(&mut r, &layout, true).map_err(|e| IoError::format(path, e))
}

/// Reads an (N, D) `.npy` file as `F`, converting float32 ↔ float64 if needed
/// (float64 → float32 rounds to nearest).
///
/// ```
/// use fisherkit_io::{read_npy_as, write_npy};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npyas-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("x.npy");
/// write_npy(&path, array![[0.1f64, 1e300]].view())?;
/// // float64 → float32 rounds to nearest (1e300 overflows to infinity)
/// let y = read_npy_as::<f32>(&path)?;
/// assert_eq!(y[[0, 0]], 0.1f32);
/// assert!(y[[0, 1]].is_infinite());
/// assert_eq!(read_npy_as::<f64>(&path)?, array![[0.1, 1e300]]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy_as<F: Element>(path: impl AsRef<Path>) -> Result<Array2<F>> {
    Ok(F::from_matrix(read_npy(path)?))
}
