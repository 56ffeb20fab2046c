//! Encoders: GMM Fisher vector and VLAD over lists of bags.

use crate::gmm::model;
use crate::{value_error, with_views, Mat, PyFloat, Vec1};
use fisherkit::encode::{parse_fv_parts, FisherVector, FisherVectorParams, Vlad, VladParams};
use fisherkit::{Encoder, Normalization};
use ndarray::{Array2, ArrayView2};
use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Encodes `views` in parallel with the GIL released; (n_bags, dim) in `F`.
fn encode_all<'py, F: PyFloat, E: Encoder<F>>(
    py: Python<'py>,
    enc: &E,
    views: &[ArrayView2<'_, F>],
) -> PyResult<Bound<'py, PyAny>> {
    let out = if views.is_empty() {
        Array2::<F>::zeros((0, enc.output_dim()))
    } else {
        py.detach(|| enc.encode_batch(views)).map_err(value_error)?
    };
    Ok(out.into_pyarray(py).into_any())
}

/// Fisher vectors (n_bags, dim) of `bags` (each (N_i, D), one dtype) under
/// the GMM `(weights (K), means (K, D), variances (K, D))`, computed in the
/// bags' dtype. `parts`: any of "prior", "mean", "var" (laid out in that order).
#[pyfunction]
#[pyo3(signature = (weights, means, variances, bags, parts, power, l2, fast, vlfeat_skips))]
#[allow(clippy::too_many_arguments)]
fn fisher_vector<'py>(
    py: Python<'py>,
    weights: Vec1<'py>,
    means: Mat<'py>,
    variances: Mat<'py>,
    bags: Vec<Mat<'py>>,
    parts: Vec<String>,
    power: f64,
    l2: bool,
    fast: bool,
    vlfeat_skips: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let params = FisherVectorParams {
        parts: parse_fv_parts(&parts.join(",")).map_err(value_error)?,
        normalization: Normalization { power, l2 },
        fast,
        vlfeat_skips,
    };
    with_views!(bags, |views: F| {
        let g = model::<F>(&weights, &means, &variances)?;
        let enc = FisherVector::new(&g, params).map_err(value_error)?;
        encode_all(py, &enc, &views)
    })
}

/// Length of the Fisher vector of K components in D dimensions with `parts`.
#[pyfunction]
fn fisher_vector_dim(n_components: usize, dim: usize, parts: Vec<String>) -> PyResult<usize> {
    let parts = parse_fv_parts(&parts.join(",")).map_err(value_error)?;
    Ok(parts
        .iter()
        .map(|p| match p {
            fisherkit::encode::FvPart::Prior => n_components,
            _ => n_components * dim,
        })
        .sum())
}

/// VLAD (n_bags, K·D) of `bags` on `centers` (K, D) with hard assignment, or on
/// the GMM `gmm = (weights, means, variances)` (soft assignment by its
/// posteriors unless `hard_assignment`). Flags as VLFeat's, in VLFeat's order.
#[pyfunction]
#[pyo3(signature = (bags, centers, gmm, normalize_mass, square_root, normalize_components, unnormalized, hard_assignment))]
#[allow(clippy::too_many_arguments)]
fn vlad<'py>(
    py: Python<'py>,
    bags: Vec<Mat<'py>>,
    centers: Option<Mat<'py>>,
    gmm: Option<(Vec1<'py>, Mat<'py>, Mat<'py>)>,
    normalize_mass: bool,
    square_root: bool,
    normalize_components: bool,
    unnormalized: bool,
    hard_assignment: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let params = VladParams {
        normalize_mass,
        square_root,
        normalize_components,
        unnormalized,
        hard_assignment,
    };
    with_views!(bags, |views: F| {
        let enc = match (&gmm, &centers) {
            (Some((w, m, v)), _) => {
                Vlad::from_gmm(&model::<F>(w, m, v)?, params).map_err(value_error)?
            }
            (None, Some(c)) => Vlad::new(c.to_owned_as::<F>(), params).map_err(value_error)?,
            (None, None) => {
                return Err(PyValueError::new_err(
                    "VLAD needs centres or a Gaussian mixture",
                ))
            }
        };
        encode_all(py, &enc, &views)
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fisher_vector, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_vector_dim, m)?)?;
    m.add_function(wrap_pyfunction!(vlad, m)?)?;
    Ok(())
}
