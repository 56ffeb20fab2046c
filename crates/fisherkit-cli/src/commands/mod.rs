//! One module per subcommand, plus the checks they share.

pub mod encode;
pub mod gmm;
pub mod kmeans;
pub mod mfa;
pub mod mixture;
pub mod pipeline;
pub mod predict;
pub mod streaming;
pub mod whiten;

use crate::error::CliError;
use fisherkit::data::check_matrix;
use fisherkit::encode::{parse_mfa_parts, MfaFisherScoreParams, MfaPart};
use fisherkit::Float;
use fisherkit_io::{file_kind, read_npy, Element, FileKind, Matrix, NamedBags};
use ndarray::ArrayView2;
use std::path::Path;

/// Fails early, before any long computation, if `output` cannot be written:
/// its directory must exist and it must not be a directory itself
/// ([`fisherkit_io::check_writable`]).
pub fn check_output(output: &Path) -> Result<(), CliError> {
    fisherkit_io::check_writable(output).map_err(CliError::other)
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

/// `--parts` of an MFA command: a non-empty list among mean, loading, or
/// the default (loading).
pub(crate) fn mfa_parts_arg(list: Option<&str>) -> Result<Vec<MfaPart>, CliError> {
    match list {
        Some(list) => {
            let p = parse_mfa_parts(list).map_err(|e| CliError::usage(format!("--parts: {e}")))?;
            if p.is_empty() {
                return Err(CliError::usage(
                    "--parts: no MFA Fisher score part selected; choose among mean, loading",
                ));
            }
            Ok(p)
        }
        None => Ok(MfaFisherScoreParams::<f64>::default().parts),
    }
}

/// Names a bag in messages: the array of an `.npz`, or the `.npy` file itself.
fn bag_label(input: &Path, is_npz: bool, name: &str) -> String {
    if is_npz {
        format!("{}: array `{name}`", input.display())
    } else {
        input.display().to_string()
    }
}

/// Checks that every bag of `bags` (read from `input`) is finite with the
/// dimension `d` of the model in `model_path`; the error names the bag.
pub(crate) fn check_bags<F: Element>(
    input: &Path,
    model_path: &Path,
    d: usize,
    bags: &NamedBags<F>,
) -> Result<(), CliError> {
    let is_npz = file_kind(input)? == FileKind::Npz;
    for (name, bag) in bags.names.iter().zip(&bags.bags) {
        if bag.ncols() != d {
            return Err(CliError::other(format!(
                "{}: bag has {} columns but the model {} has dimension {d}",
                bag_label(input, is_npz, name),
                bag.ncols(),
                model_path.display()
            )));
        }
        check_matrix(bag.view(), Some(d), "bag")
            .map_err(|e| CliError::other(format!("{}: {e}", bag_label(input, is_npz, name))))?;
    }
    Ok(())
}
