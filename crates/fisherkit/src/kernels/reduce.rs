//! Deterministic parallel reductions over the rows of a data matrix.
//!
//! Floating-point sums depend on the order of the additions. To make EM and
//! k-means bit-reproducible whatever the number of rayon threads, the rows are
//! cut into *leaves* whose size depends only on the number of rows, each leaf
//! is reduced sequentially, and the leaf results are combined along a fixed
//! balanced binary tree (split at the midpoint), in parallel with
//! [`rayon::join`]. Work stealing changes which thread computes a node, never
//! the order of the additions.

use crate::float::Float;
use ndarray::ArrayView2;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Rows processed per chunk by the chunked GMM E-step, k-means and the
/// encoders (and the unit of a reduction leaf): memory per chunk is
/// O(`CHUNK_ROWS`·(K + 2D)).
pub const CHUNK_ROWS: usize = 256;

/// Upper bound on the number of leaves (each leaf owns one accumulator).
pub(crate) const MAX_LEAVES: usize = 64;

/// Rows per leaf for `n` rows: a multiple of [`CHUNK_ROWS`], chosen from `n`
/// only, so that there are at most [`MAX_LEAVES`] leaves.
pub(crate) fn leaf_rows(n: usize) -> usize {
    let chunks = n.div_ceil(CHUNK_ROWS).max(1);
    CHUNK_ROWS * chunks.div_ceil(MAX_LEAVES)
}

/// The row ranges of the leaves of `n` rows (at least one, possibly empty, range).
pub(crate) fn leaves(n: usize) -> Vec<Range<usize>> {
    let step = leaf_rows(n);
    let mut out: Vec<Range<usize>> = (0..n).step_by(step).map(|s| s..(s + step).min(n)).collect();
    if out.is_empty() {
        out.push(0..0);
    }
    out
}

/// Reduces `leaf(range)` over the leaves of `n` rows with `merge(left, right)`
/// along a fixed binary tree; the result does not depend on the thread count.
pub(crate) fn reduce_rows<T, L, M>(n: usize, leaf: &L, merge: &M) -> T
where
    T: Send,
    L: Fn(Range<usize>) -> T + Sync,
    M: Fn(T, T) -> T + Sync,
{
    fn rec<T: Send, L, M>(ranges: &[Range<usize>], leaf: &L, merge: &M) -> T
    where
        L: Fn(Range<usize>) -> T + Sync,
        M: Fn(T, T) -> T + Sync,
    {
        if ranges.len() == 1 {
            return leaf(ranges[0].clone());
        }
        let (a, b) = ranges.split_at(ranges.len() / 2);
        let (l, r) = rayon::join(|| rec(a, leaf, merge), || rec(b, leaf, merge));
        merge(l, r)
    }
    rec(&leaves(n), leaf, merge)
}

/// Buffers reused across the leaves of one reduction: a leaf takes one (or
/// makes one when none is free) and gives it back when done, so a reduction
/// over 64 leaves allocates as many buffers as leaves run at once (about the
/// thread count), not 64. Fresh multi-megabyte buffers cost a page fault and a
/// cleared page per 4 KiB, which was a few per cent of an EM iteration.
/// Results must not depend on which buffer a leaf gets: takers reset every
/// value they read before writing it.
pub(crate) struct Pool<T>(Mutex<Vec<T>>);

impl<T> Pool<T> {
    /// An empty pool.
    pub(crate) fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    /// A free buffer, or `make()` when there is none.
    pub(crate) fn take(&self, make: impl FnOnce() -> T) -> T {
        // A poisoned lock means a leaf panicked while pushing or popping: the
        // vector itself is intact, so keep using it.
        let free = self.0.lock().unwrap_or_else(PoisonError::into_inner).pop();
        free.unwrap_or_else(make)
    }

    /// Returns a buffer for the next leaf.
    pub(crate) fn give(&self, t: T) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(t);
    }
}

/// `sums` (K) += the column sums of `q` (n, K), in `f64`, row after row (the
/// order of the additions does not depend on the layout of `q`).
pub(crate) fn add_column_sums<F: Float>(sums: &mut [f64], q: ArrayView2<'_, F>) {
    for row in q.rows() {
        match row.as_slice() {
            // contiguous rows: a loop that vectorises
            Some(r) => sums.iter_mut().zip(r).for_each(|(a, &q)| *a += q.as_f64()),
            None => sums
                .iter_mut()
                .zip(row)
                .for_each(|(a, &q)| *a += q.as_f64()),
        }
    }
}

/// $\sum_i x_i$ in `f64`, in 8 interleaved partial sums (so the loop vectorises;
/// the order is fixed, so the bits do not depend on anything but `x`).
pub(crate) fn lane_sum(x: &[f64]) -> f64 {
    lane_sum_of(x, |v| v)
}

/// $\sum_i x_i^2$ in `f64` (each $x_i$ widened, then squared), in the 8
/// interleaved partial sums of [`lane_sum`]: the L2 norm of an encoding.
pub(crate) fn sum_of_squares<F: Float>(x: &[F]) -> f64 {
    lane_sum_of(x, |v| {
        let v = v.as_f64();
        v * v
    })
}

/// $\sum_i f(x_i)$ in 8 interleaved `f64` partial sums, lane $j$ taking the
/// elements $i \equiv j \pmod 8$, combined pairwise at the end.
#[inline(always)]
fn lane_sum_of<T: Copy>(x: &[T], f: impl Fn(T) -> f64) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += f(v);
        }
    }
    for (l, &v) in lanes.iter_mut().zip(it.remainder()) {
        *l += f(v);
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_cover_rows_exactly_once() {
        for n in [0, 1, 255, 256, 257, 10_000, 1_000_000] {
            let l = leaves(n);
            assert!(l.len() <= MAX_LEAVES);
            let mut next = 0;
            for r in &l {
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn reduction_is_independent_of_thread_count() {
        let vals: Vec<f64> = (0..100_000).map(|i| 1.0 / (1.0 + i as f64)).collect();
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    reduce_rows(
                        vals.len(),
                        &|r: Range<usize>| vals[r].iter().sum::<f64>(),
                        &|a, b| a + b,
                    )
                })
        };
        let one = run(1);
        assert_eq!(one.to_bits(), run(3).to_bits());
        assert!((one - vals.iter().sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn lane_sums_are_exact_on_integers_and_close_on_fractions() {
        // integers below 2^53: every partial sum is exact, any order
        for n in [0usize, 1, 7, 8, 9, 1000, 1003] {
            let x: Vec<f64> = (0..n).map(|i| (i * i % 97) as f64).collect();
            let want: f64 = x.iter().sum();
            assert_eq!(lane_sum(&x), want, "n = {n}");
            let sq: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
            let want: f64 = sq.iter().map(|&v| (v * v) as f64).sum();
            assert_eq!(sum_of_squares(&sq), want, "n = {n}");
        }
        // fractions: close to the compensated (Kahan) sum; 10⁵ rounded additions
        // drift by ~√n ulp, so allow 1e-13 (~450 ulp), far below any caller's need
        let x: Vec<f64> = (0..100_003).map(|i| 1.0 / (1.0 + i as f64)).collect();
        let (mut s, mut c) = (0.0f64, 0.0f64);
        for &v in &x {
            let y = v * v - c;
            let t = s + y;
            c = (t - s) - y;
            s = t;
        }
        assert!((sum_of_squares(&x) - s).abs() <= 1e-13 * s);
    }
}
