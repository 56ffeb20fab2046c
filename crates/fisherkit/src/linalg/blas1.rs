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
