//! The one-vs-rest linear SVM of [`crate::svm`] trained out of core, by
//! block minimisation (Yu, Hsieh, Chang & Lin, *Large linear classification
//! when data cannot fit in memory*, KDD 2010).
//!
//! The training rows are read from a [`RowSource`] (a file, a store of
//! encodings, an array) in blocks of at most [`OutOfCoreSvmParams::block_bytes`]
//! bytes. Only the primal weights $W$ (K, D) `f32`, the intercepts, the dual
//! variables $\alpha$ (K, N) and one block are held, so memory does not grow
//! with $N^2$ (nor with $N \cdot D$). One outer pass visits every block once:
//!
//! 1. read the block $X_B$ (B, D);
//! 2. $u = X_B W^\top + b$ (B, K), one GEMM: every class's decision values on the block;
//! 3. per class (in parallel), dual coordinate descent on the block's
//!    sub-problem with the other blocks' $\alpha$ fixed — the same steps as
//!    the in-memory solver's, kept in decision-value form with the block's
//!    Gram matrix $\bar G_B = X_B X_B^\top + [\text{bias}]$ (B, B; computed
//!    once per block and cached when all of them fit in
//!    [`GRAM_CACHE_BYTES`]), a step costing O(B);
//! 4. $W \leftarrow W + \Delta A\, X_B$ and $b \leftarrow b + \Delta A\,\mathbf 1$,
//!    one GEMM over the classes and rows whose $\alpha$ moved
//!    ($\Delta A_{kt} = \Delta\alpha_{kt} y_{kt}$).
//!
//! The K binary problems are independent: a class stops when the spread of
//! its projected gradients over one outer pass (each taken when its row is
//! visited, as LIBLINEAR's per-pass rule) is at most `tol`, and is left out of
//! the GEMMs after that. Per outer pass the cost is $2 K N D$ multiply-adds of
//! GEMM plus reading the rows once.
//!
//! Cross-validation ([`ValidOutOfCoreSvmParams::fit_with_cv`]) walks the C
//! grid in ascending order on each fold, starting every C from the previous
//! one's $\alpha$ and $W$ (a feasible point of the next problem: $W$ depends
//! on $\alpha$ only, and $\alpha \le C_{\text{old}} < C$ for the hinge), and
//! scores the held-out rows by streaming them once per C.
//!
//! Deterministic: block order fixed, class k's coordinate order from ChaCha8
//! stream k of the seed, GEMMs split over output columns only.

use super::{
    argmax, dual_cd_from, loss_terms, stratified_folds, CdSettings, DualState, LinearSvc, SvmError,
    ValidLinearSvcParams,
};
use crate::linalg::{gemm, par_all};
use crate::metrics::mean_per_class_accuracy;
use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::ops::Range;

/// Total size of the cached block Gram matrices (`f32`) above which they are
/// recomputed each pass instead (256 MB; for N rows in blocks of B that is
/// N·B·4 bytes).
pub const GRAM_CACHE_BYTES: usize = 256 << 20;

/// Rows of a data set read on demand, block by block (what
/// [`ValidOutOfCoreSvmParams`] trains on).
pub trait RowSource: Sync {
    /// Number of rows N.
    fn n_rows(&self) -> usize;
    /// Width D of a row.
    fn dim(&self) -> usize;
    /// Writes the rows `rows` (indices in `0..N`) into `out` (`rows.len()`, D).
    ///
    /// # Errors
    /// Whatever reading the rows can fail with, as [`SvmError::Source`].
    fn read_rows(&self, rows: &[usize], out: ArrayViewMut2<'_, f32>) -> Result<(), SvmError>;
}

impl RowSource for ArrayView2<'_, f32> {
    fn n_rows(&self) -> usize {
        self.nrows()
    }
    fn dim(&self) -> usize {
        self.ncols()
    }
    fn read_rows(&self, rows: &[usize], mut out: ArrayViewMut2<'_, f32>) -> Result<(), SvmError> {
        for (mut o, &r) in out.rows_mut().into_iter().zip(rows) {
            o.assign(&self.row(r));
        }
        Ok(())
    }
}

/// Hyper-parameters of the out-of-core solver: the SVM's own
/// ([`crate::svm::LinearSvcParams`]: C, loss, tolerance, bias, seed; its
/// `max_iter` bounds the outer passes) and the blocking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutOfCoreSvmParams {
    /// The SVM problem and stopping rule. `max_iter` is the number of outer
    /// passes at most (default here [`OutOfCoreSvmParams::DEFAULT_MAX_PASSES`]).
    pub svm: super::LinearSvcParams,
    /// Bytes of one block of rows in `f32`, at most: B = bytes / (4 D) rows
    /// (16…2²⁰) in direct mode, also at most D / 64 (16…4096) in Gram mode.
    /// Default 256 MiB.
    pub block_bytes: usize,
    /// Coordinate-descent passes over a block per visit, ≥ 1. Default 10
    /// (a visit stops earlier when the block's own spread is below `tol`).
    pub inner_passes: usize,
    /// Direct or Gram sub-problems. Default [`InnerSolver::Auto`].
    pub inner: InnerSolver,
}

impl OutOfCoreSvmParams {
    /// Default number of outer passes at most.
    pub const DEFAULT_MAX_PASSES: usize = 100;

    /// Default settings with cost `c`.
    pub fn with_c(c: f64) -> Self {
        Self {
            svm: super::LinearSvcParams {
                max_iter: Self::DEFAULT_MAX_PASSES,
                ..super::LinearSvcParams::with_c(c)
            },
            ..Self::default()
        }
    }

    /// Checks the SVM settings ([`crate::svm::LinearSvcParams::check`]), `block_bytes` > 0
    /// and `inner_passes` ≥ 1.
    ///
    /// ```
    /// use fisherkit::svm::OutOfCoreSvmParams;
    /// assert!(OutOfCoreSvmParams::with_c(1.0).check().is_ok());
    /// let mut p = OutOfCoreSvmParams::with_c(1.0);
    /// p.inner_passes = 0;
    /// assert!(p.check().unwrap_err().to_string().contains("inner_passes"));
    /// ```
    pub fn check(&self) -> Result<ValidOutOfCoreSvmParams, SvmError> {
        let svm = self.svm.check()?;
        if self.block_bytes == 0 {
            return Err(SvmError::InvalidHyperParameter {
                name: "block_bytes",
                reason: "must be at least 1".into(),
            });
        }
        if self.inner_passes == 0 {
            return Err(SvmError::InvalidHyperParameter {
                name: "inner_passes",
                reason: "must be at least 1".into(),
            });
        }
        Ok(ValidOutOfCoreSvmParams {
            svm,
            block_bytes: self.block_bytes,
            inner_passes: self.inner_passes,
            inner: self.inner,
        })
    }
}

impl Default for OutOfCoreSvmParams {
    fn default() -> Self {
        Self {
            svm: super::LinearSvcParams {
                max_iter: Self::DEFAULT_MAX_PASSES,
                ..Default::default()
            },
            block_bytes: 256 << 20,
            inner_passes: 10,
            inner: InnerSolver::Auto,
        }
    }
}

/// [`OutOfCoreSvmParams`] that passed [`OutOfCoreSvmParams::check`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidOutOfCoreSvmParams {
    svm: ValidLinearSvcParams,
    block_bytes: usize,
    inner_passes: usize,
    inner: InnerSolver,
}

/// Widest rows solved in *direct* mode: the class's weights updated row by
/// row within a block (a step costs O(D)); wider rows take *Gram* mode
/// (decision values kept through the block's Gram matrix, O(B) a step).
pub const DIRECT_MAX_DIM: usize = 4096;

/// How a block's sub-problems are solved (same steps, same optimum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InnerSolver {
    /// Direct for rows of at most [`DIRECT_MAX_DIM`] values, Gram above.
    #[default]
    Auto,
    /// Each class's weights updated row by row: O(D) a step.
    Direct,
    /// Decision values through the block's Gram matrix, weights updated by
    /// one GEMM per block: O(B) a step.
    Gram,
}

impl InnerSolver {
    fn direct(self, dim: usize) -> bool {
        match self {
            InnerSolver::Auto => dim <= DIRECT_MAX_DIM,
            InnerSolver::Direct => true,
            InnerSolver::Gram => false,
        }
    }
}

/// Rows per block for rows of width `dim` in `block_bytes`: what the bytes
/// hold; in Gram mode also at most `dim / 64` and 4096. Per outer pass the
/// two GEMMs cost 2·K·N·D multiply-adds and the sub-problems K·N·B per inner
/// pass, in scalar steps that run tens of times slower than the GEMMs: with
/// B ≤ D/64 they stay a fraction of the pass (on 397 classes × 25 000-dim
/// rows, B = 2 684 spent most of each pass in the sub-problems).
fn block_rows(block_bytes: usize, dim: usize, direct: bool) -> usize {
    let fit = block_bytes / (4 * dim.max(1));
    if direct {
        fit.clamp(16, 1 << 20)
    } else {
        fit.min(dim / 64).clamp(16, 4096)
    }
}

/// Rows per block of a streamed prediction: what `block_bytes` holds.
fn predict_rows_per_block(block_bytes: usize, dim: usize) -> usize {
    (block_bytes / (4 * dim.max(1))).clamp(16, 4096)
}

/// One training problem: its rows (source indices), labels and blocks.
struct Problem<'a, S: RowSource> {
    src: &'a S,
    rows: Vec<usize>,
    /// Label of each local row.
    y: Vec<usize>,
    n_classes: usize,
    /// Local index ranges of the blocks.
    blocks: Vec<Range<usize>>,
    /// Cached block Gram matrices (B, B), if they fit.
    grams: Vec<Option<Array2<f32>>>,
    cache_grams: bool,
    /// Direct sub-problems (else Gram).
    direct: bool,
}

impl<'a, S: RowSource> Problem<'a, S> {
    fn new(
        src: &'a S,
        rows: Vec<usize>,
        y: Vec<usize>,
        n_classes: usize,
        bb: usize,
        direct: bool,
    ) -> Self {
        let b = block_rows(bb, src.dim(), direct);
        let n = rows.len();
        let blocks: Vec<Range<usize>> = (0..n.div_ceil(b))
            .map(|j| j * b..((j + 1) * b).min(n))
            .collect();
        let cache_grams = !direct && n.saturating_mul(b).saturating_mul(4) <= GRAM_CACHE_BYTES;
        Self {
            src,
            grams: vec![None; blocks.len()],
            rows,
            y,
            n_classes,
            blocks,
            cache_grams,
            direct,
        }
    }
}

/// The solver's state for one problem: the dual variables, the weights, the RNGs.
struct State {
    /// Per class: α of every local row.
    alpha: Vec<Vec<f64>>,
    /// (K, D) primal weights.
    w: Array2<f32>,
    /// (K) intercepts (weights of the bias feature).
    b: Vec<f64>,
    rngs: Vec<ChaCha8Rng>,
}

impl State {
    /// The starting point α = 0, W = 0. The two buffers sized by the data,
    /// W (K × D f32) and α (K × N f64), are allocated fallibly: a request
    /// the machine cannot grant is an error naming it, not an abort.
    fn new(n_classes: usize, n: usize, dim: usize, seed: u64) -> Result<Self, SvmError> {
        let w = zeros::<f32>(
            n_classes.saturating_mul(dim),
            "weights (classes × dimension, f32)",
        )?;
        let mut alpha = Vec::with_capacity(n_classes);
        for _ in 0..n_classes {
            alpha.push(zeros::<f64>(n, "dual variables (classes × rows, f64)")?);
        }
        Ok(Self {
            alpha,
            w: Array2::from_shape_vec((n_classes, dim), w).expect("K·D values"),
            b: vec![0.0; n_classes],
            rngs: (0..n_classes)
                .map(|k| {
                    let mut r = ChaCha8Rng::seed_from_u64(seed);
                    r.set_stream(k as u64);
                    r
                })
                .collect(),
        })
    }
}

/// `len` zeros, or [`SvmError::TooLarge`] naming `what` if they cannot be allocated.
fn zeros<T: Clone + Default>(len: usize, what: &'static str) -> Result<Vec<T>, SvmError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| SvmError::TooLarge {
        what,
        bytes: len.saturating_mul(std::mem::size_of::<T>()),
    })?;
    v.resize(len, T::default());
    Ok(v)
}

/// The smallest contiguous range of classes holding every `true` of `mask`.
fn class_span(mask: &[bool]) -> Option<Range<usize>> {
    let first = mask.iter().position(|&m| m)?;
    let last = mask.iter().rposition(|&m| m)?;
    Some(first..last + 1)
}

/// Gram mode of a block visit: keeps $u_t = f(x_t)$ for the block's rows
/// through its Gram matrix `gram` (B, B, row-major; the bias feature adds
/// `bias` to every entry) and the change of $\alpha y$ of each row.
struct BlockGram<'a> {
    gram: &'a [f32],
    bias: f64,
    u: Vec<f64>,
    delta: Vec<f64>,
}

impl DualState for BlockGram<'_> {
    #[inline]
    fn value(&self, s: usize) -> f64 {
        self.u[s]
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        let n = self.u.len();
        self.delta[s] += delta;
        for (us, &gs) in self.u.iter_mut().zip(&self.gram[s * n..(s + 1) * n]) {
            *us += delta * (gs as f64 + self.bias);
        }
    }
}

/// Direct mode of a block visit: keeps one class's weights (in `f64` during
/// the visit) and intercept; a value or an update is one pass over a row of
/// the block `xb` (B, D).
struct BlockDirect<'a> {
    xb: &'a Array2<f32>,
    w: Vec<f64>,
    b: f64,
    bias: f64,
}

impl BlockDirect<'_> {
    fn row(&self, s: usize) -> &[f32] {
        self.xb.row(s).to_slice().expect("row-major block")
    }
}

impl DualState for BlockDirect<'_> {
    #[inline]
    fn value(&self, s: usize) -> f64 {
        super::dot(&self.w, self.row(s)) + self.b * self.bias
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        let x = self.xb.row(s).to_slice().expect("row-major block");
        super::axpy(delta, x, &mut self.w);
        self.b += delta * self.bias;
    }
}

impl ValidOutOfCoreSvmParams {
    /// A block visit's coordinate descent: at most `inner_passes` passes,
    /// stopping at the block's own spread `tol`, no shrinking.
    fn inner_settings(&self, loss: (f64, f64)) -> CdSettings {
        CdSettings {
            loss,
            max_passes: self.inner_passes,
            tol: self.svm.tol,
            shrinking: false,
        }
    }

    fn problem<'a, S: RowSource>(
        &self,
        src: &'a S,
        rows: Vec<usize>,
        y: Vec<usize>,
        n_classes: usize,
    ) -> Problem<'a, S> {
        let direct = self.inner.direct(src.dim());
        Problem::new(src, rows, y, n_classes, self.block_bytes, direct)
    }

    /// Reads the rows of block `j` of `pb` into `buf` (resized to them).
    fn read_block<S: RowSource>(
        pb: &Problem<'_, S>,
        j: usize,
        buf: &mut Array2<f32>,
    ) -> Result<(), SvmError> {
        let r = pb.blocks[j].clone();
        let d = pb.src.dim();
        if buf.dim() != (r.len(), d) {
            *buf = Array2::zeros((r.len(), d));
        }
        pb.src.read_rows(&pb.rows[r], buf.view_mut())
    }

    /// The Gram matrix of the block whose rows are in `xb`: the one in
    /// `cached`, or computed into `scratch` (and kept in `cached` if `keep`).
    fn block_gram<'p>(
        cached: &'p mut Option<Array2<f32>>,
        keep: bool,
        xb: &Array2<f32>,
        scratch: &'p mut Array2<f32>,
    ) -> &'p Array2<f32> {
        if cached.is_none() {
            let bl = xb.nrows();
            let mut g = Array2::<f32>::zeros((bl, bl));
            gemm(g.view_mut(), false, xb.view(), xb.t(), 1.0, par_all());
            if !keep {
                *scratch = g;
                return scratch;
            }
            *cached = Some(g);
        }
        cached.as_ref().expect("cached above")
    }

    /// Outer passes until every class meets the stopping rule or `max_iter`
    /// passes. Returns (passes, converged) per class.
    fn solve<S: RowSource>(
        &self,
        pb: &mut Problem<'_, S>,
        st: &mut State,
        c: f64,
    ) -> Result<(Vec<usize>, Vec<bool>), SvmError> {
        let kk = pb.n_classes;
        let p = &self.svm;
        let loss = loss_terms(p.loss, c);
        let mut active = vec![true; kk];
        let mut passes = vec![0usize; kk];
        let mut converged = vec![false; kk];
        let mut buf = Array2::<f32>::zeros((0, 0));
        for _ in 0..p.max_iter {
            let Some(span) = class_span(&active) else {
                break;
            };
            let mut spread = vec![(f64::NEG_INFINITY, f64::INFINITY); kk];
            for j in 0..pb.blocks.len() {
                let results = if pb.direct {
                    self.direct_block(pb, st, j, &active, loss, &mut buf)?
                } else {
                    self.gram_block(pb, st, j, &active, span.clone(), loss, &mut buf)?
                };
                for (k, pmax, pmin) in results {
                    let s = &mut spread[k];
                    s.0 = s.0.max(pmax);
                    s.1 = s.1.min(pmin);
                }
            }
            for k in 0..kk {
                if active[k] {
                    passes[k] += 1;
                    if spread[k].0 - spread[k].1 <= p.tol {
                        active[k] = false;
                        converged[k] = true;
                    }
                }
            }
        }
        Ok((passes, converged))
    }

    /// One visit of block `j` in direct mode, every active class in
    /// parallel. Returns (class, first-pass spread) of the active classes.
    fn direct_block<S: RowSource>(
        &self,
        pb: &mut Problem<'_, S>,
        st: &mut State,
        j: usize,
        active: &[bool],
        loss: (f64, f64),
        buf: &mut Array2<f32>,
    ) -> Result<Vec<(usize, f64, f64)>, SvmError> {
        Self::read_block(pb, j, buf)?;
        let r = pb.blocks[j].clone();
        let xb = &*buf;
        let sqn: Vec<f64> = xb
            .rows()
            .into_iter()
            .map(|x| x.iter().map(|&v| v as f64 * v as f64).sum())
            .collect();
        let bias = if self.svm.bias { 1.0 } else { 0.0 };
        let y_block = &pb.y[r.clone()];
        let settings = self.inner_settings(loss);
        Ok(st
            .w
            .axis_iter_mut(ndarray::Axis(0))
            .into_par_iter()
            .zip(st.alpha.par_iter_mut())
            .zip(st.rngs.par_iter_mut())
            .zip(st.b.par_iter_mut())
            .enumerate()
            .filter(|(k, _)| active[*k])
            .map(|(k, (((mut w, alpha), rng), b))| {
                let ys: Vec<f64> = y_block
                    .iter()
                    .map(|&l| if l == k { 1.0 } else { -1.0 })
                    .collect();
                let mut state = BlockDirect {
                    xb,
                    w: w.iter().map(|&v| v as f64).collect(),
                    b: *b,
                    bias,
                };
                let sq: Vec<f64> = sqn.iter().map(|q| q + bias).collect();
                let (_, _, (pmax, pmin)) =
                    dual_cd_from(&mut state, &ys, &sq, &mut alpha[r.clone()], rng, &settings);
                w.iter_mut().zip(&state.w).for_each(|(o, &v)| *o = v as f32);
                *b = state.b;
                (k, pmax, pmin)
            })
            .collect())
    }

    /// One visit of block `j` in Gram mode: $u = X_B W^\top + b$ for the
    /// classes of `span`, every active class's sub-problem in parallel, then
    /// the weights' update. Returns (class, first-pass spread) of the active classes.
    #[allow(clippy::too_many_arguments)]
    fn gram_block<S: RowSource>(
        &self,
        pb: &mut Problem<'_, S>,
        st: &mut State,
        j: usize,
        active: &[bool],
        span: Range<usize>,
        loss: (f64, f64),
        buf: &mut Array2<f32>,
    ) -> Result<Vec<(usize, f64, f64)>, SvmError> {
        Self::read_block(pb, j, buf)?;
        let r = pb.blocks[j].clone();
        let mut scratch = Array2::<f32>::zeros((0, 0));
        let gram = Self::block_gram(&mut pb.grams[j], pb.cache_grams, buf, &mut scratch);
        let bl = r.len();
        let bias = if self.svm.bias { 1.0 } else { 0.0 };
        let mut u = Array2::<f32>::zeros((bl, span.len()));
        gemm(
            u.view_mut(),
            false,
            buf.view(),
            st.w.slice(s![span.clone(), ..]).t(),
            1.0,
            par_all(),
        );
        let y_block = &pb.y[r.clone()];
        let settings = self.inner_settings(loss);
        let g = gram.as_slice().expect("row-major Gram");
        let sq: Vec<f64> = (0..bl).map(|t| g[t * bl + t] as f64 + bias).collect();
        let results: Vec<(usize, Vec<f64>, f64, f64)> = st
            .alpha
            .par_iter_mut()
            .zip(st.rngs.par_iter_mut())
            .enumerate()
            .filter(|(k, _)| active[*k])
            .map(|(k, (alpha, rng))| {
                let ys: Vec<f64> = y_block
                    .iter()
                    .map(|&l| if l == k { 1.0 } else { -1.0 })
                    .collect();
                let mut state = BlockGram {
                    gram: g,
                    bias,
                    u: u.column(k - span.start)
                        .iter()
                        .map(|&v| v as f64 + st.b[k] * bias)
                        .collect(),
                    delta: vec![0.0; bl],
                };
                let (_, _, (pmax, pmin)) =
                    dual_cd_from(&mut state, &ys, &sq, &mut alpha[r.clone()], rng, &settings);
                let delta = state.delta;
                (k, delta, pmax, pmin)
            })
            .collect();
        self.apply_deltas(st, buf, &results, bias, bl);
        Ok(results.into_iter().map(|(k, _, a, b)| (k, a, b)).collect())
    }

    /// $W \leftarrow W + \Delta A X_B$ over the classes and rows that moved, $b \leftarrow b + \Delta A \mathbf 1$.
    fn apply_deltas(
        &self,
        st: &mut State,
        xb: &Array2<f32>,
        results: &[(usize, Vec<f64>, f64, f64)],
        bias: f64,
        bl: usize,
    ) {
        let mut moved_class = vec![false; st.w.nrows()];
        let mut moved_row = vec![false; bl];
        for (k, delta, _, _) in results {
            for (t, &d) in delta.iter().enumerate() {
                if d != 0.0 {
                    moved_class[*k] = true;
                    moved_row[t] = true;
                }
            }
            st.b[*k] += bias * delta.iter().sum::<f64>();
        }
        let Some(span) = class_span(&moved_class) else {
            return;
        };
        let rows: Vec<usize> = (0..bl).filter(|&t| moved_row[t]).collect();
        let mut da = Array2::<f32>::zeros((span.len(), rows.len()));
        for (k, delta, _, _) in results {
            if span.contains(k) {
                for (c, &t) in rows.iter().enumerate() {
                    da[[k - span.start, c]] = delta[t] as f32;
                }
            }
        }
        let xs = if rows.len() == bl {
            None
        } else {
            Some(xb.select(ndarray::Axis(0), &rows))
        };
        let xv = xs.as_ref().map_or(xb.view(), |x| x.view());
        gemm(
            st.w.slice_mut(s![span, ..]),
            true,
            da.view(),
            xv,
            1.0,
            par_all(),
        );
    }

    /// Checks `rows` and `y` against the source; returns nothing or the error.
    fn check_rows<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
    ) -> Result<(), SvmError> {
        if rows.len() != y.len() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: rows.len(),
                n_labels: y.len(),
            });
        }
        if let Some(&r) = rows.iter().find(|&&r| r >= src.n_rows()) {
            return Err(SvmError::Source(format!(
                "row {r} out of range: the source has {} rows",
                src.n_rows()
            )));
        }
        if src.dim() == 0 {
            return Err(SvmError::Source("the rows have width 0".into()));
        }
        if n_classes < 2 {
            return Err(SvmError::TooFewClasses(n_classes));
        }
        if let Some((index, &label)) = y.iter().enumerate().find(|(_, &l)| l >= n_classes) {
            return Err(SvmError::LabelOutOfRange {
                index,
                label,
                n_classes,
            });
        }
        let mut count = vec![0usize; n_classes];
        for &l in y {
            count[l] += 1;
        }
        if let Some(class) = count.iter().position(|&c| c == 0) {
            return Err(SvmError::MissingClass { class, n_classes });
        }
        Ok(())
    }

    /// Trains the one-vs-rest SVM on the rows `rows` of `src` with labels
    /// `y` (one per entry of `rows`, in `0..n_classes`, every class present).
    ///
    /// ```
    /// use fisherkit::svm::{OutOfCoreSvmParams, RowSource};
    /// use ndarray::array;
    /// let x = array![[0.0f32, 0.1], [0.2, 0.0], [3.0, 3.1], [3.2, 2.9]];
    /// let p = OutOfCoreSvmParams::with_c(10.0).check().unwrap();
    /// let svm = p.fit(&x.view(), &[0, 1, 2, 3], &[0, 0, 1, 1], 2).unwrap();
    /// assert_eq!(svm.predict(x.view()).unwrap(), vec![0, 0, 1, 1]);
    /// ```
    ///
    /// # Errors
    /// Rows out of range, label problems, a failing source.
    pub fn fit<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
    ) -> Result<LinearSvc<f32>, SvmError> {
        self.check_rows(src, rows, y, n_classes)?;
        let mut pb = self.problem(src, rows.to_vec(), y.to_vec(), n_classes);
        let mut st = State::new(n_classes, rows.len(), src.dim(), self.svm.seed)?;
        let (n_iter, converged) = self.solve(&mut pb, &mut st, self.svm.c)?;
        Ok(model(st, n_iter, converged))
    }

    /// Chooses C by stratified `folds`-fold cross-validation over `grid`
    /// (mean per-class accuracy on the held-out rows, averaged over folds;
    /// the folds are those of [`crate::svm::LinearSvcParams::select_c`] for the
    /// same `y` and `seed`), then trains on all `rows` with the best C (the
    /// smallest of equal best scores), walking the grid up to it with warm
    /// starts. Returns the model, the best C and `(C, score)` in grid order.
    ///
    /// # Errors
    /// As [`ValidOutOfCoreSvmParams::fit`]; an empty grid, a C ≤ 0 or
    /// non-finite, `folds` < 2 or > the number of rows.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn fit_with_cv<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<f32>, f64, Vec<(f64, f64)>), SvmError> {
        self.check_rows(src, rows, y, n_classes)?;
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
        if folds < 2 || folds > rows.len() {
            return Err(SvmError::InvalidCrossValidation(format!(
                "folds must be between 2 and the number of samples ({}), got {folds}",
                rows.len()
            )));
        }
        let mut order: Vec<usize> = (0..grid.len()).collect();
        order.sort_by(|&a, &b| grid[a].total_cmp(&grid[b]));
        let fold_of = stratified_folds(y, n_classes, folds, seed);
        let mut scores = vec![0.0f64; grid.len()];
        for f in 0..folds {
            let (tr, te): (Vec<usize>, Vec<usize>) =
                (0..rows.len()).partition(|&i| fold_of[i] != f);
            let tr_rows: Vec<usize> = tr.iter().map(|&i| rows[i]).collect();
            let tr_y: Vec<usize> = tr.iter().map(|&i| y[i]).collect();
            let te_rows: Vec<usize> = te.iter().map(|&i| rows[i]).collect();
            let te_y: Vec<usize> = te.iter().map(|&i| y[i]).collect();
            let mut pb = self.problem(src, tr_rows, tr_y, n_classes);
            let mut st = State::new(n_classes, pb.rows.len(), src.dim(), self.svm.seed)?;
            for &g in &order {
                let (it, conv) = self.solve(&mut pb, &mut st, grid[g])?;
                let m = LinearSvc {
                    coef: st.w.clone(),
                    intercept: st.b.iter().map(|&v| v as f32).collect(),
                    n_iter: it,
                    converged: conv,
                };
                let pred = predict_rows(&m, src, &te_rows, self.block_bytes)?;
                scores[g] += mean_per_class_accuracy(&te_y, &pred, n_classes)
                    .map_err(|e| SvmError::Source(e.to_string()))?
                    / folds as f64;
            }
        }
        let table: Vec<(f64, f64)> = grid.iter().copied().zip(scores).collect();
        let mut best = table[0];
        for &(c, s) in &table[1..] {
            if s > best.1 || (s == best.1 && c < best.0) {
                best = (c, s);
            }
        }
        let mut pb = self.problem(src, rows.to_vec(), y.to_vec(), n_classes);
        let mut st = State::new(n_classes, rows.len(), src.dim(), self.svm.seed)?;
        let mut last = (vec![], vec![]);
        for &g in order.iter().filter(|&&g| grid[g] <= best.0) {
            last = self.solve(&mut pb, &mut st, grid[g])?;
        }
        Ok((model(st, last.0, last.1), best.0, table))
    }
}

fn model(st: State, n_iter: Vec<usize>, converged: Vec<bool>) -> LinearSvc<f32> {
    LinearSvc {
        coef: st.w,
        intercept: Array1::from_iter(st.b.iter().map(|&v| v as f32)),
        n_iter,
        converged,
    }
}

/// The predicted class of each of the rows `rows` of `src`, streamed in
/// blocks of at most `block_bytes` bytes.
///
/// # Errors
/// A source of another width than the model's, a failing source.
pub fn predict_rows<S: RowSource>(
    model: &LinearSvc<f32>,
    src: &S,
    rows: &[usize],
    block_bytes: usize,
) -> Result<Vec<usize>, SvmError> {
    let mut out = Vec::with_capacity(rows.len());
    for_each_decision_block(model, src, rows, block_bytes, |f| {
        out.extend(f.outer_iter().map(|r| argmax(r.iter().map(|&v| v as f64))));
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with the decision values (B, K) of consecutive blocks of `rows`.
///
/// # Errors
/// A source of another width than the model's, a failing source, `f`'s error.
pub fn for_each_decision_block<S: RowSource>(
    model: &LinearSvc<f32>,
    src: &S,
    rows: &[usize],
    block_bytes: usize,
    mut f: impl FnMut(ArrayView2<'_, f32>) -> Result<(), SvmError>,
) -> Result<(), SvmError> {
    if src.dim() != model.input_dim() {
        return Err(SvmError::Source(format!(
            "rows of width {} for a model of width {}",
            src.dim(),
            model.input_dim()
        )));
    }
    let b = predict_rows_per_block(block_bytes.max(1), src.dim());
    let mut buf = Array2::<f32>::zeros((0, 0));
    for chunk in rows.chunks(b) {
        if buf.nrows() != chunk.len() {
            buf = Array2::zeros((chunk.len(), src.dim()));
        }
        src.read_rows(chunk, buf.view_mut())?;
        let mut d = Array2::<f32>::zeros((chunk.len(), model.n_classes()));
        gemm(
            d.view_mut(),
            false,
            buf.view(),
            model.coef.t(),
            1.0,
            par_all(),
        );
        for mut r in d.rows_mut() {
            r += &model.intercept;
        }
        f(d.view())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svm::{DualSolver, LinearSvcParams, SvmLoss};
    use rand_distr::{Distribution, Normal};

    /// Planted classes: K Gaussian blobs in D dimensions with overlap.
    fn blobs(n: usize, d: usize, k: usize, seed: u64) -> (Array2<f32>, Vec<usize>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nd = Normal::new(0.0f32, 1.0).unwrap();
        let centres = Array2::from_shape_fn((k, d), |_| nd.sample(&mut rng) * 0.6);
        let y: Vec<usize> = (0..n).map(|i| i % k).collect();
        let x = Array2::from_shape_fn((n, d), |(i, j)| centres[[y[i], j]] + nd.sample(&mut rng));
        (x, y)
    }

    #[test]
    fn equals_the_in_memory_solver_at_the_same_c() {
        let (x, y) = blobs(300, 40, 4, 3);
        for loss in [SvmLoss::SquaredHinge, SvmLoss::Hinge] {
            let mut base = LinearSvcParams::with_c(0.5);
            base.loss = loss;
            base.tol = 1e-5;
            base.max_iter = 5000;
            base.solver = DualSolver::Direct;
            let mem = base.fit(x.view(), &y).unwrap();
            // blocks of 16 rows (the smallest): many blocks, many outer passes
            for inner in [InnerSolver::Direct, InnerSolver::Gram] {
                let p = OutOfCoreSvmParams {
                    svm: base,
                    block_bytes: 1,
                    inner_passes: 3,
                    inner,
                }
                .check()
                .unwrap();
                let rows: Vec<usize> = (0..300).collect();
                let ooc = p.fit(&x.view(), &rows, &y, 4).unwrap();
                assert!(ooc.converged().iter().all(|&c| c), "{loss:?}");
                let scale = mem.coef().iter().fold(0.0f32, |m, v| m.max(v.abs()));
                for (a, b) in mem.coef().iter().zip(ooc.coef().iter()) {
                    assert!((a - b).abs() < 2e-3 * scale, "{loss:?}: {a} vs {b}");
                }
                for (a, b) in mem.intercept().iter().zip(ooc.intercept().iter()) {
                    assert!(
                        (a - b).abs() < 2e-3 * scale.max(1.0),
                        "{loss:?}: {a} vs {b}"
                    );
                }
                assert_eq!(
                    mem.predict(x.view()).unwrap(),
                    ooc.predict(x.view()).unwrap()
                );
                assert_eq!(
                    predict_rows(&ooc, &x.view(), &rows, 1 << 20).unwrap(),
                    ooc.predict(x.view()).unwrap()
                );
            }
        }
    }

    #[test]
    fn cross_validation_picks_a_grid_value_and_is_reproducible() {
        let (x, y) = blobs(240, 30, 3, 5);
        let rows: Vec<usize> = (0..240).collect();
        let p = OutOfCoreSvmParams {
            block_bytes: 4 * 30 * 50,
            ..OutOfCoreSvmParams::with_c(1.0)
        }
        .check()
        .unwrap();
        let grid = [10.0, 0.01, 0.1];
        let (m, c, table) = p.fit_with_cv(&x.view(), &rows, &y, 3, &grid, 3, 7).unwrap();
        assert_eq!(table.iter().map(|t| t.0).collect::<Vec<_>>(), grid);
        assert!(grid.contains(&c));
        let best = table.iter().map(|t| t.1).fold(0.0, f64::max);
        assert_eq!(table.iter().find(|t| t.0 == c).unwrap().1, best);
        assert!(best > 0.6, "planted classes are learnable: {best}");
        let (m2, c2, t2) = p.fit_with_cv(&x.view(), &rows, &y, 3, &grid, 3, 7).unwrap();
        assert_eq!((c, &table), (c2, &t2));
        assert_eq!(m.coef(), m2.coef());
        // the final model is the fit at the chosen C (warm-started path, same optimum)
        let direct = OutOfCoreSvmParams {
            svm: LinearSvcParams {
                c,
                max_iter: 100,
                ..p.svm.0
            },
            block_bytes: 4 * 30 * 50,
            inner_passes: 10,
            inner: InnerSolver::Auto,
        }
        .check()
        .unwrap()
        .fit(&x.view(), &rows, &y, 3)
        .unwrap();
        let agree = m
            .predict(x.view())
            .unwrap()
            .iter()
            .zip(direct.predict(x.view()).unwrap())
            .filter(|(a, b)| **a == *b)
            .count();
        assert!(agree >= 235, "{agree} of 240 agree");
    }

    #[test]
    fn the_same_bits_with_one_or_two_threads() {
        let (x, y) = blobs(200, 64, 5, 9);
        let rows: Vec<usize> = (0..200).collect();
        for inner in [InnerSolver::Direct, InnerSolver::Gram] {
            let p = OutOfCoreSvmParams {
                block_bytes: 4 * 64 * 40,
                inner,
                ..OutOfCoreSvmParams::with_c(1.0)
            }
            .check()
            .unwrap();
            let run = |t: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap()
                    .install(|| p.fit(&x.view(), &rows, &y, 5).unwrap())
            };
            assert_eq!(run(1), run(2));
        }
    }

    #[test]
    fn bad_inputs_are_named() {
        let (x, y) = blobs(20, 4, 2, 1);
        let p = OutOfCoreSvmParams::with_c(1.0).check().unwrap();
        let e = p.fit(&x.view(), &[0, 99], &[0, 1], 2).unwrap_err();
        assert!(e.to_string().contains("row 99"), "{e}");
        let rows: Vec<usize> = (0..20).collect();
        let e = p.fit(&x.view(), &rows, &y[..19], 2).unwrap_err();
        assert!(matches!(e, SvmError::LabelLengthMismatch { .. }));
        let e = p.fit(&x.view(), &rows, &[0; 20], 2).unwrap_err();
        assert!(matches!(e, SvmError::MissingClass { class: 1, .. }));
        let e = p
            .fit_with_cv(&x.view(), &rows, &y, 2, &[], 2, 0)
            .unwrap_err();
        assert!(e.to_string().contains("grid"));
        // weights no machine can hold: one clear error, no allocation abort
        let e = State::new(2, 10, usize::MAX / 4, 0).err().unwrap();
        assert!(e.to_string().contains("weights"), "{e}");
    }
}
