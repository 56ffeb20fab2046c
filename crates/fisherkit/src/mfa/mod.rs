//! Mixtures of factor analysers (MFA) learned by EM.
//!
//! Component $k$ generates $x = \Lambda_k z + \mu_k + \varepsilon$ with
//! $z \sim \mathcal N(0, I_R)$ and $\varepsilon \sim \mathcal N(0, \Psi)$,
//! $\Psi$ diagonal (shared by all components, or one per component), so
//! $p(x) = \sum_k w_k \mathcal N(x; \mu_k, \Lambda_k\Lambda_k^\top + \Psi)$.
//! No D×D matrix is ever formed: the Woodbury identity and the matrix
//! determinant lemma reduce everything to R×R Cholesky factorisations
//! (docs/math.md §4.2–4.3), and the E-step is dominated by two (n×D)·(D×KR) GEMMs per
//! chunk of rows — one when the chunk's posteriors are sparse, as on real
//! descriptors: its statistics are then summed pair by pair in `f64` (§4.6).
//!
//! * [`Mfa`]: parameters, log-likelihoods, posteriors, E-step statistics and
//!   the M-step ([`Mfa::update_from_statistics`]).
//! * [`MfaStats`]: mergeable `f64` sufficient statistics (shards → one EM step).
//! * [`MfaParams`]: EM fitting with k-means + PPCA initialisation and restarts,
//!   run on the parameters checked by [`MfaParams::check`] ([`ValidMfaParams`]);
//!   [`MfaParams::fit_streaming`] over data passed in chunks (out of core, see
//!   [`crate::stream`]), resumable from an [`MfaEmState`].

// Index loops mirror the formulas of small dense algebra.
#![allow(clippy::needless_range_loop)]

mod acc;
mod error;
mod fit;
mod init;
pub(crate) mod kernel;
mod model;
mod sparse;
mod stats;
mod stream;

pub use error::MfaError;
pub use fit::{MfaFit, MfaIteration, MfaParams, ValidMfaParams, PSI_FLOOR};
pub use init::INIT_KMEANS_MAX_ITER;
pub use kernel::MFA_CHUNK_ROWS;
pub use model::{Mfa, PsiMode, WEIGHT_SUM_TOL};
pub use stats::MfaStats;
pub use stream::{MfaEmState, OnMfaIteration};
