//! What `gmm fit` and `mfa fit` share for out-of-core training: the chunked
//! input, interruption by SIGINT/SIGTERM, checkpoints and resumption.
//!
//! The data are read from disk once per EM pass in blocks of `--chunk-rows`
//! rows ([`NpySource`]); the library sums the blocks' statistics. A signal
//! only raises a flag; the fit checks it between blocks and after each
//! iteration and stops with exit status 130 (SIGINT) or 143 (SIGTERM). The
//! output is written atomically only once the fit is complete, so an
//! interrupted run leaves the previous file (or none). A second signal of the
//! same kind exits at once.

use crate::args::StreamArgs;
use crate::error::CliError;
use crate::progress::{EmBar, Ui};
use fisherkit::gmm::{EmIteration, GmmError};
use fisherkit::mfa::{MfaError, MfaIteration};
use fisherkit::stream::{ChunkVisitor, DataPass, EmState, OnIteration};
use fisherkit_io::{Element, IoError, Metadata, ModelFile, NpySource};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The signal that stopped a fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The shell's convention: 128 + the signal number.
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }
}

/// Flags raised by SIGINT and SIGTERM.
pub struct Interrupt {
    int: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

impl Interrupt {
    /// Installs the handlers: the first signal raises its flag, a second one
    /// of the same kind terminates the process at once.
    pub fn install() -> Result<Self, CliError> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let int = Arc::new(AtomicBool::new(false));
        let term = Arc::new(AtomicBool::new(false));
        for (sig, flag, code) in [(SIGINT, &int, 130), (SIGTERM, &term, 143)] {
            signal_hook::flag::register_conditional_shutdown(sig, code, Arc::clone(flag))
                .and_then(|_| signal_hook::flag::register(sig, Arc::clone(flag)))
                .map_err(|e| CliError::other(format!("cannot install a signal handler: {e}")))?;
        }
        Ok(Self { int, term })
    }

    /// The signal received, if any.
    pub fn caught(&self) -> Option<Signal> {
        if self.int.load(Ordering::Relaxed) {
            Some(Signal::Int)
        } else if self.term.load(Ordering::Relaxed) {
            Some(Signal::Term)
        } else {
            None
        }
    }
}

/// Why a streamed fit stopped early: the library's error `L`, a file or
/// usage problem, or a signal.
pub enum FitFail<L> {
    Lib(L),
    Cli(CliError),
    Interrupted(Signal),
}

impl From<GmmError> for FitFail<GmmError> {
    fn from(e: GmmError) -> Self {
        FitFail::Lib(e)
    }
}

impl From<MfaError> for FitFail<MfaError> {
    fn from(e: MfaError) -> Self {
        FitFail::Lib(e)
    }
}

impl<L> From<IoError> for FitFail<L> {
    fn from(e: IoError) -> Self {
        FitFail::Cli(e.into())
    }
}

impl<L> From<CliError> for FitFail<L> {
    fn from(e: CliError) -> Self {
        FitFail::Cli(e)
    }
}

/// The training files, opened (headers validated) and named for messages.
pub struct Input {
    pub source: NpySource,
    /// The file name, or `a.npy, b.npy, …` for several.
    pub label: String,
}

impl Input {
    pub fn open(paths: &[PathBuf]) -> Result<Self, CliError> {
        let source = NpySource::open(paths)?;
        let label = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if source.n_rows() == 0 {
            return Err(CliError::other(format!(
                "{label}: training data is empty (0 rows)"
            )));
        }
        if source.dim() == 0 {
            return Err(CliError::other(format!(
                "{label}: training data has 0 columns"
            )));
        }
        Ok(Self { source, label })
    }

    /// One pass: every block of `chunk_rows` rows to `visit`, stopping at a signal.
    pub fn pass<F: Element, L>(
        &self,
        chunk_rows: usize,
        interrupt: &Interrupt,
        visit: &mut ChunkVisitor<'_, F, FitFail<L>>,
    ) -> Result<(), FitFail<L>> {
        self.source
            .for_each_block::<F, FitFail<L>>(chunk_rows, &mut |b| {
                if let Some(s) = interrupt.caught() {
                    return Err(FitFail::Interrupted(s));
                }
                visit(b)
            })
    }
}

/// Checks the streaming flags against the rest (usage errors).
pub fn check_stream_args(a: &StreamArgs, n_init: usize) -> Result<(), CliError> {
    if a.chunk_rows == 0 {
        return Err(CliError::usage("--chunk-rows must be at least 1"));
    }
    if a.checkpoint == Some(0) {
        return Err(CliError::usage(
            "--checkpoint must be at least 1 (iterations)",
        ));
    }
    if (a.checkpoint.is_some() || a.resume) && n_init > 1 {
        return Err(CliError::usage(
            "--checkpoint and --resume need --n-init 1 (restarts are not checkpointed)",
        ));
    }
    Ok(())
}

/// `<output>.ckpt`, beside the output.
pub fn checkpoint_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(".ckpt");
    output.with_file_name(name)
}

/// Metadata keys of a checkpoint.
const KEY_SETTINGS: &str = "checkpoint_settings";
const KEY_HISTORY: &str = "checkpoint_log_likelihood";
const KEY_CONVERGED: &str = "checkpoint_converged";
const KEY_ITER: &str = "checkpoint_iterations";

/// The settings that must not change between a run and its resumption,
/// as `key=value` pairs.
pub fn settings_string(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// The metadata of a checkpoint after `history.len()` iterations. The
/// history is written with `{:e}` (shortest representation that reads back
/// to the same bits).
pub fn checkpoint_metadata(
    settings: &str,
    history: &[f64],
    converged: bool,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(KEY_SETTINGS.into(), settings.to_string());
    m.insert(
        KEY_HISTORY.into(),
        history
            .iter()
            .map(|v| format!("{v:e}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    m.insert(KEY_CONVERGED.into(), converged.to_string());
    m.insert(KEY_ITER.into(), history.len().to_string());
    m
}

/// Reads back the EM history and convergence flag of a checkpoint, after
/// checking it was made with `settings`.
pub fn checkpoint_state(
    path: &Path,
    meta: &BTreeMap<String, String>,
    settings: &str,
) -> Result<(Vec<f64>, bool), CliError> {
    let get = |k: &str| {
        meta.get(k).ok_or_else(|| {
            CliError::other(format!(
                "{}: not a fisherkit checkpoint (no metadata `{k}`)",
                path.display()
            ))
        })
    };
    let saved = get(KEY_SETTINGS)?;
    if saved != settings {
        let parse = |s: &str| -> BTreeMap<String, String> {
            s.split(';')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (old, new) = (parse(saved), parse(settings));
        let diffs: Vec<String> = new
            .iter()
            .filter(|(k, v)| old.get(*k) != Some(v))
            .map(|(k, v)| {
                format!(
                    "{k} was {} and is now {v}",
                    old.get(k).map(String::as_str).unwrap_or("unset")
                )
            })
            .collect();
        return Err(CliError::other(format!(
            "{}: the checkpoint was made with other inputs or settings ({}); \
             delete it to start again",
            path.display(),
            diffs.join(", ")
        )));
    }
    let history: Vec<f64> = get(KEY_HISTORY)?
        .split(',')
        .map(|v| v.parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| {
            CliError::other(format!(
                "{}: unreadable log-likelihood history ({e})",
                path.display()
            ))
        })?;
    let converged = get(KEY_CONVERGED)? == "true";
    Ok((history, converged))
}

/// Removes a finished run's checkpoint (a missing one is fine).
pub fn remove_checkpoint(path: &Path) -> Result<(), CliError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::other(format!(
            "{}: cannot remove the checkpoint: {e}",
            path.display()
        ))),
    }
}

/// The EM state to resume from with `--resume`: `load` reads and checks the
/// checkpoint `ckpt` when it exists; `n_iter` tells how far it got. Without
/// `--resume`, or with no checkpoint on disk, the fit starts from the beginning.
pub fn resume_state<S>(
    resume: bool,
    ckpt: &Path,
    ui: &Ui,
    load: impl FnOnce() -> Result<S, CliError>,
    n_iter: impl Fn(&S) -> usize,
) -> Result<Option<S>, CliError> {
    if !resume {
        return Ok(None);
    }
    if !ckpt.exists() {
        ui.info(format!(
            "no checkpoint {} to resume from: starting from the beginning",
            ckpt.display()
        ));
        return Ok(None);
    }
    let state = load()?;
    ui.info(format!(
        "resuming from {} after {} EM iterations",
        ckpt.display(),
        n_iter(&state)
    ));
    Ok(Some(state))
}

/// Says how the training rows are read when it is not one file in one block.
pub fn announce_input<F: Element>(ui: &Ui, src: &NpySource, chunk_rows: usize) {
    if src.files().len() > 1 || src.n_rows() > chunk_rows {
        ui.info(format!(
            "training on {} rows × {} ({}) from {} file(s), {chunk_rows} rows at a time",
            src.n_rows(),
            src.dim(),
            F::DTYPE,
            src.files().len(),
        ));
    }
}

/// The report of an interrupted fit.
pub fn interrupted(
    sig: Signal,
    completed: usize,
    output: &Path,
    checkpoint: Option<(&Path, usize)>,
) -> CliError {
    let kept = if output.exists() {
        format!("{} is unchanged", output.display())
    } else {
        format!("{} was not written", output.display())
    };
    let next = match checkpoint {
        Some((p, it)) => format!(
            "; the checkpoint {} holds iteration {it}: rerun with --resume to continue",
            p.display()
        ),
        None => "; use --checkpoint N to make a long fit resumable".to_string(),
    };
    CliError {
        message: format!(
            "interrupted by {} after {completed} EM iterations; {kept}{next}",
            sig.name()
        ),
        code: sig.exit_code(),
    }
}

/// What `gmm fit` and `mfa fit` share of a run: the opened input, the
/// streaming flags, the EM schedule and the output path.
pub struct FitRun<'a> {
    pub input: &'a Input,
    pub stream: &'a StreamArgs,
    pub interrupt: &'a Interrupt,
    pub ui: &'a Ui,
    pub output: &'a Path,
    pub seed: u64,
    pub max_iter: usize,
    pub tol: fisherkit::stream::EmTol,
    pub n_init: usize,
}

/// The arguments of the library's streamed fit: the pass over the data,
/// `init_sample`, the state to resume from and the per-iteration callback.
pub type FitArgs<'p, 'o, F, K> = (
    &'p mut DataPass<'p, F, FitFail<<K as StreamedKind<F>>::Error>>,
    usize,
    Option<EmState<<K as StreamedKind<F>>::Model>>,
    &'o mut OnIteration<
        'o,
        <K as StreamedKind<F>>::Report,
        <K as StreamedKind<F>>::Model,
        FitFail<<K as StreamedKind<F>>::Error>,
    >,
);

/// The outcome of the library's streamed fit: the final EM state.
pub type FitResult<F, K> =
    Result<EmState<<K as StreamedKind<F>>::Model>, FitFail<<K as StreamedKind<F>>::Error>>;

/// The EM state of a finished fit.
pub fn state<M>(model: M, log_likelihood: Vec<f64>, converged: bool) -> EmState<M> {
    EmState {
        model,
        log_likelihood,
        converged,
    }
}

/// What the progress bar shows of an iteration: restart, iteration, mean
/// log-likelihood and change (of the `--tol` rule).
pub trait Progress {
    fn progress(&self) -> (usize, usize, f64, f64);
}

impl Progress for EmIteration {
    fn progress(&self) -> (usize, usize, f64, f64) {
        (self.restart, self.iter, self.log_likelihood, self.change)
    }
}

impl Progress for MfaIteration {
    fn progress(&self) -> (usize, usize, f64, f64) {
        (self.restart, self.iter, self.log_likelihood, self.change)
    }
}

/// A model kind fitted out of core by a `fit` command: how its checkpoints
/// are read back bit for bit, and how the library fits it. Checkpoints and
/// the output are written by the model's [`ModelFile::write`].
pub trait StreamedKind<F: Element> {
    /// The fitted model.
    type Model: ModelFile;
    /// The library's per-iteration report.
    type Report: Progress;
    /// The library's error.
    type Error;
    /// The arrays of a checkpoint, as read.
    type Saved;
    /// Prefix of the progress bar.
    const BAR: &'static str;

    fn read_exact(path: &Path) -> Result<(Self::Saved, Metadata), IoError>;
    /// The state to resume from: the saved arrays and the EM history and
    /// convergence flag.
    fn resume(
        saved: Self::Saved,
        history: (Vec<f64>, bool),
    ) -> Result<EmState<Self::Model>, Self::Error>;
    /// The library's streamed fit.
    fn fit(&self, args: FitArgs<'_, '_, F, Self>) -> FitResult<F, Self>;
}

/// Runs the streamed fit of `kind`: resumes from `<output>.ckpt` with
/// `--resume` (checked against `settings`), reads the input once per pass
/// with a progress bar, writes a checkpoint every `--checkpoint` iterations
/// and stops at a signal with the report of [`interrupted`]. Library errors
/// are reported by `lib_error`.
pub fn run_fit<F: Element, K: StreamedKind<F>>(
    kind: &K,
    run: &FitRun<'_>,
    settings: &str,
    lib_error: impl FnOnce(K::Error) -> CliError,
) -> Result<EmState<K::Model>, CliError>
where
    K::Error: std::fmt::Display,
{
    let (src, sa, ui) = (&run.input.source, run.stream, run.ui);
    let n = src.n_rows();
    let ckpt = checkpoint_path(run.output);
    let resume = resume_state(
        sa.resume,
        &ckpt,
        ui,
        || {
            let (saved, meta) = K::read_exact(&ckpt)?;
            let (history, converged) = checkpoint_state(&ckpt, &meta, settings)?;
            K::resume(saved, (history, converged))
                .map_err(|e| CliError::other(format!("{}: {e}", ckpt.display())))
        },
        |s| s.n_iter(),
    )?;
    announce_input::<F>(ui, src, sa.chunk_rows);
    let completed = Cell::new(resume.as_ref().map_or(0, |s| s.n_iter()));
    // the iteration held by the checkpoint on disk, if any
    let saved: Cell<Option<usize>> = Cell::new(resume.as_ref().map(|s| s.n_iter()));
    let bar = EmBar::new(ui, run.max_iter, run.n_init, K::BAR);
    let result = {
        let mut pass = |v: &mut ChunkVisitor<'_, F, FitFail<K::Error>>| {
            let mut done = 0;
            run.input.pass(sa.chunk_rows, run.interrupt, &mut |b| {
                v(b)?;
                done += b.nrows();
                bar.rows(done, n);
                Ok(())
            })
        };
        let mut on_iter = |it: &K::Report, st: &EmState<K::Model>| {
            let (restart, iter, ll, change) = it.progress();
            bar.update(restart, iter, ll, change);
            completed.set(st.n_iter());
            if let Some(every) = sa.checkpoint {
                if st.n_iter() % every == 0 {
                    let meta = checkpoint_metadata(settings, &st.log_likelihood, st.converged);
                    st.model.write(&ckpt, &meta)?;
                    saved.set(Some(st.n_iter()));
                }
            }
            match run.interrupt.caught() {
                Some(s) => Err(FitFail::Interrupted(s)),
                None => Ok(()),
            }
        };
        kind.fit((&mut pass, sa.init_sample, resume, &mut on_iter))
    };
    bar.finish();
    match result {
        Ok(f) => Ok(f),
        Err(FitFail::Lib(e)) => Err(lib_error(e)),
        Err(FitFail::Cli(e)) => Err(e),
        Err(FitFail::Interrupted(s)) => {
            let kept = saved.get().filter(|_| ckpt.exists());
            Err(interrupted(
                s,
                completed.get(),
                run.output,
                kept.map(|i| (ckpt.as_path(), i)),
            ))
        }
    }
}

/// Writes the fitted model to the output with `extra` and the metadata both
/// commands record, removes the checkpoint and reports `what` (the model,
/// e.g. `GMM K=5 D=8 (float32)`) fitted.
pub fn save_fit<F: Element, K: StreamedKind<F>>(
    run: &FitRun<'_>,
    fit: &EmState<K::Model>,
    mut extra: BTreeMap<String, String>,
    what: &str,
) -> Result<(), CliError> {
    let sa = run.stream;
    let n = run.input.source.n_rows();
    let final_ll = fit.log_likelihood.last().copied().unwrap_or(f64::NAN);
    let mut put = |k: &str, v: String| {
        extra.insert(k.to_string(), v);
    };
    put("seed", run.seed.to_string());
    put("n_init", run.n_init.to_string());
    put("max_iter", run.max_iter.to_string());
    put("tol", run.tol.value().to_string());
    put("tol_mode", run.tol.mode().to_string());
    put("n_iter", fit.n_iter().to_string());
    put("converged", fit.converged.to_string());
    put("mean_log_likelihood", final_ll.to_string());
    put("training_rows", n.to_string());
    put("chunk_rows", sa.chunk_rows.to_string());
    put("init_sample", sa.init_sample.to_string());
    fit.model.write(run.output, &extra)?;
    remove_checkpoint(&checkpoint_path(run.output))?;
    run.ui.info(format!(
        "{what} fitted on {n} rows: {} EM iterations, {}, mean log-likelihood {final_ll:.6} → {}",
        fit.n_iter(),
        if fit.converged {
            "converged"
        } else {
            "not converged (raise --max-iter?)"
        },
        run.output.display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_bit_for_bit() {
        let h = vec![-1.234_567_890_123_456_7e-300, 3.0, -0.1 - 0.2, 1e300];
        let m = checkpoint_metadata("a=1;b=2", &h, true);
        let (back, conv) = checkpoint_state(Path::new("c"), &m, "a=1;b=2").unwrap();
        assert!(conv);
        assert_eq!(
            back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            h.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let e = checkpoint_state(Path::new("c"), &m, "a=1;b=3").unwrap_err();
        assert!(e.message.contains("b was 2 and is now 3"), "{}", e.message);
    }

    #[test]
    fn checkpoint_sits_beside_the_output() {
        assert_eq!(
            checkpoint_path(Path::new("/x/y/gmm.safetensors")),
            PathBuf::from("/x/y/gmm.safetensors.ckpt")
        );
        assert_eq!(checkpoint_path(Path::new("m")), PathBuf::from("m.ckpt"));
    }
}
