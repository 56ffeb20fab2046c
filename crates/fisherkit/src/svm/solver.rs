//! The dual coordinate descent of one binary problem (LIBLINEAR's
//! `solve_l2r_l1l2_svc`) and the data every solver of a fit shares: the
//! rows, their squared norms and, in Gram mode, $X X^\top$.

use super::error::SvmError;
use super::params::{DualSolver, LinearSvcParams, SvmLoss, GRAM_MAX_ROWS};
use crate::float::Float;
use crate::linalg::{axpy, dot, dot_ff, gemm, gram_add_lower, mirror_lower, par_all};
use ndarray::{Array2, ArrayView2, CowArray, Ix2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Row-major data shared by every solver of a fit, with the squared row norms
/// and, in Gram mode, the matrix $K'_{ij} = x_i^\top x_j + [\text{bias}]$.
pub(super) struct Shared<'a, F: Float> {
    pub(super) data: &'a [F],
    pub(super) n: usize,
    pub(super) d: usize,
    pub(super) norms: Vec<f64>,
    /// (N, N) in Gram mode.
    pub(super) gram: Option<GramMatrix<'a>>,
}

/// The Gram matrix of Gram mode, $K'_{ij} = G_{ij} + \beta$: the linear
/// kernel $G$ (N, N, row-major, symmetric) in `f64` (computed here from X,
/// with the bias feature already added, $\beta = 0$) or borrowed in `f32`
/// from a caller that built it block by block ([`super::GramSvc`]; $\beta$ = 1
/// with the bias feature, added as each entry is read).
pub(super) enum GramMatrix<'a> {
    F64(Array2<f64>),
    F32 {
        g: CowArray<'a, f32, Ix2>,
        bias: f64,
    },
}

impl GramMatrix<'_> {
    /// $K'_{ii}$.
    pub(super) fn diag(&self, i: usize) -> f64 {
        match self {
            GramMatrix::F64(g) => g[[i, i]],
            GramMatrix::F32 { g, bias } => g[[i, i]] as f64 + bias,
        }
    }

    /// Decision values (|rows|, K), $f_{ik} = \sum_j a_{kj} K'_{r_i c_j}$, of
    /// the dual coefficients `coef` (K, |cols|) over the columns `cols`: the
    /// (|rows|, |cols|) block gathered once, then one GEMM in the Gram's own
    /// type (the bias feature added as $\beta \sum_j a_{kj}$).
    pub(super) fn decisions(
        &self,
        rows: &[usize],
        cols: &[usize],
        coef: ArrayView2<'_, f64>,
    ) -> Result<Array2<f64>, SvmError> {
        let (m, k) = (rows.len(), coef.nrows());
        match self {
            GramMatrix::F64(g) => {
                let block = gather(g.view(), rows, cols)?;
                let mut f = Array2::<f64>::zeros((m, k));
                gemm(f.view_mut(), false, block.view(), coef.t(), 1.0, par_all());
                Ok(f)
            }
            GramMatrix::F32 { g, bias } => {
                let block = gather(g.view(), rows, cols)?;
                let c32 = coef.mapv(|v| v as f32);
                let mut f = Array2::<f32>::zeros((m, k));
                gemm(f.view_mut(), false, block.view(), c32.t(), 1.0, par_all());
                let shift: Vec<f64> = coef.rows().into_iter().map(|r| bias * r.sum()).collect();
                Ok(Array2::from_shape_fn((m, k), |(i, c)| {
                    f[[i, c]] as f64 + shift[c]
                }))
            }
        }
    }
}

/// The block $G_{r_i c_j}$ (|rows|, |cols|) of `g`, copied contiguous; a
/// block that cannot be allocated is [`SvmError::TooLarge`] (at SUN397's
/// size a fold's block is 0.7 GB in `f32`), not an abort.
fn gather<T: Copy>(
    g: ArrayView2<'_, T>,
    rows: &[usize],
    cols: &[usize],
) -> Result<Array2<T>, SvmError> {
    let too_large = || SvmError::TooLarge {
        what: "cross-validation kernel blocks",
        bytes: rows
            .len()
            .saturating_mul(cols.len())
            .saturating_mul(std::mem::size_of::<T>()),
    };
    let len = rows.len().checked_mul(cols.len()).ok_or_else(too_large)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_large())?;
    for &r in rows {
        let row = g.row(r);
        v.extend(cols.iter().map(|&c| row[c]));
    }
    Ok(Array2::from_shape_vec((rows.len(), cols.len()), v).expect("len = rows × cols"))
}

impl<'a, F: Float> Shared<'a, F> {
    #[inline]
    pub(super) fn row(&self, i: usize) -> &[F] {
        &self.data[i * self.d..(i + 1) * self.d]
    }

    /// In Gram mode, the sub-problem on `rows` with its Gram block copied
    /// contiguous (|rows|², in the Gram's own type), so that a coordinate
    /// step runs over one straight row instead of gathering through `rows`
    /// (the update loop is the solver's whole cost: 99 % of a CV at SUN397's
    /// size). Its rows are `0..rows.len()`, row t standing for `rows[t]`;
    /// it holds no feature rows. `None` in direct mode.
    pub(super) fn gram_block(&self, rows: &[usize]) -> Result<Option<Shared<'a, F>>, SvmError> {
        let gram = match self.gram.as_ref() {
            None => return Ok(None),
            Some(GramMatrix::F64(g)) => GramMatrix::F64(gather(g.view(), rows, rows)?),
            Some(GramMatrix::F32 { g, bias }) => GramMatrix::F32 {
                g: CowArray::from(gather(g.view(), rows, rows)?),
                bias: *bias,
            },
        };
        let m = rows.len();
        Ok(Some(Shared {
            data: &[],
            n: m,
            d: 0,
            norms: rows.iter().map(|&r| self.norms[r]).collect(),
            gram: Some(gram),
        }))
    }
}

/// Columns per block of the blocked Gram and weight products.
pub(super) const COL_BLOCK: usize = 1024;

pub(super) fn shared<'a, F: Float>(
    x: &'a CowArray<'_, F, Ix2>,
    p: &LinearSvcParams,
) -> Shared<'a, F> {
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
        GramMatrix::F64(g)
    });
    let norms = match &gram {
        Some(g) => (0..n)
            .map(|i| g.diag(i) - if p.bias { 1.0 } else { 0.0 })
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

/// What a coordinate step needs: $f(x_s) = \bar w^\top \bar x_s$ and the
/// update $\bar w \leftarrow \bar w + \delta \bar x_s$ ($\bar x$ = x with the
/// bias feature), for the local index s into the solver's rows.
pub(super) trait DualState {
    fn value(&self, s: usize) -> f64;
    fn update(&mut self, s: usize, delta: f64);
    /// $(w, b)$ when the state keeps them (direct mode).
    fn primal(&self) -> Option<(Vec<f64>, f64)> {
        None
    }
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
    fn primal(&self) -> Option<(Vec<f64>, f64)> {
        Some((self.w.clone(), self.b))
    }
}

/// Keeps $u_t = f(x_t)$ for every row t of the problem: a value is a read, an
/// update one pass over a row of the Gram matrix (O(N) instead of O(D)),
/// $u_t \mathrel{+}= \delta\,(G_{st} + \beta)$.
struct GramState<'b, G: Float> {
    gram: ArrayView2<'b, G>,
    bias: f64,
    rows: &'b [usize],
    /// `rows` is `0..rows.len()` (a fit on all rows, not a CV fold).
    contiguous: bool,
    u: Vec<f64>,
}

impl<G: Float> DualState for GramState<'_, G> {
    #[inline]
    fn value(&self, s: usize) -> f64 {
        self.u[s]
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        let g = self.gram.row(self.rows[s]);
        let g = g.as_slice().expect("row-major Gram");
        let bias = self.bias;
        if self.contiguous {
            // rows = 0..l: a straight pass over the Gram row (vectorised;
            // equal lengths, so no bounds checks)
            let u = &mut self.u[..];
            let g = &g[..u.len()];
            for (u, &v) in u.iter_mut().zip(g) {
                *u += delta * (v.as_f64() + bias);
            }
        } else {
            for (u, &r) in self.u.iter_mut().zip(self.rows) {
                *u += delta * (g[r].as_f64() + bias);
            }
        }
    }
}

/// [`dual_cd_path`] in Gram mode on `gram` (+ `bias`) over `rows`.
#[allow(clippy::too_many_arguments)]
fn gram_path<G: Float>(
    gram: ArrayView2<'_, G>,
    bias: f64,
    rows: &[usize],
    ys: &[f64],
    sqnorm: &[f64],
    p: &LinearSvcParams,
    stream: u64,
    costs: &[f64],
) -> Vec<PathPoint> {
    let mut st = GramState {
        gram,
        bias,
        rows,
        contiguous: rows.iter().enumerate().all(|(i, &r)| i == r),
        u: vec![0.0; rows.len()],
    };
    dual_cd_path(&mut st, ys, sqnorm, p, stream, costs)
}

/// The box and diagonal of the dual for `loss` at cost `c`: $(D_{ii}, U)$.
pub(super) fn loss_terms(loss: SvmLoss, c: f64) -> (f64, f64) {
    match loss {
        SvmLoss::SquaredHinge => (0.5 / c, f64::INFINITY),
        SvmLoss::Hinge => (0.0, c),
    }
}

/// How [`dual_cd_from`] runs: the loss's $(D_{ii}, U)$, passes at most, the
/// stopping tolerance and LIBLINEAR's shrinking.
pub(super) struct CdSettings {
    pub(super) loss: (f64, f64),
    pub(super) max_passes: usize,
    pub(super) tol: f64,
    pub(super) shrinking: bool,
}

/// One point of a regularisation path of a binary problem: the dual
/// variables α over the problem's rows, $w$ and $b$ in direct mode, the
/// coordinate-descent passes and whether the tolerance was met.
pub(super) struct PathPoint {
    pub(super) alpha: Vec<f64>,
    pub(super) primal: Option<(Vec<f64>, f64)>,
    pub(super) iter: usize,
    pub(super) converged: bool,
}

/// Dual coordinate descent (LIBLINEAR's `solve_l2r_l1l2_svc`) over `l` rows
/// with signs `ys` and $\|\bar x_s\|^2$ = `sqnorm[s]`, at each cost of
/// `costs` in turn (ascending), each starting from the previous one's α
/// (a warm start: with the hinge loss $0 \le \alpha \le C_{\text{old}} \le C$ is
/// feasible for the next C, and the state keeps $w(\alpha)$; the coordinate
/// order continues the one ChaCha8 stream). One point per cost; with one
/// cost, LIBLINEAR's cold start from α = 0.
fn dual_cd_path<S: DualState>(
    state: &mut S,
    ys: &[f64],
    sqnorm: &[f64],
    p: &LinearSvcParams,
    stream: u64,
    costs: &[f64],
) -> Vec<PathPoint> {
    let mut alpha = vec![0.0f64; ys.len()];
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    rng.set_stream(stream);
    costs
        .iter()
        .map(|&c| {
            let settings = CdSettings {
                loss: loss_terms(p.loss, c),
                max_passes: p.max_iter,
                tol: p.tol,
                shrinking: p.shrinking,
            };
            let (iter, converged, _) =
                dual_cd_from(state, ys, sqnorm, &mut alpha, &mut rng, &settings);
            PathPoint {
                alpha: alpha.clone(),
                primal: state.primal(),
                iter,
                converged,
            }
        })
        .collect()
}

/// [`dual_cd`]'s passes from the dual variables `alpha` (updated in place,
/// with `state` consistent with them) and the coordinate order drawn from
/// `rng`. Returns (passes, converged, the first pass's largest and smallest
/// projected gradient).
pub(super) fn dual_cd_from(
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
/// `positive(row)`, solved at each cost of `costs` (ascending), each from
/// the previous one's solution ([`dual_cd_path`]; one cost: a cold start).
/// Returns the signs and one point per cost.
pub(super) fn solve_binary_path<F: Float>(
    sh: &Shared<'_, F>,
    rows: &[usize],
    positive: impl Fn(usize) -> bool,
    p: &LinearSvcParams,
    stream: u64,
    costs: &[f64],
) -> (Vec<f64>, Vec<PathPoint>) {
    let b2 = if p.bias { 1.0 } else { 0.0 };
    let ys: Vec<f64> = rows
        .iter()
        .map(|&r| if positive(r) { 1.0 } else { -1.0 })
        .collect();
    let sq: Vec<f64> = rows.iter().map(|&r| sh.norms[r] + b2).collect();
    let path = match &sh.gram {
        Some(GramMatrix::F64(g)) => gram_path(g.view(), 0.0, rows, &ys, &sq, p, stream, costs),
        Some(GramMatrix::F32 { g, bias }) => {
            gram_path(g.view(), *bias, rows, &ys, &sq, p, stream, costs)
        }
        None => {
            let mut st = DirectState {
                sh,
                rows,
                bias: p.bias,
                w: vec![0.0; sh.d],
                b: 0.0,
            };
            dual_cd_path(&mut st, &ys, &sq, p, stream, costs)
        }
    };
    (ys, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    /// Two overlapping classes in 6 dimensions (planted, deterministic).
    fn data() -> (Array2<f64>, Vec<bool>) {
        let x = Array2::from_shape_fn((80, 6), |(i, j)| {
            let class = (i % 2) as f64;
            ((i * 37 + j * 11) % 29) as f64 / 29.0 - 0.5 + 0.6 * class * ((j % 2) as f64)
        });
        let y = (0..80).map(|i| i % 2 == 1).collect();
        (x, y)
    }

    #[test]
    fn a_warm_started_path_reaches_each_costs_cold_solution() {
        let (x, y) = data();
        let rows: Vec<usize> = (0..80).collect();
        let costs = [0.01, 0.1, 1.0, 10.0];
        for solver in [DualSolver::Direct, DualSolver::Gram] {
            for loss in [SvmLoss::Hinge, SvmLoss::SquaredHinge] {
                let p = LinearSvcParams {
                    tol: 1e-8,
                    max_iter: 100_000,
                    solver,
                    loss,
                    ..LinearSvcParams::with_c(1.0)
                };
                let xs = x.as_standard_layout();
                let sh = shared(&xs, &p);
                let (ys, warm) = solve_binary_path(&sh, &rows, |r| y[r], &p, 3, &costs);
                for (pt, &c) in warm.iter().zip(&costs) {
                    let cold_p = LinearSvcParams { c, ..p };
                    let (_, mut cold) = solve_binary_path(&sh, &rows, |r| y[r], &cold_p, 3, &[c]);
                    let cold = cold.pop().unwrap();
                    assert!(pt.converged && cold.converged);
                    // the same optimum: decision values of every row agree
                    let f = |a: &[f64]| -> Vec<f64> {
                        (0..80)
                            .map(|i| {
                                (0..80)
                                    .map(|j| {
                                        let k: f64 = x.row(i).dot(&x.row(j)) + 1.0;
                                        a[j] * ys[j] * k
                                    })
                                    .sum()
                            })
                            .collect()
                    };
                    let (fw, fc) = (f(&pt.alpha), f(&cold.alpha));
                    let err = fw
                        .iter()
                        .zip(&fc)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f64::max);
                    assert!(err < 1e-5, "{solver:?} {loss:?} C = {c}: {err}");
                }
            }
        }
    }
}
