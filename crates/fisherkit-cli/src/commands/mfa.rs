//! `fisherkit mfa fit`.

use super::{check_output, read_training};
use crate::args::{MfaFitArgs, PsiArg};
use crate::error::CliError;
use crate::progress::{EmBar, Ui};
use fisherkit::mfa::{MfaError, MfaIteration, MfaParams, PsiMode};
use fisherkit_io::{write_mfa_model, Element, Matrix};
use ndarray::Array2;
use std::collections::BTreeMap;
use std::path::Path;

pub fn fit(a: &MfaFitArgs, ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    match read_training(&a.input)? {
        Matrix::F32(x) => fit_typed(a, x, ui),
        Matrix::F64(x) => fit_typed(a, x, ui),
    }
}

/// Bad hyper-parameters are usage errors (exit 2), except K and R that are
/// valid numbers but too large for the data (K > N, R ≥ D): those name the
/// input file (exit 1), like every data problem.
fn mfa_error(input: &Path, a: &MfaFitArgs, e: MfaError) -> CliError {
    match &e {
        MfaError::InvalidHyperParameter { name, .. }
            if !((*name == "n_components" && a.components > 0)
                || (*name == "n_factors" && a.factors > 0)) =>
        {
            CliError::usage(e)
        }
        _ => CliError::other(format!("{}: {e}", input.display())),
    }
}

fn fit_typed<F: Element>(a: &MfaFitArgs, x: Array2<F>, ui: &Ui) -> Result<(), CliError> {
    let psi_mode = match a.psi {
        PsiArg::Shared => PsiMode::Shared,
        PsiArg::PerComponent => PsiMode::PerComponent,
    };
    let params = MfaParams::new(a.components, a.factors)
        .psi_mode(psi_mode)
        .max_iter(a.max_iter)
        .tol(a.tol)
        .n_init(a.n_init)
        .seed(a.seed);
    let (n, d) = x.dim();
    let mut bar = EmBar::new(ui, a.max_iter, a.n_init, "MFA EM");
    let fit = params
        .fit_with_progress(x.view(), &mut |it: &MfaIteration| {
            bar.update(it.restart, it.iter, it.log_likelihood, it.rel_change)
        })
        .map_err(|e| mfa_error(&a.input, a, e));
    bar.finish();
    let fit = fit?;
    let final_ll = fit.log_likelihood.last().copied().unwrap_or(f64::NAN);
    let mut extra = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        extra.insert(k.to_string(), v);
    };
    put("seed", a.seed.to_string());
    put("n_init", a.n_init.to_string());
    put("max_iter", a.max_iter.to_string());
    put("tol", a.tol.to_string());
    put(
        "psi",
        match a.psi {
            PsiArg::Shared => "shared",
            PsiArg::PerComponent => "per-component",
        }
        .to_string(),
    );
    put("n_iter", fit.n_iter.to_string());
    put("converged", fit.converged.to_string());
    put("mean_log_likelihood", final_ll.to_string());
    put("training_rows", n.to_string());
    write_mfa_model(&a.output, &fit.model, &extra)?;
    ui.info(format!(
        "MFA K={} R={} D={d} ({}) fitted on {n} rows: {} EM iterations, {}, mean log-likelihood {final_ll:.6} → {}",
        a.components,
        a.factors,
        F::DTYPE,
        fit.n_iter,
        if fit.converged { "converged" } else { "not converged (raise --max-iter?)" },
        a.output.display()
    ));
    Ok(())
}
