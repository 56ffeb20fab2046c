//! `fisherkit gmm fit`: EM over one or more .npy files read in chunks.

use super::mixture::{common_fit_args, streamed_kind, FitCommand};
use crate::args::{GmmFitArgs, InitArg};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::gmm::{
    DiagGmm, EmIteration, GmmEmState, GmmError, GmmInit, GmmParams, VarianceFloor,
};
use fisherkit_io::checkpoint::{read_gmm_exact, GmmArrays};
use fisherkit_io::Element;
use std::collections::BTreeMap;

pub fn fit(a: &GmmFitArgs, ui: &Ui) -> Result<(), CliError> {
    super::mixture::fit(a, ui)
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

fn floor(a: &GmmFitArgs) -> VarianceFloor {
    match (a.variance_floor_relative, a.variance_floor_absolute) {
        (Some(f), _) => VarianceFloor::Relative(f),
        (None, Some(f)) => VarianceFloor::Absolute(f),
        (None, None) => VarianceFloor::default(),
    }
}

impl FitCommand for GmmFitArgs {
    const KIND: &'static str = "gmm";
    type Error = GmmError;
    type Params<F: Element> = GmmParams<F>;

    common_fit_args!();

    fn params<F: Element>(&self) -> GmmParams<F> {
        let init = match self.init {
            InitArg::Kmeans => GmmInit::KMeans,
            InitArg::Random => GmmInit::Random,
        };
        GmmParams::<F>::new(self.components)
            .max_iter(self.em.max_iter)
            .tol(self.em.tol_mode.with(self.em.tol))
            .n_init(self.em.n_init)
            .seed(self.em.seed)
            .init(init)
            .variance_floor(floor(self))
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("seed", self.em.seed.to_string()),
            ("init", init_name(self.init).into()),
            ("init_sample", self.stream.init_sample.to_string()),
            ("variance_floor", format!("{:?}", floor(self))),
        ]
    }

    fn extra(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("init".to_string(), init_name(self.init).to_string()),
            ("variance_floor".to_string(), format!("{:?}", floor(self))),
        ])
    }

    fn describe(&self) -> String {
        format!("GMM K={}", self.components)
    }

    fn error(&self, input: &str, e: GmmError) -> CliError {
        gmm_error(input, e)
    }
}

streamed_kind! {
    impl<F> for GmmParams<F> { DiagGmm<F>, EmIteration, GmmError, "EM" }
    read GmmArrays<F> = read_gmm_exact;
    resume |(w, m, v), (h, c)| GmmEmState::from_parts(w, m, v, h, c)
}
