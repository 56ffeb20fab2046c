//! The sparse path of the MFA E-step kernel (docs/math.md §4.6): a chunk
//! whose posteriors are mostly zero — real descriptors give each row one to
//! three components that matter — is summed pair by pair in `f64` instead of
//! by the statistics GEMM of [`super::kernel`].
//!
//! For each pair $(i, k)$ with $h_{ik} > 0$ and $d_{ik} = x_i - \mu_k$ in `f64`:
//! * `f32` only (the *refinement*): the pairs that carry the mass,
//!   $h \ge$ [`REFINE_MIN`], get their log-joint again in the centred direct
//!   form $\ell_{ik} = b_k - \frac12 d^\top\Psi_k^{-1}d + \frac12\lVert g\rVert^2$,
//!   $g_{ik} = W_k^\top d_{ik}$, from the unrounded model ([`Direct`]), and a
//!   new softmax among themselves; the others (at most K·1e-10 of a row's
//!   mass) are dropped. The GEMM's expanded form
//!   $\frac12(y^\top\Psi^{-1}y - 2y^\top\Psi^{-1}\mu') + \dots$ cancels terms far
//!   larger than the result, which reached the scores at ~4e-6 in `f32`.
//! * the statistics $\sum h g$, $\sum h g g^\top$, $\sum h d g^\top$,
//!   $\sum h d$ (and $\sum h y^2$) per component, by small `f64` GEMMs over the
//!   component's pairs, then shifted to the kernel's centre $c$:
//!   $\sum h y g^\top = \sum h d g^\top + \mu'_k \sum h g^\top$,
//!   $\sum h y = \sum h d + n_k \mu'_k$ ($y = x - c$, $\mu'_k = \mu_k - c$).
//!
//! Nothing is summed in `f32`, and only the pairs that exist cost anything:
//! about 3·D·R multiply-adds per pair against the dense statistics GEMM's
//! D·K·(R + 1) per row.

use super::acc::{view2, GAcc, Want};
use crate::float::Float;
use crate::kernels::screen::{SparseRows, REFINE_MIN};
use crate::kernels::softmax::flush_cutoff;
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2, Axis};

/// A chunk whose non-zero posteriors number more than n·K / `DENSE_FRACTION`
/// goes through the dense GEMMs (one pair of the sparse path costs about as
/// much as this many rows' worth of one component in the GEMM).
pub(crate) const DENSE_FRACTION: usize = 8;

/// Pairs per batch of the per-component `f64` GEMMs (a batch of d's is
/// `PAIR_BATCH`·D values, 256 KB at D = 500).
const PAIR_BATCH: usize = 64;

/// The model in `f64`, unrounded, for the direct form: built with the
/// kernel's other arrays in [`KernelParams::new`].
#[derive(Debug, Clone)]
pub(crate) struct Direct {
    /// (K, D): $\mu_k$.
    pub means: Array2<f64>,
    /// (K, D): $\mu'_k = \mu_k - c$ ($c$ the kernel's centre, as rounded to `F`).
    pub mu_p: Array2<f64>,
    /// (D): $c$.
    pub center: Array1<f64>,
    /// (K·R, D): row $kR + a$ is column a of $W_k = \Psi_k^{-1}\Lambda_k C_k^{-\top}$.
    pub w: Array2<f64>,
    /// (P, D): $1/\psi$.
    pub inv_psi: Array2<f64>,
    /// (K): $b_k = \log w_k - \frac12(D\log 2\pi + \log\det S_k)$.
    pub log_const: Array1<f64>,
}

impl Direct {
    /// Number of components K.
    pub(crate) fn n_components(&self) -> usize {
        self.log_const.len()
    }

    /// Dimension D.
    pub(crate) fn dim(&self) -> usize {
        self.center.len()
    }

    /// Number of factors R.
    pub(crate) fn n_factors(&self) -> usize {
        self.w.nrows() / self.n_components().max(1)
    }

    /// Row of $\Psi_k$ in `inv_psi`.
    #[inline]
    pub(crate) fn psi_row(&self, k: usize) -> usize {
        if self.inv_psi.nrows() == 1 {
            0
        } else {
            k
        }
    }

    pub(crate) fn zeros(k: usize, d: usize, r: usize, p: usize) -> Self {
        Self {
            means: Array2::zeros((k, d)),
            mu_p: Array2::zeros((k, d)),
            center: Array1::zeros(d),
            w: Array2::zeros((k * r, d)),
            inv_psi: Array2::zeros((p, d)),
            log_const: Array1::zeros(k),
        }
    }
}

/// Scratch of the sparse path, one per worker (inside the kernel's workspace).
#[derive(Default)]
pub(crate) struct SparseScratch {
    /// The chunk's pairs: posteriors (or log-joints while refining), per row.
    rows: SparseRows,
    /// (pairs, R): $g$ of each pair of `rows`.
    g: Vec<f64>,
    /// Row of each pair of `rows`.
    row_of: Vec<u32>,
    /// Pair indices grouped by component (rows ascending within one).
    order: Vec<u32>,
    /// Component k owns `order[start[k]..start[k + 1]]`.
    start: Vec<usize>,
    /// (PAIR_BATCH, D): $d$ of a batch of pairs.
    dm: Vec<f64>,
    /// (PAIR_BATCH, R): $g$ of a batch of pairs.
    gb: Vec<f64>,
    /// (PAIR_BATCH, R + 1): $[h g, h]$ of a batch of pairs.
    hg: Vec<f64>,
    /// (D, R + 1): one component's $[\sum h d g^\top, \sum h d]$.
    sdg: Vec<f64>,
    /// (R, R): one batch's $\sum h g g^\top$.
    sgg: Vec<f64>,
}

/// Whether a chunk with posteriors `h` (K, n) takes the sparse path: few
/// enough non-zero posteriors, and something to gain (statistics to sum, or
/// `f32` log-likelihoods and posteriors to refine).
pub(crate) fn wanted<F: Float>(h: ArrayView2<'_, f64>, want: Want) -> bool {
    let (k, n) = h.dim();
    if !(want.stats || refines::<F>()) {
        return false;
    }
    if forced_dense() {
        return false;
    }
    let nnz = h.iter().filter(|&&v| v > 0.0).count();
    nnz * DENSE_FRACTION <= n * k
}

/// `f32` posteriors are refined (docs/math.md §4.6); `f64` ones are exact enough.
fn refines<F: Float>() -> bool {
    F::EPS.as_f64() > 1e-12
}

/// The chunk's rows and per-row outputs.
pub(crate) struct ChunkIo<'a, 'b, F> {
    /// (n, D): the validated rows.
    pub x: ArrayView2<'a, F>,
    /// (n): $\log p(x_i)$, already written from the dense posteriors; refined here.
    pub ll: &'b mut [f64],
    /// (n, K): posteriors, when wanted.
    pub proba: Option<ArrayViewMut2<'b, F>>,
}

/// The sparse path of one chunk: `h` (K, n) are the dense posteriors and `pt`
/// (K·R + K, n) the GEMM's $g$ rows (used as they are in `f64`). Writes the
/// (refined) log-likelihoods and posteriors into `io`, and adds the wanted
/// statistics to `acc` in `f64`.
pub(crate) fn chunk<F: Float>(
    dir: &Direct,
    h: ArrayView2<'_, f64>,
    pt: ArrayView2<'_, F>,
    sp: &mut SparseScratch,
    want: Want,
    acc: Option<&mut GAcc>,
    io: ChunkIo<'_, '_, F>,
) {
    let r = dir.n_factors();
    let n = io.x.nrows();
    if refines::<F>() {
        sp.rows.set_from_dense(h.t(), REFINE_MIN);
        direct_log_joints(dir, io.x, sp);
        sp.rows
            .softmax_carrying(flush_cutoff::<F>(), io.ll, &mut sp.g, r);
    } else {
        sp.rows.set_from_dense(h.t(), f64::MIN_POSITIVE);
        gather_g(dir, pt, sp);
    }
    if let Some(mut q) = io.proba {
        q.fill(F::zero());
        for i in 0..n {
            for j in sp.rows.start[i]..sp.rows.start[i + 1] {
                q[[i, sp.rows.comp[j] as usize]] = F::from_f64_lossy(sp.rows.val[j]);
            }
        }
    }
    let Some(acc) = acc else {
        return;
    };
    acc.n_rows += n;
    acc.ll += io.ll[..n].iter().sum::<f64>();
    if want.syy && dir.inv_psi.nrows() == 1 {
        shared_syy(dir, io.x, acc);
    }
    if want.stats {
        group_by_component(dir.n_components(), sp);
        pair_sums(dir, io.x, sp, want, acc);
    }
}

/// Log-joints $\ell = b_k - \frac12 d^\top\Psi_k^{-1}d + \frac12\lVert g\rVert^2$
/// and $g = W_k^\top d$ of every pair of `sp.rows` (values replaced), in `f64`
/// from the rows of `x` (n, D), component by component.
fn direct_log_joints<F: Float>(dir: &Direct, x: ArrayView2<'_, F>, sp: &mut SparseScratch) {
    let (k, d, r) = (dir.n_components(), dir.dim(), dir.n_factors());
    sp.g.clear();
    sp.g.resize(sp.rows.val.len() * r, 0.0);
    group_by_component(k, sp);
    for kk in 0..k {
        let ip = dir.inv_psi.row(dir.psi_row(kk));
        let wk = dir.w.slice(s![kk * r..(kk + 1) * r, ..]);
        let pairs = &sp.order[sp.start[kk]..sp.start[kk + 1]];
        for batch in pairs.chunks(PAIR_BATCH) {
            let m = batch.len();
            let mut dm = view2(&mut sp.dm, (m, d));
            differences(x, &sp.row_of, batch, dir.means.row(kk), &mut dm);
            let mut gb = view2(&mut sp.gb, (m, r));
            gemm(gb.view_mut(), false, dm.view(), wk.t(), 1.0, Par::Seq);
            for (b, &j) in batch.iter().enumerate() {
                let j = j as usize;
                let dr = dm.row(b);
                let quad = weighted_sq(dr.as_slice().expect("contiguous"), &ip);
                let g = gb.row(b);
                let gg: f64 = g.iter().map(|v| v * v).sum();
                sp.rows.val[j] = dir.log_const[kk] - 0.5 * quad + 0.5 * gg;
                sp.g[j * r..(j + 1) * r].copy_from_slice(g.as_slice().expect("contiguous"));
            }
        }
    }
}

/// $g$ of every pair of `sp.rows` from the GEMM's rows `pt` (K·R + K, n).
fn gather_g<F: Float>(dir: &Direct, pt: ArrayView2<'_, F>, sp: &mut SparseScratch) {
    let r = dir.n_factors();
    sp.g.clear();
    for i in 0..sp.rows.n_rows() {
        for j in sp.rows.start[i]..sp.rows.start[i + 1] {
            let c = sp.rows.comp[j] as usize;
            sp.g.extend((0..r).map(|a| pt[[c * r + a, i]].as_f64()));
        }
    }
}

/// `sp.row_of`, and `sp.order` / `sp.start`: the pairs of `sp.rows` grouped by
/// component, rows ascending within a component.
fn group_by_component(k: usize, sp: &mut SparseScratch) {
    let rows = &sp.rows;
    sp.row_of.clear();
    for i in 0..rows.n_rows() {
        sp.row_of.extend(std::iter::repeat_n(
            i as u32,
            rows.start[i + 1] - rows.start[i],
        ));
    }
    sp.start.clear();
    sp.start.resize(k + 1, 0);
    for &c in &rows.comp {
        sp.start[c as usize + 1] += 1;
    }
    for j in 0..k {
        sp.start[j + 1] += sp.start[j];
    }
    sp.order.clear();
    sp.order.resize(rows.comp.len(), 0);
    let mut next = sp.start[..k].to_vec();
    for (j, &c) in rows.comp.iter().enumerate() {
        sp.order[next[c as usize]] = j as u32;
        next[c as usize] += 1;
    }
}

/// Rows $b$ of `dm` (m, D): $x_{i_b} - \mu$ in `f64`, $i_b$ the row of pair `batch[b]`.
fn differences<F: Float>(
    x: ArrayView2<'_, F>,
    row_of: &[u32],
    batch: &[u32],
    mu: ndarray::ArrayView1<'_, f64>,
    dm: &mut ArrayViewMut2<'_, f64>,
) {
    let mu = mu.as_slice().expect("contiguous");
    for (mut out, &j) in dm.outer_iter_mut().zip(batch) {
        let xr = x.row(row_of[j as usize] as usize);
        let out = out.as_slice_mut().expect("contiguous");
        match xr.as_slice() {
            Some(xs) => {
                for ((o, &xv), &m) in out.iter_mut().zip(xs).zip(mu) {
                    *o = xv.as_f64() - m;
                }
            }
            None => {
                for ((o, &xv), &m) in out.iter_mut().zip(xr.iter()).zip(mu) {
                    *o = xv.as_f64() - m;
                }
            }
        }
    }
}

/// $\sum_d v_d^2 w_d$ in 8 interleaved `f64` partial sums (vectorises; fixed order).
fn weighted_sq(v: &[f64], w: &ndarray::ArrayView1<'_, f64>) -> f64 {
    let w = w.as_slice().expect("contiguous");
    let mut lanes = [0.0f64; 8];
    let full = v.len() - v.len() % 8;
    for (vc, wc) in v[..full].chunks_exact(8).zip(w[..full].chunks_exact(8)) {
        for j in 0..8 {
            lanes[j] += vc[j] * vc[j] * wc[j];
        }
    }
    for j in full..v.len() {
        lanes[j - full] += v[j] * v[j] * w[j];
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

/// $\sum_i (x_i - c)^2$ (shared $\Psi$: no posteriors) into `acc.syy` (1, D), `f64`.
fn shared_syy<F: Float>(dir: &Direct, x: ArrayView2<'_, F>, acc: &mut GAcc) {
    let c = &dir.center;
    let mut tot = acc.syy.row_mut(0);
    for row in x.rows() {
        ndarray::Zip::from(&mut tot)
            .and(&row)
            .and(c)
            .for_each(|t, &xv, &c| {
                let y = xv.as_f64() - c;
                *t += y * y;
            });
    }
}

/// The statistics of the pairs (grouped by [`group_by_component`]) into `acc`,
/// component by component in batches of [`PAIR_BATCH`] pairs.
fn pair_sums<F: Float>(
    dir: &Direct,
    x: ArrayView2<'_, F>,
    sp: &mut SparseScratch,
    want: Want,
    acc: &mut GAcc,
) {
    let (k, d, r) = (dir.n_components(), dir.dim(), dir.n_factors());
    let kr = k * r;
    // Columns of [h g, h] summed against d: all R + 1, or only h's.
    let (c0, wid) = if want.yg { (0, r + 1) } else { (r, 1) };
    for kk in 0..k {
        let (a, b) = (sp.start[kk], sp.start[kk + 1]);
        if a == b {
            continue;
        }
        let mut sdg = view2(&mut sp.sdg, (d, wid));
        sdg.fill(0.0);
        let (mut nk, mut sg) = (0.0f64, vec![0.0f64; r]);
        for batch in sp.order[a..b].chunks(PAIR_BATCH) {
            let m = batch.len();
            let mut dm = view2(&mut sp.dm, (m, d));
            differences(x, &sp.row_of, batch, dir.means.row(kk), &mut dm);
            let mut hg = view2(&mut sp.hg, (m, r + 1));
            let mut gb = view2(&mut sp.gb, (m, r));
            for (bi, &j) in batch.iter().enumerate() {
                let j = j as usize;
                let h = sp.rows.val[j];
                let g = &sp.g[j * r..(j + 1) * r];
                nk += h;
                for q in 0..r {
                    gb[[bi, q]] = g[q];
                    hg[[bi, q]] = h * g[q];
                    sg[q] += h * g[q];
                }
                hg[[bi, r]] = h;
            }
            gemm(
                sdg.view_mut(),
                true,
                dm.t(),
                hg.slice(s![.., c0..]),
                1.0,
                Par::Seq,
            );
            if want.yg {
                let mut sgg = view2(&mut sp.sgg, (r, r));
                gemm(
                    sgg.view_mut(),
                    false,
                    gb.t(),
                    hg.slice(s![.., ..r]),
                    1.0,
                    Par::Seq,
                );
                acc.sgg
                    .index_axis_mut(Axis(0), kk)
                    .zip_mut_with(&sgg, |a, v| *a += v);
            }
            if want.syy && dir.inv_psi.nrows() > 1 {
                let mp = dir.mu_p.row(kk);
                let mut syy = acc.syy.row_mut(kk);
                for (bi, dr) in dm.outer_iter().enumerate() {
                    let h = hg[[bi, r]];
                    ndarray::Zip::from(&mut syy)
                        .and(&dr)
                        .and(&mp)
                        .for_each(|s, &dv, &mp| {
                            let y = dv + mp;
                            *s += h * y * y;
                        });
                }
            }
        }
        acc.nk[kk] += nk;
        for q in 0..r {
            acc.sg[[kk, q]] += sg[q];
        }
        // Shift from d = x − μ_k to y = x − c: Σ h y gᵀ = Σ h d gᵀ + μ' (Σ h g)ᵀ, Σ h y = Σ h d + n_k μ'.
        let mp = dir.mu_p.row(kk);
        for dd in 0..d {
            let m = mp[dd];
            if want.yg {
                for q in 0..r {
                    acc.syg[[dd, kk * r + q]] += sdg[[dd, q]] + m * sg[q];
                }
            }
            acc.syg[[dd, kr + kk]] += sdg[[dd, wid - 1]] + m * nk;
        }
    }
}

/// Test hook: whether this thread's chunks must take the dense GEMMs.
#[cfg(not(test))]
fn forced_dense() -> bool {
    false
}

#[cfg(test)]
thread_local! {
    /// Sends every chunk of this thread through the dense GEMMs (tests only).
    pub(crate) static FORCE_DENSE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn forced_dense() -> bool {
    FORCE_DENSE.with(|f| f.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_moves_with_the_entries_softmax_keeps() {
        // Row 0: three log-joints, the last far below the cutoff; row 1: one.
        let mut rows = SparseRows {
            start: vec![0, 3, 4],
            comp: vec![0, 2, 5, 1],
            val: vec![-1.0, -1.5, -400.0, 3.0],
        };
        let mut payload = vec![0.0, 0.5, 2.0, 2.5, 5.0, 5.5, 1.0, 1.5];
        let mut ll = [0.0; 2];
        rows.softmax_carrying(-50.0, &mut ll, &mut payload, 2);
        assert_eq!(rows.start, vec![0, 2, 3]);
        assert_eq!(rows.comp, vec![0, 2, 1]);
        assert_eq!(&payload[..6], &[0.0, 0.5, 2.0, 2.5, 1.0, 1.5]);
        let e = (-0.5f64).exp();
        assert!((rows.val[0] - 1.0 / (1.0 + e)).abs() < 1e-15);
        assert!((ll[0] - (-1.0 + (1.0 + e).ln())).abs() < 1e-15);
        assert_eq!((rows.val[2], ll[1]), (1.0, 3.0));
    }
}
