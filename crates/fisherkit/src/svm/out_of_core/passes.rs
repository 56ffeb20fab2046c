//! The outer passes of block minimisation and one visit of a block, in
//! direct or Gram mode: the sub-problems' coordinate descent and the
//! weights' update.

use super::blocks::{class_span, Problem, State};
use super::source::RowSource;
use super::ValidOutOfCoreSvmParams;
use crate::linalg::{axpy, dot, gemm, par_all};
use crate::svm::error::SvmError;
use crate::svm::solver::{dual_cd_from, loss_terms, CdSettings, DualState};
use ndarray::{s, Array2};
use rayon::prelude::*;
use std::ops::Range;

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
        dot(&self.w, self.row(s)) + self.b * self.bias
    }
    #[inline]
    fn update(&mut self, s: usize, delta: f64) {
        let x = self.xb.row(s).to_slice().expect("row-major block");
        axpy(delta, x, &mut self.w);
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

    /// Outer passes until every class meets the stopping rule or `max_iter`
    /// passes. Returns (passes, converged) per class.
    pub(super) fn solve<S: RowSource>(
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
}
