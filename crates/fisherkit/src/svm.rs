//! One-vs-rest linear support vector machine trained by dual coordinate descent.
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
//! Classes are solved in parallel (rayon). The data are never copied per class
//! or per cross-validation fold: solvers take index lists into the shared
//! row-major X (a non-row-major X is copied once per call).

use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::linalg::{gemm, Par};
use crate::metrics::mean_per_class_accuracy;
use ndarray::{Array1, Array2, ArrayView2, Axis, CowArray, Ix2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Rows per chunk of [`LinearSvc::decision_function`].
const CHUNK_ROWS: usize = 256;

/// Errors of the [`crate::svm`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SvmError {
    /// Bad feature matrix (empty, wrong width, NaN or infinite values).
    #[error(transparent)]
    Data(#[from] DataError),
    /// A hyper-parameter out of range.
    #[error("invalid SVM hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Labels and rows differ in number.
    #[error("X has {n_rows} rows but y has {n_labels} labels")]
    LabelLengthMismatch { n_rows: usize, n_labels: usize },
    /// Fewer than two classes.
    #[error("need at least 2 classes, got {0}")]
    TooFewClasses(usize),
    /// A class index in `0..n_classes` with no sample.
    #[error(
        "class {class} has no training sample; labels must be 0..{n_classes} with every class present"
    )]
    MissingClass { class: usize, n_classes: usize },
    /// A label ≥ `n_classes`.
    #[error(
        "label y[{index}] = {label} is out of range: labels must be < n_classes = {n_classes}"
    )]
    LabelOutOfRange {
        index: usize,
        label: usize,
        n_classes: usize,
    },
    /// Bad cross-validation grid or fold count.
    #[error("invalid cross-validation setting: {0}")]
    InvalidCrossValidation(String),
}

/// The loss of the primal problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SvmLoss {
    /// $\max(0, 1 - y w^\top x)$ (L1-loss SVM, LIBLINEAR `-s 3`).
    Hinge,
    /// $\max(0, 1 - y w^\top x)^2$ (L2-loss SVM, LIBLINEAR `-s 1`, scikit-learn's default).
    #[default]
    SquaredHinge,
}

/// Hyper-parameters of [`LinearSvc`].
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
    /// Default 1000 (LIBLINEAR's). [`LinearSvc::converged`] tells whether it was hit.
    pub max_iter: usize,
    /// Append a constant feature 1 (regularised intercept). Default true.
    pub bias: bool,
    /// LIBLINEAR's shrinking of bound coordinates. Default true.
    pub shrinking: bool,
    /// Seed of the coordinate order; class $k$ uses ChaCha8 stream $k$.
    pub seed: u64,
}

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
        }
    }
}

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

/// Row-major data shared by every solver of a fit, with the squared row norms.
struct Shared<'a, F: Float> {
    data: &'a [F],
    d: usize,
    norms: Vec<f64>,
}

impl<F: Float> Shared<'_, F> {
    #[inline]
    fn row(&self, i: usize) -> &[F] {
        &self.data[i * self.d..(i + 1) * self.d]
    }
}

fn shared<'a, F: Float>(x: &'a CowArray<'_, F, Ix2>) -> Shared<'a, F> {
    let d = x.ncols();
    let data = x.as_slice().expect("standard layout");
    let norms = (0..x.nrows())
        .into_par_iter()
        .map(|i| {
            let r = &data[i * d..(i + 1) * d];
            dot_ff(r, r)
        })
        .collect();
    Shared { data, d, norms }
}

/// $\sum_j w_j x_j$ in `f64` with 8 independent accumulators (vectorisable).
#[inline]
fn dot<F: Float>(w: &[f64], x: &[F]) -> f64 {
    let mut acc = [0.0f64; 8];
    let wc = w.chunks_exact(8);
    let xc = x.chunks_exact(8);
    let (wr, xr) = (wc.remainder(), xc.remainder());
    for (a, b) in wc.zip(xc) {
        for l in 0..8 {
            acc[l] += a[l] * b[l].as_f64();
        }
    }
    let mut s = acc.iter().sum::<f64>();
    for (a, b) in wr.iter().zip(xr) {
        s += a * b.as_f64();
    }
    s
}

#[inline]
fn dot_ff<F: Float>(x: &[F], y: &[F]) -> f64 {
    let mut acc = [0.0f64; 8];
    let xc = x.chunks_exact(8);
    let yc = y.chunks_exact(8);
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            acc[l] += a[l].as_f64() * b[l].as_f64();
        }
    }
    let mut s = acc.iter().sum::<f64>();
    for (a, b) in xr.iter().zip(yr) {
        s += a.as_f64() * b.as_f64();
    }
    s
}

/// $w \leftarrow w + a x$.
#[inline]
fn axpy<F: Float>(a: f64, x: &[F], w: &mut [f64]) {
    for (wj, xj) in w.iter_mut().zip(x) {
        *wj += a * xj.as_f64();
    }
}

/// Dual coordinate descent on the rows `rows` of `sh`, $y_i = +1$ where
/// `positive(row)`. Returns (w, b, α, iterations, converged).
fn solve_binary<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    positive: impl Fn(usize) -> bool,
    p: &LinearSvcParams,
    stream: u64,
) -> (Vec<f64>, f64, Vec<f64>, usize, bool) {
    let l = rows.len();
    let (diag, upper) = match p.loss {
        SvmLoss::SquaredHinge => (0.5 / p.c, f64::INFINITY),
        SvmLoss::Hinge => (0.0, p.c),
    };
    let b2 = if p.bias { 1.0 } else { 0.0 };
    let ys: Vec<f64> = rows
        .iter()
        .map(|&r| if positive(r) { 1.0 } else { -1.0 })
        .collect();
    let qd: Vec<f64> = rows.iter().map(|&r| sh.norms[r] + b2 + diag).collect();
    let mut alpha = vec![0.0f64; l];
    let mut w = vec![0.0f64; sh.d];
    let mut wb = 0.0f64;
    let mut index: Vec<usize> = (0..l).collect();
    let mut active = l;
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    rng.set_stream(stream);
    let (mut pgmax_old, mut pgmin_old) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut iter = 0;
    let mut converged = false;
    while iter < p.max_iter {
        let (mut pgmax_new, mut pgmin_new) = (f64::NEG_INFINITY, f64::INFINITY);
        for i in 0..active {
            let j = i + rng.random_range(0..active - i);
            index.swap(i, j);
        }
        let mut s = 0;
        while s < active {
            let i = index[s];
            let xi = sh.row(rows[i]);
            let yi = ys[i];
            let g = yi * (dot(&w, xi) + wb) - 1.0 + alpha[i] * diag;
            let mut pg = 0.0;
            if alpha[i] == 0.0 {
                if p.shrinking && g > pgmax_old {
                    active -= 1;
                    index.swap(s, active);
                    continue;
                } else if g < 0.0 {
                    pg = g;
                }
            } else if alpha[i] == upper {
                if p.shrinking && g < pgmin_old {
                    active -= 1;
                    index.swap(s, active);
                    continue;
                } else if g > 0.0 {
                    pg = g;
                }
            } else {
                pg = g;
            }
            pgmax_new = pgmax_new.max(pg);
            pgmin_new = pgmin_new.min(pg);
            if pg.abs() > 1e-12 {
                let old = alpha[i];
                // qd = 0 only for a zero row without bias under the hinge loss:
                // the dual is then linear increasing in α_i, optimum at U = C.
                let new = if qd[i] > 0.0 {
                    (old - g / qd[i]).max(0.0).min(upper)
                } else {
                    upper
                };
                alpha[i] = new;
                let delta = (new - old) * yi;
                axpy(delta, xi, &mut w);
                if p.bias {
                    wb += delta;
                }
            }
            s += 1;
        }
        iter += 1;
        if pgmax_new - pgmin_new <= p.tol {
            if active == l {
                converged = true;
                break;
            }
            active = l;
            pgmax_old = f64::INFINITY;
            pgmin_old = f64::NEG_INFINITY;
            continue;
        }
        pgmax_old = if pgmax_new <= 0.0 {
            f64::INFINITY
        } else {
            pgmax_new
        };
        pgmin_old = if pgmin_new >= 0.0 {
            f64::NEG_INFINITY
        } else {
            pgmin_new
        };
    }
    (w, wb, alpha, iter, converged)
}

/// Weights (K, D), intercepts (K), iterations and convergence flags of a one-vs-rest fit.
struct OvrFit {
    w: Array2<f64>,
    b: Array1<f64>,
    n_iter: Vec<usize>,
    converged: Vec<bool>,
}

fn fit_ovr<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    y: &[usize],
    n_classes: usize,
    p: &LinearSvcParams,
) -> OvrFit {
    let sols: Vec<_> = (0..n_classes)
        .into_par_iter()
        .map(|k| solve_binary(sh, rows, |r| y[r] == k, p, k as u64))
        .collect();
    let mut w = Array2::<f64>::zeros((n_classes, sh.d));
    let mut b = Array1::<f64>::zeros(n_classes);
    let mut n_iter = Vec::with_capacity(n_classes);
    let mut converged = Vec::with_capacity(n_classes);
    for (k, (wk, bk, _, it, conv)) in sols.into_iter().enumerate() {
        w.row_mut(k).assign(&Array1::from(wk));
        b[k] = bk;
        n_iter.push(it);
        converged.push(conv);
    }
    OvrFit {
        w,
        b,
        n_iter,
        converged,
    }
}

/// Index of the largest value, the first on ties.
fn argmax(v: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, x) in v.enumerate() {
        if x > best.1 {
            best = (i, x);
        }
    }
    best.0
}

impl LinearSvcParams {
    /// Default parameters with cost `c`.
    pub fn with_c(c: f64) -> Self {
        Self {
            c,
            ..Self::default()
        }
    }

    /// Checks every hyper-parameter.
    pub fn validate(&self) -> Result<(), SvmError> {
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
        Ok(())
    }

    /// Checks X and y; returns the number of classes: `n_classes` if given,
    /// else max(y) + 1.
    fn check_xy<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        n_classes: Option<usize>,
    ) -> Result<usize, SvmError> {
        self.validate()?;
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
        let sh = shared(&xs);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let fit = fit_ovr(&sh, &rows, y, k, self);
        Ok(LinearSvc {
            coef: fit.w.mapv(F::from_f64_lossy),
            intercept: fit.b.mapv(F::from_f64_lossy),
            n_iter: fit.n_iter,
            converged: fit.converged,
        })
    }

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
        self.validate()?;
        check_matrix(x, None, "SVM training data")?;
        if positive.len() != x.nrows() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: x.nrows(),
                n_labels: positive.len(),
            });
        }
        let xs = x.as_standard_layout();
        let sh = shared(&xs);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let (w, b, alpha, n_iter, converged) = solve_binary(&sh, &rows, |r| positive[r], self, 0);
        Ok(BinarySvm {
            w: Array1::from(w),
            bias: b,
            alpha: Array1::from(alpha),
            n_iter,
            converged,
            c: self.c,
            loss: self.loss,
        })
    }

    /// Chooses C by stratified `folds`-fold cross-validation over `grid`,
    /// scoring the mean per-class accuracy on each held-out fold (averaged
    /// over folds). The other hyper-parameters are `self`'s.
    ///
    /// Folds: each class's samples are shuffled (ChaCha8, `seed`) and dealt
    /// round-robin to the folds, the dealing continuing from class to class,
    /// so fold sizes differ by at most one and each class is spread evenly.
    /// The (C, fold) fits run in parallel, each solving its classes in
    /// parallel on the one rayon pool (no oversubscription); no fit copies X.
    ///
    /// `x`: (N, D); `y`: (N) in `0..n_classes` as for [`LinearSvcParams::fit`].
    /// Returns the best C (the smallest among equal best scores) and
    /// `(C, score)` for every grid value, in grid order.
    ///
    /// # Errors
    /// As [`LinearSvcParams::fit`]; an empty grid, a C ≤ 0 or non-finite in the
    /// grid, `folds` < 2 or > N.
    pub fn select_c<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(f64, Vec<(f64, f64)>), SvmError> {
        let n_classes = self.check_xy(x, y, None)?;
        if grid.is_empty() {
            return Err(SvmError::InvalidCrossValidation(
                "the C grid is empty".into(),
            ));
        }
        if let Some(c) = grid.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return Err(SvmError::InvalidCrossValidation(format!(
                "every C must be a finite number > 0, got {c}"
            )));
        }
        let n = x.nrows();
        if folds < 2 || folds > n {
            return Err(SvmError::InvalidCrossValidation(format!(
                "folds must be between 2 and the number of samples ({n}), got {folds}"
            )));
        }
        let fold_of = stratified_folds(y, n_classes, folds, seed);
        let xs = x.as_standard_layout();
        let sh = shared(&xs);
        let jobs: Vec<(usize, usize)> = (0..grid.len())
            .flat_map(|g| (0..folds).map(move |f| (g, f)))
            .collect();
        let scores: Vec<f64> =
            jobs.par_iter()
                .map(|&(g, f)| {
                    let train: Vec<usize> = (0..n).filter(|&i| fold_of[i] != f).collect();
                    let test: Vec<usize> = (0..n).filter(|&i| fold_of[i] == f).collect();
                    let p = LinearSvcParams {
                        c: grid[g],
                        ..*self
                    };
                    let fit = fit_ovr(&sh, &train, y, n_classes, &p);
                    let pred: Vec<usize> =
                        test.iter()
                            .map(|&i| {
                                let xi = sh.row(i);
                                argmax(
                                    fit.w.outer_iter().zip(&fit.b).map(|(w, b)| {
                                        dot(w.as_slice().expect("row-major"), xi) + b
                                    }),
                                )
                            })
                            .collect();
                    let truth: Vec<usize> = test.iter().map(|&i| y[i]).collect();
                    mean_per_class_accuracy(&truth, &pred, n_classes)
                        .expect("labels validated, test folds non-empty")
                })
                .collect();
        let table: Vec<(f64, f64)> = (0..grid.len())
            .map(|g| {
                let s: f64 = scores[g * folds..(g + 1) * folds].iter().sum();
                (grid[g], s / folds as f64)
            })
            .collect();
        let mut best = table[0];
        for &(c, s) in &table[1..] {
            if s > best.1 || (s == best.1 && c < best.0) {
                best = (c, s);
            }
        }
        Ok((best.0, table))
    }
}

/// Fold index (N) of every sample: stratified round-robin dealing of each
/// class's seeded shuffle, continuing across classes.
fn stratified_folds(y: &[usize], n_classes: usize, folds: usize, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut fold_of = vec![0usize; y.len()];
    let mut next = 0usize;
    for k in 0..n_classes {
        let mut idx: Vec<usize> = (0..y.len()).filter(|&i| y[i] == k).collect();
        for i in (1..idx.len()).rev() {
            let j = rng.random_range(0..=i);
            idx.swap(i, j);
        }
        for i in idx {
            fold_of[i] = next % folds;
            next += 1;
        }
    }
    fold_of
}

/// A fitted one-vs-rest linear SVM: $f_k(x) = w_k^\top x + b_k$, prediction
/// $\arg\max_k f_k(x)$.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearSvc<F: Float> {
    /// (K, D).
    coef: Array2<F>,
    /// (K).
    intercept: Array1<F>,
    n_iter: Vec<usize>,
    converged: Vec<bool>,
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
