//! Numerical kernels shared by several models and encoders, which know nothing
//! of any model (`docs/architecture.md` §2, the "shared numerics" layer):
//!
//! * [`softmax`]: row softmax of log-joint matrices with posterior flushing
//!   (GMM and encoder E-steps);
//! * [`diag_gauss`]: the diagonal-GMM log-joint in GEMM form (GMM E-step and
//!   Fisher vector);
//! * [`screen`]: the screened diagonal-GMM log-joints — a bound that prunes
//!   components provably below $e^{-50}$ of a row's best, and the exact
//!   `f64` direct form for the rest (GMM E-step and Fisher vector,
//!   `docs/math.md` §2.7);
//! * [`exp`]: the vectorisable $e^t$, $t \le 0$, they are built on (also the
//!   MFA E-step's);
//! * [`reduce`]: thread-count-independent parallel reductions over rows and
//!   the chunk size they are cut in (GMM statistics and k-means).

pub(crate) mod diag_gauss;
pub(crate) mod exp;
pub(crate) mod reduce;
pub(crate) mod screen;
pub(crate) mod softmax;
