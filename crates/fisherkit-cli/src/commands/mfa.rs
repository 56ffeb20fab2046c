//! `fisherkit mfa fit`: wired when the library's `fisherkit::mfa` lands.

use super::{check_output, read_training};
use crate::args::MfaFitArgs;
use crate::error::CliError;
use crate::progress::Ui;

pub fn fit(a: &MfaFitArgs, _ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    let _x = read_training(&a.input)?;
    Err(CliError::other(
        "`fisherkit mfa fit` is not supported yet: MFA fitting has not landed in this build",
    ))
}
