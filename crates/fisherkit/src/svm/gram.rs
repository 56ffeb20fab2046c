//! The SVM on a precomputed linear kernel, kept in dual form: [`GramSvc`].

use super::cv::Stop;
use super::error::SvmError;
use super::model::argmax;
use super::ovr::fit_ovr;
use super::params::{LinearSvcParams, ValidLinearSvcParams};
use super::solver::{GramMatrix, Shared};
use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::linalg::{gemm, par_all};
use ndarray::{Array1, Array2, ArrayView2, CowArray};

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
    pub fn fit_gram_with_cv<'a>(
        &self,
        gram: impl Into<KernelView<'a>>,
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
    /// `gram` (N, N, row-major) holds $x_i^\top x_j$ of the training vectors
    /// (symmetric, finite), in `f64` or `f32` (at SUN397's 19 850 training
    /// images an `f32` kernel is 1.6 GB); `y` (N) as for
    /// [`LinearSvcParams::fit`]. The kernel is borrowed, not copied: the bias
    /// feature's constant 1 is added to each entry as it is read (when
    /// `self.bias`). Cross-validation folds are sub-blocks of the kernel, so
    /// no feature vector is needed. With an `f64` kernel, the same folds,
    /// order and updates as [`DualSolver::Gram`](super::DualSolver::Gram) on
    /// the same kernel.
    ///
    /// # Errors
    /// As [`LinearSvcParams::select_c`]; a non-square kernel.
    ///
    /// ```
    /// use fisherkit::svm::LinearSvcParams;
    /// use ndarray::array;
    /// let x = array![[0.0f32, 0.1], [0.2, 0.0], [0.1, 0.1], [3.0, 3.1], [3.2, 2.9], [3.1, 3.0]];
    /// let gram = x.dot(&x.t());
    /// let (svm, c, table) = LinearSvcParams::default()
    ///     .fit_gram_with_cv(gram.view(), &[0, 0, 0, 1, 1, 1], &[0.1, 1.0], 3, 0)
    ///     .unwrap();
    /// assert_eq!(table.len(), 2);
    /// assert!(c == 0.1 || c == 1.0);
    /// // decision values of the training vectors from their kernel rows
    /// assert_eq!(svm.predict(gram.mapv(f64::from).view()).unwrap(), vec![0, 0, 0, 1, 1, 1]);
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn fit_gram_with_cv<'a>(
        &self,
        gram: impl Into<KernelView<'a>>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(GramSvc, f64, Vec<(f64, f64)>), SvmError> {
        self.fit_gram_with_cv_until(gram, y, grid, folds, seed, &|| false)
    }

    /// [`ValidLinearSvcParams::fit_gram_with_cv`], asking `stop` before each
    /// class's fit of every fold and before the final fit (a few seconds
    /// apart at SUN397's size): once it returns `true` the fit gives up.
    ///
    /// # Errors
    /// As [`ValidLinearSvcParams::fit_gram_with_cv`]; [`SvmError::Stopped`]
    /// once `stop` said so.
    #[allow(clippy::type_complexity)]
    pub fn fit_gram_with_cv_until<'a>(
        &self,
        gram: impl Into<KernelView<'a>>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
        stop: &Stop<'_>,
    ) -> Result<(GramSvc, f64, Vec<(f64, f64)>), SvmError> {
        let gram = gram.into();
        if gram.nrows() != gram.ncols() {
            return Err(SvmError::Data(DataError::DimensionMismatch {
                what: "kernel (must be square)",
                got: gram.ncols(),
                expected: gram.nrows(),
            }));
        }
        let n = gram.nrows();
        let n_classes;
        let norms: Vec<f64>;
        let matrix = match gram {
            KernelView::F32(g) => {
                n_classes = self.check_cv(g, y, grid, folds)?;
                norms = (0..n).map(|i| g[[i, i]] as f64).collect();
                let g = if g.is_standard_layout() {
                    CowArray::from(g)
                } else {
                    CowArray::from(g.as_standard_layout().into_owned())
                };
                GramMatrix::F32 {
                    g,
                    bias: if self.bias { 1.0 } else { 0.0 },
                }
            }
            KernelView::F64(g) => {
                // Copied once with the bias feature added, as DualSolver::Gram does.
                n_classes = self.check_cv(g, y, grid, folds)?;
                norms = (0..n).map(|i| g[[i, i]]).collect();
                let mut g = g.to_owned();
                if self.bias {
                    g.mapv_inplace(|v| v + 1.0);
                }
                GramMatrix::F64(g)
            }
        };
        let sh = Shared::<f64> {
            data: &[],
            n,
            d: 0,
            norms,
            gram: Some(matrix),
        };
        let (best, table) = self.cv_table(&sh, y, n_classes, grid, folds, seed, stop)?;
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

/// A linear kernel (N, N) given to [`GramSvc`]'s fit: `f64` (copied once,
/// the bias added) or `f32` (borrowed; the bias added as entries are read).
#[derive(Debug, Clone, Copy)]
pub enum KernelView<'a> {
    /// A kernel in `f32`.
    F32(ArrayView2<'a, f32>),
    /// A kernel in `f64`.
    F64(ArrayView2<'a, f64>),
}

impl KernelView<'_> {
    /// (rows, columns).
    pub fn dim(&self) -> (usize, usize) {
        match self {
            KernelView::F32(g) => g.dim(),
            KernelView::F64(g) => g.dim(),
        }
    }

    fn nrows(&self) -> usize {
        self.dim().0
    }

    fn ncols(&self) -> usize {
        self.dim().1
    }
}

impl<'a> From<ArrayView2<'a, f32>> for KernelView<'a> {
    fn from(g: ArrayView2<'a, f32>) -> Self {
        KernelView::F32(g)
    }
}

impl<'a> From<ArrayView2<'a, f64>> for KernelView<'a> {
    fn from(g: ArrayView2<'a, f64>) -> Self {
        KernelView::F64(g)
    }
}
