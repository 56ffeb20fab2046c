//! The Fisher vector of a diagonal GMM (docs/math.md §3), VLFeat's
//! `vl_fisher_encode` layout, with scikit-image's optional prior block.

use super::posterior::{posteriors_in_place, Assign, SparsePosteriors};
use super::{EncodeError, Encoder};
use crate::float::Float;
use crate::gmm::DiagGmm;
use crate::kernels::diag_gauss::{log_joint_gemm, mixture_mean};
use crate::kernels::reduce::add_column_sums;
use crate::kernels::screen::{refined_pairs, ScreenScratch, SparseRows, REFINE_MIN};
use crate::kernels::softmax::flush_cutoff;
use crate::linalg::{gemm, Par};
use crate::normalize::Normalization;
use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;
use std::fmt;

/// VLFeat's thresholds: components with $w_k < 10^{-6}$ and posteriors
/// $q_{ik} < 10^{-6}$ are skipped when [`FisherVectorParams::vlfeat_skips`] is set.
pub const VLFEAT_SKIP: f64 = 1e-6;

/// A chunk whose non-zero posteriors exceed `n·K / DENSE_FRACTION` is
/// accumulated with two GEMMs instead of the sparse loop (the GEMM runs about
/// this many times faster per multiply-add than the scattered row updates).
const DENSE_FRACTION: usize = 12;

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
const REFINED_DENSE_FRACTION: usize = 20;

/// One block of the Fisher vector. Blocks are always laid out in the order
/// prior, mean, var, whatever the order they are requested in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FvPart {
    /// $d_{\pi,k} = (\frac1N\sum_i q_{ik} - w_k)/\sqrt{w_k}$, length K.
    Prior,
    /// $u_{kd}$, length K·D (component-major).
    Mean,
    /// $v_{kd}$, length K·D (component-major).
    Var,
}

impl FvPart {
    /// All parts, in layout order.
    pub const ALL: [FvPart; 3] = [FvPart::Prior, FvPart::Mean, FvPart::Var];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            FvPart::Prior => "prior",
            FvPart::Mean => "mean",
            FvPart::Var => "var",
        }
    }
}

impl fmt::Display for FvPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a comma-separated list of parts (`"prior,mean,var"`, case- and
/// space-insensitive). Unknown, empty or repeated parts are errors.
pub fn parse_fv_parts(s: &str) -> Result<Vec<FvPart>, EncodeError> {
    let mut parts = Vec::new();
    for tok in s.split(',') {
        let t = tok.trim().to_ascii_lowercase();
        let part = FvPart::ALL
            .iter()
            .copied()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                EncodeError::InvalidOption(format!(
                    "unknown Fisher vector part `{}`; valid parts are prior, mean, var",
                    tok.trim()
                ))
            })?;
        parts.push(part);
    }
    check_parts(&parts)?;
    Ok(parts)
}

fn check_parts(parts: &[FvPart]) -> Result<(), EncodeError> {
    if parts.is_empty() {
        return Err(EncodeError::InvalidOption(
            "no Fisher vector part selected; choose among prior, mean, var".into(),
        ));
    }
    for (i, p) in parts.iter().enumerate() {
        if parts[..i].contains(p) {
            return Err(EncodeError::InvalidOption(format!(
                "Fisher vector part `{p}` is given twice"
            )));
        }
    }
    Ok(())
}

/// Options of [`FisherVector`].
#[derive(Debug, Clone, PartialEq)]
pub struct FisherVectorParams {
    /// Blocks to output (non-empty, no duplicates); default `[Mean, Var]`.
    pub parts: Vec<FvPart>,
    /// Post-processing; default signed square root then L2 (the improved FV).
    pub normalization: Normalization,
    /// Hard assignment: $q_{ik} = 1$ for the arg-max component (VLFeat's `FAST`).
    pub fast: bool,
    /// VLFeat 0.9.21's skips: components with $w_k < 10^{-6}$ leave the
    /// mixture (log-weight $-\infty$: zero blocks, excluded from the other
    /// posteriors' normalisation) and posteriors $q_{ik} < 10^{-6}$ are dropped
    /// without renormalising. Default `false`: exact posteriors, as scikit-image.
    pub vlfeat_skips: bool,
}

impl Default for FisherVectorParams {
    fn default() -> Self {
        Self {
            parts: vec![FvPart::Mean, FvPart::Var],
            normalization: Normalization::default(),
            fast: false,
            vlfeat_skips: false,
        }
    }
}

impl FisherVectorParams {
    /// Checks every setting that does not depend on the model (parts
    /// non-empty and distinct, power finite and > 0) and returns the checked
    /// parameters, which [`FisherVector`] is built from.
    ///
    /// ```
    /// use fisherkit::encode::{FisherVectorParams, FvPart};
    /// assert!(FisherVectorParams::default().check().is_ok());
    /// let twice = FisherVectorParams { parts: vec![FvPart::Mean, FvPart::Mean], ..Default::default() };
    /// assert!(twice.check().unwrap_err().to_string().contains("twice"));
    /// ```
    pub fn check(&self) -> Result<ValidFisherVectorParams, EncodeError> {
        check_parts(&self.parts)?;
        self.normalization
            .validate()
            .map_err(EncodeError::InvalidOption)?;
        Ok(ValidFisherVectorParams(self.clone()))
    }
}

/// [`FisherVectorParams`] that passed [`FisherVectorParams::check`]; only
/// `check` makes one (params → checked params → encoder). Reads as the
/// parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidFisherVectorParams(FisherVectorParams);

impl std::ops::Deref for ValidFisherVectorParams {
    type Target = FisherVectorParams;
    fn deref(&self) -> &FisherVectorParams {
        &self.0
    }
}

impl ValidFisherVectorParams {
    /// The encoder of `gmm` (cloned) with these settings; see
    /// [`FisherVector::new`].
    pub fn build<F: Float>(self, gmm: &DiagGmm<F>) -> Result<FisherVector<F>, EncodeError> {
        FisherVector::from_checked(gmm, self)
    }
}

/// Fisher vector encoder of a diagonal GMM with K components in D dimensions.
///
/// For a bag $x_1 \dots x_N$ (N, D), with posteriors $q_{ik}$ (computed in log
/// space) and $z_{ikd} = (x_{id} - \mu_{kd})/\sigma_{kd}$:
/// $$u_{kd} = \frac{1}{N\sqrt{w_k}} \sum_i q_{ik} z_{ikd}, \qquad
///   v_{kd} = \frac{1}{N\sqrt{2 w_k}} \sum_i q_{ik} (z_{ikd}^2 - 1),$$
/// $$d_{\pi,k} = \frac{\frac1N \sum_i q_{ik} - w_k}{\sqrt{w_k}}.$$
/// Output: the selected blocks in the order $[d_\pi]$ (K), $[u_1 \dots u_K]$
/// (K·D), $[v_1 \dots v_K]$ (K·D), then [`Normalization::apply`]. With power 1
/// and no L2 the mean and var blocks equal VLFeat's un-normalised
/// `vl_fisher_encode`; scikit-image's variance block is $-v$.
///
/// These are the gradients of $\frac1N\sum_i \log p(x_i)$ scaled by the
/// diagonal Fisher information: $u_{kd} = \frac{\sigma_{kd}}{\sqrt{w_k}}
/// \partial_{\mu_{kd}}$, $v_{kd} = \frac{2\sigma^2_{kd}}{\sqrt{2 w_k}}
/// \partial_{\sigma^2_{kd}}$.
#[derive(Debug, Clone)]
pub struct FisherVector<F: Float> {
    gmm: DiagGmm<F>,
    params: FisherVectorParams,
    /// $1/\sigma_{kd}$, (K, D).
    inv_sigma: Array2<F>,
    /// Components used (false: skipped, prior < 1e-6 with `vlfeat_skips`).
    active: Vec<bool>,
    /// Reference point $c$ of the log-joint GEMM and of the dense
    /// accumulation (the mixture mean), (D).
    center: Array1<F>,
    /// (2D, K): rows 0..D hold $-1/(2\sigma^2_{kd})$, rows D..2D hold
    /// $(\mu_{kd} - c_d)/\sigma^2_{kd}$, so that $[y^2, y]$ times it plus
    /// `bias` is $\log w_k \mathcal N(x; \mu_k, \sigma^2_k)$ up to a constant.
    kernel: Array2<F>,
    /// (K): $\log w_k - \frac12 \sum_d (\log\sigma^2_{kd} + (\mu_{kd}-c_d)^2/\sigma^2_{kd})$;
    /// $-\infty$ for skipped components (VLFeat's log-weight of a tiny prior).
    bias: Vec<F>,
    has_prior: bool,
    has_mean: bool,
    has_var: bool,
    path: Accumulation,
    /// Whether chunks go through the screened kernel first (docs/math.md §2.7).
    screening: bool,
}

/// How the sums $\sum_i q_{ik} z_{ikd}$, $\sum_i q_{ik} z^2_{ikd}$ are accumulated
/// (a performance knob; every path computes the same vector up to rounding).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulation {
    /// Per chunk of rows: sparse when few posteriors are non-zero, else GEMM.
    Auto,
    /// Always the loop over non-zero $(i, k)$ pairs.
    Sparse,
    /// Always the GEMMs $Q^\top [y^2, y]$.
    Dense,
}

impl<F: Float> FisherVector<F> {
    /// Builds the encoder: [`FisherVectorParams::check`], then
    /// [`ValidFisherVectorParams::build`]. The GMM is cloned.
    ///
    /// # Errors
    /// [`EncodeError::InvalidOption`] for an invalid setting, or for a model
    /// whose means or variances are so extreme that its log-density
    /// overflows `F`.
    pub fn new(gmm: &DiagGmm<F>, params: FisherVectorParams) -> Result<Self, EncodeError> {
        params.check()?.build(gmm)
    }

    fn from_checked(
        gmm: &DiagGmm<F>,
        params: ValidFisherVectorParams,
    ) -> Result<Self, EncodeError> {
        let params = params.0;
        let inv_sigma = gmm.variances().mapv(|v| F::one() / v.sqrt());
        let active: Vec<bool> = gmm
            .weights()
            .iter()
            .map(|w| !(params.vlfeat_skips && w.as_f64() < VLFEAT_SKIP))
            .collect();
        let k = gmm.n_components();
        let center = mixture_mean(gmm.weights(), gmm.means());
        // The constant D/2·log 2π is left out: it cancels in the posteriors.
        let center64 = center.as_slice().expect("standard layout");
        let joint = log_joint_gemm(gmm.weights(), gmm.means(), gmm.variances(), center64, false);
        let kernel = joint.weights;
        let bias: Vec<F> = (0..k)
            .map(|kk| match active[kk] {
                true => F::from_f64_lossy(joint.bias[kk]),
                false => F::neg_infinity(),
            })
            .collect();
        // Means or variances so extreme that the log-joint's coefficients
        // overflow F would give NaN posteriors: refuse the model up front.
        if let Some(kk) = (0..k).find(|&kk| {
            let bad_bias = bias[kk].is_nan() || bias[kk] == F::infinity();
            bad_bias || kernel.column(kk).iter().any(|v| !v.is_finite())
        }) {
            return Err(EncodeError::InvalidOption(format!(
                "component {kk} of the model has means or variances too extreme for {} (its log-density overflows); rescale the data or use float64",
                F::NAME
            )));
        }
        let has = |p| params.parts.contains(&p);
        Ok(Self {
            gmm: gmm.clone(),
            inv_sigma,
            active,
            center: center.mapv(F::from_f64_lossy),
            kernel,
            bias,
            has_prior: has(FvPart::Prior),
            has_mean: has(FvPart::Mean),
            has_var: has(FvPart::Var),
            params,
            path: Accumulation::Auto,
            screening: true,
        })
    }

    /// Forces an accumulation path (for tests and benchmarks).
    /// `Accumulation::Dense` also turns the screening off (the screened
    /// kernel always accumulates pair by pair).
    #[doc(hidden)]
    pub fn with_accumulation(mut self, path: Accumulation) -> Self {
        self.path = path;
        if path == Accumulation::Dense {
            self.screening = false;
        }
        self
    }

    /// Turns the screened kernel (docs/math.md §2.7) on (the default) or off
    /// (every chunk through the GEMM kernel; for tests and benchmarks).
    #[doc(hidden)]
    pub fn with_screening(mut self, on: bool) -> Self {
        self.screening = on;
        self
    }

    /// The mixture the encoder was built from.
    pub fn gmm(&self) -> &DiagGmm<F> {
        &self.gmm
    }

    /// The encoder's options.
    pub fn params(&self) -> &FisherVectorParams {
        &self.params
    }

    fn assign(&self) -> Assign {
        if self.params.fast {
            Assign::Hard
        } else if self.params.vlfeat_skips {
            Assign::SoftSkip(VLFEAT_SKIP)
        } else {
            Assign::Soft
        }
    }
}

/// Rows per chunk of the log-joint GEMM: memory O(rows·(K + 2D)).
const FV_CHUNK: usize = 256;

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
        super::check_output(out.view())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataError;
    use ndarray::{array, Array1, Array2};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// log w_k N(x; mu_k, var_k) straight from the formula, f64.
    fn log_joint(w: &[f64], mu: &Array2<f64>, var: &Array2<f64>, x: &[f64]) -> Vec<f64> {
        (0..w.len())
            .map(|k| {
                let mut acc = 0.0;
                for (d, &xd) in x.iter().enumerate() {
                    let v = var[[k, d]];
                    let z = xd - mu[[k, d]];
                    acc += (2.0 * std::f64::consts::PI * v).ln() + z * z / v;
                }
                w[k].ln() - 0.5 * acc
            })
            .collect()
    }

    fn lse(v: &[f64]) -> f64 {
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
    }

    /// Mean log-likelihood of the bag.
    fn mean_ll(w: &[f64], mu: &Array2<f64>, var: &Array2<f64>, x: &Array2<f64>) -> f64 {
        x.outer_iter()
            .map(|r| lse(&log_joint(w, mu, var, r.as_slice().unwrap())))
            .sum::<f64>()
            / x.nrows() as f64
    }

    /// [prior, mean, var] straight from docs/math.md §3.2 with naive loops.
    fn naive_fv(g: &DiagGmm<f64>, x: &Array2<f64>, hard: bool) -> Vec<f64> {
        let (k, d) = (g.n_components(), g.dim());
        let w = g.weights().to_vec();
        let mu = g.means().to_owned();
        let var = g.variances().to_owned();
        let n = x.nrows() as f64;
        let mut prior = vec![0.0; k];
        let mut u = vec![0.0; k * d];
        let mut v = vec![0.0; k * d];
        for r in x.outer_iter() {
            let lj = log_joint(&w, &mu, &var, r.as_slice().unwrap());
            let l = lse(&lj);
            let arg = (0..k).fold(0, |a, j| if lj[j] > lj[a] { j } else { a });
            for kk in 0..k {
                let q = if hard {
                    f64::from(u8::from(kk == arg))
                } else {
                    (lj[kk] - l).exp()
                };
                prior[kk] += q;
                for dd in 0..d {
                    let z = (r[dd] - mu[[kk, dd]]) / var[[kk, dd]].sqrt();
                    u[kk * d + dd] += q * z;
                    v[kk * d + dd] += q * (z * z - 1.0);
                }
            }
        }
        for kk in 0..k {
            prior[kk] = (prior[kk] / n - w[kk]) / w[kk].sqrt();
            for dd in 0..d {
                u[kk * d + dd] /= n * w[kk].sqrt();
                v[kk * d + dd] /= n * (2.0 * w[kk]).sqrt();
            }
        }
        [prior, u, v].concat()
    }

    fn random_gmm(rng: &mut ChaCha8Rng, k: usize, d: usize, spread: f64) -> DiagGmm<f64> {
        let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
        let s: f64 = w.iter().sum();
        w.iter_mut().for_each(|v| *v /= s);
        let mu = Array2::from_shape_fn((k, d), |_| rng.random_range(-spread..spread));
        let var = Array2::from_shape_fn((k, d), |_| rng.random_range(0.3..2.0));
        DiagGmm::new(Array1::from(w), mu, var).unwrap()
    }

    fn random_bag(rng: &mut ChaCha8Rng, n: usize, d: usize, spread: f64) -> Array2<f64> {
        Array2::from_shape_fn((n, d), |_| rng.random_range(-spread..spread))
    }

    fn raw_params(parts: Vec<FvPart>, fast: bool) -> FisherVectorParams {
        FisherVectorParams {
            parts,
            normalization: Normalization::NONE,
            fast,
            vlfeat_skips: false,
        }
    }

    fn assert_close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        let scale = b.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * scale,
                "entry {i}: {x} vs {y} (scale {scale})"
            );
        }
    }

    #[test]
    fn hand_sized_case_matches_formula_on_every_path() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Overlapping components (dense posteriors) and separated ones (sparse);
        // more rows than CHUNK_ROWS so several chunks are summed.
        for (spread, n) in [(0.5, 7), (6.0, 300), (2.0, 600)] {
            let g = random_gmm(&mut rng, 4, 3, spread);
            let x = random_bag(&mut rng, n, 3, spread + 1.0);
            for fast in [false, true] {
                let want = naive_fv(&g, &x, fast);
                for path in [
                    Accumulation::Auto,
                    Accumulation::Sparse,
                    Accumulation::Dense,
                ] {
                    let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), fast))
                        .unwrap()
                        .with_accumulation(path);
                    let got = fv.encode(x.view()).unwrap();
                    assert_eq!(got.len(), fv.output_dim());
                    assert_close(got.as_slice().unwrap(), &want, 1e-10);
                }
            }
        }
    }

    #[test]
    fn dense_and_sparse_chunks_of_one_bag_add_up() {
        // K = 24: components 0..4 share the mean 0 (rows there have 4 non-zero
        // posteriors: a dense chunk), the others sit 60 apart (one non-zero
        // posterior per row, exp of the rest underflows: sparse chunks).
        // 600 rows = 3 chunks of 200. The dense chunk expands around the
        // mixture mean, |x − c| ≈ 700 σ: rounding ≈ 1e-16·700², hence 1e-8.
        let (k, d) = (24, 2);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mu = Array2::from_shape_fn(
            (k, d),
            |(kk, j)| if kk < 4 { 0.0 } else { 60.0 * (kk + j) as f64 },
        );
        let var = Array2::from_shape_fn((k, d), |(kk, _)| 1.0 + 0.2 * (kk % 4) as f64);
        let g = DiagGmm::new(Array1::from_elem(k, 1.0 / k as f64), mu.clone(), var).unwrap();
        let x = Array2::from_shape_fn((600, d), |(i, j)| {
            let c = if i < 200 { 0 } else { 4 + i % 20 };
            mu[[c, j]] + rng.random_range(-1.0..1.0)
        });
        let want = naive_fv(&g, &x, false);
        let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
        let got = fv.encode(x.view()).unwrap();
        assert_close(got.as_slice().unwrap(), &want, 1e-8);
    }

    #[test]
    fn parts_select_blocks_in_layout_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let g = random_gmm(&mut rng, 3, 2, 1.0);
        let x = random_bag(&mut rng, 20, 2, 2.0);
        let full = naive_fv(&g, &x, false);
        let (k, kd) = (3, 6);
        for (parts, want) in [
            (vec![FvPart::Var, FvPart::Mean], full[k..].to_vec()),
            (vec![FvPart::Mean], full[k..k + kd].to_vec()),
            (vec![FvPart::Var], full[k + kd..].to_vec()),
            (vec![FvPart::Prior], full[..k].to_vec()),
            (
                vec![FvPart::Var, FvPart::Prior],
                [&full[..k], &full[k + kd..]].concat(),
            ),
        ] {
            let fv = FisherVector::new(&g, raw_params(parts, false)).unwrap();
            let got = fv.encode(x.view()).unwrap();
            assert_close(got.as_slice().unwrap(), &want, 1e-10);
        }
    }

    #[test]
    fn blocks_are_scaled_gradients_of_mean_log_likelihood() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (k, d) = (3, 4);
        let g = random_gmm(&mut rng, k, d, 1.5);
        let x = random_bag(&mut rng, 40, d, 2.5);
        let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
        let got = fv.encode(x.view()).unwrap();
        let w = g.weights().to_vec();
        let mu = g.means().to_owned();
        let var = g.variances().to_owned();
        let h = 1e-5;
        let mut fd = Vec::new();
        // prior: softmax parametrisation w = softmax(alpha), alpha = ln w.
        for kk in 0..k {
            let f = |e: f64| {
                let a: Vec<f64> = (0..k)
                    .map(|j| w[j].ln() + if j == kk { e } else { 0.0 })
                    .collect();
                let z = lse(&a);
                let ww: Vec<f64> = a.iter().map(|v| (v - z).exp()).collect();
                mean_ll(&ww, &mu, &var, &x)
            };
            fd.push((f(h) - f(-h)) / (2.0 * h) / w[kk].sqrt());
        }
        for kk in 0..k {
            for dd in 0..d {
                let mut p = mu.clone();
                p[[kk, dd]] += h;
                let mut m = mu.clone();
                m[[kk, dd]] -= h;
                let grad = (mean_ll(&w, &p, &var, &x) - mean_ll(&w, &m, &var, &x)) / (2.0 * h);
                fd.push(var[[kk, dd]].sqrt() / w[kk].sqrt() * grad);
            }
        }
        for kk in 0..k {
            for dd in 0..d {
                let mut p = var.clone();
                p[[kk, dd]] += h;
                let mut m = var.clone();
                m[[kk, dd]] -= h;
                let grad = (mean_ll(&w, &mu, &p, &x) - mean_ll(&w, &mu, &m, &x)) / (2.0 * h);
                fd.push(2.0 * var[[kk, dd]] / (2.0 * w[kk]).sqrt() * grad);
            }
        }
        for (i, (a, b)) in got.iter().zip(&fd).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1e-3),
                "entry {i}: encoder {a} vs finite difference {b}"
            );
        }
    }

    #[test]
    fn f32_matches_f64() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let g = random_gmm(&mut rng, 5, 6, 2.0);
        let x = random_bag(&mut rng, 50, 6, 3.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        for path in [Accumulation::Sparse, Accumulation::Dense] {
            let p = FisherVectorParams::default();
            let a = FisherVector::new(&g, p.clone())
                .unwrap()
                .encode(x.view())
                .unwrap();
            let b = FisherVector::new(&g32, p)
                .unwrap()
                .with_accumulation(path)
                .encode(x32.view())
                .unwrap();
            let b: Vec<f64> = b.iter().map(|&v| v as f64).collect();
            assert_close(&b, a.as_slice().unwrap(), 1e-4);
        }
    }

    /// A mixture of K components in D dims around `offset` whose means are
    /// `spread` apart along dimensions of decaying scale (as PCA'd
    /// descriptors), and n rows drawn from it (a fifth of them half-way
    /// between two components, where two posteriors are alive).
    pub(crate) fn planted_mixture(
        seed: u64,
        k: usize,
        d: usize,
        n: usize,
        spread: f64,
        offset: f64,
    ) -> (DiagGmm<f64>, Array2<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
        let s: f64 = w.iter().sum();
        w.iter_mut().for_each(|v| *v /= s);
        let scale: Vec<f64> = (0..d).map(|j| (-(j as f64) / 8.0).exp() + 0.1).collect();
        let mu = Array2::from_shape_fn((k, d), |(_, j)| {
            offset + spread * scale[j] * rng.random_range(-1.0..1.0)
        });
        let var = Array2::from_shape_fn((k, d), |(_, j)| {
            scale[j] * scale[j] * rng.random_range(0.1..0.4)
        });
        let x = Array2::from_shape_fn((n, d), |(i, j)| {
            let (a, b) = (i % k, (i * 7 + 3) % k);
            let t = if i % 5 == 0 { 0.5 } else { 0.0 };
            let m = (1.0 - t) * mu[[a, j]] + t * mu[[b, j]];
            m + var[[a, j]].sqrt() * rng.random_range(-1.5..1.5)
        });
        (DiagGmm::new(Array1::from(w), mu, var).unwrap(), x)
    }

    /// Relative L2 distance |a − b| / |b|.
    fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        (num / den).sqrt()
    }

    /// Whether every chunk of `x` goes through the screened kernel.
    fn all_chunks_screened<F: Float>(g: &DiagGmm<F>, x: ArrayView2<'_, F>) -> bool {
        let mut ws = crate::kernels::screen::ScreenScratch::default();
        let mut rows = SparseRows::default();
        x.axis_chunks_iter(Axis(0), FV_CHUNK)
            .all(|xc| g.screen().survivors(xc, None, &mut ws, &mut rows))
    }

    #[test]
    fn screened_equals_unscreened_on_sparse_and_dense_posteriors() {
        // sparse: separated components (a row has 1-2 live posteriors);
        // dense: overlapping ones, where the screening falls back to the GEMM.
        for (spread, sparse) in [(12.0, true), (0.3, false)] {
            let (g, x) = planted_mixture(11, 48, 40, 700, spread, 3.0);
            assert_eq!(all_chunks_screened(&g, x.view()), sparse, "spread {spread}");
            for fast in [false, true] {
                for skips in [false, true] {
                    let mut p = raw_params(FvPart::ALL.to_vec(), fast);
                    p.vlfeat_skips = skips;
                    let fv = FisherVector::new(&g, p).unwrap();
                    let on = fv.clone().encode(x.view()).unwrap();
                    let off = fv.with_screening(false).encode(x.view()).unwrap();
                    assert_close(on.as_slice().unwrap(), off.as_slice().unwrap(), 1e-12);
                }
            }
            let want = naive_fv(&g, &x, false);
            let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
            assert_close(
                fv.encode(x.view()).unwrap().as_slice().unwrap(),
                &want,
                1e-12,
            );
        }
    }

    #[test]
    fn f32_is_within_1e_6_of_f64_far_from_the_origin() {
        // Means ~1000 away from the origin, in units of σ ≈ 0.3-0.6: the
        // expanded form of the log-joint in f32 loses ~1e-7·|y|²/σ² nats.
        let (g, x) = planted_mixture(12, 24, 64, 1000, 10.0, 1000.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        // the f64 reference encodes the same (f32-rounded) model and data
        let g64: DiagGmm<f64> = g32.cast();
        let x64 = x32.mapv(|v| v as f64);
        assert!(all_chunks_screened(&g32, x32.view()));
        for params in [
            FisherVectorParams::default(),
            raw_params(FvPart::ALL.to_vec(), false),
        ] {
            let want = FisherVector::new(&g64, params.clone())
                .unwrap()
                .encode(x64.view())
                .unwrap();
            let fv32 = FisherVector::new(&g32, params).unwrap();
            let got: Vec<f64> = fv32
                .encode(x32.view())
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect();
            let err = rel_l2(&got, want.as_slice().unwrap());
            assert!(err <= 1e-6, "screened f32 vs f64: {err:e}");
        }
    }

    #[test]
    fn gemm_path_f32_is_within_1e_6_of_f64_far_from_the_origin() {
        // As above, but every chunk through the GEMM (no screening), as on real descriptors
        // where the bound prunes nothing: the sparse posteriors are refined (docs/math.md §2.8).
        // Without the refinement this case measured 2.3e-3.
        for (seed, sep) in [(21, 10.0), (22, 3.0)] {
            let (g, x) = planted_mixture(seed, 24, 64, 1000, sep, 1000.0);
            let g32: DiagGmm<f32> = g.cast();
            let x32 = x.mapv(|v| v as f32);
            let g64: DiagGmm<f64> = g32.cast();
            let x64 = x32.mapv(|v| v as f64);
            for params in [
                FisherVectorParams::default(),
                raw_params(FvPart::ALL.to_vec(), false),
            ] {
                let want = FisherVector::new(&g64, params.clone())
                    .unwrap()
                    .encode(x64.view())
                    .unwrap();
                let fv32 = FisherVector::new(&g32, params)
                    .unwrap()
                    .with_screening(false);
                let got: Vec<f64> = fv32
                    .encode(x32.view())
                    .unwrap()
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let err = rel_l2(&got, want.as_slice().unwrap());
                assert!(
                    err <= 1e-6,
                    "GEMM-path f32 vs f64 (separation {sep}): {err:e}"
                );
            }
        }
    }

    #[test]
    fn f32_rows_with_a_few_live_posteriors_are_refined() {
        // Real descriptors' regime (docs/math.md §2.8): per row about two
        // posteriors >= 1e-10 but five or more above f32's flush. Counting
        // every unflushed posterior sent such chunks through the dense GEMM
        // (5.8e-6 from f64 on the bench's real descriptors); the choice now
        // counts the pairs the refined loop keeps.
        let (k, n) = (48, 1000);
        let (g, x) = planted_mixture(31, k, 64, n, 0.9, 1000.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        let g64: DiagGmm<f64> = g32.cast();
        let x64 = x32.mapv(|v| v as f64);
        let q = g64.predict_proba(x64.view()).unwrap();
        let unflushed = q.iter().filter(|&&v| v >= 1e-19).count();
        let kept = q.iter().filter(|&&v| v >= REFINE_MIN).count();
        assert!(unflushed * DENSE_FRACTION > n * k, "{unflushed}");
        assert!(kept * REFINED_DENSE_FRACTION <= n * k, "{kept}");
        for screening in [true, false] {
            for params in [
                FisherVectorParams::default(),
                raw_params(FvPart::ALL.to_vec(), false),
            ] {
                let want = FisherVector::new(&g64, params.clone())
                    .unwrap()
                    .encode(x64.view())
                    .unwrap();
                let got: Vec<f64> = FisherVector::new(&g32, params)
                    .unwrap()
                    .with_screening(screening)
                    .encode(x32.view())
                    .unwrap()
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let err = rel_l2(&got, want.as_slice().unwrap());
                assert!(err <= 1e-6, "screening {screening}: f32 vs f64 {err:e}");
            }
        }
    }

    #[test]
    fn screened_encodings_do_not_depend_on_threads_or_batching() {
        let (g, x) = planted_mixture(13, 32, 30, 900, 8.0, -50.0);
        let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
        let bags: Vec<_> = (0..5)
            .map(|b| x.slice(s![b * 150..b * 150 + 300, ..]))
            .collect();
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| fv.encode_batch(&bags).unwrap())
        };
        let one = run(1);
        assert_eq!(one, run(3));
        for (b, bag) in bags.iter().enumerate() {
            assert_eq!(fv.encode(*bag).unwrap(), one.row(b));
        }
    }

    #[test]
    fn bad_options_and_bags_are_errors() {
        let g = DiagGmm::new(array![1.0], array![[0.0, 0.0]], array![[1.0, 1.0]]).unwrap();
        let msg = |p: FisherVectorParams| FisherVector::new(&g, p).unwrap_err().to_string();
        assert!(msg(raw_params(vec![], false)).contains("no Fisher vector part"));
        assert!(msg(raw_params(vec![FvPart::Mean, FvPart::Mean], false))
            .contains("`mean` is given twice"));
        let mut p = FisherVectorParams::default();
        p.normalization.power = 0.0;
        assert!(msg(p).contains("power"));

        let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
        let e = fv.encode(Array2::<f64>::zeros((0, 2)).view()).unwrap_err();
        assert!(matches!(
            e,
            EncodeError::Bag {
                index: 0,
                source: DataError::Empty { .. }
            }
        ));
        let e = fv.encode(array![[1.0, 2.0, 3.0]].view()).unwrap_err();
        assert!(e.to_string().contains("3 columns"), "{e}");
        let e = fv
            .encode(array![[1.0, 2.0], [0.0, f64::NAN]].view())
            .unwrap_err();
        assert!(e.to_string().contains("row 1"), "{e}");
        let bags = [array![[1.0, 2.0]], array![[1.0]]];
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        let e = fv.encode_batch(&views).unwrap_err();
        assert!(matches!(e, EncodeError::Bag { index: 1, .. }), "{e}");
    }

    #[test]
    fn overflowing_models_and_bags_are_errors_not_nan() {
        // |μ|/σ² = 1e50 does not fit in f32: refused when the encoder is built
        let g = DiagGmm::<f32>::new(
            array![0.5, 0.5],
            array![[1e30, 0.0], [0.0, 1.0]],
            array![[1e-20, 1.0], [1.0, 1.0]],
        )
        .unwrap();
        let err = FisherVector::new(&g, FisherVectorParams::default()).unwrap_err();
        assert!(err.to_string().contains("component 0"), "{err}");
        assert!(err.to_string().contains("f32"), "{err}");
        // a finite bag whose squares overflow f32: an error naming the bag
        let g = DiagGmm::<f32>::new(
            array![0.5, 0.5],
            array![[0.0, 0.0], [1.0, 1.0]],
            array![[1e-6, 1.0], [1.0, 1.0]],
        )
        .unwrap();
        let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
        let ok = array![[0.5f32, 0.5], [0.1, 0.2]];
        let huge = array![[1e30f32, 0.0], [0.1, 0.2]];
        assert!(fv.encode(ok.view()).unwrap().iter().all(|v| v.is_finite()));
        let err = fv.encode_batch(&[ok.view(), huge.view()]).unwrap_err();
        assert!(
            matches!(
                err,
                EncodeError::NonFiniteOutput {
                    index: 1,
                    dtype: "f32"
                }
            ),
            "{err}"
        );
        assert!(matches!(
            fv.encode(huge.view()).unwrap_err(),
            EncodeError::NonFiniteOutput { index: 0, .. }
        ));
    }

    #[test]
    fn parse_parts() {
        assert_eq!(
            parse_fv_parts("prior, Mean,var").unwrap(),
            vec![FvPart::Prior, FvPart::Mean, FvPart::Var]
        );
        let e = parse_fv_parts("mean,sigma").unwrap_err().to_string();
        assert!(
            e.contains("`sigma`") && e.contains("prior, mean, var"),
            "{e}"
        );
        assert!(parse_fv_parts("var,var")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(parse_fv_parts("").is_err());
    }

    #[test]
    fn vlfeat_skips_drop_small_priors_and_posteriors() {
        // Component 1 has a prior below 1e-6: with skips it leaves the mixture
        // (VLFeat's log-weight −∞), so component 0 takes every posterior 1.
        let w0: f64 = 1.0 - 5e-7;
        let g = DiagGmm::new(array![w0, 5e-7], array![[0.0], [0.5]], array![[1.0], [1.0]]).unwrap();
        let x = array![[0.3], [0.6], [-1.0]];
        let mut p = raw_params(vec![FvPart::Mean, FvPart::Var], false);
        p.vlfeat_skips = true;
        let got = FisherVector::new(&g, p.clone())
            .unwrap()
            .encode(x.view())
            .unwrap();
        let (u0, v0) = x
            .iter()
            .fold((0.0, 0.0), |(u, v), &z| (u + z, v + z * z - 1.0));
        let want = [
            u0 / (3.0 * w0.sqrt()),
            0.0,
            v0 / (3.0 * (2.0 * w0).sqrt()),
            0.0,
        ];
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-12, "{got} vs {want:?}");
        }
        // Posterior skip: at x = 0 component 1 (mean 6) has q ≈ 1.5e-8 < 1e-6,
        // dropped without renormalising; at x = 3 both have q = 1/2.
        let g = DiagGmm::new(array![0.5, 0.5], array![[0.0], [6.0]], array![[1.0], [1.0]]).unwrap();
        let x = array![[0.0], [3.0]];
        let got = FisherVector::new(&g, p).unwrap().encode(x.view()).unwrap();
        let q10 = 1.0 / (1.0 + 18f64.exp());
        assert!(q10 < 1e-6 && q10 > 1e-9);
        let s = 1.0 / (2.0 * 0.5f64.sqrt());
        let t = 1.0 / (2.0 * 1f64.sqrt());
        let want = [
            0.5 * 3.0 * s,
            0.5 * -3.0 * s,
            (-(1.0 - q10) + 0.5 * 8.0) * t,
            0.5 * 8.0 * t,
        ];
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-12, "{got} vs {want:?}");
        }
    }
}
