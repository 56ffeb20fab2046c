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

pub(crate) use super::acc::{view2, GAcc, Want};
use super::sparse::{self, Direct, SparseScratch};
use super::MfaError;
use crate::float::{Float, LN_2PI};
use crate::kernels::diag_gauss::mixture_mean;
use crate::kernels::reduce::lane_sum;
use crate::kernels::softmax::{flush_cutoff, softmax_columns_flushed};
use crate::linalg::{gemm, vectorized, Cholesky, Par};
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
        let center: Array1<F> = mixture_mean(weights, means).mapv(F::from_f64_lossy);
        let inv_psi = psi.mapv(|v| F::from_f64_lossy(1.0 / v.as_f64()));
        let mut stacked_t = Array2::<F>::zeros((k * r + k, d));
        let mut g_offset = Array1::<F>::zeros(k * r);
        let mut log_const = Array1::<f64>::zeros(k);
        let mut m_inv = Array3::<f64>::zeros((k, r, r));
        let mut c_inv = Array3::<f64>::zeros((k, r, r));
        let mut direct = Direct::zeros(k, d, r, p);
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
                weights[kk].as_f64().ln() - 0.5 * (d as f64 * LN_2PI + log_det_s);
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
        self.direct.n_components()
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.direct.dim()
    }

    /// Number of factors R.
    pub fn n_factors(&self) -> usize {
        self.m_inv.dim().1
    }

    /// Row of $\Psi_k$ in `inv_psi`.
    #[inline]
    pub fn psi_row(&self, k: usize) -> usize {
        self.direct.psi_row(k)
    }
}

impl<F: Float> AsRef<KernelParams<F>> for KernelParams<F> {
    fn as_ref(&self) -> &KernelParams<F> {
        self
    }
}

/// Rows per block processed sequentially by one task of the parallel E-step.
pub(crate) const BLOCK_ROWS: usize = 8 * MFA_CHUNK_ROWS;

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
    // element-wise steps compiled for this CPU's widest vectors (same
    // operations in the same order: same bits)
    vectorized(
        #[inline(always)]
        || centre_and_square(kp, x, ws),
    );
    project(kp, n, ws, par);
    vectorized(
        #[inline(always)]
        || {
            log_joints(kp, n, ws);
            posteriors::<F>(n, k, ws, ll);
        },
    );
    if sparse::wanted::<F>(view2(&mut ws.lj, (k, n)).view(), want) {
        let w = k * (kp.n_factors() + 1);
        let lj = view2(&mut ws.lj, (k, n));
        let pt = view2(&mut ws.pt, (w, n));
        let io = sparse::ChunkIo { x, ll, proba };
        sparse::chunk(&kp.direct, lj.view(), pt.view(), &mut ws.sp, want, acc, io);
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
#[inline(always)]
fn centre_and_square<F: Float>(kp: &KernelParams<F>, x: ArrayView2<'_, F>, ws: &mut Workspace<F>) {
    let (n, d) = x.dim();
    let mut y = view2(&mut ws.y, (n, d));
    let mut y2 = view2(&mut ws.y2, (n, d));
    let y = y.as_slice_mut().expect("workspace is contiguous");
    let y2 = y2.as_slice_mut().expect("workspace is contiguous");
    let center = kp.center.as_slice().expect("model arrays are contiguous");
    // plain slice loops, so that they inline into (and vectorise with) the caller
    let rows = y.chunks_exact_mut(d).zip(y2.chunks_exact_mut(d));
    for ((yr, y2r), xr) in rows.zip(x.rows()) {
        let put = |(y, y2): (&mut F, &mut F), (&xv, &c): (&F, &F)| {
            let v = xv - c;
            *y = v;
            *y2 = v * v;
        };
        let out = yr.iter_mut().zip(y2r.iter_mut());
        match xr.to_slice() {
            Some(xs) => out.zip(xs.iter().zip(center)).for_each(|(o, i)| put(o, i)),
            None => out.zip(xr.iter().zip(center)).for_each(|(o, i)| put(o, i)),
        }
    }
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
#[inline(always)]
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
            let q = q.to_slice().expect("contiguous");
            let pm = pt.row(kr + kk);
            let pm = pm.to_slice().expect("contiguous");
            let lj = lj.row_mut(kk).into_slice().expect("contiguous");
            for ((l, &q), &pm) in lj.iter_mut().zip(q).zip(pm) {
                *l = b - 0.5 * (q.as_f64() - 2.0 * pm.as_f64());
            }
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

/// Posteriors $h$ and $\log p(x_i)$ from the log-joints in `ws.lj` (K, n):
/// the column softmax of [`softmax_columns_flushed`] (`f32` cutoff for `f32`).
#[inline(always)]
fn posteriors<F: Float>(n: usize, k: usize, ws: &mut Workspace<F>, ll: &mut [f64]) {
    let lj = view2(&mut ws.lj, (k, n));
    softmax_columns_flushed(lj, flush_cutoff::<F>(), &mut ll[..n], &mut ws.m, &mut ws.s);
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

/// Rows of a block summed in `F` by the GEMM before being flushed to `f64`.
const FLUSH_ROWS: usize = 4 * MFA_CHUNK_ROWS;

/// Accumulates the rows of `xb` sequentially into `acc` using `ws`.
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
    let mut since_flush = 0;
    for xc in xb.axis_chunks_iter(Axis(0), size) {
        let m = xc.nrows();
        process_chunk(kp, xc, ws, want, Some(acc), &mut ll[..m], None, Par::Seq);
        since_flush += m;
        if since_flush >= FLUSH_ROWS {
            flush(kp, ws, acc);
            since_flush = 0;
        }
    }
    flush(kp, ws, acc);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mfa::sparse::FORCE_DENSE;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, Normal, Uniform};

    /// A mixture whose components are so far apart (means 40 σ-units apart
    /// per dimension) that even `f64` posteriors are mostly exactly zero, and
    /// n rows drawn from it, component i mod K for row i.
    fn separated(
        k: usize,
        d: usize,
        r: usize,
        p: usize,
        n: usize,
    ) -> (KernelParams<f64>, Array2<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let nrm = Normal::new(0.0, 1.0).unwrap();
        let uni = Uniform::new(0.5, 1.5).unwrap();
        let w = Array1::from_elem(k, 1.0 / k as f64);
        let means: Array2<f64> =
            Array2::from_shape_fn((k, d), |_| 40.0 * nrm.sample(&mut rng) + 3.0);
        let lam: ndarray::Array3<f64> =
            ndarray::Array3::from_shape_fn((k, d, r), |_| nrm.sample(&mut rng));
        let psi: Array2<f64> = Array2::from_shape_fn((p, d), |_| uni.sample(&mut rng));
        let x = Array2::from_shape_fn((n, d), |(i, j)| {
            let c = i % k;
            let z: f64 = (0..r).map(|a| lam[[c, j, a]] * nrm.sample(&mut rng)).sum();
            means[[c, j]] + z + psi[[if p == 1 { 0 } else { c }, j]].sqrt() * nrm.sample(&mut rng)
        });
        let kp = KernelParams::new(w.view(), means.view(), lam.view(), psi.view()).unwrap();
        (kp, x)
    }

    fn rel(a: impl IntoIterator<Item = f64>, b: impl IntoIterator<Item = f64>) -> f64 {
        let (mut num, mut den) = (0.0, 0.0);
        for (x, y) in a.into_iter().zip(b) {
            num += (x - y) * (x - y);
            den += y * y;
        }
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    }

    #[test]
    fn sparse_sums_equal_the_dense_gemm_sums_in_f64() {
        let (k, d, r, n) = (16, 24, 3, 1100);
        for p in [1, k] {
            let (kp, x) = separated(k, d, r, p, n);
            for want in [Want::EM, Want::SCORES, Want::SCORES_MEAN] {
                let sparse = accumulate(&kp, x.view(), want, false);
                FORCE_DENSE.with(|f| f.set(true));
                let dense = accumulate(&kp, x.view(), want, false);
                FORCE_DENSE.with(|f| f.set(false));
                // Different bits: the sparse path did run.
                assert_ne!(sparse, dense, "p {p} {want:?}");
                assert_eq!(sparse.n_rows, dense.n_rows);
                assert!((sparse.ll - dense.ll).abs() <= 1e-12 * dense.ll.abs());
                let fields = [
                    (
                        "nk",
                        rel(sparse.nk.iter().copied(), dense.nk.iter().copied()),
                    ),
                    (
                        "sg",
                        rel(sparse.sg.iter().copied(), dense.sg.iter().copied()),
                    ),
                    (
                        "sgg",
                        rel(sparse.sgg.iter().copied(), dense.sgg.iter().copied()),
                    ),
                    (
                        "syg",
                        rel(sparse.syg.iter().copied(), dense.syg.iter().copied()),
                    ),
                    (
                        "syy",
                        rel(sparse.syy.iter().copied(), dense.syy.iter().copied()),
                    ),
                ];
                for (name, e) in fields {
                    assert!(e < 1e-10, "p {p} {want:?}: {name} differs by {e:.2e}");
                }
            }
        }
    }
}
