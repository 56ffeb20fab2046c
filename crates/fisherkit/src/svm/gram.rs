//! The SVM on a precomputed linear kernel, kept in dual form: [`GramSvc`].

use super::error::SvmError;
use super::model::argmax;
use super::ovr::fit_ovr;
use super::params::{LinearSvcParams, ValidLinearSvcParams};
use super::solver::Shared;
use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::linalg::{gemm, par_all};
use ndarray::{Array1, Array2, ArrayView2};

/// A one-vs-rest linear SVM trained on a precomputed linear kernel
/// $K_{ij} = x_i^\top x_j$ of the N training vectors (see
/// [`LinearSvcParams::fit_gram_with_cv`]), kept in dual form: the decision
/// values are $f_k(x) = \sum_n a_{kn}\, x^\top x_n + b_k$ with
/// $a_{kn} = \alpha_{kn} y_{kn}$. The same coordinate descent as
/// [`DualSolver::Gram`](super::DualSolver::Gram), for callers that build the kernel themselves, block
/// by block from data that never fit in memory whole (docs/pipeline.md §4).
#[derive(Debug, Clone, PartialEq)]
pub struct GramSvc {
    /// (K, N) dual coefficients.
    dual_coef: Array2<f64>,
    /// (K) intercepts.
    intercept: Array1<f64>,
    n_iter: Vec<usize>,
    converged: Vec<bool>,
}

impl GramSvc {
    /// Number of classes K.
    pub fn n_classes(&self) -> usize {
        self.dual_coef.nrows()
    }

    /// Number of training vectors N.
    pub fn n_train(&self) -> usize {
        self.dual_coef.ncols()
    }

    /// (K, N) dual coefficients $a_{kn}$.
    pub fn dual_coef(&self) -> ArrayView2<'_, f64> {
        self.dual_coef.view()
    }

    /// (K) intercepts $b_k$.
    pub fn intercept(&self) -> ndarray::ArrayView1<'_, f64> {
        self.intercept.view()
    }

    /// Coordinate-descent passes per class.
    pub fn n_iter(&self) -> &[usize] {
        &self.n_iter
    }

    /// Whether each class's problem met the tolerance.
    pub fn converged(&self) -> &[bool] {
        &self.converged
    }

    /// Decision values (M, K) from the cross kernel `k` (M, N),
    /// $k_{mn} = x_m^\top x_n$ against the N training vectors.
    ///
    /// # Errors
    /// `k` not N wide, or not finite.
    pub fn decision_function(&self, k: ArrayView2<'_, f64>) -> Result<Array2<f64>, SvmError> {
        check_matrix(k, Some(self.n_train()), "cross kernel")?;
        let mut f = Array2::<f64>::zeros((k.nrows(), self.n_classes()));
        gemm(f.view_mut(), false, k, self.dual_coef.t(), 1.0, par_all());
        for mut row in f.rows_mut() {
            row += &self.intercept;
        }
        Ok(f)
    }

    /// The predicted class (argmax of the decision values, first on ties) of
    /// each row of the cross kernel `k` (M, N).
    ///
    /// # Errors
    /// As [`GramSvc::decision_function`].
    pub fn predict(&self, k: ArrayView2<'_, f64>) -> Result<Vec<usize>, SvmError> {
        let f = self.decision_function(k)?;
        Ok(f.rows()
            .into_iter()
            .map(|r| argmax(r.iter().copied()))
            .collect())
    }

    /// The primal weights of a block of features: $W_{:,B} = A X_{:,B}$
    /// (K, |B|) from the training vectors' columns `x` (N, |B|), in `f64`.
    /// Calling it block by block over the columns gives the weights of
    /// [`LinearSvc`](super::LinearSvc) without holding X.
    ///
    /// # Errors
    /// `x` without N rows, or not finite.
    pub fn weights_block<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<Array2<f64>, SvmError> {
        if x.nrows() != self.n_train() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: x.nrows(),
                n_labels: self.n_train(),
            });
        }
        check_matrix(x, None, "SVM weight block")?;
        let xb = x.mapv(|v| v.as_f64());
        let mut w = Array2::<f64>::zeros((self.n_classes(), x.ncols()));
        gemm(
            w.view_mut(),
            false,
            self.dual_coef.view(),
            xb.view(),
            1.0,
            par_all(),
        );
        Ok(w)
    }
}

impl LinearSvcParams {
    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_gram_with_cv`].
    #[allow(clippy::type_complexity)]
    pub fn fit_gram_with_cv(
        &self,
        gram: Array2<f64>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(GramSvc, f64, Vec<(f64, f64)>), SvmError> {
        self.check()?.fit_gram_with_cv(gram, y, grid, folds, seed)
    }
}

impl ValidLinearSvcParams {
    /// [`ValidLinearSvcParams::fit_with_cv`] on a precomputed linear kernel:
    /// `gram` (N, N) holds $x_i^\top x_j$ of the training vectors (symmetric,
    /// finite); `y` (N) as for [`LinearSvcParams::fit`]. The bias feature is
    /// added here when `self.bias`. Cross-validation folds are sub-blocks of
    /// the kernel, so no feature vector is needed. Same folds, order and
    /// updates as [`DualSolver::Gram`](super::DualSolver::Gram) on the same kernel.
    ///
    /// # Errors
    /// As [`LinearSvcParams::select_c`]; a non-square kernel.
    #[allow(clippy::type_complexity)]
    pub fn fit_gram_with_cv(
        &self,
        mut gram: Array2<f64>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(GramSvc, f64, Vec<(f64, f64)>), SvmError> {
        if gram.nrows() != gram.ncols() {
            return Err(SvmError::Data(DataError::DimensionMismatch {
                what: "kernel (must be square)",
                got: gram.ncols(),
                expected: gram.nrows(),
            }));
        }
        let n_classes = self.check_cv(gram.view(), y, grid, folds)?;
        let n = gram.nrows();
        let norms: Vec<f64> = (0..n).map(|i| gram[[i, i]]).collect();
        if self.bias {
            gram.mapv_inplace(|v| v + 1.0);
        }
        let sh = Shared::<f64> {
            data: &[],
            n,
            d: 0,
            norms,
            gram: Some(gram),
        };
        let (best, table) = self.cv_table(&sh, y, n_classes, grid, folds, seed);
        let p = self.with_cost(best);
        let rows: Vec<usize> = (0..n).collect();
        let fit = fit_ovr(&sh, &rows, y, n_classes, &p);
        let model = GramSvc {
            dual_coef: fit.coef,
            intercept: fit.b,
            n_iter: fit.n_iter,
            converged: fit.converged,
        };
        Ok((model, best, table))
    }
}
