//! k-means clustering: greedy k-means++ seeding and Lloyd iterations
//! (`docs/math.md` §8).
//!
//! Minimises the inertia $\sum_i \min_k \lVert x_i - c_k \rVert^2$ over the
//! centroids $c_k$. The squared distances of a chunk of rows to all centroids
//! are one GEMM, $\lVert y \rVert^2 - 2\, y \cdot c'_k + \lVert c'_k \rVert^2$
//! with $y = x - m$, $c' = c - m$ and $m$ the data mean (centring keeps the
//! expansion accurate in `f32` when the data sit far from the origin). Chunks
//! run in parallel with rayon; sums are reduced in an order that does not
//! depend on the number of threads, so a seed fixes the result bit for bit.

mod distances;
mod error;
mod lloyd;
mod model;
mod params;
mod seeding;

pub use distances::squared_distances;
pub use error::KMeansError;
pub use model::KMeans;
pub use params::{kmeans_defaults, KMeansParams, ValidKMeansParams};
pub use seeding::{default_local_trials, kmeans_plus_plus, kmeans_plus_plus_with_trials};

#[cfg(test)]
mod tests;
