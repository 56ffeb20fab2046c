//! `fisherkit gmm fit`.

use super::{check_output, read_training};
use crate::args::{GmmFitArgs, InitArg};
use crate::error::CliError;
use crate::progress::{EmBar, Ui};
use fisherkit::gmm::{EmIteration, GmmError, GmmInit, GmmParams, VarianceFloor};
use fisherkit_io::{write_gmm, Element, Matrix};
use ndarray::Array2;
use std::collections::BTreeMap;

pub fn fit(a: &GmmFitArgs, ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    match read_training(&a.input)? {
        Matrix::F32(x) => fit_typed(a, x, ui),
        Matrix::F64(x) => fit_typed(a, x, ui),
    }
}

/// Maps a library error to a report: bad hyper-parameters are usage errors
/// (exit 2); anything about the data names the input file (exit 1).
pub fn gmm_error(input: &std::path::Path, e: GmmError) -> CliError {
    match e {
        GmmError::InvalidHyperParameter { .. } => CliError::usage(e),
        _ => CliError::other(format!("{}: {e}", input.display())),
    }
}

fn fit_typed<F: Element>(a: &GmmFitArgs, x: Array2<F>, ui: &Ui) -> Result<(), CliError> {
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
    let (n, d) = x.dim();
    let mut bar = EmBar::new(ui, a.max_iter, a.n_init, "EM");
    let fit = params
        .fit_with_progress(x.view(), &mut |it: &EmIteration| {
            bar.update(it.restart, it.iter, it.log_likelihood, it.rel_change)
        })
        .map_err(|e| gmm_error(&a.input, e));
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
        "init",
        match a.init {
            InitArg::Kmeans => "kmeans",
            InitArg::Random => "random",
        }
        .to_string(),
    );
    put("variance_floor", format!("{floor:?}"));
    put("n_iter", fit.n_iter.to_string());
    put("converged", fit.converged.to_string());
    put("mean_log_likelihood", final_ll.to_string());
    put("training_rows", n.to_string());
    write_gmm(&a.output, &fit.model, &extra)?;
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
