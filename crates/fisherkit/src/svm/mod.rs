//! One-vs-rest linear support vector machine trained by dual coordinate descent
//! (in memory here; out of core, from rows read block by block, in
//! [`OutOfCoreSvmParams`]).
//!
//! For each class $k$ a binary problem with labels $y_i = +1$ (class $k$) or
//! $-1$ (any other class) is solved in the L2-regularised form of LIBLINEAR
//! (Hsieh, Chang, Lin, Keerthi, Sundararajan, ICML 2008):
//! $$\min_w \tfrac12 \|w\|^2 + C \sum_i \xi(w; x_i, y_i),$$
//! $\xi = \max(0, 1 - y_i w^\top x_i)^2$ (squared hinge, L2-loss, LIBLINEAR's
//! default `-s 1`) or $\max(0, 1 - y_i w^\top x_i)$ (hinge, L1-loss, `-s 3`).
//! With `bias`, every $x_i$ is extended by a constant feature 1 whose weight is
//! the intercept — regularised like the other weights, as LIBLINEAR's `-B 1`
//! and scikit-learn's `LinearSVC(intercept_scaling=1)`.
//!
//! The dual $\min_\alpha \tfrac12 \alpha^\top \bar Q \alpha - e^\top\alpha$,
//! $0 \le \alpha_i \le U$, with $\bar Q_{ij} = y_i y_j x_i^\top x_j + D_{ii}\delta_{ij}$
//! ($U = \infty$, $D_{ii} = 1/(2C)$ for the squared hinge; $U = C$, $D_{ii} = 0$
//! for the hinge) is minimised one coordinate at a time in a seeded random
//! order, keeping $w = \sum_i y_i \alpha_i x_i$ up to date: each step costs
//! two passes over one row. Shrinking and the stopping rule (the spread of the
//! projected gradient, $\max PG - \min PG \le$ `tol`, default 0.1) are
//! LIBLINEAR's. The weights are accumulated in `f64` (the many small
//! rank-one updates would drift in `f32`; the passes are memory-bound on the
//! rows, so the wider accumulator costs nothing measurable).
//!
//! Two interchangeable ways to run the steps ([`DualSolver`]): *direct*
//! keeps $w$ and reads a row of X per step (O(D)); *Gram* caches
//! $X X^\top$ (N, N) once and keeps the N decision values instead (O(N) per
//! step, $W$ formed at the end) — the fast choice when N ≤ D, e.g. 1000 Fisher
//! vectors of 250 000 dimensions, and chosen automatically then.
//!
//! Classes are solved in parallel (rayon). The data are never copied per class
//! or per cross-validation fold: solvers take index lists into the shared
//! row-major X (a non-row-major X is copied once per call), and the Gram
//! matrix is shared by all classes, folds and C values of a call.

mod binary;
mod cv;
mod error;
mod gram;
mod model;
mod out_of_core;
mod ovr;
mod params;
mod solver;

pub use binary::BinarySvm;
pub use cv::Stop;
pub use error::SvmError;
pub use gram::{GramSvc, KernelView};
pub use model::{argmax, LinearSvc};
pub use out_of_core::{
    for_each_decision_block, predict_rows, OutOfCoreSvmParams, RowSource, ValidOutOfCoreSvmParams,
    GRAM_CACHE_BYTES,
};
pub use params::{DualSolver, LinearSvcParams, SvmLoss, ValidLinearSvcParams, GRAM_MAX_ROWS};
