//! One binary problem on its own: [`BinarySvm`], its weights and dual
//! variables (mostly for diagnostics and tests).

use super::error::SvmError;
use super::ovr::{collect_ovr, ClassFit};
use super::params::{LinearSvcParams, SvmLoss, ValidLinearSvcParams};
use super::solver::{shared, solve_binary_path};
use crate::data::check_matrix;
use crate::float::Float;
use ndarray::{Array1, ArrayView2};

/// The solution of one binary problem, with its dual variables: what
/// [`LinearSvcParams::fit_binary`] returns (mostly for diagnostics and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct BinarySvm {
    /// Weights (D), $w = \sum_i y_i \alpha_i x_i$.
    pub w: Array1<f64>,
    /// Intercept $b$ (the weight of the constant feature; 0 without bias).
    pub bias: f64,
    /// Dual variables (N), $0 \le \alpha_i \le U$.
    pub alpha: Array1<f64>,
    /// Passes over the data made.
    pub n_iter: usize,
    /// Whether the stopping rule was met before `max_iter`.
    pub converged: bool,
    c: f64,
    loss: SvmLoss,
}

impl BinarySvm {
    /// $f(x) = w^\top x + b$ for every row of `x` (N, D), in `f64`.
    pub fn decision_function<F: Float>(&self, x: ArrayView2<'_, F>) -> Array1<f64> {
        x.outer_iter()
            .map(|r| {
                r.iter()
                    .zip(&self.w)
                    .map(|(a, b)| a.as_f64() * b)
                    .sum::<f64>()
                    + self.bias
            })
            .collect()
    }

    /// Primal objective $\tfrac12(\|w\|^2 + b^2) + C\sum_i \xi_i$ on `x` (N, D)
    /// with labels `positive` (N) (true: $y_i = +1$), computed directly.
    pub fn primal_objective<F: Float>(&self, x: ArrayView2<'_, F>, positive: &[bool]) -> f64 {
        let f = self.decision_function(x);
        let loss: f64 = f
            .iter()
            .zip(positive)
            .map(|(&v, &p)| {
                let m = (1.0 - if p { v } else { -v }).max(0.0);
                match self.loss {
                    SvmLoss::Hinge => m,
                    SvmLoss::SquaredHinge => m * m,
                }
            })
            .sum();
        0.5 * (self.w.dot(&self.w) + self.bias * self.bias) + self.c * loss
    }

    /// Dual objective $e^\top\alpha - \tfrac12 \|\bar w\|^2 - \tfrac12\sum_i D_{ii}\alpha_i^2$
    /// ($\bar w = (w, b)$), a lower bound of the primal objective (weak duality).
    pub fn dual_objective(&self) -> f64 {
        let diag = match self.loss {
            SvmLoss::Hinge => 0.0,
            SvmLoss::SquaredHinge => 0.5 / self.c,
        };
        self.alpha.sum()
            - 0.5 * (self.w.dot(&self.w) + self.bias * self.bias)
            - 0.5 * diag * self.alpha.dot(&self.alpha)
    }
}

impl LinearSvcParams {
    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_binary`].
    pub fn fit_binary<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        positive: &[bool],
    ) -> Result<BinarySvm, SvmError> {
        self.check()?.fit_binary(x, positive)
    }
}

impl ValidLinearSvcParams {
    /// Solves the single binary problem with $y_i = +1$ where `positive[i]`,
    /// $-1$ elsewhere, on `x` (N, D); returns the weights and the dual variables.
    ///
    /// # Errors
    /// Bad hyper-parameters or data, `positive.len() != N`.
    pub fn fit_binary<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        positive: &[bool],
    ) -> Result<BinarySvm, SvmError> {
        check_matrix(x, None, "SVM training data")?;
        if positive.len() != x.nrows() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: x.nrows(),
                n_labels: positive.len(),
            });
        }
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let (ys, mut path) = solve_binary_path(&sh, &rows, |r| positive[r], self, 0, &[self.c]);
        let pt = path.pop().expect("one cost, one point");
        let alpha = Array1::from(pt.alpha.clone());
        let (n_iter, converged) = (pt.iter, pt.converged);
        let fit = collect_ovr(&sh, vec![ClassFit::new(&rows, &ys, pt)], self);
        Ok(BinarySvm {
            w: fit.weights(&sh).row(0).to_owned(),
            bias: fit.b[0],
            alpha,
            n_iter,
            converged,
            c: self.c,
            loss: self.loss,
        })
    }
}
