//! One-vs-rest: K binary problems solved in parallel and assembled into
//! weights (or, in Gram mode, dual coefficients), and the fits of
//! [`LinearSvc`] on data in memory.

use super::error::SvmError;
use super::model::argmax;
use super::model::LinearSvc;
use super::params::{LinearSvcParams, ValidLinearSvcParams};
use super::solver::{shared, solve_binary_path, PathPoint, Shared, COL_BLOCK};
use crate::float::Float;
use crate::linalg::{dot, gemm, Par};
use ndarray::{Array1, Array2, ArrayView2, Axis};
use rayon::prelude::*;

/// A one-vs-rest fit: in direct mode the weights, in Gram mode the dual
/// coefficients $a_{kn} = \alpha_{kn} y_{kn}$ (zero outside the training rows).
pub(super) struct OvrFit {
    /// (K, D) weights, or (K, N) dual coefficients in Gram mode.
    pub(super) coef: Array2<f64>,
    /// (K).
    pub(super) b: Array1<f64>,
    pub(super) dual: bool,
    pub(super) n_iter: Vec<usize>,
    pub(super) converged: Vec<bool>,
}

pub(super) fn fit_ovr<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    y: &[usize],
    n_classes: usize,
    p: &LinearSvcParams,
) -> OvrFit {
    let sols: Vec<ClassFit> = (0..n_classes)
        .into_par_iter()
        .map(|k| {
            let (ys, mut path) = solve_binary_path(sh, rows, |r| y[r] == k, p, k as u64, &[p.c]);
            ClassFit::new(rows, &ys, path.pop().expect("one cost, one point"))
        })
        .collect();
    collect_ovr(sh, sols, p)
}

/// One class's solution as [`collect_ovr`] assembles it.
pub(super) struct ClassFit {
    coef: ClassCoef,
    iter: usize,
    converged: bool,
}

/// The coefficients of one class.
enum ClassCoef {
    /// Gram mode: (row of the shared data, $a = \alpha y$) where $\alpha \ne 0$.
    Dual(Vec<(usize, f64)>),
    /// Direct mode: $w$ (D) and $b$.
    Primal(Vec<f64>, f64),
}

impl ClassFit {
    /// From a point of [`solve_binary_path`] over `rows` with signs `ys`.
    pub(super) fn new(rows: &[usize], ys: &[f64], pt: PathPoint) -> Self {
        let coef = match pt.primal {
            Some((w, b)) => ClassCoef::Primal(w, b),
            None => ClassCoef::Dual(
                rows.iter()
                    .zip(&pt.alpha)
                    .zip(ys)
                    .filter(|((_, a), _)| **a != 0.0)
                    .map(|((&r, a), yv)| (r, a * yv))
                    .collect(),
            ),
        };
        Self {
            coef,
            iter: pt.iter,
            converged: pt.converged,
        }
    }
}

/// Assembles the per-class solutions into an [`OvrFit`] (in Gram mode the
/// dual coefficients are N wide, zero outside the solutions' rows).
pub(super) fn collect_ovr<F: Float>(
    sh: &Shared<'_, F>,
    sols: Vec<ClassFit>,
    p: &LinearSvcParams,
) -> OvrFit {
    let n_classes = sols.len();
    let dual = sh.gram.is_some();
    let width = if dual { sh.n } else { sh.d };
    let mut coef = Array2::<f64>::zeros((n_classes, width));
    let mut b = Array1::<f64>::zeros(n_classes);
    let mut n_iter = Vec::with_capacity(n_classes);
    let mut converged = Vec::with_capacity(n_classes);
    for (k, sol) in sols.into_iter().enumerate() {
        match sol.coef {
            ClassCoef::Primal(w, wb) => {
                coef.row_mut(k).assign(&Array1::from(w));
                b[k] = wb;
            }
            ClassCoef::Dual(a) => {
                let mut sum = 0.0;
                for (r, v) in a {
                    coef[[k, r]] = v;
                    sum += v;
                }
                if p.bias {
                    b[k] = sum;
                }
            }
        }
        n_iter.push(sol.iter);
        converged.push(sol.converged);
    }
    OvrFit {
        coef,
        b,
        dual,
        n_iter,
        converged,
    }
}

impl OvrFit {
    /// Weights (K, D) in `f64`: in Gram mode $W = A X$, blocks of
    /// [`COL_BLOCK`] columns in parallel (`f64` GEMM on a converted block).
    pub(super) fn weights<F: Float>(&self, sh: &Shared<'_, F>) -> Array2<f64> {
        if !self.dual {
            return self.coef.clone();
        }
        let k = self.coef.nrows();
        let x = ArrayView2::from_shape((sh.n, sh.d), sh.data).expect("shape");
        let blocks: Vec<Array2<f64>> = (0..sh.d.div_ceil(COL_BLOCK))
            .into_par_iter()
            .map(|blk| {
                let xb = x
                    .slice(ndarray::s![
                        ..,
                        blk * COL_BLOCK..((blk + 1) * COL_BLOCK).min(sh.d)
                    ])
                    .mapv(|v| v.as_f64());
                let mut wb = Array2::<f64>::zeros((k, xb.ncols()));
                gemm(
                    wb.view_mut(),
                    false,
                    self.coef.view(),
                    xb.view(),
                    1.0,
                    Par::Seq,
                );
                wb
            })
            .collect();
        let views: Vec<_> = blocks.iter().map(|b| b.view()).collect();
        ndarray::concatenate(Axis(1), &views).expect("blocks have K rows")
    }

    /// The predicted class of each of `rows` of the shared data, for a fit
    /// on the rows `train`: in Gram mode from one product of the
    /// (|rows|, |train|) kernel block with the dual coefficients
    /// ([`GramMatrix::decisions`]); otherwise row by row, in parallel.
    pub(super) fn predict_rows<F: Float>(
        &self,
        sh: &Shared<'_, F>,
        rows: &[usize],
        train: &[usize],
    ) -> Result<Vec<usize>, SvmError> {
        Ok(match (&sh.gram, self.dual) {
            (Some(g), true) => {
                let coef = self.coef.select(Axis(1), train);
                g.decisions(rows, train, coef.view())?
                    .rows()
                    .into_iter()
                    .map(|r| argmax(r.iter().copied()))
                    .collect()
            }
            _ => rows
                .par_iter()
                .map(|&i| argmax(self.decision_row(sh, i).into_iter()))
                .collect(),
        })
    }

    /// $f_k(x_i) = w_k^\top x_i + b_k$ (K) for a row i of the shared data
    /// (primal weights; Gram-mode fits are scored by [`OvrFit::predict_rows`]).
    fn decision_row<F: Float>(&self, sh: &Shared<'_, F>, i: usize) -> Vec<f64> {
        let xi = sh.row(i);
        self.coef
            .outer_iter()
            .zip(&self.b)
            .map(|(c, b)| dot(c.as_slice().expect("row-major"), xi) + b)
            .collect()
    }
}

impl LinearSvcParams {
    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit`]:
    /// the one-vs-rest SVM on `x` (N, D) with labels `y` (N).
    ///
    /// ```
    /// use fisherkit::svm::LinearSvcParams;
    /// use ndarray::array;
    /// let x = array![[0.0, 0.1], [0.2, 0.0], [3.0, 3.1], [3.2, 2.9]];
    /// let svm = LinearSvcParams::with_c(10.0).fit(x.view(), &[0, 0, 1, 1]).unwrap();
    /// assert_eq!(svm.predict(x.view()).unwrap(), vec![0, 0, 1, 1]);
    /// ```
    pub fn fit<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
    ) -> Result<LinearSvc<F>, SvmError> {
        self.check()?.fit(x, y)
    }

    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_with_n_classes`].
    pub fn fit_with_n_classes<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        n_classes: usize,
    ) -> Result<LinearSvc<F>, SvmError> {
        self.check()?.fit_with_n_classes(x, y, n_classes)
    }
}

impl ValidLinearSvcParams {
    /// Trains the one-vs-rest SVM on `x` (N, D) with labels `y` (N) in
    /// `0..n_classes`, `n_classes = max(y) + 1` ≥ 2, every class present.
    /// K = n_classes binary problems are solved, also when K = 2.
    ///
    /// # Errors
    /// Bad hyper-parameters, empty or non-finite X, `y.len() != N`, fewer than
    /// two classes, a class in `0..n_classes` without samples.
    pub fn fit<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
    ) -> Result<LinearSvc<F>, SvmError> {
        self.fit_impl(x, y, None)
    }

    /// [`LinearSvcParams::fit`] with the number of classes given: labels
    /// must be < `n_classes` and every class must be present.
    pub fn fit_with_n_classes<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        n_classes: usize,
    ) -> Result<LinearSvc<F>, SvmError> {
        self.fit_impl(x, y, Some(n_classes))
    }

    fn fit_impl<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        n_classes: Option<usize>,
    ) -> Result<LinearSvc<F>, SvmError> {
        let k = self.check_xy(x, y, n_classes)?;
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let fit = fit_ovr(&sh, &rows, y, k, self);
        Ok(LinearSvc {
            coef: fit.weights(&sh).mapv(F::from_f64_lossy),
            intercept: fit.b.mapv(F::from_f64_lossy),
            n_iter: fit.n_iter,
            converged: fit.converged,
        })
    }
}
