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
    /// Bad data.
    #[error(transparent)]
    Data(#[from] DataError),
}
