//! `fisherkit gmm fit`: EM over one or more .npy files read in chunks.

use super::check_output;
use super::streaming::{
    check_stream_args, run_fit, save_fit, settings_string, FitFail, FitRun, Input, Interrupt,
    StreamedKind,
};
use crate::args::{GmmFitArgs, InitArg};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::gmm::{
    DiagGmm, EmIteration, GmmEmState, GmmError, GmmInit, GmmParams, VarianceFloor,
};
use fisherkit::stream::{DataPass, OnIteration};
use fisherkit_io::checkpoint::{read_gmm_exact, GmmArrays};
use fisherkit_io::{Dtype, Element, IoError, ModelFile};
use std::collections::BTreeMap;
use std::path::Path;

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
        .tol(a.tol_mode.with(a.tol))
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
    let fit = run_fit(&params, &run, &settings, |e| gmm_error(&input.label, e))?;
    let extra = BTreeMap::from([
        ("init".to_string(), init_name(a.init).to_string()),
        ("variance_floor".to_string(), format!("{floor:?}")),
    ]);
    let what = format!("GMM K={} D={d} ({})", a.components, F::DTYPE);
    save_fit::<F, GmmParams<F>>(&run, &fit, extra, &what)
}

impl<F: Element> StreamedKind<F> for GmmParams<F> {
    type Model = DiagGmm<F>;
    type Report = EmIteration;
    type Error = GmmError;
    type Saved = GmmArrays<F>;
    const BAR: &'static str = "EM";

    fn read_exact(path: &Path) -> Result<(GmmArrays<F>, BTreeMap<String, String>), IoError> {
        read_gmm_exact(path)
    }

    fn resume(
        (w, m, v): GmmArrays<F>,
        history: Vec<f64>,
        converged: bool,
    ) -> Result<GmmEmState<F>, GmmError> {
        GmmEmState::from_parts(w, m, v, history, converged)
    }

    fn write(
        path: &Path,
        model: &DiagGmm<F>,
        meta: &BTreeMap<String, String>,
    ) -> Result<(), IoError> {
        model.write(path, meta)
    }

    fn progress(it: &EmIteration) -> (usize, usize, f64, f64) {
        (it.restart, it.iter, it.log_likelihood, it.change)
    }

    fn fit(
        &self,
        pass: &mut DataPass<'_, F, FitFail<GmmError>>,
        init_sample: usize,
        resume: Option<GmmEmState<F>>,
        on_iter: &mut OnIteration<'_, EmIteration, DiagGmm<F>, FitFail<GmmError>>,
    ) -> Result<GmmEmState<F>, FitFail<GmmError>> {
        let f = self.fit_streaming(pass, init_sample, resume, on_iter)?;
        Ok(GmmEmState {
            model: f.model,
            log_likelihood: f.log_likelihood,
            converged: f.converged,
        })
    }
}
