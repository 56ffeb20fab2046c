//! k-means: `kmeans_fit`, `kmeans_squared_distances`.

use crate::{value_error, Mat, PyFloat};
use fisherkit::kmeans::{squared_distances, KMeansParams};
use ndarray::ArrayView2;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

type FitOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<i64>>,
    f64,
    usize,
    bool,
);

fn fit_impl<'py, F: PyFloat>(
    py: Python<'py>,
    x: ArrayView2<'_, F>,
    params: &KMeansParams,
) -> PyResult<FitOut<'py>> {
    let km = py.detach(|| params.fit(x)).map_err(value_error)?;
    let labels = km.labels().mapv(|l| l as i64).into_pyarray(py);
    let (inertia, n_iter, converged) = (km.inertia(), km.n_iter(), km.converged());
    let centroids = km.into_centroids().into_pyarray(py).into_any();
    Ok((centroids, labels, inertia, n_iter, converged))
}

/// k-means++ seeding then Lloyd updates on the rows of `x` (N, D).
/// Returns `(centroids (K, D) in x's dtype, labels (N) int64, inertia, n_iter, converged)`.
#[pyfunction]
fn kmeans_fit<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    n_clusters: usize,
    max_iter: usize,
    tol: f64,
    n_init: usize,
    seed: u64,
) -> PyResult<FitOut<'py>> {
    let params = KMeansParams::new(n_clusters)
        .max_iter(max_iter)
        .tol(tol)
        .n_init(n_init)
        .seed(seed);
    match &x {
        Mat::F32(a) => fit_impl(py, a.as_array(), &params),
        Mat::F64(a) => fit_impl(py, a.as_array(), &params),
    }
}

/// Squared Euclidean distances (N, K) of the rows of `x` (N, D) to `centroids`
/// (K, D), in x's dtype.
#[pyfunction]
fn kmeans_squared_distances<'py>(
    py: Python<'py>,
    x: Mat<'py>,
    centroids: Mat<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    fn run<'py, F: PyFloat>(
        py: Python<'py>,
        x: ArrayView2<'_, F>,
        c: &Mat<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let c = c.to_owned_as::<F>();
        let d = py
            .detach(|| squared_distances(x, c.view()))
            .map_err(value_error)?;
        Ok(d.into_pyarray(py).into_any())
    }
    match &x {
        Mat::F32(a) => run(py, a.as_array(), &centroids),
        Mat::F64(a) => run(py, a.as_array(), &centroids),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_squared_distances, m)?)?;
    Ok(())
}
