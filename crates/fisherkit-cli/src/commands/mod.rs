//! One module per subcommand, plus the checks they share.

pub mod encode;
pub mod gmm;
pub mod kmeans;
pub mod mfa;
pub mod pipeline;
pub mod streaming;
pub mod whiten;

use crate::error::CliError;
use fisherkit::data::check_matrix;
use fisherkit::Float;
use fisherkit_io::{read_npy, Matrix};
use ndarray::ArrayView2;
use std::path::Path;

/// Fails early, before any long computation, if `output` cannot be written:
/// its directory must exist and it must not be a directory itself.
pub fn check_output(output: &Path) -> Result<(), CliError> {
    if output.is_dir() {
        return Err(CliError::other(format!(
            "{}: is a directory; --output needs a file name",
            output.display()
        )));
    }
    if let Some(dir) = output.parent() {
        if !dir.as_os_str().is_empty() && !dir.is_dir() {
            return Err(CliError::other(format!(
                "{}: directory {} does not exist",
                output.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Reads training data (N, D) and checks it is non-empty and finite; errors
/// name the file and, for NaN/Inf, the row and column.
pub fn read_training(path: &Path) -> Result<Matrix, CliError> {
    let m = read_npy(path)?;
    match &m {
        Matrix::F32(x) => check_data(path, x.view())?,
        Matrix::F64(x) => check_data(path, x.view())?,
    }
    Ok(m)
}

fn check_data<F: Float>(path: &Path, x: ArrayView2<'_, F>) -> Result<(), CliError> {
    check_matrix(x, None, "training data")
        .map_err(|e| CliError::other(format!("{}: {e}", path.display())))
}
