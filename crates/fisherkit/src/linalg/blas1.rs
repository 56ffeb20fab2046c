//! BLAS-1 kernels on slices with `f64` accumulation: dot products and
//! $w \leftarrow w + a x$, the inner loops of the SVMs' coordinate descent.

use crate::float::Float;

/// $\sum_j w_j x_j$ in `f64` with 8 independent accumulators (vectorisable).
#[inline]
pub(crate) fn dot<F: Float>(w: &[f64], x: &[F]) -> f64 {
    let mut acc = [0.0f64; 8];
    let wc = w.chunks_exact(8);
    let xc = x.chunks_exact(8);
    let (wr, xr) = (wc.remainder(), xc.remainder());
    for (a, b) in wc.zip(xc) {
        for l in 0..8 {
            acc[l] += a[l] * b[l].as_f64();
        }
    }
    let mut s = acc.iter().sum::<f64>();
    for (a, b) in wr.iter().zip(xr) {
        s += a * b.as_f64();
    }
    s
}

/// $\sum_j x_j y_j$ in `f64` with 8 independent accumulators (vectorisable).
#[inline]
pub(crate) fn dot_ff<F: Float>(x: &[F], y: &[F]) -> f64 {
    let mut acc = [0.0f64; 8];
    let xc = x.chunks_exact(8);
    let yc = y.chunks_exact(8);
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            acc[l] += a[l].as_f64() * b[l].as_f64();
        }
    }
    let mut s = acc.iter().sum::<f64>();
    for (a, b) in xr.iter().zip(yr) {
        s += a.as_f64() * b.as_f64();
    }
    s
}

/// $w \leftarrow w + a x$.
#[inline]
pub(crate) fn axpy<F: Float>(a: f64, x: &[F], w: &mut [f64]) {
    for (wj, xj) in w.iter_mut().zip(x) {
        *wj += a * xj.as_f64();
    }
}

/// Column block of [`dots`]: a multiple of 8, so that blocking keeps each
/// lane's order; `BLOCK` × 4 B of each row of `xs` stay in cache while a
/// block of `w` streams past them.
const DOTS_BLOCK: usize = 2048;

/// $s_{ik} = \sum_j w_{kj} x_{ij}$ for every row $x_i$ of `xs` (each of
/// length D) and every row $w_k$ of `w` (K, D), as an (|xs|, K) array: the
/// scores of a batch of features under K linear classifiers.
///
/// Each $s_{ik}$ is accumulated in `f64` exactly as [`dot_ff`] does (8 lane
/// sums over $j \equiv l \pmod 8$ in increasing j, the lanes added in order,
/// then the last D mod 8 terms), so a row gets the same bits in any batch;
/// the batch only saves memory traffic — each row of `w` is read once per
/// batch, in column blocks, instead of once per feature (at 67 classes ×
/// 751 000 dims, 201 MB a feature). Classes run in parallel.
///
/// # Panics
/// A row of `xs` whose length is not `w.ncols()`; `w` not in standard layout.
///
/// ```
/// use fisherkit::linalg::dots;
/// use ndarray::array;
/// let w = array![[1.0f32, 2.0, 3.0], [0.5, 0.0, -1.0]];
/// let s = dots(w.view(), &[&[1.0, 1.0, 1.0], &[2.0, 0.0, 4.0]]);
/// assert_eq!(s, array![[6.0, -0.5], [14.0, -3.0]]);
/// ```
pub fn dots(w: ndarray::ArrayView2<'_, f32>, xs: &[&[f32]]) -> ndarray::Array2<f64> {
    use rayon::prelude::*;
    let (k, d) = w.dim();
    assert!(xs.iter().all(|x| x.len() == d), "rows of length {d}");
    let w = w.as_slice().expect("standard layout");
    let main = d - d % 8;
    let per_class: Vec<Vec<f64>> = (0..k)
        .into_par_iter()
        .map(|c| {
            let wr = &w[c * d..(c + 1) * d];
            let mut acc = vec![[0.0f64; 8]; xs.len()];
            super::vectorized(
                #[inline(always)]
                || {
                    for j0 in (0..main).step_by(DOTS_BLOCK) {
                        let j1 = (j0 + DOTS_BLOCK).min(main);
                        for (a, x) in acc.iter_mut().zip(xs) {
                            let (wc, xc) = (wr[j0..j1].chunks_exact(8), x[j0..j1].chunks_exact(8));
                            for (u, v) in wc.zip(xc) {
                                for l in 0..8 {
                                    a[l] += u[l] as f64 * v[l] as f64;
                                }
                            }
                        }
                    }
                },
            );
            acc.iter()
                .zip(xs)
                .map(|(a, x)| {
                    let mut s = a.iter().sum::<f64>();
                    for j in main..d {
                        s += wr[j] as f64 * x[j] as f64;
                    }
                    s
                })
                .collect()
        })
        .collect();
    ndarray::Array2::from_shape_fn((xs.len(), k), |(i, c)| per_class[c][i])
}
