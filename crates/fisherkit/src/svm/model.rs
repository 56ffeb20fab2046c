//! The fitted one-vs-rest linear SVM, [`LinearSvc`], and its decision rule.

use super::error::SvmError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::linalg::{gemm, Par};
use ndarray::{Array1, Array2, ArrayView2, Axis};
use rayon::prelude::*;

/// Rows per chunk of [`LinearSvc::decision_function`].
const CHUNK_ROWS: usize = 256;

/// A fitted one-vs-rest linear SVM: $f_k(x) = w_k^\top x + b_k$, prediction
/// $\arg\max_k f_k(x)$.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearSvc<F: Float> {
    /// (K, D).
    pub(super) coef: Array2<F>,
    /// (K).
    pub(super) intercept: Array1<F>,
    pub(super) n_iter: Vec<usize>,
    pub(super) converged: Vec<bool>,
}

impl<F: Float> LinearSvc<F> {
    /// Builds a model from weights `coef` (K, D) and intercepts (K).
    ///
    /// # Errors
    /// K < 2, D = 0, K mismatch, non-finite values.
    pub fn from_parts(coef: Array2<F>, intercept: Array1<F>) -> Result<Self, SvmError> {
        let (k, _) = coef.dim();
        if k < 2 {
            return Err(SvmError::TooFewClasses(k));
        }
        check_matrix(coef.view(), None, "SVM weights")?;
        if intercept.len() != k {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: k,
                n_labels: intercept.len(),
            });
        }
        if let Some(v) = intercept.iter().find(|v| !v.is_finite()) {
            return Err(SvmError::InvalidHyperParameter {
                name: "intercept",
                reason: format!("non-finite value {v}"),
            });
        }
        Ok(Self {
            coef,
            intercept,
            n_iter: vec![0; k],
            converged: vec![true; k],
        })
    }

    /// Number of classes K.
    pub fn n_classes(&self) -> usize {
        self.coef.nrows()
    }

    /// Feature dimension D.
    pub fn input_dim(&self) -> usize {
        self.coef.ncols()
    }

    /// Weights $w_k$ (K, D).
    pub fn coef(&self) -> ArrayView2<'_, F> {
        self.coef.view()
    }

    /// Intercepts $b_k$ (K) (zeros when fitted without bias).
    pub fn intercept(&self) -> ndarray::ArrayView1<'_, F> {
        self.intercept.view()
    }

    /// Passes over the data made by each binary solver (K).
    pub fn n_iter(&self) -> &[usize] {
        &self.n_iter
    }

    /// Whether each binary solver met the stopping rule before `max_iter` (K).
    pub fn converged(&self) -> &[bool] {
        &self.converged
    }

    /// Decision values $f_k(x_i) = w_k^\top x_i + b_k$, (N, K) for `x` (N, D):
    /// one GEMM per chunk of rows, chunks in parallel.
    ///
    /// # Errors
    /// Empty X, a width other than D, non-finite values.
    pub fn decision_function(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, SvmError> {
        check_matrix(x, Some(self.input_dim()), "SVM input")?;
        let mut out = Array2::<F>::zeros((x.nrows(), self.n_classes()));
        out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS)
            .into_par_iter()
            .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
            .for_each(|(mut o, xc)| {
                gemm(o.view_mut(), false, xc, self.coef.t(), F::one(), Par::Seq);
                o.rows_mut()
                    .into_iter()
                    .for_each(|mut r| r += &self.intercept);
            });
        Ok(out)
    }

    /// Predicted class $\arg\max_k f_k(x_i)$ (the lowest index on ties) for
    /// each row of `x` (N, D).
    ///
    /// # Errors
    /// As [`LinearSvc::decision_function`].
    pub fn predict(&self, x: ArrayView2<'_, F>) -> Result<Vec<usize>, SvmError> {
        let f = self.decision_function(x)?;
        Ok(f.outer_iter()
            .map(|r| argmax(r.iter().map(|v| v.as_f64())))
            .collect())
    }
}

/// Index of the largest value, the first on ties: the class a one-vs-rest
/// SVM predicts from its decision values.
pub fn argmax(v: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, x) in v.enumerate() {
        if x > best.1 {
            best = (i, x);
        }
    }
    best.0
}
