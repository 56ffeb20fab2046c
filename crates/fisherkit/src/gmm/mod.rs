//! Diagonal-covariance Gaussian mixture models.
//!
//! $p(x) = \sum_k w_k \, \mathcal N(x; \mu_k, \operatorname{diag} \sigma_k^2)$.
//! [`DiagGmm`] holds the parameters and computes posteriors and
//! log-likelihoods in log space with one GEMM per chunk of rows.

mod error;
mod model;

pub use error::GmmError;
pub use model::{DiagGmm, CHUNK_ROWS};
