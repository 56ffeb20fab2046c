//! Encoding one bag: per chunk of rows the screened or the GEMM posterior
//! kernel, the `f64` sums $n_k$, $\sum_i q_{ik} z_{ikd}$, $\sum_i q_{ik} z^2_{ikd}$
//! (pair by pair or by GEMM), then the blocks; and the [`Encoder`] impl.

use super::encoder::{Accumulation, FisherVector};
use crate::encode::posterior::{posteriors_in_place, Assign, SparsePosteriors};
use crate::encode::{EncodeError, Encoder};
use crate::float::Float;
use crate::kernels::reduce::add_column_sums;
use crate::kernels::screen::{refined_pairs, ScreenScratch, SparseRows, REFINE_MIN};
use crate::kernels::softmax::flush_cutoff;
use crate::linalg::{gemm, Par};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// A chunk whose non-zero posteriors exceed `n·K / DENSE_FRACTION` is
/// accumulated with two GEMMs instead of the sparse loop (the GEMM runs about
/// this many times faster per multiply-add than the scattered row updates).
pub(super) const DENSE_FRACTION: usize = 12;

/// The same choice for `f32` soft assignment, whose sparse loop keeps only
/// the pairs with $q \ge$ [`REFINE_MIN`] and evaluates each of them once
/// more in the centred direct form (docs/math.md §2.8): a chunk is
/// accumulated pair by pair when those pairs are at most `n·K /
/// REFINED_DENSE_FRACTION`. A refined pair costs about 1.7 times an
/// accumulated one (a direct log-joint, D subtractions and multiply-adds,
/// before the accumulation's D subtractions and 2D multiply-adds), hence
/// 12 · 1.7 ≈ 20. Real descriptors (2.2 such pairs per row at K = 50, 4.1
/// above `f32`'s flush) then take the exact path, where counting every
/// unflushed posterior sent them through the dense GEMM, 6e-6 from `f64`.
pub(super) const REFINED_DENSE_FRACTION: usize = 20;

/// Rows per chunk of the log-joint GEMM: memory O(rows·(K + 2D)).
pub(super) const FV_CHUNK: usize = 256;

/// Working memory of one encoding, reused across the bags of a batch.
#[derive(Default)]
struct Workspace<F: Float> {
    /// (rows, K) log-joints, then posteriors (GEMM path).
    lp: Array2<F>,
    /// (rows, 2D) $[y^2, y]$, $y = x - c$ (GEMM path).
    scratch: Array2<F>,
    /// Posteriors of a GEMM-path chunk as triples.
    sparse: SparsePosteriors<F>,
    /// The posteriors of a chunk in CSR form with `f64` values (both paths).
    rows: SparseRows,
    /// Screening buffers (docs/math.md §2.7).
    screen: ScreenScratch<F>,
    /// (rows) log-likelihoods from the screened softmax (unused by the FV).
    ll: Vec<f64>,
    /// The bag's statistics in `f64`: $n_k = \sum_i q_{ik}$ (K),
    /// $\sum_i q_{ik} z_{ikd}$ and $\sum_i q_{ik} z^2_{ikd}$ (K·D, component-major).
    nk: Vec<f64>,
    sz: Vec<f64>,
    sz2: Vec<f64>,
    /// Dense chunks: (K, 2D) $Q^\top [y^2, y]$ summed in `F`, their
    /// $\sum_i q_{ik}$ (K), and whether any chunk took this path.
    raw: Array2<F>,
    nkd: Vec<f64>,
    any_dense: bool,
    /// Sparse pairs grouped by component (see `group_by_component`).
    by_start: Vec<usize>,
    by_pairs: Vec<(u32, f64)>,
}

impl<F: Float> FisherVector<F> {
    /// The un-normalised blocks of `x` (N ≥ 1, D) into `out` (`output_dim()`):
    /// per chunk of rows the screened kernel (docs/math.md §2.7) or, for a
    /// dense chunk, the GEMM kernel; then the blocks from the `f64` sums.
    fn encode_raw(&self, x: ArrayView2<'_, F>, out: &mut [F], ws: &mut Workspace<F>) {
        let n = x.nrows();
        // Equal chunks of at most FV_CHUNK rows.
        let rows = n.div_ceil(n.div_ceil(FV_CHUNK));
        self.start_bag(rows, ws);
        for xc in x.axis_chunks_iter(Axis(0), rows) {
            if !(self.screening && self.screened_chunk(xc, ws)) {
                self.gemm_chunk(xc, ws);
            }
        }
        self.fold_dense_sums(ws);
        self.write_blocks(n, ws, out);
    }

    /// Sizes and zeroes the workspace for a bag cut in chunks of `rows` rows.
    fn start_bag(&self, rows: usize, ws: &mut Workspace<F>) {
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        if ws.lp.nrows() < rows || ws.lp.ncols() != k {
            ws.lp = Array2::zeros((rows, k));
        }
        if ws.scratch.nrows() < rows || ws.scratch.ncols() != 2 * d {
            ws.scratch = Array2::zeros((rows, 2 * d));
        }
        ws.ll.resize(rows, 0.0);
        for (v, len) in [(&mut ws.nk, k), (&mut ws.sz, k * d), (&mut ws.sz2, k * d)] {
            v.clear();
            v.resize(len, 0.0);
        }
        ws.any_dense = false;
        ws.screen.reset();
    }

    /// The chunk `xc` (n, D) through the screened kernel: exact posteriors of
    /// the components that can matter, accumulated in `f64`. False (nothing
    /// added) when the chunk is dense.
    fn screened_chunk(&self, xc: ArrayView2<'_, F>, ws: &mut Workspace<F>) -> bool {
        let active = self.params.vlfeat_skips.then_some(&self.active[..]);
        let screen = self.gmm.screen();
        if !screen.survivors(xc, active, &mut ws.screen, &mut ws.rows) {
            return false;
        }
        let n = xc.nrows();
        match self.assign() {
            Assign::Hard => ws.rows.hard_assign(),
            Assign::Soft => ws.rows.softmax(flush_cutoff::<F>(), &mut ws.ll[..n]),
            Assign::SoftSkip(t) => {
                ws.rows.softmax(flush_cutoff::<F>(), &mut ws.ll[..n]);
                // Compared after rounding to F, as VLFeat compares its stored posteriors.
                ws.rows.retain(|q| F::from_f64_lossy(q).as_f64() >= t);
            }
        }
        self.accumulate_pairs(xc, ws);
        true
    }

    /// The chunk `xc` (n, D) through the GEMM kernel: log-joints
    /// $[y^2, y]\,W + b$ (n, K), posteriors, then the sparse loop when few are
    /// non-zero or the GEMMs $Q^\top [y^2, y]$ otherwise.
    fn gemm_chunk(&self, xc: ArrayView2<'_, F>, ws: &mut Workspace<F>) {
        let (k, nc) = (self.gmm.n_components(), xc.nrows());
        let assign = self.assign();
        self.squares_about_center(xc, ws.scratch.slice_mut(s![..nc, ..]));
        let mut lp = ws.lp.slice_mut(s![..nc, ..]);
        let scratch = ws.scratch.slice(s![..nc, ..]);
        gemm(
            lp.view_mut(),
            false,
            scratch,
            self.kernel.view(),
            F::one(),
            Par::Seq,
        );
        // Exact posteriors: computed in place in `lp` (vectorised), which the
        // dense accumulation then uses as it is; otherwise (skips, hard
        // assignment, or a row whose log-joints overflowed) the sparse
        // triples directly.
        let in_place = if assign == Assign::Soft {
            let r = posteriors_in_place(lp.view_mut(), &self.bias);
            if r.is_none() {
                ws.sparse.fill_from_log_joint(lp.view(), assign);
            }
            r
        } else {
            ws.sparse
                .fill_from_scores(lp.view_mut(), &self.bias, assign);
            None
        };
        let nnz = in_place.unwrap_or_else(|| ws.sparse.nnz());
        let refine = assign == Assign::Soft && F::EPS.as_f64() > 1e-12;
        let need_z = self.has_mean || self.has_var;
        let use_sparse = !need_z
            || match self.path {
                Accumulation::Auto if refine => {
                    let kept = match in_place {
                        Some(_) => refined_pairs(lp.iter().map(|q| q.as_f64())),
                        None => refined_pairs(ws.sparse.q.iter().map(|q| q.as_f64())),
                    };
                    kept * REFINED_DENSE_FRACTION <= nc * k
                }
                Accumulation::Auto => nnz * DENSE_FRACTION <= nc * k,
                Accumulation::Sparse => true,
                Accumulation::Dense => false,
            };
        if use_sparse {
            if in_place.is_some() {
                ws.sparse.fill_from_dense(lp.view());
            }
            ws.rows.start.clone_from(&ws.sparse.start);
            ws.rows.comp.clone_from(&ws.sparse.comp);
            ws.rows.val.clear();
            ws.rows.val.extend(ws.sparse.q.iter().map(|q| q.as_f64()));
            if refine {
                self.refine_posteriors(xc, ws);
            }
            self.accumulate_pairs(xc, ws);
        } else {
            if in_place.is_none() {
                lp.fill(F::zero());
                let sp = &ws.sparse;
                for i in 0..nc {
                    for j in sp.start[i]..sp.start[i + 1] {
                        lp[[i, sp.comp[j] as usize]] = sp.q[j];
                    }
                }
            }
            self.accumulate_dense(nc, ws);
        }
    }

    /// `f32` only (docs/math.md §2.8): the GEMM's log-joints carry the rounding of the
    /// expanded form ($\sum_d y^2 a_{kd} + y b_{kd}$ of terms far larger than their sum), up
    /// to ~1e-5 relative in the posteriors. The pairs in `ws.rows` (posteriors, per row of
    /// `xc` (n, D)) that carry the mass, $q \ge$ [`REFINE_MIN`], get their log-joints again
    /// in the centred direct form in `f64` and a new softmax among themselves; the others
    /// (at most K·1e-10 of a row's mass) are dropped. Few pairs per row pass on real
    /// descriptors (1.5–2 at K = 50), so this costs about D multiply-adds per pair.
    fn refine_posteriors(&self, xc: ArrayView2<'_, F>, ws: &mut Workspace<F>) {
        ws.rows.retain(|q| q >= REFINE_MIN);
        self.gmm.screen().exact_log_joints(xc, &mut ws.rows);
        let n = xc.nrows();
        ws.rows.softmax(flush_cutoff::<F>(), &mut ws.ll[..n]);
    }

    /// $[y^2, y]$ with $y = x - c$ for the rows of `xc` (n, D) into
    /// `scratch` (n, 2D).
    fn squares_about_center(&self, xc: ArrayView2<'_, F>, mut scratch: ArrayViewMut2<'_, F>) {
        let d = self.gmm.dim();
        let center = self.center.as_slice().expect("standard layout");
        for (mut yr, xr) in scratch.outer_iter_mut().zip(xc.outer_iter()) {
            let yr = yr.as_slice_mut().expect("standard layout");
            let (sq, lin) = yr.split_at_mut(d);
            let xr = xr.to_slice().expect("standard layout");
            // Two simple loops: each vectorises.
            for ((lin, &x), &c) in lin.iter_mut().zip(xr).zip(center) {
                *lin = x - c;
            }
            for (sq, &y) in sq.iter_mut().zip(&*lin) {
                *sq = y * y;
            }
        }
    }

    /// Adds $Q^\top [y^2, y]$ (K, 2D) for the posteriors $Q$ in the first
    /// `nc` rows of `ws.lp` (nc, K) and $[y^2, y]$ in those of `ws.scratch`
    /// (nc, 2D) into the dense sums (in `F`).
    fn accumulate_dense(&self, nc: usize, ws: &mut Workspace<F>) {
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        let q = ws.lp.slice(s![..nc, ..]);
        let scratch = ws.scratch.slice(s![..nc, ..]);
        if !ws.any_dense {
            ws.any_dense = true;
            if ws.raw.dim() != (k, 2 * d) {
                ws.raw = Array2::zeros((k, 2 * d));
            } else {
                ws.raw.fill(F::zero());
            }
            ws.nkd.clear();
            ws.nkd.resize(k, 0.0);
        }
        add_column_sums(&mut ws.nkd, q);
        gemm(ws.raw.view_mut(), true, q.t(), scratch, F::one(), Par::Seq);
    }

    /// Adds the pairs of `ws.rows` (posteriors of the rows of `xc` (n, D))
    /// into the `f64` sums: $n_k \mathrel{+}= q$, $\sum q z$, $\sum q z^2$
    /// with $z = (x - \mu_k)/\sigma_k$ in `f64` (no cancellation).
    fn accumulate_pairs(&self, xc: ArrayView2<'_, F>, ws: &mut Workspace<F>) {
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        let need_z = self.has_mean || self.has_var;
        // Component by component, so that μ_k, 1/σ_k and the sums stay in
        // cache while the bag rows stream past.
        ws.rows
            .group_by_component(k, &mut ws.by_start, &mut ws.by_pairs);
        let screen = self.gmm.screen();
        let (means, inv_sd) = (screen.means64(), screen.inv_sd64());
        let means = means.as_slice().expect("standard layout");
        let inv_sd = inv_sd.as_slice().expect("standard layout");
        let xs = xc.to_slice().expect("standard layout");
        for kk in 0..k {
            let group = &ws.by_pairs[ws.by_start[kk]..ws.by_start[kk + 1]];
            ws.nk[kk] += group.iter().map(|&(_, q)| q).sum::<f64>();
            if group.is_empty() || !need_z {
                continue;
            }
            let r = kk * d..(kk + 1) * d;
            accumulate_z(AccumulateZ {
                x: xs,
                group,
                mu: &means[r.clone()],
                is: &inv_sd[r.clone()],
                u: &mut ws.sz[r.clone()],
                uu: &mut ws.sz2[r],
            });
        }
    }

    /// Dense sums → $\sum q z$ and $\sum q z^2$ added into the `f64` sums
    /// (in `f64`: the expansion about $c$ cancels).
    fn fold_dense_sums(&self, ws: &mut Workspace<F>) {
        if !ws.any_dense {
            return;
        }
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        let means = self.gmm.means();
        let means = means.as_slice().expect("model arrays are standard layout");
        let inv_sigma = self.inv_sigma.as_slice().expect("standard layout");
        let center = self.center.as_slice().expect("standard layout");
        let raw = ws.raw.as_slice().expect("standard layout");
        // element-wise over contiguous slices, compiled for AVX2: vectorises
        // (the same operations in the same order as a scalar loop: same bits)
        crate::linalg::vectorized(|| {
            for kk in 0..k {
                let nq = ws.nkd[kk];
                ws.nk[kk] += nq;
                let r = kk * d..(kk + 1) * d;
                let (r2, r1) = raw[2 * kk * d..2 * (kk + 1) * d].split_at(d);
                for (((((u, uu), &is), &m), &c), (&r2, &r1)) in ws.sz[r.clone()]
                    .iter_mut()
                    .zip(&mut ws.sz2[r.clone()])
                    .zip(&inv_sigma[r.clone()])
                    .zip(&means[r])
                    .zip(center)
                    .zip(r2.iter().zip(r1))
                {
                    let is = is.as_f64();
                    let mu = m.as_f64() - c.as_f64();
                    let (r2, r1) = (r2.as_f64(), r1.as_f64());
                    *u += (r1 - nq * mu) * is;
                    *uu += (r2 - 2.0 * mu * r1 + mu * mu * nq) * is * is;
                }
            }
        });
    }

    /// The Fisher-information scaling (docs/math.md §3.2) of the `f64` sums
    /// of a bag of `n` rows into the selected blocks of `out`.
    fn write_blocks(&self, n: usize, ws: &Workspace<F>, out: &mut [F]) {
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        out.fill(F::zero());
        let (prior_blk, rest) = out.split_at_mut(if self.has_prior { k } else { 0 });
        let (mean_blk, var_blk) = rest.split_at_mut(if self.has_mean { k * d } else { 0 });
        let inv_n = 1.0 / n as f64;
        let weights = self.gmm.weights();
        for kk in 0..k {
            let wk = weights[kk].as_f64();
            let r = kk * d..(kk + 1) * d;
            if self.has_prior && self.active[kk] {
                prior_blk[kk] = F::from_f64_lossy((ws.nk[kk] * inv_n - wk) / wk.sqrt());
            }
            if self.has_mean {
                let su = inv_n / wk.sqrt();
                for (u, &s) in mean_blk[r.clone()].iter_mut().zip(&ws.sz[r.clone()]) {
                    *u = F::from_f64_lossy(s * su);
                }
            }
            if self.has_var {
                let sv = inv_n / (2.0 * wk).sqrt();
                let nq = ws.nk[kk];
                for (v, &s) in var_blk[r.clone()].iter_mut().zip(&ws.sz2[r.clone()]) {
                    *v = F::from_f64_lossy((s - nq) * sv);
                }
            }
        }
    }
}

/// One component's pairs for [`accumulate_z`]: `x` the chunk's rows (n·D,
/// row-major), `group` its (row, q) pairs, `mu` and `is` (D) its mean and
/// $1/\sigma$, `u` and `uu` (D) its sums $\sum q z$ and $\sum q z^2$.
struct AccumulateZ<'a, F> {
    x: &'a [F],
    group: &'a [(u32, f64)],
    mu: &'a [f64],
    is: &'a [f64],
    u: &'a mut [f64],
    uu: &'a mut [f64],
}

/// $u \mathrel{+}= q z$, $uu \mathrel{+}= q z^2$, $z = (x - \mu)\,s$ in `f64`
/// for each pair, compiled for the CPU's widest vectors (pulp's dispatch).
fn accumulate_z<F: Float>(a: AccumulateZ<'_, F>) {
    pulp::Arch::new().dispatch(a)
}

impl<F: Float> pulp::WithSimd for AccumulateZ<'_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let d = self.mu.len();
        for &(i, q) in self.group {
            let i = i as usize;
            let xr = &self.x[i * d..(i + 1) * d];
            for ((((u, uu), &x), &m), &s) in self
                .u
                .iter_mut()
                .zip(self.uu.iter_mut())
                .zip(xr)
                .zip(self.mu)
                .zip(self.is)
            {
                let z = (x.as_f64() - m) * s;
                let qz = q * z;
                *u += qz;
                *uu += qz * z;
            }
        }
    }
}

impl<F: Float> Encoder<F> for FisherVector<F> {
    fn input_dim(&self) -> usize {
        self.gmm.dim()
    }

    fn output_dim(&self) -> usize {
        let (k, d) = (self.gmm.n_components(), self.gmm.dim());
        usize::from(self.has_prior) * k
            + usize::from(self.has_mean) * k * d
            + usize::from(self.has_var) * k * d
    }

    fn encode_unchecked(&self, bag: ArrayView2<'_, F>, out: ArrayViewMut1<'_, F>) {
        self.encode_with(bag, out, &mut Workspace::default());
    }

    /// As the provided method, but each rayon job reuses one workspace.
    fn encode_batch(&self, bags: &[ArrayView2<'_, F>]) -> Result<Array2<F>, EncodeError> {
        for (index, bag) in bags.iter().enumerate() {
            crate::data::check_matrix(*bag, Some(self.input_dim()), "bag")
                .map_err(|source| EncodeError::Bag { index, source })?;
        }
        let mut out = Array2::zeros((bags.len(), self.output_dim()));
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(bags.par_iter())
            .for_each_init(Workspace::default, |ws, (row, bag)| {
                self.encode_with(*bag, row, ws)
            });
        crate::encode::check_output(out.view())?;
        Ok(out)
    }
}

impl<F: Float> FisherVector<F> {
    fn encode_with(
        &self,
        bag: ArrayView2<'_, F>,
        mut out: ArrayViewMut1<'_, F>,
        ws: &mut Workspace<F>,
    ) {
        let x = bag.as_standard_layout();
        match out.as_slice_mut() {
            Some(o) => self.encode_raw(x.view(), o, ws),
            None => {
                let mut tmp = vec![F::zero(); out.len()];
                self.encode_raw(x.view(), &mut tmp, ws);
                out.iter_mut().zip(tmp).for_each(|(o, t)| *o = t);
            }
        }
        self.params.normalization.apply(out.view_mut());
    }
}
