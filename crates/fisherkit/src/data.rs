//! Validation of user data matrices shared by every algorithm.

use crate::float::Float;
use ndarray::ArrayView2;

/// What is wrong with a data matrix or bag handed to the library.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// The matrix has no rows.
    #[error("{what} is empty (0 rows)")]
    Empty { what: &'static str },
    /// The matrix has no columns.
    #[error("{what} has 0 columns")]
    NoColumns { what: &'static str },
    /// Columns do not match the model's dimension.
    #[error("{what} has {got} columns but the model has dimension {expected}")]
    DimensionMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// A NaN or infinite value.
    #[error("{what} has a non-finite value ({value}) at row {row}, column {col}")]
    NonFinite {
        what: &'static str,
        row: usize,
        col: usize,
        value: f64,
    },
}

/// Checks that `x` (N, D) is non-empty, has `expected_dim` columns when given,
/// and holds only finite values. `what` names the matrix in the message
/// (`"training data"`, `"bag"`).
pub fn check_matrix<F: Float>(
    x: ArrayView2<'_, F>,
    expected_dim: Option<usize>,
    what: &'static str,
) -> Result<(), DataError> {
    let (n, d) = x.dim();
    if n == 0 {
        return Err(DataError::Empty { what });
    }
    if d == 0 {
        return Err(DataError::NoColumns { what });
    }
    if let Some(expected) = expected_dim {
        if d != expected {
            return Err(DataError::DimensionMismatch {
                what,
                got: d,
                expected,
            });
        }
    }
    for (row, r) in x.outer_iter().enumerate() {
        // Branch-free over the row so that it vectorises; the element scan
        // below then finds the culprit.
        let finite = match r.as_slice() {
            Some(s) => crate::linalg::vectorized(|| s.iter().fold(true, |a, v| a & v.is_finite())),
            None => r.iter().all(|v| v.is_finite()),
        };
        if finite {
            continue;
        }
        let (col, value) = r
            .iter()
            .enumerate()
            .find(|(_, v)| !v.is_finite())
            .map(|(c, v)| (c, v.as_f64()))
            .expect("a non-finite element exists");
        return Err(DataError::NonFinite {
            what,
            row,
            col,
            value,
        });
    }
    Ok(())
}
