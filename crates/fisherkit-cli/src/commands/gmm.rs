//! `fisherkit gmm fit`.

use super::{check_output, read_training};
use crate::args::GmmFitArgs;
use crate::error::CliError;
use crate::progress::Ui;

pub fn fit(a: &GmmFitArgs, _ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    let _x = read_training(&a.input)?;
    Err(CliError::other("gmm fit is not wired yet"))
}
