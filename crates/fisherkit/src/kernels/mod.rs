//! Numerical kernels shared by several models and encoders, which know nothing
//! of any model (`docs/architecture.md` §2, the "shared numerics" layer):
//!
//! * [`softmax`]: row softmax of log-joint matrices with posterior flushing
//!   (GMM and encoder E-steps);
//! * [`exp`]: the vectorisable $e^t$, $t \le 0$, they are built on (also the
//!   MFA E-step's).

pub(crate) mod exp;
pub(crate) mod softmax;
