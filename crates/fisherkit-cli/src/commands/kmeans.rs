//! `fisherkit kmeans fit`.

use super::{check_output, read_training};
use crate::args::KmeansFitArgs;
use crate::error::CliError;
use crate::progress::Ui;

pub fn fit(a: &KmeansFitArgs, _ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    let _x = read_training(&a.input)?;
    Err(CliError::other("kmeans fit is not wired yet"))
}
