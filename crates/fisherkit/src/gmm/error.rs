use crate::data::DataError;

/// Errors of the [`crate::gmm`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GmmError {
    /// Model parameters that are inconsistent or out of range.
    #[error("invalid GMM parameters: {0}")]
    InvalidModel(String),
    /// A hyper-parameter out of range.
    #[error("invalid GMM hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Fewer training rows than components.
    #[error("cannot fit {n_components} components to {n_rows} rows: EM needs at least as many rows as components")]
    TooFewRows { n_rows: usize, n_components: usize },
    /// Sufficient statistics that are inconsistent with each other or the model.
    #[error("invalid GMM statistics: {0}")]
    InvalidStatistics(String),
    /// Bad data.
    #[error(transparent)]
    Data(#[from] DataError),
}
