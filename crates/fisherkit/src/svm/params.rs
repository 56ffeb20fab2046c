//! The SVM's hyper-parameters and their check: [`LinearSvcParams`] →
//! [`LinearSvcParams::check`] → [`ValidLinearSvcParams`], which every fit
//! runs on (linfa's params → checked params → fit).

use super::error::SvmError;
use crate::data::check_matrix;
use crate::float::Float;
use ndarray::ArrayView2;

/// The loss of the primal problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SvmLoss {
    /// $\max(0, 1 - y w^\top x)$ (L1-loss SVM, LIBLINEAR `-s 3`).
    Hinge,
    /// $\max(0, 1 - y w^\top x)^2$ (L2-loss SVM, LIBLINEAR `-s 1`, scikit-learn's default).
    #[default]
    SquaredHinge,
}

/// Hyper-parameters of [`LinearSvc`](super::LinearSvc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearSvcParams {
    /// Cost $C > 0$ of the loss (larger: less regularisation). Default 1.
    pub c: f64,
    /// Loss. Default [`SvmLoss::SquaredHinge`].
    pub loss: SvmLoss,
    /// Stopping tolerance on the projected-gradient spread (LIBLINEAR's `-e`),
    /// > 0. Default 0.1.
    pub tol: f64,
    /// Maximum number of passes over the data per binary problem, ≥ 1.
    /// Default 1000 (LIBLINEAR's). [`LinearSvc::converged`](super::LinearSvc::converged) tells whether it was hit.
    pub max_iter: usize,
    /// Append a constant feature 1 (regularised intercept). Default true.
    pub bias: bool,
    /// LIBLINEAR's shrinking of bound coordinates. Default true.
    pub shrinking: bool,
    /// Seed of the coordinate order; class $k$ uses ChaCha8 stream $k$.
    pub seed: u64,
    /// How $w^\top x_i$ is obtained in the coordinate steps. Default [`DualSolver::Auto`].
    pub solver: DualSolver,
}

/// Two ways to run the same coordinate descent (same order, same updates,
/// same stopping rule; results equal up to rounding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DualSolver {
    /// Gram when N ≤ D and N ≤ [`GRAM_MAX_ROWS`], else direct.
    #[default]
    Auto,
    /// Keep $w$ (D): a step costs two passes over a row of X, O(D). Memory O(D) per class.
    Direct,
    /// Cache $K' = X X^\top + [\text{bias}]$ (N, N) in `f64` once (one blocked
    /// GEMM, $N^2 D$ multiply-adds, shared by all classes, folds and C values);
    /// a step then costs O(N) and $W = A X$ is formed once at the end. The
    /// fast choice for few samples of high dimension (Fisher vectors).
    Gram,
}

/// Largest N for which [`DualSolver::Auto`] caches the (N, N) `f64` Gram matrix (512 MB).
pub const GRAM_MAX_ROWS: usize = 8192;

impl Default for LinearSvcParams {
    fn default() -> Self {
        Self {
            c: 1.0,
            loss: SvmLoss::SquaredHinge,
            tol: 0.1,
            max_iter: 1000,
            bias: true,
            shrinking: true,
            seed: 0,
            solver: DualSolver::Auto,
        }
    }
}

impl LinearSvcParams {
    /// Default parameters with cost `c`.
    pub fn with_c(c: f64) -> Self {
        Self {
            c,
            ..Self::default()
        }
    }

    /// Checks every hyper-parameter (C and `tol` finite and > 0, `max_iter`
    /// ≥ 1) and returns the checked parameters, which every fit runs on.
    ///
    /// ```
    /// use fisherkit::svm::LinearSvcParams;
    /// assert!(LinearSvcParams::with_c(0.5).check().is_ok());
    /// let e = LinearSvcParams::with_c(-1.0).check().unwrap_err();
    /// assert!(e.to_string().contains("c"));
    /// ```
    pub fn check(&self) -> Result<ValidLinearSvcParams, SvmError> {
        if !(self.c.is_finite() && self.c > 0.0) {
            return Err(SvmError::InvalidHyperParameter {
                name: "c",
                reason: format!("must be a finite number > 0, got {}", self.c),
            });
        }
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return Err(SvmError::InvalidHyperParameter {
                name: "tol",
                reason: format!("must be a finite number > 0, got {}", self.tol),
            });
        }
        if self.max_iter == 0 {
            return Err(SvmError::InvalidHyperParameter {
                name: "max_iter",
                reason: "must be at least 1".into(),
            });
        }
        Ok(ValidLinearSvcParams(*self))
    }
}

/// [`LinearSvcParams`] that passed [`LinearSvcParams::check`]; only `check`
/// makes one, so the fits below validate the data but never the settings
/// again (linfa's params → checked params → fit). Reads as the parameters
/// (`Deref`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidLinearSvcParams(LinearSvcParams);

impl std::ops::Deref for ValidLinearSvcParams {
    type Target = LinearSvcParams;
    fn deref(&self) -> &LinearSvcParams {
        &self.0
    }
}

impl ValidLinearSvcParams {
    /// The same checked settings with another cost `c` (a grid value the
    /// caller checked: finite and > 0).
    pub(super) fn with_cost(&self, c: f64) -> Self {
        debug_assert!(c.is_finite() && c > 0.0);
        Self(LinearSvcParams { c, ..self.0 })
    }

    /// Checks X and y; returns the number of classes: `n_classes` if given,
    /// else max(y) + 1.
    pub(super) fn check_xy<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        n_classes: Option<usize>,
    ) -> Result<usize, SvmError> {
        check_matrix(x, None, "SVM training data")?;
        if y.len() != x.nrows() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: x.nrows(),
                n_labels: y.len(),
            });
        }
        let n_classes = n_classes.unwrap_or_else(|| y.iter().max().map_or(0, |m| m + 1));
        if let Some((index, &label)) = y.iter().enumerate().find(|(_, &l)| l >= n_classes) {
            return Err(SvmError::LabelOutOfRange {
                index,
                label,
                n_classes,
            });
        }
        if n_classes < 2 {
            return Err(SvmError::TooFewClasses(n_classes));
        }
        let mut count = vec![0usize; n_classes];
        for &l in y {
            count[l] += 1;
        }
        if let Some(class) = count.iter().position(|&c| c == 0) {
            return Err(SvmError::MissingClass { class, n_classes });
        }
        Ok(n_classes)
    }
}
