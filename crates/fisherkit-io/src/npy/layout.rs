//! What a validated header describes: an (N, D) little-endian float
//! C-order matrix ([`MatrixLayout`]), and whether the bytes that follow fit it.

use super::dtype::Dtype;
use super::header::{py_shape, Descr, Header};

/// What a validated header describes: a 2-D float matrix of `n` rows, `d`
/// columns, whose data takes `nbytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MatrixLayout {
    pub dtype: Dtype,
    pub n: usize,
    pub d: usize,
    pub nbytes: usize,
}

impl Header {
    /// Checks the header describes an (N, D) little-endian float C-order array.
    pub(crate) fn matrix_layout(&self) -> Result<MatrixLayout, String> {
        let dtype = match self.descr {
            Descr::Simple {
                order,
                kind: 'f',
                size,
            } if size == 4 || size == 8 => {
                let dtype = if size == 4 { Dtype::F32 } else { Dtype::F64 };
                if order == '>' {
                    return Err(format!(
                        "big-endian {dtype} is not supported; expected little-endian \
                         (convert with a.astype('<f{size}'))"
                    ));
                }
                dtype
            }
            ref other => {
                return Err(format!(
                    "dtype {} not supported; expected float32 or float64",
                    other.numpy_name()
                ))
            }
        };
        let (n, d) = match self.shape[..] {
            [n, d] => (n, d),
            _ => {
                return Err(format!(
                    "expected a 2-D (N, D) array, got shape {}",
                    py_shape(&self.shape)
                ))
            }
        };
        if self.fortran_order && n > 1 && d > 1 {
            return Err("Fortran-order (column-major) arrays are not supported; \
                 save a C-order array (np.ascontiguousarray)"
                .into());
        }
        let nbytes = n
            .checked_mul(d)
            .and_then(|e| e.checked_mul(dtype.size()))
            .ok_or_else(|| format!("shape {} is too large to address", py_shape(&self.shape)))?;
        Ok(MatrixLayout {
            dtype,
            n,
            d,
            nbytes,
        })
    }
}

impl MatrixLayout {
    /// Checks that `available` bytes of data follow the header.
    pub(crate) fn check_available(&self, available: u64) -> Result<(), String> {
        let want = self.nbytes as u64;
        if available == want {
            return Ok(());
        }
        let what = format!(
            "header says {}×{} {} ({} bytes) but {} bytes follow",
            self.n, self.d, self.dtype, self.nbytes, available
        );
        if available < want {
            Err(format!("file is truncated: {what}"))
        } else {
            Err(format!("file has trailing data: {what}"))
        }
    }
}
