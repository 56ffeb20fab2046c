//! `fisherkit mfa fit`: EM over one or more .npy files read in chunks.

use super::check_output;
use super::streaming::{
    check_stream_args, run_fit, save_fit, settings_string, FitFail, FitRun, Input, Interrupt,
    StreamedKind,
};
use crate::args::{MfaFitArgs, PsiArg};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::mfa::{Mfa, MfaEmState, MfaError, MfaIteration, MfaParams, PsiMode};
use fisherkit::stream::{DataPass, OnIteration};
use fisherkit_io::checkpoint::read_mfa_exact;
use fisherkit_io::{Dtype, Element, IoError, MfaArrays, ModelFile};
use std::collections::BTreeMap;
use std::path::Path;

pub fn fit(a: &MfaFitArgs, ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    check_stream_args(&a.stream, a.n_init)?;
    let input = Input::open(&a.input)?;
    let interrupt = Interrupt::install()?;
    match input.source.dtype() {
        Dtype::F32 => fit_typed::<f32>(a, &input, &interrupt, ui),
        Dtype::F64 => fit_typed::<f64>(a, &input, &interrupt, ui),
    }
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

fn fit_typed<F: Element>(
    a: &MfaFitArgs,
    input: &Input,
    interrupt: &Interrupt,
    ui: &Ui,
) -> Result<(), CliError> {
    let psi_mode = match a.psi {
        PsiArg::Shared => PsiMode::Shared,
        PsiArg::PerComponent => PsiMode::PerComponent,
    };
    let params = MfaParams::new(a.components, a.factors)
        .psi_mode(psi_mode)
        .max_iter(a.max_iter)
        .tol(a.tol_mode.with(a.tol))
        .n_init(a.n_init)
        .seed(a.seed);
    let src = &input.source;
    let (n, d) = (src.n_rows(), src.dim());
    let sa = &a.stream;
    let settings = settings_string(&[
        ("kind", "mfa".into()),
        ("dtype", F::DTYPE.to_string()),
        ("rows", n.to_string()),
        ("dim", d.to_string()),
        ("chunk_rows", sa.chunk_rows.to_string()),
        ("components", a.components.to_string()),
        ("factors", a.factors.to_string()),
        ("psi", psi_name(a.psi).into()),
        ("seed", a.seed.to_string()),
        ("init_sample", sa.init_sample.to_string()),
    ]);
    let run = FitRun {
        input,
        stream: sa,
        interrupt,
        ui,
        output: &a.output,
        seed: a.seed,
        max_iter: a.max_iter,
        tol: a.tol_mode.with(a.tol),
        n_init: a.n_init,
    };
    let fit = run_fit::<F, _>(&params, &run, &settings, |e| mfa_error(&input.label, a, e))?;
    let extra = BTreeMap::from([("psi".to_string(), psi_name(a.psi).to_string())]);
    let what = format!(
        "MFA K={} R={} D={d} ({})",
        a.components,
        a.factors,
        F::DTYPE
    );
    save_fit::<F, MfaParams>(&run, &fit, extra, &what)
}

impl<F: Element> StreamedKind<F> for MfaParams {
    type Model = Mfa<F>;
    type Report = MfaIteration;
    type Error = MfaError;
    type Saved = MfaArrays<F>;
    const BAR: &'static str = "MFA EM";

    fn read_exact(path: &Path) -> Result<(MfaArrays<F>, BTreeMap<String, String>), IoError> {
        read_mfa_exact(path)
    }

    fn resume(
        m: MfaArrays<F>,
        history: Vec<f64>,
        converged: bool,
    ) -> Result<MfaEmState<F>, MfaError> {
        MfaEmState::from_parts(m.weights, m.means, m.loadings, m.psi, history, converged)
    }

    fn write(path: &Path, model: &Mfa<F>, meta: &BTreeMap<String, String>) -> Result<(), IoError> {
        model.write(path, meta)
    }

    fn progress(it: &MfaIteration) -> (usize, usize, f64, f64) {
        (it.restart, it.iter, it.log_likelihood, it.change)
    }

    fn fit(
        &self,
        pass: &mut DataPass<'_, F, FitFail<MfaError>>,
        init_sample: usize,
        resume: Option<MfaEmState<F>>,
        on_iter: &mut OnIteration<'_, MfaIteration, Mfa<F>, FitFail<MfaError>>,
    ) -> Result<MfaEmState<F>, FitFail<MfaError>> {
        let f = self.fit_streaming(pass, init_sample, resume, on_iter)?;
        Ok(MfaEmState {
            model: f.model,
            log_likelihood: f.log_likelihood,
            converged: f.converged,
        })
    }
}
