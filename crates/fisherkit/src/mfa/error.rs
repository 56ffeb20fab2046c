use crate::data::DataError;
use crate::kmeans::KMeansError;

/// Errors of the [`crate::mfa`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MfaError {
    /// Model parameters that are inconsistent or out of range.
    #[error("invalid MFA parameters: {0}")]
    InvalidModel(String),
    /// A hyper-parameter out of range (or inconsistent with the data).
    #[error("invalid MFA hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Sufficient statistics that do not belong to this model or to each other.
    #[error("MFA statistics mismatch: {0}")]
    StatisticsMismatch(String),
    /// A numerical failure (a matrix that should be positive definite is not).
    #[error("MFA numerical failure: {0}")]
    Numerical(String),
    /// The k-means initialisation failed.
    #[error("MFA initialisation: {0}")]
    KMeans(#[from] KMeansError),
    /// Bad data.
    #[error(transparent)]
    Data(#[from] DataError),
}
