//! A fitted k-means model, [`KMeans`]: centroids, labels, inertia.

use super::distances::{assign, data_mean};
use super::error::KMeansError;
use crate::data::check_matrix;
use crate::float::Float;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

/// A fitted k-means model.
#[derive(Debug, Clone, PartialEq)]
pub struct KMeans<F: Float> {
    pub(super) centroids: Array2<F>,
    pub(super) labels: Array1<usize>,
    pub(super) inertia: f64,
    pub(super) inertia_history: Vec<f64>,
    pub(super) n_iter: usize,
    pub(super) converged: bool,
}

impl<F: Float> KMeans<F> {
    /// Centroids $c_k$, shape (K, D).
    pub fn centroids(&self) -> ArrayView2<'_, F> {
        self.centroids.view()
    }

    /// Consumes the model, returning the centroids (K, D).
    pub fn into_centroids(self) -> Array2<F> {
        self.centroids
    }

    /// Number of clusters K.
    pub fn n_clusters(&self) -> usize {
        self.centroids.nrows()
    }

    /// Cluster of each training row (N), for the returned centroids.
    pub fn labels(&self) -> ArrayView1<'_, usize> {
        self.labels.view()
    }

    /// $\sum_i \lVert x_i - c_{l_i} \rVert^2$ over the training rows, in `f64`
    /// (each distance computed directly, not by the GEMM expansion).
    pub fn inertia(&self) -> f64 {
        self.inertia
    }

    /// Inertia after the seeding and after each Lloyd update of the kept run
    /// (length `n_iter() + 1`); non-increasing up to rounding.
    pub fn inertia_history(&self) -> &[f64] {
        &self.inertia_history
    }

    /// Number of Lloyd updates of the kept run.
    pub fn n_iter(&self) -> usize {
        self.n_iter
    }

    /// Whether the kept run stopped on `tol` rather than `max_iter`.
    pub fn converged(&self) -> bool {
        self.converged
    }

    /// Index of the nearest centroid of each row of `x` (N, D).
    pub fn predict(&self, x: ArrayView2<'_, F>) -> Result<Array1<usize>, KMeansError> {
        check_matrix(x, Some(self.centroids.ncols()), "data")?;
        let center = data_mean(x);
        let (labels, _) = assign(x, &center, self.centroids.view());
        Ok(Array1::from(labels))
    }
}
