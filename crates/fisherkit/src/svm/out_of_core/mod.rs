//! The one-vs-rest linear SVM of [`crate::svm`] trained out of core, by
//! block minimisation (Yu, Hsieh, Chang & Lin, *Large linear classification
//! when data cannot fit in memory*, KDD 2010).
//!
//! The training rows are read from a [`RowSource`] (a file, a store of
//! encodings, an array) in blocks of at most [`OutOfCoreSvmParams::block_bytes`]
//! bytes. Only the primal weights $W$ (K, D) `f32`, the intercepts, the dual
//! variables $\alpha$ (K, N) and one block are held, so memory does not grow
//! with $N^2$ (nor with $N \cdot D$). One outer pass visits every block once:
//!
//! 1. read the block $X_B$ (B, D);
//! 2. $u = X_B W^\top + b$ (B, K), one GEMM: every class's decision values on the block;
//! 3. per class (in parallel), dual coordinate descent on the block's
//!    sub-problem with the other blocks' $\alpha$ fixed — the same steps as
//!    the in-memory solver's, kept in decision-value form with the block's
//!    Gram matrix $\bar G_B = X_B X_B^\top + [\text{bias}]$ (B, B; computed
//!    once per block and cached when all of them fit in
//!    [`GRAM_CACHE_BYTES`]), a step costing O(B);
//! 4. $W \leftarrow W + \Delta A\, X_B$ and $b \leftarrow b + \Delta A\,\mathbf 1$,
//!    one GEMM over the classes and rows whose $\alpha$ moved
//!    ($\Delta A_{kt} = \Delta\alpha_{kt} y_{kt}$).
//!
//! The K binary problems are independent: a class stops when the spread of
//! its projected gradients over one outer pass (each taken when its row is
//! visited, as LIBLINEAR's per-pass rule) is at most `tol`, and is left out of
//! the GEMMs after that. Per outer pass the cost is $2 K N D$ multiply-adds of
//! GEMM plus reading the rows once.
//!
//! Cross-validation ([`ValidOutOfCoreSvmParams::fit_with_cv`]) walks the C
//! grid in ascending order on each fold, starting every C from the previous
//! one's $\alpha$ and $W$ (a feasible point of the next problem: $W$ depends
//! on $\alpha$ only, and $\alpha \le C_{\text{old}} < C$ for the hinge), and
//! scores the held-out rows by streaming them once per C.
//!
//! Deterministic: block order fixed, class k's coordinate order from ChaCha8

mod blocks;
mod fit;
mod passes;
mod predict;
mod source;

pub use blocks::GRAM_CACHE_BYTES;
pub use predict::{for_each_decision_block, predict_rows};
pub use source::RowSource;

use super::error::SvmError;
use super::params::{LinearSvcParams, ValidLinearSvcParams};

/// Hyper-parameters of the out-of-core solver: the SVM's own
/// ([`crate::svm::LinearSvcParams`]: C, loss, tolerance, bias, seed; its
/// `max_iter` bounds the outer passes) and the blocking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutOfCoreSvmParams {
    /// The SVM problem and stopping rule. `max_iter` is the number of outer
    /// passes at most (default here [`OutOfCoreSvmParams::DEFAULT_MAX_PASSES`]).
    pub svm: LinearSvcParams,
    /// Bytes of one block of rows in `f32`, at most: B = bytes / (4 D) rows
    /// (16…2²⁰) in direct mode, also at most D / 64 (16…4096) in Gram mode.
    /// Default 256 MiB.
    pub block_bytes: usize,
    /// Coordinate-descent passes over a block per visit, ≥ 1. Default 10
    /// (a visit stops earlier when the block's own spread is below `tol`).
    pub inner_passes: usize,
    /// Direct or Gram sub-problems. Default [`InnerSolver::Auto`].
    pub inner: InnerSolver,
}

impl OutOfCoreSvmParams {
    /// Default number of outer passes at most.
    pub const DEFAULT_MAX_PASSES: usize = 100;

    /// Default settings with cost `c`.
    pub fn with_c(c: f64) -> Self {
        Self {
            svm: LinearSvcParams {
                max_iter: Self::DEFAULT_MAX_PASSES,
                ..LinearSvcParams::with_c(c)
            },
            ..Self::default()
        }
    }

    /// Checks the SVM settings ([`crate::svm::LinearSvcParams::check`]), `block_bytes` > 0
    /// and `inner_passes` ≥ 1.
    ///
    /// ```
    /// use fisherkit::svm::OutOfCoreSvmParams;
    /// assert!(OutOfCoreSvmParams::with_c(1.0).check().is_ok());
    /// let mut p = OutOfCoreSvmParams::with_c(1.0);
    /// p.inner_passes = 0;
    /// assert!(p.check().unwrap_err().to_string().contains("inner_passes"));
    /// ```
    pub fn check(&self) -> Result<ValidOutOfCoreSvmParams, SvmError> {
        let svm = self.svm.check()?;
        if self.block_bytes == 0 {
            return Err(SvmError::InvalidHyperParameter {
                name: "block_bytes",
                reason: "must be at least 1".into(),
            });
        }
        if self.inner_passes == 0 {
            return Err(SvmError::InvalidHyperParameter {
                name: "inner_passes",
                reason: "must be at least 1".into(),
            });
        }
        Ok(ValidOutOfCoreSvmParams {
            svm,
            block_bytes: self.block_bytes,
            inner_passes: self.inner_passes,
            inner: self.inner,
        })
    }
}

impl Default for OutOfCoreSvmParams {
    fn default() -> Self {
        Self {
            svm: LinearSvcParams {
                max_iter: Self::DEFAULT_MAX_PASSES,
                ..Default::default()
            },
            block_bytes: 256 << 20,
            inner_passes: 10,
            inner: InnerSolver::Auto,
        }
    }
}

/// [`OutOfCoreSvmParams`] that passed [`OutOfCoreSvmParams::check`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidOutOfCoreSvmParams {
    svm: ValidLinearSvcParams,
    block_bytes: usize,
    inner_passes: usize,
    inner: InnerSolver,
}

/// Widest rows solved in *direct* mode: the class's weights updated row by
/// row within a block (a step costs O(D)); wider rows take *Gram* mode
/// (decision values kept through the block's Gram matrix, O(B) a step).
pub const DIRECT_MAX_DIM: usize = 4096;

/// How a block's sub-problems are solved (same steps, same optimum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InnerSolver {
    /// Direct for rows of at most [`DIRECT_MAX_DIM`] values, Gram above.
    #[default]
    Auto,
    /// Each class's weights updated row by row: O(D) a step.
    Direct,
    /// Decision values through the block's Gram matrix, weights updated by
    /// one GEMM per block: O(B) a step.
    Gram,
}

impl InnerSolver {
    fn direct(self, dim: usize) -> bool {
        match self {
            InnerSolver::Auto => dim <= DIRECT_MAX_DIM,
            InnerSolver::Direct => true,
            InnerSolver::Gram => false,
        }
    }
}

#[cfg(test)]
mod tests;
