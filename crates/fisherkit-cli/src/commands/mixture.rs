//! What `gmm fit` and `mfa fit` share above the streamed EM of
//! [`super::streaming`]: the steps of the command (check the output and the
//! streaming flags, open the input, pick the element type of the data), the
//! settings a checkpoint is checked against, the run and the output. A
//! command says only what is its own ([`FitCommand`]).

use super::check_output;
use super::streaming::{
    check_stream_args, run_fit, save_fit, settings_string, FitRun, Input, Interrupt, StreamedKind,
};
use crate::args::StreamArgs;
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::stream::EmTol;
use fisherkit_io::{Dtype, Element};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The arguments every `fit` command has.
pub struct CommonFitArgs<'a> {
    pub input: &'a [PathBuf],
    pub output: &'a Path,
    pub stream: &'a StreamArgs,
    pub components: usize,
    pub seed: u64,
    pub max_iter: usize,
    pub tol: EmTol,
    pub n_init: usize,
}

/// [`FitCommand::common`] of an argument struct: `gmm fit` and `mfa fit`
/// name these arguments alike (crate::args).
macro_rules! common_fit_args {
    () => {
        fn common(&self) -> $crate::commands::mixture::CommonFitArgs<'_> {
            $crate::commands::mixture::CommonFitArgs {
                input: &self.input,
                output: &self.output,
                stream: &self.stream,
                components: self.components,
                seed: self.em.seed,
                max_iter: self.em.max_iter,
                tol: self.em.tol_mode.with(self.em.tol),
                n_init: self.em.n_init,
            }
        }
    };
}
pub(crate) use common_fit_args;

/// The [`StreamedKind`] of a library parameter type: its model, report and
/// error types, the progress bar's prefix, how a checkpoint's arrays are read
/// back bit for bit and made a state to resume (`saved`, the EM history and
/// convergence flag → `resume`), and the library's streamed fit.
macro_rules! streamed_kind {
    (
        impl<$f:ident> for $params:ty { $model:ty, $report:ty, $error:ty, $bar:literal }
        read $saved:ty = $read:path;
        resume |$arrays:pat_param, $hc:pat_param| $resume:expr
    ) => {
        impl<$f: fisherkit_io::Element> $crate::commands::streaming::StreamedKind<$f> for $params {
            type Model = $model;
            type Report = $report;
            type Error = $error;
            type Saved = $saved;
            const BAR: &'static str = $bar;

            fn read_exact(
                path: &std::path::Path,
            ) -> Result<($saved, fisherkit_io::Metadata), fisherkit_io::IoError> {
                $read(path)
            }

            fn resume(
                $arrays: $saved,
                $hc: (Vec<f64>, bool),
            ) -> Result<fisherkit::stream::EmState<$model>, $error> {
                $resume
            }

            fn fit(
                &self,
                (pass, init_sample, resume, on_iter): $crate::commands::streaming::FitArgs<
                    '_,
                    '_,
                    $f,
                    Self,
                >,
            ) -> $crate::commands::streaming::FitResult<$f, Self> {
                let f = self.fit_streaming(pass, init_sample, resume, on_iter)?;
                Ok($crate::commands::streaming::state(
                    f.model,
                    f.log_likelihood,
                    f.converged,
                ))
            }
        }
    };
}
pub(crate) use streamed_kind;

/// A `fit` command of a mixture model: its arguments, the library's
/// parameters they make, and what it records beyond [`CommonFitArgs`].
pub trait FitCommand {
    /// The `kind` setting (`gmm`, `mfa`).
    const KIND: &'static str;
    /// The library's error.
    type Error: std::fmt::Display;
    /// The library's parameters for data of element type `F`.
    type Params<F: Element>: StreamedKind<F, Error = Self::Error>;

    fn common(&self) -> CommonFitArgs<'_>;
    fn params<F: Element>(&self) -> Self::Params<F>;
    /// The settings after `kind`, `dtype`, `rows`, `dim`, `chunk_rows` and
    /// `components`, in the order of the checkpoint's `settings` key.
    fn settings(&self) -> Vec<(&'static str, String)>;
    /// The model's own metadata keys of the output.
    fn extra(&self) -> BTreeMap<String, String>;
    /// The model in the final report, before `D=… (dtype)`: `GMM K=5`.
    fn describe(&self) -> String;
    /// A library error as the command reports it; `input` names the input.
    fn error(&self, input: &str, e: Self::Error) -> CliError;
}

/// Runs a `fit` command: checks, opens the input and fits in the element
/// type of the data.
pub fn fit<C: FitCommand>(cmd: &C, ui: &Ui) -> Result<(), CliError> {
    let c = cmd.common();
    check_output(c.output)?;
    check_stream_args(c.stream, c.n_init)?;
    let input = Input::open(c.input)?;
    let interrupt = Interrupt::install()?;
    match input.source.dtype() {
        Dtype::F32 => fit_typed::<f32, C>(cmd, &input, &interrupt, ui),
        Dtype::F64 => fit_typed::<f64, C>(cmd, &input, &interrupt, ui),
    }
}

fn fit_typed<F: Element, C: FitCommand>(
    cmd: &C,
    input: &Input,
    interrupt: &Interrupt,
    ui: &Ui,
) -> Result<(), CliError> {
    let c = cmd.common();
    let params = cmd.params::<F>();
    let (n, d) = (input.source.n_rows(), input.source.dim());
    let mut settings = vec![
        ("kind", C::KIND.to_string()),
        ("dtype", F::DTYPE.to_string()),
        ("rows", n.to_string()),
        ("dim", d.to_string()),
        ("chunk_rows", c.stream.chunk_rows.to_string()),
        ("components", c.components.to_string()),
    ];
    settings.extend(cmd.settings());
    let run = FitRun {
        input,
        stream: c.stream,
        interrupt,
        ui,
        output: c.output,
        seed: c.seed,
        max_iter: c.max_iter,
        tol: c.tol,
        n_init: c.n_init,
    };
    let settings = settings_string(&settings);
    let fit = run_fit::<F, _>(&params, &run, &settings, |e| cmd.error(&input.label, e))?;
    let what = format!("{} D={d} ({})", cmd.describe(), F::DTYPE);
    save_fit::<F, C::Params<F>>(&run, &fit, cmd.extra(), &what)
}
