//! Screened log-joints of a diagonal GMM (`docs/math.md` §2.7): the exact
//! log-joints of only the components that can carry a posterior above
//! $e^{-T}$ of a row's largest, shared by the GMM's E-step
//! ([`crate::gmm::DiagGmm::sufficient_statistics`]) and the Fisher vector
//! encoder ([`crate::encode::FisherVector`]).
//!
//! The Mahalanobis term of a diagonal Gaussian is a sum of non-negative
//! per-dimension terms, so dropping all but a subset $S$ of $m$ dimensions
//! gives an *upper* bound on each log-joint,
//! $$\ell_k(x) \le U_k(x) = \log w_k - \tfrac12\sum_{d} \log\sigma^2_{kd} -
//!   \tfrac12 \sum_{d\in S} (x_d - \mu_{kd})^2/\sigma^2_{kd}.$$
//! $U$ costs one small GEMM (n, 2m)·(2m, K). The exact log-joint
//! $\ell_b$ of each row's best-bounded component is then computed, and every
//! component with $U_k + \varepsilon < \ell_b - T$ ($\varepsilon$ a rigorous
//! bound on the rounding errors) has $\ell_k - \max_j \ell_j < -T$: its
//! posterior is below $e^{-T}$ and it is dropped. The survivors' log-joints
//! are evaluated in the centred direct form
//! $\sum_d ((x_d - \mu_{kd})/\sigma_{kd})^2$ accumulated in `f64`, which has
//! no cancellation, so they are accurate to `f64` rounding even for `f32`
//! data. Log-joints here leave out the constant $-\frac D2 \log 2\pi$.

use crate::float::Float;
use crate::linalg::{gemm, Par};
use ndarray::{Array2, ArrayView1, ArrayView2};

/// $T$: components whose posterior is provably below $e^{-T}$ of their row's
/// largest are dropped (`docs/math.md` §2.7). $e^{-50} \approx 2\cdot10^{-22}$
/// is below the `f32` flush of the softmax ($e^{-43.7}$), so in `f32` the
/// screening drops nothing that was not already flushed, and below `f64`
/// rounding of a posterior sum of up to $10^5$ components.
pub(crate) const SCREEN_GAP: f64 = 50.0;

/// $m$, the number of dimensions the bound sums over (at most D). A probe
/// that fails costs the bound's GEMM, 2m/2D of the full one (6 % at D = 500).
/// On well-separated mixtures 32 dimensions already prune almost every
/// component; on the bench's real descriptors no m up to 256 prunes enough
/// (`docs/evidence/bench-2026-12-02-screen.md`), so a larger m would only make
/// the failed probe dearer.
pub(crate) const SCREEN_DIMS: usize = 32;

/// A chunk whose survivors exceed n·K / `DENSE_SURVIVORS` is handed back to
/// the caller's dense GEMM path: evaluating a survivor directly (D `f64`
/// multiply-adds, scattered) costs several times a GEMM's multiply-adds.
pub(crate) const DENSE_SURVIVORS: usize = 6;

/// After a chunk was found dense, this many following chunks of the same bag
/// or reduction leaf skip the screening (its bound GEMM is then wasted work).
pub(crate) const DENSE_SKIP_CHUNKS: usize = 7;

/// The screening data of a diagonal GMM with K components in D dimensions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DiagScreen<F> {
    /// $S$: the m dimensions of the bound, those along which the components'
    /// means are most separated relative to their variances.
    dims: Vec<usize>,
    /// (m): $c_d$, $d \in S$, the mixture mean the bound's GEMM is centred on.
    center: Vec<F>,
    /// (2m, K): rows 0..m hold $-1/(2\sigma^2_{kd})$, rows m..2m hold
    /// $(\mu_{kd} - c_d)/\sigma^2_{kd}$, $d \in S$.
    bound_w: Array2<F>,
    /// (K): $\log w_k - \frac12 \sum_d \log\sigma^2_{kd} - \frac12\sum_{d\in S}
    /// (\mu_{kd}-c_d)^2/\sigma^2_{kd}$.
    bound_b: Vec<f64>,
    /// (m): $\max_k 1/(2\sigma^2_{kd})$ and $\max_k |\mu_{kd}-c_d|/\sigma^2_{kd}$,
    /// for the rounding-error bound of the GEMM.
    abs_a: Vec<f64>,
    abs_b: Vec<f64>,
    /// Rounding-error bound of `bound_b` and of the exact log-joints' constant.
    const_err: f64,
    /// (K): $\log w_k - \frac12 \sum_d \log\sigma^2_{kd}$.
    log_norm: Vec<f64>,
    /// (K, D): $\mu_{kd}$ and $1/\sigma_{kd}$ in `f64`.
    means: Array2<f64>,
    inv_sd: Array2<f64>,
}

/// Posteriors below this are dropped, and those above it recomputed exactly, when `f32`
/// posteriors come from the GEMM (docs/math.md §2.8): the dropped mass is at most K·1e-10 of
/// a row's.
pub(crate) const REFINE_MIN: f64 = 1e-10;

/// How many of the posteriors `q` the refinement keeps ($q \ge$ [`REFINE_MIN`]): the
/// pairs a refined chunk's sparse loop costs, which decide between it and the dense GEMM.
pub(crate) fn refined_pairs(q: impl Iterator<Item = f64>) -> usize {
    q.filter(|&v| v >= REFINE_MIN).count()
}

/// Per-row lists in CSR form: row `i` owns `comp[start[i]..start[i+1]]`
/// (ascending) and `val[start[i]..start[i+1]]`. The screening writes exact
/// log-joints in `val`; [`SparseRows::softmax`] turns them into posteriors.
#[derive(Debug, Default, Clone)]
pub(crate) struct SparseRows {
    pub start: Vec<usize>,
    pub comp: Vec<u32>,
    pub val: Vec<f64>,
}

/// Reusable buffers of [`DiagScreen::survivors`].
#[derive(Debug, Default)]
pub(crate) struct ScreenScratch<F> {
    /// (n, 2m): $[y_S^2, y_S]$.
    ys: Array2<F>,
    /// (n, K): the bound's GEMM.
    bound: Array2<F>,
    /// (n): rounding-error bound of each row's GEMM values.
    err: Vec<f64>,
    /// Chunks left that skip screening after a dense one.
    skip: usize,
}

impl<F: Float> ScreenScratch<F> {
    /// Forgets that an earlier chunk was dense (a new bag starts).
    pub fn reset(&mut self) {
        self.skip = 0;
    }
}

impl<F: Float> DiagScreen<F> {
    /// The screening data of the mixture `weights` (K, > 0), `means` (K, D),
    /// `variances` (K, D, > 0) with bound centre `center` (D), the mixture
    /// mean as rounded to F by the caller.
    pub fn new(
        weights: ArrayView1<'_, F>,
        means: ArrayView2<'_, F>,
        variances: ArrayView2<'_, F>,
        center: &[F],
    ) -> Self {
        let (k, d) = means.dim();
        let m = SCREEN_DIMS.min(d);
        let means64 = means.mapv(|v| v.as_f64());
        let var64 = variances.mapv(|v| v.as_f64());
        let c64: Vec<f64> = center.iter().map(|c| c.as_f64()).collect();
        // Separation of dimension d: the weighted mean over components of
        // (μ_kd − c_d)²/σ²_kd, the expected contribution of d to the gap
        // between a far component's log-joint and the best one.
        let mut score: Vec<(f64, usize)> = (0..d)
            .map(|dd| {
                let s = (0..k)
                    .map(|kk| {
                        let mu = means64[[kk, dd]] - c64[dd];
                        weights[kk].as_f64() * mu * mu / var64[[kk, dd]]
                    })
                    .sum::<f64>();
                (s, dd)
            })
            .collect();
        score.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut dims: Vec<usize> = score[..m].iter().map(|&(_, dd)| dd).collect();
        dims.sort_unstable();

        let mut log_norm = vec![0.0; k];
        let mut const_abs = 0.0f64;
        for kk in 0..k {
            let lw = weights[kk].as_f64().ln();
            let sl: f64 = (0..d).map(|dd| var64[[kk, dd]].ln()).sum();
            let sl_abs: f64 = (0..d).map(|dd| var64[[kk, dd]].ln().abs()).sum();
            log_norm[kk] = lw - 0.5 * sl;
            const_abs = const_abs.max(lw.abs() + sl_abs);
        }
        let mut bound_w = Array2::<F>::zeros((2 * m, k));
        let mut bound_b = log_norm.clone();
        let (mut abs_a, mut abs_b) = (vec![0.0f64; m], vec![0.0f64; m]);
        let mut quad_abs = 0.0f64;
        for kk in 0..k {
            let mut quad = 0.0;
            for (j, &dd) in dims.iter().enumerate() {
                let var = var64[[kk, dd]];
                let mu = means64[[kk, dd]] - c64[dd];
                quad += mu * mu / var;
                bound_w[[j, kk]] = F::from_f64_lossy(-0.5 / var);
                bound_w[[m + j, kk]] = F::from_f64_lossy(mu / var);
                abs_a[j] = abs_a[j].max(0.5 / var);
                abs_b[j] = abs_b[j].max(mu.abs() / var);
            }
            bound_b[kk] -= 0.5 * quad;
            quad_abs = quad_abs.max(quad);
        }
        // Sums of at most D + m + 2 f64 terms: error ≤ γ_{D+m+2}·Σ|terms|,
        // doubled for the logs' own rounding.
        let const_err = 2.0 * (d + m + 8) as f64 * f64::EPSILON * (const_abs + quad_abs);
        let inv_sd = var64.mapv(|v| 1.0 / v.sqrt());
        Self {
            center: dims.iter().map(|&dd| center[dd]).collect(),
            bound_w,
            bound_b,
            abs_a,
            abs_b,
            const_err,
            log_norm,
            means: means64,
            inv_sd,
            dims,
        }
    }

    /// $\mu_{kd}$ (K, D) in `f64`.
    pub fn means64(&self) -> ArrayView2<'_, f64> {
        self.means.view()
    }

    /// $1/\sigma_{kd}$ (K, D) in `f64`.
    pub fn inv_sd64(&self) -> ArrayView2<'_, f64> {
        self.inv_sd.view()
    }

    /// $\log w_k - \frac12\sum_d\log\sigma^2_{kd} - \frac12\sum_d z_d^2$ with
    /// $z_d = (x_d - \mu_{kd})/\sigma_{kd}$ accumulated in `f64` (the centred
    /// direct form: no cancellation), for the row `x` (D) already widened to
    /// `f64`. Also returns $\sum_d z_d^2$.
    pub fn exact_log_joint(&self, x: &[f64], k: usize) -> (f64, f64) {
        let mu = self.means.row(k);
        let is = self.inv_sd.row(k);
        let maha = sq_dist(
            x,
            mu.as_slice().expect("standard layout"),
            is.as_slice().expect("standard layout"),
        );
        (self.log_norm[k] - 0.5 * maha, maha)
    }

    /// For every row i of `x` (n, D), the exact log-joint ([`Self::exact_log_joint`]) of
    /// each component listed for it in `rows`, into `rows.val`.
    pub fn exact_log_joints(&self, x: ArrayView2<'_, F>, rows: &mut SparseRows) {
        let mut x64 = vec![0.0f64; x.ncols()];
        for (i, xr) in x.outer_iter().enumerate() {
            let pairs = rows.start[i]..rows.start[i + 1];
            if pairs.is_empty() {
                continue;
            }
            // over a contiguous slice the widening vectorises (the row iterator did not)
            match xr.as_slice() {
                Some(xs) => x64.iter_mut().zip(xs).for_each(|(a, &v)| *a = v.as_f64()),
                None => x64.iter_mut().zip(xr).for_each(|(a, &v)| *a = v.as_f64()),
            }
            for j in pairs {
                rows.val[j] = self.exact_log_joint(&x64, rows.comp[j] as usize).0;
            }
        }
    }

    /// The survivors of the rows of `x` (n, D) with their exact log-joints,
    /// into `out` (n rows, components ascending), or `false` (and `out`
    /// unspecified) when the chunk is dense — more than n·K /
    /// [`DENSE_SURVIVORS`] survivors — or a bound is not finite (the caller's
    /// GEMM path then handles the chunk as before the screening). `active`
    /// (K), if given, removes the components marked false from the mixture.
    pub fn survivors(
        &self,
        x: ArrayView2<'_, F>,
        active: Option<&[bool]>,
        ws: &mut ScreenScratch<F>,
        out: &mut SparseRows,
    ) -> bool {
        if ws.skip > 0 {
            ws.skip -= 1;
            return false;
        }
        let budget = x.nrows() * self.log_norm.len() / DENSE_SURVIVORS;
        let ok = self.bounds(x, ws) && self.select(x, active, ws, out, budget);
        if !ok {
            ws.skip = DENSE_SKIP_CHUNKS;
        }
        ok
    }

    /// Step 1: the GEMM part of $U$ for every (row, component) into
    /// `ws.bound` (n, K), and each row's rounding-error bound into `ws.err`.
    /// False if a value is not finite.
    fn bounds(&self, x: ArrayView2<'_, F>, ws: &mut ScreenScratch<F>) -> bool {
        let (n, k, m) = (x.nrows(), self.log_norm.len(), self.dims.len());
        if ws.ys.dim() != (n, 2 * m) {
            ws.ys = Array2::zeros((n, 2 * m));
        }
        if ws.bound.dim() != (n, k) {
            ws.bound = Array2::zeros((n, k));
        }
        ws.err.clear();
        // Each of the 2m terms a·y², b·y is computed with relative error
        // ≤ 6ε (y, y², the coefficient, the product), their sum adds γ_{2m},
        // the output's rounding one more ε: ≤ (2m + 8)·ε·Σ|terms|.
        let gamma = (2 * m + 8) as f64 * F::EPS.as_f64();
        for (mut yr, xr) in ws.ys.rows_mut().into_iter().zip(x.rows()) {
            let yr = yr.as_slice_mut().expect("standard layout");
            let (sq, lin) = yr.split_at_mut(m);
            let mut mag = 0.0f64;
            for (j, &dd) in self.dims.iter().enumerate() {
                let y = xr[dd] - self.center[j];
                lin[j] = y;
                sq[j] = y * y;
                let y = y.as_f64();
                mag += self.abs_a[j] * y * y + self.abs_b[j] * y.abs();
            }
            ws.err.push(gamma * mag + self.const_err);
        }
        gemm(
            ws.bound.view_mut(),
            false,
            ws.ys.view(),
            self.bound_w.view(),
            F::one(),
            Par::Seq,
        );
        ws.err.iter().all(|e| e.is_finite()) && ws.bound.iter().fold(true, |a, v| a & v.is_finite())
    }

    /// Step 2: per row, the exact log-joint of the best-bounded component,
    /// then the exact log-joints of every component whose bound is within
    /// $T$ (plus the error bounds) of it, into `out`. False when there are
    /// more than `budget` survivors (the chunk is dense).
    fn select(
        &self,
        x: ArrayView2<'_, F>,
        active: Option<&[bool]>,
        ws: &ScreenScratch<F>,
        out: &mut SparseRows,
        budget: usize,
    ) -> bool {
        let k = self.log_norm.len();
        let mut x64 = vec![0.0f64; x.ncols()];
        // Pass 1: each row's best-bounded component, exactly, and the cut;
        // the chunk is declared dense before any other exact evaluation.
        let mut best = Vec::with_capacity(x.nrows());
        let mut count = 0;
        for (i, xr) in x.rows().into_iter().enumerate() {
            let ub = |kk: usize| self.bound_of(ws, active, i, kk);
            let Some(b) = (0..k)
                .filter(|&kk| ub(kk) > f64::NEG_INFINITY)
                .reduce(|a, kk| if ub(kk) > ub(a) { kk } else { a })
            else {
                return false;
            };
            x64.iter_mut()
                .zip(xr.iter())
                .for_each(|(a, &v)| *a = v.as_f64());
            let (l_best, maha_best) = self.exact_log_joint(&x64, b);
            // Error of ℓ_best: a D-term f64 sum plus the constant.
            let err_best = 2.0 * (x.ncols() + 8) as f64 * f64::EPSILON * maha_best;
            let cut = l_best - SCREEN_GAP - ws.err[i] - err_best;
            count += (0..k).filter(|&kk| ub(kk) >= cut).count();
            if count > budget {
                return false;
            }
            best.push((b, l_best, cut));
        }
        // Pass 2: the exact log-joints of the survivors.
        out.start.clear();
        out.comp.clear();
        out.val.clear();
        out.start.push(0);
        for (i, (xr, &(b, l_best, cut))) in x.rows().into_iter().zip(&best).enumerate() {
            x64.iter_mut()
                .zip(xr.iter())
                .for_each(|(a, &v)| *a = v.as_f64());
            for kk in 0..k {
                if self.bound_of(ws, active, i, kk) >= cut {
                    let l = if kk == b {
                        l_best
                    } else {
                        self.exact_log_joint(&x64, kk).0
                    };
                    out.comp.push(kk as u32);
                    out.val.push(l);
                }
            }
            out.start.push(out.comp.len());
        }
        true
    }

    /// $\tilde U_k$ of row `i` from the GEMM in `ws.bound`; $-\infty$ for a
    /// component that `active` removes.
    #[inline]
    fn bound_of(&self, ws: &ScreenScratch<F>, active: Option<&[bool]>, i: usize, k: usize) -> f64 {
        match active {
            Some(a) if !a[k] => f64::NEG_INFINITY,
            _ => ws.bound[[i, k]].as_f64() + self.bound_b[k],
        }
    }
}

/// $\sum_d ((x_d - \mu_d) s_d)^2$ in `f64`, all slices of length D.
#[inline]
fn sq_dist(x: &[f64], mu: &[f64], is: &[f64]) -> f64 {
    pulp::Arch::new().dispatch(SqDist { x, mu, is })
}

struct SqDist<'a> {
    x: &'a [f64],
    mu: &'a [f64],
    is: &'a [f64],
}

impl pulp::WithSimd for SqDist<'_> {
    type Output = f64;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> f64 {
        // 8 independent lanes: vectorises, and the order of the additions
        // depends only on D.
        const L: usize = 8;
        let mut acc = [0.0f64; L];
        let n = self.x.len();
        let main = n - n % L;
        for ((x, mu), is) in self.x[..main]
            .chunks_exact(L)
            .zip(self.mu[..main].chunks_exact(L))
            .zip(self.is[..main].chunks_exact(L))
        {
            for l in 0..L {
                let z = (x[l] - mu[l]) * is[l];
                acc[l] += z * z;
            }
        }
        let mut tail = 0.0;
        for j in main..n {
            let z = (self.x[j] - self.mu[j]) * self.is[j];
            tail += z * z;
        }
        acc.iter().sum::<f64>() + tail
    }
}

impl SparseRows {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// Each row keeps only its first largest entry, with value 1 (hard
    /// assignment of log-joints to their arg-max).
    pub fn hard_assign(&mut self) {
        for i in 0..self.n_rows() {
            let (a, b) = (self.start[i], self.start[i + 1]);
            let mut best = a;
            for j in a..b {
                if self.val[j] > self.val[best] {
                    best = j;
                }
            }
            self.comp[i] = self.comp[best];
            self.val[i] = 1.0;
            self.start[i] = i;
        }
        let n = self.n_rows();
        self.start[n] = n;
        self.comp.truncate(n);
        self.val.truncate(n);
    }

    /// The entries of `q` (n, K) of at least `min`, per row (components ascending), their
    /// values as in `q`.
    pub fn set_from_dense<F: Float>(&mut self, q: ArrayView2<'_, F>, min: f64) {
        self.start.clear();
        self.comp.clear();
        self.val.clear();
        self.start.push(0);
        for row in q.outer_iter() {
            for (k, &v) in row.iter().enumerate() {
                if v.as_f64() >= min {
                    self.comp.push(k as u32);
                    self.val.push(v.as_f64());
                }
            }
            self.start.push(self.comp.len());
        }
    }

    /// Keeps the entries whose value passes `keep`.
    pub fn retain(&mut self, keep: impl Fn(f64) -> bool) {
        let mut w = 0;
        for i in 0..self.n_rows() {
            let (a, b) = (self.start[i], self.start[i + 1]);
            self.start[i] = w;
            for j in a..b {
                if keep(self.val[j]) {
                    self.comp[w] = self.comp[j];
                    self.val[w] = self.val[j];
                    w += 1;
                }
            }
        }
        let n = self.n_rows();
        self.start[n] = w;
        self.comp.truncate(w);
        self.val.truncate(w);
    }

    /// The pairs grouped by component, rows ascending within a component:
    /// component k of `k` owns `pairs[start[k]..start[k+1]]`, each `(row, val)`.
    pub fn group_by_component(
        &self,
        k: usize,
        start: &mut Vec<usize>,
        pairs: &mut Vec<(u32, f64)>,
    ) {
        start.clear();
        start.resize(k + 1, 0);
        for &c in &self.comp {
            start[c as usize + 1] += 1;
        }
        for j in 0..k {
            start[j + 1] += start[j];
        }
        pairs.clear();
        pairs.resize(self.val.len(), (0, 0.0));
        let mut next = start[..k].to_vec();
        for i in 0..self.n_rows() {
            for j in self.start[i]..self.start[i + 1] {
                let c = self.comp[j] as usize;
                pairs[next[c]] = (i as u32, self.val[j]);
                next[c] += 1;
            }
        }
    }

    /// Each row's log-joints in `val` become posteriors
    /// $q_j = e^{\ell_j - M}/\sum_i e^{\ell_i - M}$, $M = \max_i \ell_i$, with
    /// the terms below $e^{\text{cutoff}}$ of the largest removed (the
    /// flush of `docs/math.md` §2.2); `loglik[i]` (n) $= M + \ln\sum_i e^{\ell_i - M}$.
    pub fn softmax(&mut self, cutoff: f64, loglik: &mut [f64]) {
        self.softmax_carrying(cutoff, loglik, &mut [], 0);
    }

    /// [`SparseRows::softmax`], with `width` values per entry in `payload`
    /// (entry j owns `payload[j·width..(j+1)·width]`) moved along with the
    /// entries that are kept.
    pub fn softmax_carrying(
        &mut self,
        cutoff: f64,
        loglik: &mut [f64],
        payload: &mut [f64],
        width: usize,
    ) {
        let mut w = 0;
        let n = self.n_rows();
        for (i, ll) in loglik[..n].iter_mut().enumerate() {
            let (a, b) = (self.start[i], self.start[i + 1]);
            let m = self.val[a..b]
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let mut sum = 0.0;
            let w0 = w;
            for j in a..b {
                let t = self.val[j] - m;
                if t >= cutoff {
                    let e = t.exp();
                    sum += e;
                    self.comp[w] = self.comp[j];
                    self.val[w] = e;
                    if width > 0 && w != j {
                        payload.copy_within(j * width..(j + 1) * width, w * width);
                    }
                    w += 1;
                }
            }
            let inv = 1.0 / sum;
            self.val[w0..w].iter_mut().for_each(|v| *v *= inv);
            *ll = m + sum.ln();
            self.start[i] = w0;
        }
        self.start[n] = w;
        self.comp.truncate(w);
        self.val.truncate(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::diag_gauss::mixture_mean;
    use ndarray::{Array1, Array2};
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Exact log-joints (without −D/2·log 2π) from the formula, in f64.
    fn naive<F: Float>(
        w: &Array1<F>,
        mu: &Array2<F>,
        var: &Array2<F>,
        x: ArrayView1<'_, F>,
    ) -> Vec<f64> {
        (0..w.len())
            .map(|k| {
                let mut acc = 0.0;
                for (d, &xd) in x.iter().enumerate() {
                    let v = var[[k, d]].as_f64();
                    let z = xd.as_f64() - mu[[k, d]].as_f64();
                    acc += v.ln() + z * z / v;
                }
                w[k].as_f64().ln() - 0.5 * acc
            })
            .collect()
    }

    /// Runs the screening with no density budget on a model and rows, and
    /// checks that every component whose true posterior is at least
    /// $e^{-T}$ of its row's largest survived with its exact log-joint.
    /// Returns (survivors, pairs) for the caller's sanity checks.
    fn check_bound<F: Float>(
        w: Array1<F>,
        mu: Array2<F>,
        var: Array2<F>,
        x: Array2<F>,
    ) -> (usize, usize) {
        let center = mixture_mean(w.view(), mu.view()).mapv(F::from_f64_lossy);
        let scr = DiagScreen::new(w.view(), mu.view(), var.view(), center.as_slice().unwrap());
        let mut ws = ScreenScratch::default();
        let mut out = SparseRows::default();
        assert!(scr.bounds(x.view(), &mut ws));
        assert!(scr.select(x.view(), None, &ws, &mut out, usize::MAX));
        for (i, xr) in x.rows().into_iter().enumerate() {
            let lj = naive(&w, &mu, &var, xr);
            let m = lj.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let kept = &out.comp[out.start[i]..out.start[i + 1]];
            let vals = &out.val[out.start[i]..out.start[i + 1]];
            for (k, &l) in lj.iter().enumerate() {
                if l - m >= -SCREEN_GAP {
                    let pos = kept.iter().position(|&c| c as usize == k);
                    assert!(
                        pos.is_some(),
                        "row {i}: component {k} at {} of the max was pruned",
                        l - m
                    );
                }
            }
            for (&k, &v) in kept.iter().zip(vals) {
                let want = lj[k as usize];
                assert!(
                    (v - want).abs() <= 1e-10 * (1.0 + want.abs()),
                    "row {i} comp {k}: {v} vs {want}"
                );
            }
        }
        (out.comp.len(), x.nrows() * w.len())
    }

    /// A random mixture (K, D) around `offset` whose components are `spread`
    /// apart, and n rows drawn near its components (some between two).
    fn planted(
        rng: &mut ChaCha8Rng,
        k: usize,
        d: usize,
        n: usize,
        spread: f64,
        offset: f64,
    ) -> (Array1<f64>, Array2<f64>, Array2<f64>, Array2<f64>) {
        let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.1..1.0)).collect();
        let s: f64 = w.iter().sum();
        w.iter_mut().for_each(|v| *v /= s);
        // decaying per-dimension scale, as PCA'd descriptors
        let scale: Vec<f64> = (0..d).map(|j| (-(j as f64) / 6.0).exp() + 0.05).collect();
        let mu = Array2::from_shape_fn((k, d), |(_, j)| {
            offset + spread * scale[j] * rng.random_range(-1.0..1.0)
        });
        let var = Array2::from_shape_fn((k, d), |(_, j)| {
            scale[j] * scale[j] * rng.random_range(0.05..0.5)
        });
        let x = Array2::from_shape_fn((n, d), |(i, j)| {
            let (a, b) = (i % k, (i * 7 + 3) % k);
            let t = if i % 5 == 0 { 0.5 } else { 0.0 };
            let m = (1.0 - t) * mu[[a, j]] + t * mu[[b, j]];
            m + var[[a, j]].sqrt() * rng.random_range(-2.0..2.0)
        });
        (Array1::from(w), mu, var, x)
    }

    #[test]
    fn separated_mixture_is_pruned_and_the_bound_holds() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (w, mu, var, x) = planted(&mut rng, 40, 48, 300, 6.0, 0.0);
        let (kept, all) = check_bound(w, mu, var, x);
        // the test would be vacuous if nothing were pruned
        assert!(kept * 5 < all, "{kept} of {all} survive");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The bound never prunes a component whose posterior is at least
        /// e^-T of its row's largest, for any model, offset and type.
        #[test]
        fn bound_never_prunes_a_live_component(
            seed in 0u64..10_000,
            k in 1usize..24,
            d in 1usize..70,
            spread in 0.1f64..20.0,
            offset in -1e3f64..1e3,
            f32_data in any::<bool>(),
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (w, mu, var, x) = planted(&mut rng, k, d, 40, spread, offset);
            if f32_data {
                let c = |a: &Array2<f64>| a.mapv(|v| v as f32);
                let w32 = w.mapv(|v| v as f32);
                let w32 = &w32 / w32.sum();
                check_bound(w32, c(&mu), c(&var), c(&x));
            } else {
                check_bound(w, mu, var, x);
            }
        }
    }
}
