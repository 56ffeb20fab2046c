//! The chunked E-step kernel of the MFA: posteriors, log-likelihoods and the
//! sufficient statistics in "whitened factor" space, written as GEMMs.
//!
//! For a chunk Y (n, D) of centred rows (see [`KernelParams`]):
//! 1. $P^\top = [W \,|\, \Psi^{-1}\mu'] ^\top Y^\top$ — (K·R + K, n), one GEMM;
//!    $Q^\top = \Psi^{-1} (Y^2)^\top$ — (P, n);
//! 2. per component, $g = P_k - W_k^\top\mu'_k$ and the log-joint
//!    $\log w_k\mathcal N = b_k - \frac12 (q - 2p_k) + \frac12\lVert g\rVert^2$ (O(n·K·R));
//! 3. posteriors $h$ by log-sum-exp;
//! 4. statistics: $E = [h\circ g \,|\, h]$ (K·R + K, n) and
//!    $\sum_i y_i [h g^\top, h] = Y^\top E^\top$ — one GEMM (D, K·R + K);
//!    $\sum h g g^\top$ per component (R, R), $\sum h y^2$.
//!
//! The sums are accumulated in `f64` per chunk; blocks of rows run in parallel
//! and are added in block order, so the result does not depend on the number
//! of threads.

use super::sparse::{self, Direct, SparseScratch};
use super::MfaError;
use crate::float::Float;
use crate::kernels::exp::exp_nonpositive;
use crate::linalg::{gemm, Cholesky, Par};
use ndarray::{s, Array1, Array2, Array3, ArrayView1, ArrayView2, ArrayView3, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// Rows per chunk of the chunked E-step and encoder: memory per chunk is
/// O(`MFA_CHUNK_ROWS`·(D + K·R)).
pub const MFA_CHUNK_ROWS: usize = 512;

/// Precomputed quantities of the E-step kernel (docs/math.md §4.2–4.3): with
/// $c$ the mixture mean, $y = x - c$, $\mu'_k = \mu_k - c$,
/// $M_k = I_R + \Lambda_k^\top\Psi_k^{-1}\Lambda_k = C_k C_k^\top$ and
/// $W_k = \Psi_k^{-1}\Lambda_k C_k^{-\top}$ (D, R). Built from plain arrays
/// ([`KernelParams::new`]); the kernel knows nothing of the model type.
#[derive(Debug, Clone)]
pub(crate) struct KernelParams<F: Float> {
    /// Reference point $c$ (D), the mixture mean rounded to `F`.
    pub center: Array1<F>,
    /// (K·R + K, D): row $kR + r$ is column r of $W_k$, row $KR + k$ is $\Psi_k^{-1}\mu'_k$.
    pub stacked_t: Array2<F>,
    /// (K·R): $W_k^\top\mu'_k$.
    pub g_offset: Array1<F>,
    /// (P, D), P = 1 (shared) or K: $1/\psi$.
    pub inv_psi: Array2<F>,
    /// (K): $\log w_k - \frac12 (D\log 2\pi + \log\det S_k + \mu'^\top_k\Psi_k^{-1}\mu'_k)$.
    pub log_const: Array1<f64>,
    /// (K, R, R): $M_k^{-1}$.
    pub m_inv: Array3<f64>,
    /// (K, R, R): $C_k^{-1}$.
    pub c_inv: Array3<f64>,
    /// The same model in `f64`, unrounded, for the direct form of the sparse path.
    pub direct: Direct,
}

impl<F: Float> KernelParams<F> {
    /// The kernel of the mixture `weights` (K), `means` (K, D), `loadings`
    /// (K, D, R) and `psi` (P, D), P = 1 or K, all already valid in shape and
    /// range. Fails only if some $M_k$ is numerically not positive definite.
    pub fn new(
        weights: ArrayView1<'_, F>,
        means: ArrayView2<'_, F>,
        loadings: ArrayView3<'_, F>,
        psi: ArrayView2<'_, F>,
    ) -> Result<Self, MfaError> {
        let (k, d, r) = loadings.dim();
        let p = psi.nrows();
        let center: Array1<F> = {
            let mut c = Array1::<f64>::zeros(d);
            for (w, m) in weights.iter().zip(means.outer_iter()) {
                let w = w.as_f64();
                c.zip_mut_with(&m, |c, m| *c += w * m.as_f64());
            }
            c.mapv(F::from_f64_lossy)
        };
        let inv_psi = psi.mapv(|v| F::from_f64_lossy(1.0 / v.as_f64()));
        let mut stacked_t = Array2::<F>::zeros((k * r + k, d));
        let mut g_offset = Array1::<F>::zeros(k * r);
        let mut log_const = Array1::<f64>::zeros(k);
        let mut m_inv = Array3::<f64>::zeros((k, r, r));
        let mut c_inv = Array3::<f64>::zeros((k, r, r));
        let mut direct = Direct::zeros(k, d, r, p);
        let ln_2pi = (2.0 * std::f64::consts::PI).ln();
        let mut wrow = vec![0.0f64; r];
        for kk in 0..k {
            let pk = if p == 1 { 0 } else { kk };
            let psi_k: Vec<f64> = psi.row(pk).iter().map(|v| v.as_f64()).collect();
            let lam = loadings.index_axis(Axis(0), kk);
            // M = I + Λᵀ Ψ⁻¹ Λ
            let mut m = Array2::<f64>::eye(r);
            for dd in 0..d {
                let ip = 1.0 / psi_k[dd];
                for a in 0..r {
                    let la = lam[[dd, a]].as_f64() * ip;
                    for b in 0..=a {
                        m[[a, b]] += la * lam[[dd, b]].as_f64();
                    }
                }
            }
            for a in 0..r {
                for b in 0..a {
                    m[[b, a]] = m[[a, b]];
                }
            }
            let c = Cholesky::new(m.view()).map_err(|e| {
                MfaError::Numerical(format!(
                    "component {kk}: I + ΛᵀΨ⁻¹Λ cannot be factorised ({e})"
                ))
            })?;
            // W_k rows: C⁻¹ (Ψ⁻¹ Λ[d, :])ᵀ ; offset o = W_kᵀ μ' ; quadratic μ'ᵀΨ⁻¹μ'
            let mut offset = vec![0.0f64; r];
            let mut quad = 0.0f64;
            let mut sum_log_psi = 0.0f64;
            for dd in 0..d {
                let ip = 1.0 / psi_k[dd];
                for a in 0..r {
                    wrow[a] = lam[[dd, a]].as_f64() * ip;
                }
                c.solve_lower_in_place(&mut wrow);
                let mu = means[[kk, dd]].as_f64() - center[dd].as_f64();
                for a in 0..r {
                    direct.w[[kk * r + a, dd]] = wrow[a];
                    let wf = F::from_f64_lossy(wrow[a]);
                    stacked_t[[kk * r + a, dd]] = wf;
                    offset[a] += wf.as_f64() * mu;
                }
                stacked_t[[k * r + kk, dd]] = F::from_f64_lossy(mu * ip);
                quad += mu * mu * ip;
                sum_log_psi += psi_k[dd].ln();
            }
            for a in 0..r {
                g_offset[kk * r + a] = F::from_f64_lossy(offset[a]);
            }
            let log_det_s = sum_log_psi + c.log_det();
            direct.log_const[kk] =
                weights[kk].as_f64().ln() - 0.5 * (d as f64 * ln_2pi + log_det_s);
            log_const[kk] = direct.log_const[kk] - 0.5 * quad;
            m_inv.index_axis_mut(Axis(0), kk).assign(&c.inverse());
            c_inv
                .index_axis_mut(Axis(0), kk)
                .assign(&c.inverse_factor());
        }
        direct.means.assign(&means.mapv(|v| v.as_f64()));
        direct.inv_psi.assign(&psi.mapv(|v| 1.0 / v.as_f64()));
        direct.center.assign(&center.mapv(|v| v.as_f64()));
        ndarray::Zip::from(direct.mu_p.rows_mut())
            .and(direct.means.rows())
            .for_each(|mut mp, m| {
                ndarray::Zip::from(&mut mp)
                    .and(&m)
                    .and(&direct.center)
                    .for_each(|mp, &m, &c| *mp = m - c);
            });
        Ok(Self {
            center,
            stacked_t,
            g_offset,
            inv_psi,
            log_const,
            m_inv,
            c_inv,
            direct,
        })
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.log_const.len()
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.center.len()
    }

    /// Number of factors R.
    pub fn n_factors(&self) -> usize {
        self.m_inv.dim().1
    }

    /// Row of $\Psi_k$ in `inv_psi`.
    #[inline]
    pub fn psi_row(&self, k: usize) -> usize {
        if self.inv_psi.nrows() == 1 {
            0
        } else {
            k
        }
    }
}

impl<F: Float> AsRef<KernelParams<F>> for KernelParams<F> {
    fn as_ref(&self) -> &KernelParams<F> {
        self
    }
}

/// Rows per block processed sequentially by one task of the parallel E-step.
pub(crate) const BLOCK_ROWS: usize = 8 * MFA_CHUNK_ROWS;

/// What the kernel must accumulate besides log-likelihoods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    /// $n_k$, $\sum h g$, $\sum h g g^\top$, $\sum h y g^\top$, $\sum h y$.
    pub stats: bool,
    /// $\sum h y^2$ (per component) or $\sum y^2$ (shared $\Psi$).
    pub syy: bool,
    /// With `stats`: also $\sum h y g^\top$ and $\sum h g g^\top$ (otherwise
    /// only $n_k$, $\sum h g$ and $\sum h y$, a GEMM R+1 times narrower).
    pub yg: bool,
}

impl Want {
    pub const NONE: Self = Self {
        stats: false,
        syy: false,
        yg: false,
    };
    /// What the Fisher score with respect to the means needs.
    pub const SCORES_MEAN: Self = Self {
        stats: true,
        syy: false,
        yg: false,
    };
    pub const SCORES: Self = Self {
        stats: true,
        syy: false,
        yg: true,
    };
    pub const EM: Self = Self {
        stats: true,
        syy: true,
        yg: true,
    };
}

/// Scratch buffers of one worker, reused across chunks (flat storage, viewed
/// with the shape of the current chunk so a short last chunk reallocates nothing).
pub(crate) struct Workspace<F: Float> {
    y: Vec<F>,
    y2: Vec<F>,
    pt: Vec<F>,
    qt: Vec<F>,
    lj: Vec<f64>,
    et: Vec<F>,
    /// (D, K·R + K) running sum in `F` of the current block, flushed to `f64` by [`flush`].
    syg: Vec<F>,
    /// (K, D) running sum in `F` (per-component $\Psi$), flushed by [`flush`].
    syy: Vec<F>,
    sgg: Vec<F>,
    /// (K, D) running sum in `F` of $\sum h y$ when only that is wanted (`!Want::yg`).
    sy: Vec<F>,
    pending: bool,
    /// Whether the pending sums are in `syg` (else in `sy`).
    pending_yg: bool,
    m: Vec<f64>,
    s: Vec<f64>,
    /// Scratch of the sparse path ([`sparse::chunk`]).
    sp: SparseScratch,
}

impl<F: Float> Default for Workspace<F> {
    fn default() -> Self {
        Self {
            y: Vec::new(),
            y2: Vec::new(),
            pt: Vec::new(),
            qt: Vec::new(),
            lj: Vec::new(),
            et: Vec::new(),
            syg: Vec::new(),
            syy: Vec::new(),
            sgg: Vec::new(),
            sy: Vec::new(),
            pending: false,
            pending_yg: false,
            m: Vec::new(),
            s: Vec::new(),
            sp: SparseScratch::default(),
        }
    }
}

/// A (rows, cols) row-major view of the first rows·cols elements of `v`, grown as needed.
pub(super) fn view2<T: Clone + num_traits::Zero>(
    v: &mut Vec<T>,
    shape: (usize, usize),
) -> ArrayViewMut2<'_, T> {
    let len = shape.0 * shape.1;
    if v.len() < len {
        v.resize(len, T::zero());
    }
    ArrayViewMut2::from_shape(shape, &mut v[..len]).expect("length matches shape")
}

thread_local! {
    static CACHED: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's cached workspace (created on first use), so
/// that encoding many bags on a thread allocates nothing per bag.
pub(crate) fn with_cached_workspace<F: Float, T>(f: impl FnOnce(&mut Workspace<F>) -> T) -> T {
    let mut ws: Workspace<F> = CACHED
        .with(|c| c.borrow_mut().take())
        .and_then(|b| b.downcast::<Workspace<F>>().ok())
        .map(|b| *b)
        .unwrap_or_default();
    let out = f(&mut ws);
    CACHED.with(|c| *c.borrow_mut() = Some(Box::new(ws)));
    out
}

/// Sufficient statistics in whitened-factor space ($g$, not $e = C^{-\top} g$), `f64`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GAcc {
    pub n_rows: usize,
    pub ll: f64,
    /// (K): $\sum_i h_{ik}$.
    pub nk: Array1<f64>,
    /// (K, R): $\sum_i h_{ik} g_{ik}$.
    pub sg: Array2<f64>,
    /// (K, R, R): $\sum_i h_{ik} g_{ik} g_{ik}^\top$.
    pub sgg: Array3<f64>,
    /// (D, K·R + K): columns $kR..kR+R$ hold $\sum_i h_{ik} y_i g_{ik}^\top$, column $KR+k$ holds $\sum_i h_{ik} y_i$.
    pub syg: Array2<f64>,
    /// (P, D): $\sum_i y_i^2$ (P = 1) or $\sum_i h_{ik} y_i^2$ (P = K); empty when not wanted.
    pub syy: Array2<f64>,
}

impl GAcc {
    pub fn zeros(k: usize, d: usize, r: usize, p: usize, want: Want) -> Self {
        let (sk, sd, sr) = if want.stats { (k, d, r) } else { (0, 0, 0) };
        Self {
            n_rows: 0,
            ll: 0.0,
            nk: Array1::zeros(sk),
            sg: Array2::zeros((sk, sr)),
            sgg: Array3::zeros((sk, sr, sr)),
            syg: Array2::zeros((sd, sk * sr + sk)),
            syy: if want.syy {
                Array2::zeros((p, d))
            } else {
                Array2::zeros((0, 0))
            },
        }
    }

    pub fn add(&mut self, o: &GAcc) {
        self.n_rows += o.n_rows;
        self.ll += o.ll;
        self.nk += &o.nk;
        self.sg += &o.sg;
        self.sgg += &o.sgg;
        self.syg += &o.syg;
        self.syy += &o.syy;
    }
}

fn add_into<F: Float>(acc: &mut ArrayViewMut2<'_, f64>, v: ArrayView2<'_, F>) {
    acc.zip_mut_with(&v, |a, b| *a += b.as_f64());
}

/// Adds the `F` running sums of the workspace to `acc` and resets them.
pub(crate) fn flush<F: Float>(kp: &KernelParams<F>, ws: &mut Workspace<F>, acc: &mut GAcc) {
    if !ws.pending {
        return;
    }
    let (k, d, r) = (kp.n_components(), kp.dim(), kp.n_factors());
    let w = k * r + k;
    if ws.pending_yg {
        add_into(&mut acc.syg.view_mut(), view2(&mut ws.syg, (d, w)).view());
    } else {
        add_into(
            &mut acc.syg.slice_mut(s![.., k * r..]),
            view2(&mut ws.sy, (k, d)).t(),
        );
    }
    // Per-component Ψ with K > 1 is the only case whose Σ y² sums wait in the
    // workspace; with one Ψ row they go straight into `acc` (see `process_chunk`),
    // and the thread-cached `ws.syy` may hold another model's stale sums.
    if kp.inv_psi.nrows() > 1 && acc.syy.nrows() == k {
        add_into(&mut acc.syy.view_mut(), view2(&mut ws.syy, (k, d)).view());
    }
    ws.pending = false;
}

/// Processes one chunk `x` (n, D) of validated rows: writes $\log p(x_i)$
/// into `ll` (n), posteriors into `proba` (n, K) when given, and adds the
/// wanted statistics to `acc` (the two large sums stay in the workspace in
/// `F` until [`flush`]). Steps: [`centre_and_square`], [`project`],
/// [`log_joints`], [`posteriors`], then [`factor_sums`] and [`row_sums`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn process_chunk<F: Float>(
    kp: &KernelParams<F>,
    x: ArrayView2<'_, F>,
    ws: &mut Workspace<F>,
    want: Want,
    acc: Option<&mut GAcc>,
    ll: &mut [f64],
    proba: Option<ArrayViewMut2<'_, F>>,
    par: Par,
) {
    let n = x.nrows();
    let k = kp.n_components();
    centre_and_square(kp, x, ws);
    project(kp, n, ws, par);
    log_joints(kp, n, ws);
    posteriors::<F>(n, k, ws, ll);
    if sparse::wanted::<F>(view2(&mut ws.lj, (k, n)).view(), want) {
        let w = k * (kp.n_factors() + 1);
        let lj = view2(&mut ws.lj, (k, n));
        let pt = view2(&mut ws.pt, (w, n));
        let io = sparse::ChunkIo { x, ll, proba };
        sparse::chunk(kp, lj.view(), pt.view(), &mut ws.sp, want, acc, io);
        return;
    }
    if let Some(mut q) = proba {
        let lj = view2(&mut ws.lj, (k, n));
        for kk in 0..k {
            for (qi, &h) in q.column_mut(kk).iter_mut().zip(lj.row(kk).iter()) {
                *qi = F::from_f64_lossy(h);
            }
        }
    }
    let Some(acc) = acc else {
        return;
    };
    acc.n_rows += n;
    acc.ll += ll.iter().sum::<f64>();
    if !want.stats {
        return;
    }
    factor_sums(kp, n, ws, want, acc);
    row_sums(kp, n, ws, want, acc, par);
    ws.pending = true;
}

/// $y = x - c$ and $y^2$ of the chunk into `ws.y`, `ws.y2` (n, D).
fn centre_and_square<F: Float>(kp: &KernelParams<F>, x: ArrayView2<'_, F>, ws: &mut Workspace<F>) {
    let (n, d) = x.dim();
    let mut y = view2(&mut ws.y, (n, d));
    let mut y2 = view2(&mut ws.y2, (n, d));
    ndarray::Zip::from(y.rows_mut())
        .and(y2.rows_mut())
        .and(x.rows())
        .for_each(|mut y, mut y2, xr| {
            ndarray::Zip::from(&mut y)
                .and(&mut y2)
                .and(&xr)
                .and(&kp.center)
                .for_each(|y, y2, &xv, &c| {
                    let v = xv - c;
                    *y = v;
                    *y2 = v * v;
                });
        });
}

/// The two GEMMs (docs/math.md §4.3): $P^\top = [W | \Psi^{-1}\mu']^\top Y^\top$
/// (K·R + K, n) into `ws.pt` and $Q^\top = \Psi^{-1}(Y^2)^\top$ (P, n) into `ws.qt`.
fn project<F: Float>(kp: &KernelParams<F>, n: usize, ws: &mut Workspace<F>, par: Par) {
    let d = kp.dim();
    let w = kp.n_components() * (kp.n_factors() + 1);
    let p = kp.inv_psi.nrows();
    let y = view2(&mut ws.y, (n, d));
    let y2 = view2(&mut ws.y2, (n, d));
    gemm(
        view2(&mut ws.pt, (w, n)),
        false,
        kp.stacked_t.view(),
        y.t(),
        F::one(),
        par,
    );
    gemm(
        view2(&mut ws.qt, (p, n)),
        false,
        kp.inv_psi.view(),
        y2.t(),
        F::one(),
        par,
    );
}

/// Log-joints $b_k - \frac12(q - 2p_k) + \frac12\lVert g\rVert^2$ into
/// `ws.lj` (K, n), `f64`; turns the factor rows of `ws.pt` into
/// $g = P_k - W_k^\top\mu'_k$.
fn log_joints<F: Float>(kp: &KernelParams<F>, n: usize, ws: &mut Workspace<F>) {
    let (k, r) = (kp.n_components(), kp.n_factors());
    let (kr, w, p) = (k * r, k * r + k, kp.inv_psi.nrows());
    let mut pt = view2(&mut ws.pt, (w, n));
    let qt = view2(&mut ws.qt, (p, n));
    let mut lj = view2(&mut ws.lj, (k, n));
    for kk in 0..k {
        let b = kp.log_const[kk];
        {
            let q = qt.row(kp.psi_row(kk));
            let pm = pt.row(kr + kk);
            let mut lj = lj.row_mut(kk);
            ndarray::Zip::from(&mut lj)
                .and(&q)
                .and(&pm)
                .for_each(|l, &q, &pm| *l = b - 0.5 * (q.as_f64() - 2.0 * pm.as_f64()));
        }
        let ljs = lj.row_mut(kk).into_slice().expect("contiguous");
        for a in 0..r {
            let o = kp.g_offset[kk * r + a];
            let row = pt.row_mut(kk * r + a).into_slice().expect("contiguous");
            for (g, l) in row.iter_mut().zip(ljs.iter_mut()) {
                let v = *g - o;
                *g = v;
                let v = v.as_f64();
                *l += 0.5 * v * v;
            }
        }
    }
}

/// Log-sum-exp over the components, column by column of `ws.lj` (K, n):
/// `ll` (n) gets $\log p(x_i)$ and `ws.lj` the posteriors $h$.
///
/// Terms more than ½·ln(smallest normal of F) below the row maximum
/// (posteriors < 1e-19 in f32) are flushed to exactly 0: invisible at F's
/// precision, and it keeps `exp` in its fast range and h, h·g out of the
/// denormals (whose arithmetic is ~100× slower).
fn posteriors<F: Float>(n: usize, k: usize, ws: &mut Workspace<F>, ll: &mut [f64]) {
    let mut lj = view2(&mut ws.lj, (k, n));
    let (mx, sx) = (&mut ws.m, &mut ws.s);
    mx.clear();
    mx.resize(n, f64::NEG_INFINITY);
    sx.clear();
    sx.resize(n, 0.0);
    for row in lj.rows() {
        for (m, &v) in mx.iter_mut().zip(row.iter()) {
            if v > *m {
                *m = v;
            }
        }
    }
    let cutoff = crate::kernels::softmax::flush_cutoff::<F>();
    for mut row in lj.rows_mut() {
        let row = row.as_slice_mut().expect("contiguous");
        for ((v, &m), s) in row.iter_mut().zip(mx.iter()).zip(sx.iter_mut()) {
            let t = *v - m;
            let e = if t >= cutoff {
                exp_nonpositive(t.max(cutoff))
            } else {
                0.0
            };
            *v = e;
            *s += e;
        }
    }
    for ((l, m), s) in ll.iter_mut().zip(mx.iter()).zip(sx.iter_mut()) {
        *l = m + s.ln();
        *s = 1.0 / *s;
    }
    for mut row in lj.rows_mut() {
        for (v, &inv) in row.iter_mut().zip(sx.iter()) {
            *v *= inv;
        }
    }
}

/// $n_k$ and $\sum h g$ into `acc`; $E = [h\circ g \,|\, h]$ (K·R + K, n)
/// into `ws.et` (the $h\circ g$ rows only when `want.yg`).
fn factor_sums<F: Float>(
    kp: &KernelParams<F>,
    n: usize,
    ws: &mut Workspace<F>,
    want: Want,
    acc: &mut GAcc,
) {
    let (k, r) = (kp.n_components(), kp.n_factors());
    let (kr, w) = (k * r, k * r + k);
    let mut et = view2(&mut ws.et, (w, n));
    let lj = view2(&mut ws.lj, (k, n));
    let pt = view2(&mut ws.pt, (w, n));
    for kk in 0..k {
        let nk: f64;
        {
            let mut hrow = et.row_mut(kr + kk);
            let hrow = hrow.as_slice_mut().expect("contiguous");
            let hsrc = lj.row(kk);
            let hsrc = hsrc.as_slice().expect("contiguous");
            for (hv, &h) in hrow.iter_mut().zip(hsrc) {
                *hv = F::from_f64_lossy(h);
            }
            nk = lane_sum(hsrc);
        }
        acc.nk[kk] += nk;
        let (mut top, bottom) = et.view_mut().split_at(Axis(0), kr);
        let h = bottom.row(kk);
        let h = h.as_slice().expect("contiguous");
        for a in 0..r {
            let g = pt.row(kk * r + a);
            let g = g.as_slice().expect("contiguous");
            let sum = if want.yg {
                let mut e = top.row_mut(kk * r + a);
                mul_sum(h, g, Some(e.as_slice_mut().expect("contiguous")))
            } else {
                mul_sum(h, g, None)
            };
            acc.sg[[kk, a]] += sum;
        }
    }
}

/// The sums over rows: $Y^\top E^\top$ (D, K·R + K) or only $\sum h y$
/// (K, D) into the workspace's pending `F` sums, $\sum h g g^\top$ into
/// `acc`, and $\sum y^2$ / $\sum h y^2$.
fn row_sums<F: Float>(
    kp: &KernelParams<F>,
    n: usize,
    ws: &mut Workspace<F>,
    want: Want,
    acc: &mut GAcc,
    par: Par,
) {
    let (k, d, r) = (kp.n_components(), kp.dim(), kp.n_factors());
    let (kr, w, p) = (k * r, k * r + k, kp.inv_psi.nrows());
    let y = view2(&mut ws.y, (n, d));
    let y2 = view2(&mut ws.y2, (n, d));
    let et = view2(&mut ws.et, (w, n));
    let pt = view2(&mut ws.pt, (w, n));
    let accumulate = ws.pending;
    debug_assert!(!accumulate || ws.pending_yg == want.yg);
    ws.pending_yg = want.yg;
    if want.yg {
        gemm(
            view2(&mut ws.syg, (d, w)),
            accumulate,
            y.t(),
            et.t(),
            F::one(),
            par,
        );
        let mut sgg = view2(&mut ws.sgg, (r, r));
        for kk in 0..k {
            let rows = s![kk * r..(kk + 1) * r, ..];
            gemm(
                sgg.view_mut(),
                false,
                et.slice(rows),
                pt.slice(rows).t(),
                F::one(),
                Par::Seq,
            );
            add_into(&mut acc.sgg.index_axis_mut(Axis(0), kk), sgg.view());
        }
    } else {
        // Σ h y only: (K, n)·(n, D)
        gemm(
            view2(&mut ws.sy, (k, d)),
            accumulate,
            et.slice(s![kr.., ..]),
            y.view(),
            F::one(),
            par,
        );
    }
    if want.syy {
        if p == 1 {
            let mut tot = acc.syy.row_mut(0);
            for row in y2.rows() {
                tot.zip_mut_with(&row, |a, b| *a += b.as_f64());
            }
        } else {
            gemm(
                view2(&mut ws.syy, (k, d)),
                accumulate,
                et.slice(s![kr.., ..]),
                y2.view(),
                F::one(),
                par,
            );
        }
    }
}

/// $\sum_i x_i$ in `f64`, in 8 interleaved partial sums (so the loop vectorises;
/// the order is fixed, so the bits do not depend on anything but `x`).
fn lane_sum(x: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    for (l, v) in lanes.iter_mut().zip(it.remainder()) {
        *l += v;
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

/// $e_i = h_i g_i$ (written to `e` when given) and $\sum_i e_i$ in `f64`, in 8
/// interleaved partial sums like [`lane_sum`]. `h`, `g` (and `e`) have equal lengths.
fn mul_sum<F: Float>(h: &[F], g: &[F], e: Option<&mut [F]>) -> f64 {
    let mut lanes = [0.0f64; 8];
    let n = h.len().min(g.len());
    let full = n - n % 8;
    match e {
        Some(e) => {
            for ((ec, hc), gc) in e[..full]
                .chunks_exact_mut(8)
                .zip(h[..full].chunks_exact(8))
                .zip(g[..full].chunks_exact(8))
            {
                for j in 0..8 {
                    let v = hc[j] * gc[j];
                    ec[j] = v;
                    lanes[j] += v.as_f64();
                }
            }
            for j in full..n {
                let v = h[j] * g[j];
                e[j] = v;
                lanes[j - full] += v.as_f64();
            }
        }
        None => {
            for (hc, gc) in h[..full].chunks_exact(8).zip(g[..full].chunks_exact(8)) {
                for j in 0..8 {
                    lanes[j] += (hc[j] * gc[j]).as_f64();
                }
            }
            for j in full..n {
                lanes[j - full] += (h[j] * g[j]).as_f64();
            }
        }
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

/// Accumulates the rows of `xb` sequentially into `acc` using `ws`. The
/// `F` sums of a dense chunk reach `f64` after that chunk (docs/math.md §4.6).
pub(crate) fn accumulate_seq<F: Float>(
    kp: &KernelParams<F>,
    xb: ArrayView2<'_, F>,
    want: Want,
    ws: &mut Workspace<F>,
    acc: &mut GAcc,
) {
    let mut ll = [0.0f64; MFA_CHUNK_ROWS];
    let n = xb.nrows();
    // equal-sized chunks (a 1000-row bag is two chunks of 500)
    let n_chunks = n.div_ceil(MFA_CHUNK_ROWS);
    let size = n.div_ceil(n_chunks);
    for xc in xb.axis_chunks_iter(Axis(0), size) {
        let m = xc.nrows();
        process_chunk(kp, xc, ws, want, Some(acc), &mut ll[..m], None, Par::Seq);
        flush(kp, ws, acc);
    }
}

/// Accumulates over all rows of `x` (N, D), sequentially (for encoders called
/// from parallel code) or in parallel blocks added in block order.
///
/// `model` is anything that lends the kernel arrays (an `&Mfa`, or the
/// [`KernelParams`] themselves).
pub(crate) fn accumulate<F: Float>(
    model: &(impl AsRef<KernelParams<F>> + ?Sized),
    x: ArrayView2<'_, F>,
    want: Want,
    parallel: bool,
) -> GAcc {
    let kp = model.as_ref();
    let (n, d) = x.dim();
    let (k, r, p) = (kp.n_components(), kp.n_factors(), kp.inv_psi.nrows());
    let run_block = |xb: ArrayView2<'_, F>| {
        let mut acc = GAcc::zeros(k, d, r, p, want);
        with_cached_workspace(|ws| accumulate_seq(kp, xb, want, ws, &mut acc));
        acc
    };
    if !parallel || n <= BLOCK_ROWS || rayon::current_num_threads() <= 1 {
        // Same block partition as the parallel path, so the bits agree.
        let mut total: Option<GAcc> = None;
        for xb in x.axis_chunks_iter(Axis(0), BLOCK_ROWS) {
            let b = run_block(xb);
            match total.as_mut() {
                None => total = Some(b),
                Some(t) => t.add(&b),
            }
        }
        return total.expect("x has at least one row");
    }
    let blocks: Vec<ArrayView2<'_, F>> = x.axis_chunks_iter(Axis(0), BLOCK_ROWS).collect();
    let wave = 2 * rayon::current_num_threads();
    let mut total: Option<GAcc> = None;
    for group in blocks.chunks(wave) {
        let parts: Vec<GAcc> = group.par_iter().map(|xb| run_block(*xb)).collect();
        for b in parts {
            match total.as_mut() {
                None => total = Some(b),
                Some(t) => t.add(&b),
            }
        }
    }
    total.expect("x has at least one row")
}
