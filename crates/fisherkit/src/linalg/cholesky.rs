//! A small dense Cholesky factorisation for the R×R (R ≈ 10) systems of the
//! mixture of factor analysers, always in `f64`.
//!
//! $A = L L^\top$ with $L$ lower triangular; solves, inverse and
//! $\log\det A = 2\sum_i \log L_{ii}$. Meant for small matrices: $O(n^3)$ scalar code.

// Index loops mirror the formulas of small dense algebra.
#![allow(clippy::needless_range_loop)]

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

/// Why a matrix could not be factorised.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CholeskyError {
    /// The matrix is not square.
    #[error("Cholesky: matrix is not square (shape ({rows}, {cols}))")]
    NotSquare { rows: usize, cols: usize },
    /// A pivot is not positive (or not finite): the matrix is not positive definite.
    #[error("Cholesky: matrix is not positive definite (pivot {index} is {value})")]
    NotPositiveDefinite { index: usize, value: f64 },
}

/// The factor $L$ of $A = L L^\top$ for a symmetric positive-definite `A` (n, n).
#[derive(Debug, Clone, PartialEq)]
pub struct Cholesky {
    l: Array2<f64>,
}

impl Cholesky {
    /// Factorises `a` (n, n), reading only its lower triangle.
    pub fn new(a: ArrayView2<'_, f64>) -> Result<Self, CholeskyError> {
        let (n, m) = a.dim();
        if n != m {
            return Err(CholeskyError::NotSquare { rows: n, cols: m });
        }
        let mut l = Array2::<f64>::zeros((n, n));
        for j in 0..n {
            let mut d = a[[j, j]];
            for k in 0..j {
                d -= l[[j, k]] * l[[j, k]];
            }
            if !(d.is_finite() && d > 0.0) {
                return Err(CholeskyError::NotPositiveDefinite { index: j, value: d });
            }
            let djj = d.sqrt();
            l[[j, j]] = djj;
            for i in j + 1..n {
                let mut s = a[[i, j]];
                for k in 0..j {
                    s -= l[[i, k]] * l[[j, k]];
                }
                l[[i, j]] = s / djj;
            }
        }
        Ok(Self { l })
    }

    /// Size n of the factorised matrix.
    pub fn dim(&self) -> usize {
        self.l.nrows()
    }

    /// The lower-triangular factor $L$ (n, n).
    pub fn factor(&self) -> ArrayView2<'_, f64> {
        self.l.view()
    }

    /// Solves $L y = b$ in place (`b`: n).
    pub fn solve_lower_in_place(&self, b: &mut [f64]) {
        let n = self.dim();
        debug_assert_eq!(b.len(), n);
        for i in 0..n {
            let mut s = b[i];
            for k in 0..i {
                s -= self.l[[i, k]] * b[k];
            }
            b[i] = s / self.l[[i, i]];
        }
    }

    /// Solves $L^\top x = y$ in place (`b`: n).
    pub fn solve_upper_in_place(&self, b: &mut [f64]) {
        let n = self.dim();
        debug_assert_eq!(b.len(), n);
        for i in (0..n).rev() {
            let mut s = b[i];
            for k in i + 1..n {
                s -= self.l[[k, i]] * b[k];
            }
            b[i] = s / self.l[[i, i]];
        }
    }

    /// Solves $A x = b$ (`b`: n).
    pub fn solve_vec(&self, b: ArrayView1<'_, f64>) -> Array1<f64> {
        let mut v = b.to_vec();
        self.solve_lower_in_place(&mut v);
        self.solve_upper_in_place(&mut v);
        Array1::from(v)
    }

    /// Solves $A X = B$ for `b` (n, m), column by column.
    pub fn solve_mat(&self, b: ArrayView2<'_, f64>) -> Array2<f64> {
        let n = self.dim();
        assert_eq!(b.nrows(), n, "Cholesky::solve_mat: B has wrong row count");
        let mut x = Array2::<f64>::zeros(b.dim());
        let mut col = vec![0.0; n];
        for j in 0..b.ncols() {
            for i in 0..n {
                col[i] = b[[i, j]];
            }
            self.solve_lower_in_place(&mut col);
            self.solve_upper_in_place(&mut col);
            for i in 0..n {
                x[[i, j]] = col[i];
            }
        }
        x
    }

    /// $A^{-1}$ (n, n), exactly symmetric.
    pub fn inverse(&self) -> Array2<f64> {
        let n = self.dim();
        let mut inv = self.solve_mat(Array2::<f64>::eye(n).view());
        for i in 0..n {
            for j in 0..i {
                let v = 0.5 * (inv[[i, j]] + inv[[j, i]]);
                inv[[i, j]] = v;
                inv[[j, i]] = v;
            }
        }
        inv
    }

    /// $L^{-1}$ (n, n), lower triangular.
    pub fn inverse_factor(&self) -> Array2<f64> {
        let n = self.dim();
        let mut out = Array2::<f64>::zeros((n, n));
        let mut col = vec![0.0; n];
        for j in 0..n {
            col.iter_mut().for_each(|v| *v = 0.0);
            col[j] = 1.0;
            self.solve_lower_in_place(&mut col);
            for i in 0..n {
                out[[i, j]] = col[i];
            }
        }
        out
    }

    /// $\log\det A = 2 \sum_i \log L_{ii}$.
    pub fn log_det(&self) -> f64 {
        2.0 * self.l.diag().iter().map(|v| v.ln()).sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn factor_solve_inverse_logdet() {
        let a = array![[4.0, 2.0, 0.6], [2.0, 5.0, 1.0], [0.6, 1.0, 3.0]];
        let c = Cholesky::new(a.view()).unwrap();
        let l = c.factor();
        let llt = l.dot(&l.t());
        assert!((&llt - &a).iter().all(|v| v.abs() < 1e-12));
        let b = array![1.0, -2.0, 0.5];
        let x = c.solve_vec(b.view());
        assert!((a.dot(&x) - &b).iter().all(|v| v.abs() < 1e-12));
        let inv = c.inverse();
        assert!((a.dot(&inv) - Array2::<f64>::eye(3))
            .iter()
            .all(|v| v.abs() < 1e-12));
        let li = c.inverse_factor();
        assert!((l.dot(&li) - Array2::<f64>::eye(3))
            .iter()
            .all(|v| v.abs() < 1e-12));
        // det by cofactor expansion
        let det = a[[0, 0]] * (a[[1, 1]] * a[[2, 2]] - a[[1, 2]] * a[[2, 1]])
            - a[[0, 1]] * (a[[1, 0]] * a[[2, 2]] - a[[1, 2]] * a[[2, 0]])
            + a[[0, 2]] * (a[[1, 0]] * a[[2, 1]] - a[[1, 1]] * a[[2, 0]]);
        assert!((c.log_det() - det.ln()).abs() < 1e-12);
    }

    #[test]
    fn non_positive_definite_is_an_error() {
        let a = array![[1.0, 2.0], [2.0, 1.0]];
        let e = Cholesky::new(a.view()).unwrap_err();
        assert!(matches!(
            e,
            CholeskyError::NotPositiveDefinite { index: 1, .. }
        ));
        let e = Cholesky::new(array![[1.0, 0.0]].view()).unwrap_err();
        assert!(e.to_string().contains("not square"));
        assert!(Cholesky::new(array![[f64::NAN]].view()).is_err());
    }
}
