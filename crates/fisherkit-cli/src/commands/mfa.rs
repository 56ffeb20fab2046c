//! `fisherkit mfa fit`: EM over one or more .npy files read in chunks.

use super::check_output;
use super::streaming::{
    announce_input, check_stream_args, checkpoint_metadata, checkpoint_path, checkpoint_state,
    interrupted, remove_checkpoint, resume_state, settings_string, FitFail, Input, Interrupt,
};
use crate::args::{MfaFitArgs, PsiArg};
use crate::error::CliError;
use crate::progress::{EmBar, Ui};
use fisherkit::mfa::{MfaEmState, MfaError, MfaIteration, MfaParams, PsiMode};
use fisherkit::stream::ChunkVisitor;
use fisherkit_io::checkpoint::read_mfa_exact;
use fisherkit_io::{write_mfa_model, Dtype, Element};
use std::cell::Cell;
use std::collections::BTreeMap;

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
        .tol(a.tol)
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
    let ckpt = checkpoint_path(&a.output);
    let resume = resume_state(
        sa.resume,
        &ckpt,
        ui,
        || {
            let (m, meta) = read_mfa_exact::<F>(&ckpt)?;
            let (history, converged) = checkpoint_state(&ckpt, &meta, &settings)?;
            MfaEmState::from_parts(m.weights, m.means, m.loadings, m.psi, history, converged)
                .map_err(|e| CliError::other(format!("{}: {e}", ckpt.display())))
        },
        |s| s.n_iter(),
    )?;
    announce_input::<F>(ui, src, sa.chunk_rows);
    let completed = Cell::new(resume.as_ref().map_or(0, |s| s.n_iter()));
    // the iteration held by the checkpoint on disk, if any
    let saved: Cell<Option<usize>> = Cell::new(resume.as_ref().map(|s| s.n_iter()));
    let bar = EmBar::new(ui, a.max_iter, a.n_init, "MFA EM");
    let result = {
        let mut pass = |v: &mut ChunkVisitor<'_, F, FitFail<MfaError>>| {
            let mut done = 0;
            input.pass(sa.chunk_rows, interrupt, &mut |b| {
                v(b)?;
                done += b.nrows();
                bar.rows(done, n);
                Ok(())
            })
        };
        let mut on_iter =
            |it: &MfaIteration, st: &MfaEmState<F>| -> Result<(), FitFail<MfaError>> {
                bar.update(it.restart, it.iter, it.log_likelihood, it.rel_change);
                completed.set(st.n_iter());
                if let Some(every) = sa.checkpoint {
                    if st.n_iter() % every == 0 {
                        let meta = checkpoint_metadata(&settings, &st.log_likelihood, st.converged);
                        write_mfa_model(&ckpt, &st.model, &meta)?;
                        saved.set(Some(st.n_iter()));
                    }
                }
                match interrupt.caught() {
                    Some(s) => Err(FitFail::Interrupted(s)),
                    None => Ok(()),
                }
            };
        params.fit_streaming(&mut pass, sa.init_sample, resume, &mut on_iter)
    };
    bar.finish();
    let fit = match result {
        Ok(f) => f,
        Err(FitFail::Lib(e)) => return Err(mfa_error(&input.label, a, e)),
        Err(FitFail::Cli(e)) => return Err(e),
        Err(FitFail::Interrupted(s)) => {
            let kept = saved.get().filter(|_| ckpt.exists());
            return Err(interrupted(
                s,
                completed.get(),
                &a.output,
                kept.map(|i| (ckpt.as_path(), i)),
            ));
        }
    };
    let final_ll = fit.log_likelihood.last().copied().unwrap_or(f64::NAN);
    let mut extra = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        extra.insert(k.to_string(), v);
    };
    put("seed", a.seed.to_string());
    put("n_init", a.n_init.to_string());
    put("max_iter", a.max_iter.to_string());
    put("tol", a.tol.to_string());
    put("psi", psi_name(a.psi).to_string());
    put("n_iter", fit.n_iter.to_string());
    put("converged", fit.converged.to_string());
    put("mean_log_likelihood", final_ll.to_string());
    put("training_rows", n.to_string());
    put("chunk_rows", sa.chunk_rows.to_string());
    put("init_sample", sa.init_sample.to_string());
    write_mfa_model(&a.output, &fit.model, &extra)?;
    remove_checkpoint(&ckpt)?;
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
