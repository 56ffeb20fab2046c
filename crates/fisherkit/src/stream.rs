//! Data that arrive in chunks of rows: the interface of out-of-core EM.
//!
//! The library never reads files. A caller that holds more rows than fit in
//! memory passes a *pass* closure: called with a visitor, it feeds the
//! visitor every row of the data set, in consecutive chunks (n_c, D), in the
//! same order at every call, and returns the visitor's first error. The
//! streamed fits ([`crate::gmm::GmmParams::fit_streaming`],
//! [`crate::mfa::MfaParams::fit_streaming`]) make one pass per EM iteration,
//! summing the mergeable E-step statistics of the chunks, so their memory is
//! O(chunk · (K + D) + K · D) whatever N. The chunking is the caller's: the
//! same chunks give the same bits.

use crate::float::Float;
use ndarray::{Array2, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The visitor a pass feeds with chunks (n_c, D) of rows.
pub type ChunkVisitor<'a, F, E> = dyn FnMut(ArrayView2<'_, F>) -> Result<(), E> + 'a;

/// A pass over the data: calls the visitor on every chunk, in a fixed order,
/// stopping at (and returning) its first error.
pub type DataPass<'a, F, E> = dyn FnMut(&mut ChunkVisitor<'_, F, E>) -> Result<(), E> + 'a;

/// The ChaCha8 stream of the initialisation sample (restart r of EM uses stream r).
pub(crate) const SAMPLE_STREAM: u64 = u64::MAX;

/// A uniform sample without replacement of at most `cap` rows of a stream
/// (Vitter's algorithm R): row $i$ (0-based) replaces a random slot with
/// probability $\mathrm{cap}/(i+1)$ once the reservoir is full. While the
/// stream has at most `cap` rows the sample is all of them, in order, and no
/// random number is drawn.
pub(crate) struct Reservoir<F: Float> {
    cap: usize,
    dim: usize,
    seen: u64,
    rows: Vec<F>,
    rng: ChaCha8Rng,
}

impl<F: Float> Reservoir<F> {
    pub fn new(cap: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(SAMPLE_STREAM);
        Self {
            cap,
            dim: 0,
            seen: 0,
            rows: Vec::new(),
            rng,
        }
    }

    /// Offers the rows of `x` (n, D); D is the same for every call (checked by the caller).
    pub fn push(&mut self, x: ArrayView2<'_, F>) {
        self.dim = x.ncols();
        for row in x.rows() {
            let i = self.seen;
            self.seen += 1;
            if (i as usize) < self.cap {
                self.rows.extend(row.iter().copied());
            } else {
                let j = self.rng.random_range(0..=i) as usize;
                if j < self.cap {
                    let d = self.dim;
                    self.rows[j * d..(j + 1) * d]
                        .iter_mut()
                        .zip(row.iter())
                        .for_each(|(a, &b)| *a = b);
                }
            }
        }
    }

    /// Number of rows offered.
    pub fn seen(&self) -> usize {
        self.seen as usize
    }

    /// The sample (min(cap, seen), D).
    pub fn into_matrix(self) -> Array2<F> {
        let n = self.rows.len().checked_div(self.dim).unwrap_or(0);
        Array2::from_shape_vec((n, self.dim), self.rows).expect("whole rows")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservoir_keeps_everything_below_cap_and_is_uniform_above() {
        let x = Array2::from_shape_fn((10, 2), |(i, j)| (i * 2 + j) as f64);
        let mut r = Reservoir::new(10, 0);
        r.push(x.slice(ndarray::s![..4, ..]));
        r.push(x.slice(ndarray::s![4.., ..]));
        assert_eq!(r.into_matrix(), x);
        // inclusion frequencies of 100 rows in samples of 10: each ≈ 0.1
        let y = Array2::from_shape_fn((100, 1), |(i, _)| i as f64);
        let mut hits = [0usize; 100];
        let trials = 2000;
        for s in 0..trials {
            let mut r = Reservoir::new(10, s);
            for c in y.axis_chunks_iter(ndarray::Axis(0), 7) {
                r.push(c);
            }
            assert_eq!(r.seen(), 100);
            let m = r.into_matrix();
            assert_eq!(m.nrows(), 10);
            for v in m.column(0) {
                hits[*v as usize] += 1;
            }
        }
        // binomial(2000, 0.1): sd ≈ 13.4; 6 sd bounds
        for (i, h) in hits.iter().enumerate() {
            assert!((120..=280).contains(h), "row {i} sampled {h} times");
        }
    }
}
