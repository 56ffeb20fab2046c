//! `fisherkit kmeans fit`.

use super::{check_output, read_training};
use crate::args::KmeansFitArgs;
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::kmeans::{KMeansError, KMeansParams};
use fisherkit_io::{write_npy, Element, Matrix};
use ndarray::Array2;

pub fn fit(a: &KmeansFitArgs, ui: &Ui) -> Result<(), CliError> {
    check_output(&a.output)?;
    match read_training(&a.input)? {
        Matrix::F32(x) => fit_typed(a, x, ui),
        Matrix::F64(x) => fit_typed(a, x, ui),
    }
}

fn fit_typed<F: Element>(a: &KmeansFitArgs, x: Array2<F>, ui: &Ui) -> Result<(), CliError> {
    let params = KMeansParams::new(a.clusters)
        .max_iter(a.max_iter)
        .n_init(a.n_init)
        .seed(a.seed);
    let spinner = ui.spinner(&format!(
        "k-means: {} clusters on {} rows",
        a.clusters,
        x.nrows()
    ));
    let km = params.fit(x.view());
    spinner.finish_and_clear();
    let km = km.map_err(|e| match e {
        KMeansError::InvalidHyperParameter { .. } => CliError::usage(e),
        _ => CliError::other(format!("{}: {e}", a.input.display())),
    })?;
    write_npy(&a.output, km.centroids())?;
    ui.info(format!(
        "k-means K={} D={} ({}): {} iterations, {}, inertia {:.6e} → {}",
        a.clusters,
        x.ncols(),
        F::DTYPE,
        km.n_iter(),
        if km.converged() {
            "converged"
        } else {
            "not converged"
        },
        km.inertia(),
        a.output.display()
    ));
    Ok(())
}
