//! The errors of k-means.

use crate::data::DataError;

/// Errors of the [`crate::kmeans`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KMeansError {
    /// A hyper-parameter out of range.
    #[error("invalid k-means hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Fewer rows than clusters.
    #[error("cannot make {n_clusters} clusters from {n_rows} rows: k-means needs at least as many rows as clusters")]
    TooFewRows { n_rows: usize, n_clusters: usize },
    /// Bad data.
    #[error(transparent)]
    Data(#[from] DataError),
}
