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

use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::linalg::{gemm, gram_add_lower, mirror_lower, par_all, Par};
use crate::metrics::mean_per_class_accuracy;
use ndarray::{Array1, Array2, ArrayView2, Axis, CowArray, Ix2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

mod out_of_core;
pub use out_of_core::{
    for_each_decision_block, predict_rows, OutOfCoreSvmParams, RowSource, ValidOutOfCoreSvmParams,
    GRAM_CACHE_BYTES,
};

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
    /// A buffer sized by the data that cannot be allocated.
    #[error(
        "the SVM's {what} need {bytes} bytes, more than can be allocated: fewer classes or a shorter encoding"
    )]
    TooLarge { what: &'static str, bytes: usize },
    /// The rows of an out-of-core fit could not be read (the source's message).
    #[error("reading the SVM's rows: {0}")]
    Source(String),
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

/// Row-major data shared by every solver of a fit, with the squared row norms
/// and, in Gram mode, the matrix $K'_{ij} = x_i^\top x_j + [\text{bias}]$.
struct Shared<'a, F: Float> {
    data: &'a [F],
    n: usize,
    d: usize,
    norms: Vec<f64>,
    /// (N, N) in Gram mode.
    gram: Option<Array2<f64>>,
}

impl<F: Float> Shared<'_, F> {
    #[inline]
    fn row(&self, i: usize) -> &[F] {
        &self.data[i * self.d..(i + 1) * self.d]
    }
}

/// Columns per block of the blocked Gram and weight products.
const COL_BLOCK: usize = 1024;

/// Largest N for which [`DualSolver::Auto`] caches the (N, N) `f64` Gram matrix (512 MB).
pub const GRAM_MAX_ROWS: usize = 8192;

fn shared<'a, F: Float>(x: &'a CowArray<'_, F, Ix2>, p: &LinearSvcParams) -> Shared<'a, F> {
    let (n, d) = x.dim();
    let data = x.as_slice().expect("standard layout");
    let use_gram = match p.solver {
        DualSolver::Direct => false,
        DualSolver::Gram => true,
        DualSolver::Auto => n <= d && n <= GRAM_MAX_ROWS,
    };
    let gram = use_gram.then(|| {
        let mut g = gram_matrix(x.view());
        if p.bias {
            g.mapv_inplace(|v| v + 1.0);
        }
        g
    });
    let norms = match &gram {
        Some(g) => (0..n)
            .map(|i| g[[i, i]] - if p.bias { 1.0 } else { 0.0 })
            .collect(),
        None => (0..n)
            .into_par_iter()
            .map(|i| {
                let r = &data[i * d..(i + 1) * d];
                dot_ff(r, r)
            })
            .collect(),
    };
    Shared {
        data,
        n,
        d,
        norms,
        gram,
    }
}

/// $X X^\top$ (N, N) accumulated in `f64` over blocks of [`COL_BLOCK`]
/// columns: each block product is a GEMM in `F` (so `f32` entries carry a
/// relative error of about $\sqrt{1024}\,\epsilon_{32} \approx 2\cdot 10^{-6}$),
/// split by rows of the output over the threads and added to the `f64` sum
/// in block order, so the result does not depend on the number of threads.
/// Only the lower triangle is computed ($N^2 D$ multiply-adds), then mirrored.
/// Extra memory: one (N, [`COL_BLOCK`]) block plus a (256, N) buffer per thread.
fn gram_matrix<F: Float>(x: ArrayView2<'_, F>) -> Array2<f64> {
    let (n, d) = x.dim();
    let mut acc = Array2::<f64>::zeros((n, n));
    for b in 0..d.div_ceil(COL_BLOCK) {
        let xb = x
            .slice(ndarray::s![.., b * COL_BLOCK..((b + 1) * COL_BLOCK).min(d)])
            .as_standard_layout()
            .into_owned();
        gram_add_lower(&mut acc, xb.view());
    }
    mirror_lower(&mut acc);
    acc
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

/// What a coordinate step needs: $f(x_s) = \bar w^\top \bar x_s$ and the
/// update $\bar w \leftarrow \bar w + \delta \bar x_s$ ($\bar x$ = x with the
/// bias feature), for the local index s into the solver's rows.
trait DualState {
    fn value(&self, s: usize) -> f64;
    fn update(&mut self, s: usize, delta: f64);
}

/// Keeps $w$ (D) and $b$: each value and update is one pass over a row of X.
struct DirectState<'a, 'b, F: Float> {
    sh: &'b Shared<'a, F>,
    rows: &'b [usize],
    bias: bool,
    w: Vec<f64>,
    b: f64,
}

impl<F: Float> DualState for DirectState<'_, '_, F> {
    #[inline]
    fn value(&self, s: usize) -> f64 {
        dot(&self.w, self.sh.row(self.rows[s])) + self.b
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        axpy(delta, self.sh.row(self.rows[s]), &mut self.w);
        if self.bias {
            self.b += delta;
        }
    }
}

/// Keeps $u_t = f(x_t)$ for every row t of the problem: a value is a read, an
/// update one pass over a row of the Gram matrix (O(N) instead of O(D)).
struct GramState<'b> {
    gram: &'b Array2<f64>,
    rows: &'b [usize],
    u: Vec<f64>,
}

impl DualState for GramState<'_> {
    #[inline]
    fn value(&self, s: usize) -> f64 {
        self.u[s]
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        let g = self.gram.row(self.rows[s]);
        let g = g.as_slice().expect("row-major Gram");
        for (u, &r) in self.u.iter_mut().zip(self.rows) {
            *u += delta * g[r];
        }
    }
}

/// The box and diagonal of the dual for `loss` at cost `c`: $(D_{ii}, U)$.
fn loss_terms(loss: SvmLoss, c: f64) -> (f64, f64) {
    match loss {
        SvmLoss::SquaredHinge => (0.5 / c, f64::INFINITY),
        SvmLoss::Hinge => (0.0, c),
    }
}

/// How [`dual_cd_from`] runs: the loss's $(D_{ii}, U)$, passes at most, the
/// stopping tolerance and LIBLINEAR's shrinking.
struct CdSettings {
    loss: (f64, f64),
    max_passes: usize,
    tol: f64,
    shrinking: bool,
}

/// Dual coordinate descent (LIBLINEAR's `solve_l2r_l1l2_svc`) over `l` rows
/// with signs `ys` and $\|\bar x_s\|^2$ = `sqnorm[s]`. Returns (α, iterations, converged).
fn dual_cd(
    state: &mut impl DualState,
    ys: &[f64],
    sqnorm: &[f64],
    p: &LinearSvcParams,
    stream: u64,
) -> (Vec<f64>, usize, bool) {
    let mut alpha = vec![0.0f64; ys.len()];
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    rng.set_stream(stream);
    let settings = CdSettings {
        loss: loss_terms(p.loss, p.c),
        max_passes: p.max_iter,
        tol: p.tol,
        shrinking: p.shrinking,
    };
    let (iter, converged, _) = dual_cd_from(state, ys, sqnorm, &mut alpha, &mut rng, &settings);
    (alpha, iter, converged)
}

/// [`dual_cd`]'s passes from the dual variables `alpha` (updated in place,
/// with `state` consistent with them) and the coordinate order drawn from
/// `rng`. Returns (passes, converged, the first pass's largest and smallest
/// projected gradient).
fn dual_cd_from(
    state: &mut impl DualState,
    ys: &[f64],
    sqnorm: &[f64],
    alpha: &mut [f64],
    rng: &mut ChaCha8Rng,
    settings: &CdSettings,
) -> (usize, bool, (f64, f64)) {
    let l = ys.len();
    let (diag, upper) = settings.loss;
    let shrinking = settings.shrinking;
    let qd: Vec<f64> = sqnorm.iter().map(|q| q + diag).collect();
    let mut index: Vec<usize> = (0..l).collect();
    let mut active = l;
    let (mut pgmax_old, mut pgmin_old) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut first = (f64::NEG_INFINITY, f64::INFINITY);
    let mut iter = 0;
    let mut converged = false;
    while iter < settings.max_passes {
        let (mut pgmax_new, mut pgmin_new) = (f64::NEG_INFINITY, f64::INFINITY);
        for i in 0..active {
            let j = i + rng.random_range(0..active - i);
            index.swap(i, j);
        }
        let mut s = 0;
        while s < active {
            let i = index[s];
            let yi = ys[i];
            let g = yi * state.value(i) - 1.0 + alpha[i] * diag;
            let mut pg = 0.0;
            if alpha[i] == 0.0 {
                if shrinking && g > pgmax_old {
                    active -= 1;
                    index.swap(s, active);
                    continue;
                } else if g < 0.0 {
                    pg = g;
                }
            } else if alpha[i] == upper {
                if shrinking && g < pgmin_old {
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
                state.update(i, (new - old) * yi);
            }
            s += 1;
        }
        if iter == 0 {
            first = (pgmax_new, pgmin_new);
        }
        iter += 1;
        if pgmax_new - pgmin_new <= settings.tol {
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
    (iter, converged, first)
}

/// One binary problem on the rows `rows` of `sh`, $y = +1$ where
/// `positive(row)`. Returns (α, signs, w and b in direct mode, iterations, converged).
#[allow(clippy::type_complexity)]
fn solve_binary<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    positive: impl Fn(usize) -> bool,
    p: &LinearSvcParams,
    stream: u64,
) -> (Vec<f64>, Vec<f64>, Option<(Vec<f64>, f64)>, usize, bool) {
    let b2 = if p.bias { 1.0 } else { 0.0 };
    let ys: Vec<f64> = rows
        .iter()
        .map(|&r| if positive(r) { 1.0 } else { -1.0 })
        .collect();
    let sq: Vec<f64> = rows.iter().map(|&r| sh.norms[r] + b2).collect();
    match &sh.gram {
        Some(gram) => {
            let mut st = GramState {
                gram,
                rows,
                u: vec![0.0; rows.len()],
            };
            let (a, it, conv) = dual_cd(&mut st, &ys, &sq, p, stream);
            (a, ys, None, it, conv)
        }
        None => {
            let mut st = DirectState {
                sh,
                rows,
                bias: p.bias,
                w: vec![0.0; sh.d],
                b: 0.0,
            };
            let (a, it, conv) = dual_cd(&mut st, &ys, &sq, p, stream);
            (a, ys, Some((st.w, st.b)), it, conv)
        }
    }
}

/// A one-vs-rest fit: in direct mode the weights, in Gram mode the dual
/// coefficients $a_{kn} = \alpha_{kn} y_{kn}$ (zero outside the training rows).
struct OvrFit {
    /// (K, D) weights, or (K, N) dual coefficients in Gram mode.
    coef: Array2<f64>,
    /// (K).
    b: Array1<f64>,
    dual: bool,
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
    collect_ovr(sh, rows, sols, p)
}

/// Assembles the per-class solutions of [`solve_binary`] into an [`OvrFit`].
#[allow(clippy::type_complexity)]
fn collect_ovr<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    sols: Vec<(Vec<f64>, Vec<f64>, Option<(Vec<f64>, f64)>, usize, bool)>,
    p: &LinearSvcParams,
) -> OvrFit {
    let n_classes = sols.len();
    let dual = sh.gram.is_some();
    let width = if dual { sh.n } else { sh.d };
    let mut coef = Array2::<f64>::zeros((n_classes, width));
    let mut b = Array1::<f64>::zeros(n_classes);
    let mut n_iter = Vec::with_capacity(n_classes);
    let mut converged = Vec::with_capacity(n_classes);
    for (k, (alpha, ys, primal, it, conv)) in sols.into_iter().enumerate() {
        match primal {
            Some((w, wb)) => {
                coef.row_mut(k).assign(&Array1::from(w));
                b[k] = wb;
            }
            None => {
                let mut sum = 0.0;
                for ((&r, a), yv) in rows.iter().zip(&alpha).zip(&ys) {
                    coef[[k, r]] = a * yv;
                    sum += a * yv;
                }
                if p.bias {
                    b[k] = sum;
                }
            }
        }
        n_iter.push(it);
        converged.push(conv);
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
    fn weights<F: Float>(&self, sh: &Shared<'_, F>) -> Array2<f64> {
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

    /// $f_k(x_i)$ (K) for a row i of the shared data: $\sum_j a_{kj} K'_{ij}$
    /// in Gram mode ($K'$ holds the bias feature, so this includes $b_k$),
    /// $w_k^\top x_i + b_k$ otherwise.
    fn decision_row<F: Float>(&self, sh: &Shared<'_, F>, i: usize) -> Vec<f64> {
        match (&sh.gram, self.dual) {
            (Some(g), true) => {
                let gi = g.row(i);
                let gi = gi.as_slice().expect("row-major Gram");
                self.coef
                    .outer_iter()
                    .map(|c| dot(c.as_slice().expect("row-major"), gi))
                    .collect()
            }
            _ => {
                let xi = sh.row(i);
                self.coef
                    .outer_iter()
                    .zip(&self.b)
                    .map(|(c, b)| dot(c.as_slice().expect("row-major"), xi) + b)
                    .collect()
            }
        }
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

    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_binary`].
    pub fn fit_binary<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        positive: &[bool],
    ) -> Result<BinarySvm, SvmError> {
        self.check()?.fit_binary(x, positive)
    }

    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::select_c`].
    pub fn select_c<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(f64, Vec<(f64, f64)>), SvmError> {
        self.check()?.select_c(x, y, grid, folds, seed)
    }

    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_with_cv`].
    #[allow(clippy::type_complexity)]
    pub fn fit_with_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<F>, f64, Vec<(f64, f64)>), SvmError> {
        self.check()?.fit_with_cv(x, y, grid, folds, seed)
    }

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
    fn with_cost(&self, c: f64) -> Self {
        debug_assert!(c.is_finite() && c > 0.0);
        Self(LinearSvcParams { c, ..self.0 })
    }

    /// Checks X and y; returns the number of classes: `n_classes` if given,
    /// else max(y) + 1.
    fn check_xy<F: Float>(
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
        let sol = solve_binary(&sh, &rows, |r| positive[r], self, 0);
        let alpha = Array1::from(sol.0.clone());
        let (n_iter, converged) = (sol.3, sol.4);
        let fit = collect_ovr(&sh, rows.as_slice(), vec![sol], self);
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
        let n_classes = self.check_cv(x, y, grid, folds)?;
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        Ok(self.cv_table(&sh, y, n_classes, grid, folds, seed))
    }

    /// [`LinearSvcParams::select_c`] then a fit on all of `x` with the best
    /// C, sharing the data preparation (in Gram mode the Gram matrix is
    /// computed once). Returns the model, the best C and the CV table.
    ///
    /// # Errors
    /// As [`LinearSvcParams::select_c`].
    #[allow(clippy::type_complexity)]
    pub fn fit_with_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<F>, f64, Vec<(f64, f64)>), SvmError> {
        let n_classes = self.check_cv(x, y, grid, folds)?;
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        let (best, table) = self.cv_table(&sh, y, n_classes, grid, folds, seed);
        let p = self.with_cost(best);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let fit = fit_ovr(&sh, &rows, y, n_classes, &p);
        let model = LinearSvc {
            coef: fit.weights(&sh).mapv(F::from_f64_lossy),
            intercept: fit.b.mapv(F::from_f64_lossy),
            n_iter: fit.n_iter,
            converged: fit.converged,
        };
        Ok((model, best, table))
    }

    /// Validates a cross-validation request; returns the number of classes.
    fn check_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
    ) -> Result<usize, SvmError> {
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
        Ok(n_classes)
    }

    /// The CV table and the best C (smallest among equal best scores).
    fn cv_table<F: Float>(
        &self,
        sh: &Shared<'_, F>,
        y: &[usize],
        n_classes: usize,
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> (f64, Vec<(f64, f64)>) {
        let n = y.len();
        let fold_of = stratified_folds(y, n_classes, folds, seed);
        let jobs: Vec<(usize, usize)> = (0..grid.len())
            .flat_map(|g| (0..folds).map(move |f| (g, f)))
            .collect();
        let scores: Vec<f64> = jobs
            .par_iter()
            .map(|&(g, f)| {
                let train: Vec<usize> = (0..n).filter(|&i| fold_of[i] != f).collect();
                let test: Vec<usize> = (0..n).filter(|&i| fold_of[i] == f).collect();
                let p = self.with_cost(grid[g]);
                let fit = fit_ovr(sh, &train, y, n_classes, &p);
                let pred: Vec<usize> = test
                    .iter()
                    .map(|&i| argmax(fit.decision_row(sh, i).into_iter()))
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
        (best.0, table)
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

/// A one-vs-rest linear SVM trained on a precomputed linear kernel
/// $K_{ij} = x_i^\top x_j$ of the N training vectors (see
/// [`LinearSvcParams::fit_gram_with_cv`]), kept in dual form: the decision
/// values are $f_k(x) = \sum_n a_{kn}\, x^\top x_n + b_k$ with
/// $a_{kn} = \alpha_{kn} y_{kn}$. The same coordinate descent as
/// [`DualSolver::Gram`], for callers that build the kernel themselves, block
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
    /// [`LinearSvc`] without holding X.
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

impl ValidLinearSvcParams {
    /// [`ValidLinearSvcParams::fit_with_cv`] on a precomputed linear kernel:
    /// `gram` (N, N) holds $x_i^\top x_j$ of the training vectors (symmetric,
    /// finite); `y` (N) as for [`LinearSvcParams::fit`]. The bias feature is
    /// added here when `self.bias`. Cross-validation folds are sub-blocks of
    /// the kernel, so no feature vector is needed. Same folds, order and
    /// updates as [`DualSolver::Gram`] on the same kernel.
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
