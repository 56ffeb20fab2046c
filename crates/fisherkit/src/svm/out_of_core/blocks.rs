//! What one out-of-core solve holds: the problem's rows cut into blocks
//! (and their cached Gram matrices) and the solver's state (α, W, b, RNGs).

use super::source::RowSource;
use super::ValidOutOfCoreSvmParams;
use crate::linalg::{gemm, par_all};
use crate::svm::error::SvmError;
use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::ops::Range;

/// Total size of the cached block Gram matrices (`f32`) above which they are
/// recomputed each pass instead (256 MB; for N rows in blocks of B that is
/// N·B·4 bytes).
pub const GRAM_CACHE_BYTES: usize = 256 << 20;

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

/// One training problem: its rows (source indices), labels and blocks.
pub(super) struct Problem<'a, S: RowSource> {
    pub(super) src: &'a S,
    pub(super) rows: Vec<usize>,
    /// Label of each local row.
    pub(super) y: Vec<usize>,
    pub(super) n_classes: usize,
    /// Local index ranges of the blocks.
    pub(super) blocks: Vec<Range<usize>>,
    /// Cached block Gram matrices (B, B), if they fit.
    pub(super) grams: Vec<Option<Array2<f32>>>,
    pub(super) cache_grams: bool,
    /// Direct sub-problems (else Gram).
    pub(super) direct: bool,
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
pub(super) struct State {
    /// Per class: α of every local row.
    pub(super) alpha: Vec<Vec<f64>>,
    /// (K, D) primal weights.
    pub(super) w: Array2<f32>,
    /// (K) intercepts (weights of the bias feature).
    pub(super) b: Vec<f64>,
    pub(super) rngs: Vec<ChaCha8Rng>,
}

impl State {
    /// The starting point α = 0, W = 0. The two buffers sized by the data,
    /// W (K × D f32) and α (K × N f64), are allocated fallibly: a request
    /// the machine cannot grant is an error naming it, not an abort.
    pub(super) fn new(n_classes: usize, n: usize, dim: usize, seed: u64) -> Result<Self, SvmError> {
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
pub(super) fn class_span(mask: &[bool]) -> Option<Range<usize>> {
    let first = mask.iter().position(|&m| m)?;
    let last = mask.iter().rposition(|&m| m)?;
    Some(first..last + 1)
}

impl ValidOutOfCoreSvmParams {
    pub(super) fn problem<'a, S: RowSource>(
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
    pub(super) fn read_block<S: RowSource>(
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
    pub(super) fn block_gram<'p>(
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
}
