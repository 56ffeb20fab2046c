//! `fisherkit mfa fit`: EM over one or more .npy files read in chunks.

use super::mixture::{common_fit_args, streamed_kind, FitCommand};
use crate::args::{MfaFitArgs, PsiArg};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::mfa::{Mfa, MfaEmState, MfaError, MfaIteration, MfaParams, PsiMode};
use fisherkit_io::checkpoint::read_mfa_exact;
use fisherkit_io::{Element, MfaArrays};
use std::collections::BTreeMap;

pub fn fit(a: &MfaFitArgs, ui: &Ui) -> Result<(), CliError> {
    super::mixture::fit(a, ui)
}

/// Bad hyper-parameters are usage errors (exit 2), except K and R that are
/// valid numbers but too large for the data (K > N, R ≥ D): those name the
/// input file (exit 1), like every data problem.
fn mfa_error(input: &str, a: &MfaFitArgs, e: MfaError) -> CliError {
    match &e {
        MfaError::InvalidHyperParameter { name, .. }
            if !((*name == "n_components" && a.components > 0)
                || (*name == "n_factors" && a.factors > 0)) =>
        {
            CliError::usage(e)
        }
        _ => CliError::other(format!("{input}: {e}")),
    }
}

fn psi_name(p: PsiArg) -> &'static str {
    match p {
        PsiArg::Shared => "shared",
        PsiArg::PerComponent => "per-component",
    }
}

impl FitCommand for MfaFitArgs {
    const KIND: &'static str = "mfa";
    type Error = MfaError;
    type Params<F: Element> = MfaParams;

    common_fit_args!();

    fn params<F: Element>(&self) -> MfaParams {
        let psi_mode = match self.psi {
            PsiArg::Shared => PsiMode::Shared,
            PsiArg::PerComponent => PsiMode::PerComponent,
        };
        MfaParams::new(self.components, self.factors)
            .psi_mode(psi_mode)
            .max_iter(self.em.max_iter)
            .tol(self.em.tol_mode.with(self.em.tol))
            .n_init(self.em.n_init)
            .seed(self.em.seed)
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("factors", self.factors.to_string()),
            ("psi", psi_name(self.psi).into()),
            ("seed", self.em.seed.to_string()),
            ("init_sample", self.stream.init_sample.to_string()),
        ]
    }

    fn extra(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("psi".to_string(), psi_name(self.psi).to_string())])
    }

    fn describe(&self) -> String {
        format!("MFA K={} R={}", self.components, self.factors)
    }

    fn error(&self, input: &str, e: MfaError) -> CliError {
        mfa_error(input, self, e)
    }
}

streamed_kind! {
    impl<F> for MfaParams { Mfa<F>, MfaIteration, MfaError, "MFA EM" }
    read MfaArrays<F> = read_mfa_exact;
    resume |m, (h, c)| MfaEmState::from_parts(m.weights, m.means, m.loadings, m.psi, h, c)
}
