//! `fisherkit gmm fit`: EM over one or more .npy files read in chunks.

use super::check_output;
use super::streaming::{
    announce_input, check_stream_args, checkpoint_metadata, checkpoint_path, checkpoint_state,
    interrupted, remove_checkpoint, resume_state, settings_string, FitFail, Input, Interrupt,
};
use crate::args::{GmmFitArgs, InitArg};
use crate::error::CliError;
use crate::progress::{EmBar, Ui};
use fisherkit::gmm::{EmIteration, GmmEmState, GmmError, GmmInit, GmmParams, VarianceFloor};
use fisherkit::stream::ChunkVisitor;
use fisherkit_io::checkpoint::read_gmm_exact;
use fisherkit_io::{write_gmm, Dtype, Element};
use std::cell::Cell;
use std::collections::BTreeMap;

pub fn fit(a: &GmmFitArgs, ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    check_stream_args(&a.stream, a.n_init)?;
    let input = Input::open(&a.input)?;
    let interrupt = Interrupt::install()?;
    match input.source.dtype() {
        Dtype::F32 => fit_typed::<f32>(a, &input, &interrupt, ui),
        Dtype::F64 => fit_typed::<f64>(a, &input, &interrupt, ui),
    }
}

/// Maps a library error to a report: bad hyper-parameters are usage errors
/// (exit 2); anything about the data names the input file(s) (exit 1).
pub fn gmm_error(input: &str, e: GmmError) -> CliError {
    match e {
        GmmError::InvalidHyperParameter { .. } => CliError::usage(e),
        _ => CliError::other(format!("{input}: {e}")),
    }
}

fn init_name(i: InitArg) -> &'static str {
    match i {
        InitArg::Kmeans => "kmeans",
        InitArg::Random => "random",
    }
}

fn fit_typed<F: Element>(
    a: &GmmFitArgs,
    input: &Input,
    interrupt: &Interrupt,
    ui: &Ui,
) -> Result<(), CliError> {
    let floor = match (a.variance_floor_relative, a.variance_floor_absolute) {
        (Some(f), _) => VarianceFloor::Relative(f),
        (None, Some(f)) => VarianceFloor::Absolute(f),
        (None, None) => VarianceFloor::default(),
    };
    let init = match a.init {
        InitArg::Kmeans => GmmInit::KMeans,
        InitArg::Random => GmmInit::Random,
    };
    let params = GmmParams::<F>::new(a.components)
        .max_iter(a.max_iter)
        .tol(a.tol)
        .n_init(a.n_init)
        .seed(a.seed)
        .init(init)
        .variance_floor(floor);
    let src = &input.source;
    let (n, d) = (src.n_rows(), src.dim());
    let sa = &a.stream;
    let settings = settings_string(&[
        ("kind", "gmm".into()),
        ("dtype", F::DTYPE.to_string()),
        ("rows", n.to_string()),
        ("dim", d.to_string()),
        ("chunk_rows", sa.chunk_rows.to_string()),
        ("components", a.components.to_string()),
        ("seed", a.seed.to_string()),
        ("init", init_name(a.init).into()),
        ("init_sample", sa.init_sample.to_string()),
        ("variance_floor", format!("{floor:?}")),
    ]);
    let ckpt = checkpoint_path(&a.output);
    let resume = resume_state(
        sa.resume,
        &ckpt,
        ui,
        || {
            let ((w, m, v), meta) = read_gmm_exact::<F>(&ckpt)?;
            let (history, converged) = checkpoint_state(&ckpt, &meta, &settings)?;
            GmmEmState::from_parts(w, m, v, history, converged)
                .map_err(|e| CliError::other(format!("{}: {e}", ckpt.display())))
        },
        |s| s.n_iter(),
    )?;
    announce_input::<F>(ui, src, sa.chunk_rows);
    let completed = Cell::new(resume.as_ref().map_or(0, |s| s.n_iter()));
    // the iteration held by the checkpoint on disk, if any
    let saved: Cell<Option<usize>> = Cell::new(resume.as_ref().map(|s| s.n_iter()));
    let bar = EmBar::new(ui, a.max_iter, a.n_init, "EM");
    let result = {
        let mut pass = |v: &mut ChunkVisitor<'_, F, FitFail<GmmError>>| {
            let mut done = 0;
            input.pass(sa.chunk_rows, interrupt, &mut |b| {
                v(b)?;
                done += b.nrows();
                bar.rows(done, n);
                Ok(())
            })
        };
        let mut on_iter = |it: &EmIteration, st: &GmmEmState<F>| -> Result<(), FitFail<GmmError>> {
            bar.update(it.restart, it.iter, it.log_likelihood, it.rel_change);
            completed.set(st.n_iter());
            if let Some(every) = sa.checkpoint {
                if st.n_iter() % every == 0 {
                    let meta = checkpoint_metadata(&settings, &st.log_likelihood, st.converged);
                    write_gmm(&ckpt, &st.model, &meta)?;
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
        Err(FitFail::Lib(e)) => return Err(gmm_error(&input.label, e)),
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
    put("init", init_name(a.init).to_string());
    put("variance_floor", format!("{floor:?}"));
    put("n_iter", fit.n_iter.to_string());
    put("converged", fit.converged.to_string());
    put("mean_log_likelihood", final_ll.to_string());
    put("training_rows", n.to_string());
    put("chunk_rows", sa.chunk_rows.to_string());
    put("init_sample", sa.init_sample.to_string());
    write_gmm(&a.output, &fit.model, &extra)?;
    remove_checkpoint(&ckpt)?;
    ui.info(format!(
        "GMM K={} D={d} ({}) fitted on {n} rows: {} EM iterations, {}, mean log-likelihood {final_ll:.6} → {}",
        a.components,
        F::DTYPE,
        fit.n_iter,
        if fit.converged { "converged" } else { "not converged (raise --max-iter?)" },
        a.output.display()
    ));
    Ok(())
}
