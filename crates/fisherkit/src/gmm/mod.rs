//! Diagonal-covariance Gaussian mixture models.
//!
//! $p(x) = \sum_k w_k \, \mathcal N(x; \mu_k, \operatorname{diag} \sigma_k^2)$.
//! [`DiagGmm`] holds the parameters and computes posteriors and
//! log-likelihoods in log space with one GEMM per chunk of rows.
//! [`GmmParams`] fits a mixture by EM (after [`GmmParams::check`] into
//! [`ValidGmmParams`]); [`GmmStats`] are the mergeable E-step
//! sums behind it (streaming and distributed EM);
//! [`GmmParams::fit_streaming`] runs EM over data passed in chunks
//! (out of core, see [`crate::stream`]) and resumes from a [`GmmEmState`].

mod error;
mod estep;
mod fit;
mod model;
pub(crate) mod stats;
mod stream;

pub use crate::kernels::softmax::log_joint_to_posteriors_flushed;
pub use error::GmmError;
pub use fit::{EmIteration, GmmFit, GmmInit, GmmParams, ValidGmmParams, INIT_KMEANS_MAX_ITER};
pub use model::{DiagGmm, CHUNK_ROWS};
pub use stats::{GmmStats, VarianceFloor, STARVED_FRACTION};
pub use stream::{GmmEmState, OnGmmIteration};
