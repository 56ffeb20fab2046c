//! Squared distances: the GEMM expansion about the data mean for rows against
//! centroids, and the direct form for single pairs.

use super::error::KMeansError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::kernels::reduce::{reduce_rows, CHUNK_ROWS};
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis, Zip};
use rayon::prelude::*;

/// Mean of the rows of `x` (N, D), accumulated in `f64`, rounded to `F`.
pub(super) fn data_mean<F: Float>(x: ArrayView2<'_, F>) -> Array1<F> {
    let d = x.ncols();
    let sum = reduce_rows(
        x.nrows(),
        &|r| {
            let mut acc = Array1::<f64>::zeros(d);
            for row in x.slice(s![r, ..]).rows() {
                Zip::from(&mut acc)
                    .and(&row)
                    .for_each(|a, &v| *a += v.as_f64());
            }
            acc
        },
        &|a, b| a + b,
    );
    let n = x.nrows().max(1) as f64;
    sum.mapv(|v| F::from_f64_lossy(v / n))
}

/// $\lVert a - b \rVert^2$ in `f64`, with 8 independent partial sums so that
/// the loop vectorises (a single running sum is latency-bound).
#[inline]
pub(super) fn sq_dist<F: Float>(a: ArrayView1<'_, F>, b: ArrayView1<'_, F>) -> f64 {
    match (a.as_slice(), b.as_slice()) {
        (Some(a), Some(b)) => sq_dist_slices(a, b),
        _ => {
            let mut acc = 0.0f64;
            Zip::from(&a).and(&b).for_each(|&u, &v| {
                let t = u.as_f64() - v.as_f64();
                acc += t * t;
            });
            acc
        }
    }
}

#[inline]
fn sq_dist_slices<F: Float>(a: &[F], b: &[F]) -> f64 {
    const L: usize = 8;
    let mut acc = [0.0f64; L];
    let (ac, at) = a.split_at(a.len() - a.len() % L);
    let (bc, bt) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(L).zip(bc.chunks_exact(L)) {
        for l in 0..L {
            let t = x[l].as_f64() - y[l].as_f64();
            acc[l] += t * t;
        }
    }
    let mut tail = 0.0;
    for (x, y) in at.iter().zip(bt) {
        let t = x.as_f64() - y.as_f64();
        tail += t * t;
    }
    acc.iter().sum::<f64>() + tail
}

/// $\lVert a \rVert^2$ in `f64` (vectorised like [`sq_dist`]).
#[inline]
fn sq_norm<F: Float>(a: ArrayView1<'_, F>) -> f64 {
    match a.as_slice() {
        Some(s) => {
            const L: usize = 8;
            let mut acc = [0.0f64; L];
            let (c, t) = s.split_at(s.len() - s.len() % L);
            for x in c.chunks_exact(L) {
                for l in 0..L {
                    acc[l] += x[l].as_f64() * x[l].as_f64();
                }
            }
            acc.iter().sum::<f64>() + t.iter().map(|v| v.as_f64() * v.as_f64()).sum::<f64>()
        }
        None => a.iter().map(|v| v.as_f64() * v.as_f64()).sum(),
    }
}

/// Squared Euclidean distances of every row of `x` (N, D) to every row of
/// `centroids` (K, D), shape (N, K), by the GEMM expansion
/// $\lVert y_i\rVert^2 - 2 y_i\cdot c'_k + \lVert c'_k\rVert^2$ about the data
/// mean (clamped at 0). Parallel over chunks of rows.
///
/// Errors: an empty or non-finite `x` or `centroids`, or different widths.
pub fn squared_distances<F: Float>(
    x: ArrayView2<'_, F>,
    centroids: ArrayView2<'_, F>,
) -> Result<Array2<F>, KMeansError> {
    check_matrix(centroids, None, "centroids")?;
    check_matrix(x, Some(centroids.ncols()), "data")?;
    let center = data_mean(x);
    let prep = Prepared::new(centroids, &center);
    let mut out = Array2::<F>::zeros((x.nrows(), centroids.nrows()));
    out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS)
        .into_par_iter()
        .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
        .for_each_init(
            || (Array2::zeros((0, 0)), Array2::zeros((0, 0))),
            |(y, g), (mut o, xc)| {
                prep.distances(xc, &center, y, g, |i, k, dist| {
                    o[[i, k]] = F::from_f64_lossy(dist)
                })
            },
        );
    Ok(out)
}

/// Centroids prepared for the GEMM distance: $c' = c - m$ and $\lVert c'\rVert^2$.
struct Prepared<F: Float> {
    /// (K, D)
    shifted: Array2<F>,
    /// (K)
    norms: Vec<f64>,
}

impl<F: Float> Prepared<F> {
    fn new(centroids: ArrayView2<'_, F>, center: &Array1<F>) -> Self {
        let shifted = &centroids - &center.view().insert_axis(Axis(0));
        let norms = shifted.rows().into_iter().map(sq_norm).collect();
        Self { shifted, norms }
    }

    /// Calls `f(i, k, ‖x_i − c_k‖²)` for the rows of the chunk `xc` (n, D).
    /// `y` and `g` are scratch buffers.
    fn distances(
        &self,
        xc: ArrayView2<'_, F>,
        center: &Array1<F>,
        y: &mut Array2<F>,
        g: &mut Array2<F>,
        mut f: impl FnMut(usize, usize, f64),
    ) {
        let (n, d) = xc.dim();
        let k = self.shifted.nrows();
        if y.dim() != (n, d) {
            *y = Array2::zeros((n, d));
        }
        if g.dim() != (n, k) {
            *g = Array2::zeros((n, k));
        }
        Zip::from(y.rows_mut())
            .and(xc.rows())
            .for_each(|mut yr, xr| {
                Zip::from(&mut yr)
                    .and(&xr)
                    .and(center)
                    .for_each(|y, &x, &c| *y = x - c)
            });
        gemm(
            g.view_mut(),
            false,
            y.view(),
            self.shifted.t(),
            F::one(),
            Par::Seq,
        );
        for (i, (yr, gr)) in y.rows().into_iter().zip(g.rows()).enumerate() {
            let yn = sq_norm(yr);
            for (kk, (&gv, &cn)) in gr.iter().zip(&self.norms).enumerate() {
                f(i, kk, (yn - 2.0 * gv.as_f64() + cn).max(0.0));
            }
        }
    }
}

/// Nearest centroid of each row (first index on ties) and the exact squared
/// distance to it, in `f64`.
pub(super) fn assign<F: Float>(
    x: ArrayView2<'_, F>,
    center: &Array1<F>,
    centroids: ArrayView2<'_, F>,
) -> (Vec<usize>, Vec<f64>) {
    let n = x.nrows();
    let prep = Prepared::new(centroids, center);
    let mut labels = vec![0usize; n];
    let mut dist = vec![0.0f64; n];
    labels
        .par_chunks_mut(CHUNK_ROWS)
        .zip(dist.par_chunks_mut(CHUNK_ROWS))
        .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
        .for_each_init(
            || (Array2::zeros((0, 0)), Array2::zeros((0, 0))),
            |(y, g), ((lab, dst), xc)| {
                let mut best = vec![(f64::INFINITY, 0usize); xc.nrows()];
                prep.distances(xc, center, y, g, |i, k, d| {
                    if d < best[i].0 {
                        best[i] = (d, k);
                    }
                });
                for (i, (l, dd)) in lab.iter_mut().zip(dst.iter_mut()).enumerate() {
                    *l = best[i].1;
                    *dd = sq_dist(xc.row(i), centroids.row(*l));
                }
            },
        );
    (labels, dist)
}
