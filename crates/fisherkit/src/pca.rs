//! Principal component analysis by eigendecomposition of the covariance matrix.
//!
//! With $\bar x = \frac1N\sum_i x_i$ and the centred data $X_c$ (N, D), the
//! covariance $S = X_c^\top X_c / (N-1)$ (D, D) is accumulated in `f64` with
//! one GEMM per chunk of rows (chunks in parallel, summed in a fixed order),
//! then decomposed $S = U \Lambda U^\top$ by faer's self-adjoint eigensolver.
//! The components are the eigenvectors of the `n_components` largest
//! eigenvalues, in decreasing order; the explained variances are those
//! eigenvalues — the same as scikit-learn's `PCA` (which takes the SVD of $X_c$:
//! $\lambda_j = s_j^2/(N-1)$).
//!
//! Cost: $N D^2$ multiply-adds for $S$ plus $O(D^3)$ for the eigensolver, memory
//! $O(D^2)$ besides the data: suited to D up to a few thousand and any N.
//!
//! Sign convention: each component is flipped so that its entry of largest
//! absolute value (the first such entry on ties) is positive, as
//! scikit-learn's `svd_flip(u_based_decision=False)`.

use crate::data::{check_matrix, DataError};
use crate::float::Float;
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView2, Axis, Zip};
use rayon::prelude::*;

/// Rows per chunk of the covariance and transform loops.
const CHUNK_ROWS: usize = 1024;
/// Column block of the lower-block-triangular scatter products: only about
/// half of $Y^\top Y$ is computed, then mirrored.
const SYM_BLOCK: usize = 256;
/// Chunks computed in parallel per round of the covariance accumulation. The
/// chunk Gram matrices of a round are summed in chunk order, so the result does
/// not depend on the number of threads; memory is `ROUND_CHUNKS`·D² `f64`.
const ROUND_CHUNKS: usize = 8;

/// Errors of the [`crate::pca`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PcaError {
    /// Bad data (empty, wrong width, NaN or infinite values).
    #[error(transparent)]
    Data(#[from] DataError),
    /// `n_components` is 0.
    #[error("n_components must be at least 1")]
    NoComponents,
    /// More components than the data can give.
    #[error(
        "n_components = {requested} exceeds min(n_samples, dim) = {max} \
         (use PcaParams::n_components_clamped or clamp_components = true to take fewer)"
    )]
    TooManyComponents { requested: usize, max: usize },
    /// Centred PCA needs two samples to estimate a variance.
    #[error("PCA with centring needs at least 2 samples, got {0}")]
    TooFewSamples(usize),
    /// A negative or non-finite explained variance given to [`Pca::from_parts`].
    #[error("explained variance {index} is {value}; variances must be finite and >= 0")]
    InvalidVariance { index: usize, value: f64 },
    /// A total variance given to [`Pca::with_total_variance`] that is not
    /// finite or is below the sum of the kept variances.
    #[error(
        "total variance {total} must be finite and at least the sum of the kept variances ({kept})"
    )]
    InvalidTotalVariance { total: f64, kept: f64 },
    /// The eigensolver did not converge.
    #[error("the eigendecomposition of the {0}x{0} covariance matrix did not converge")]
    Eigen(usize),
}

/// Hyper-parameters of [`Pca`]: build, then [`PcaParams::fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcaParams {
    /// Number of components kept, $1 \le$ `n_components` $\le \min(N, D)$
    /// (see `clamp_components`).
    pub n_components: usize,
    /// Divide each projected coordinate by $\sqrt{\lambda_j}$ so that it has
    /// unit variance on the training data. Components whose eigenvalue is
    /// numerically zero ($\lambda_j \le \lambda_1 D \epsilon_{64}$) are mapped to 0.
    pub whiten: bool,
    /// Subtract the mean before projecting (the usual PCA). Without centring
    /// the decomposed matrix is the second moment $X^\top X / N$ and the mean
    /// is taken as 0.
    pub center: bool,
    /// When `n_components` > min(N, D): take min(N, D) components instead of
    /// failing. The fitted [`Pca::n_components`] tells how many were kept.
    pub clamp_components: bool,
}

impl PcaParams {
    /// `n_components` components, no whitening, centred, no clamping.
    pub fn new(n_components: usize) -> Self {
        Self {
            n_components,
            whiten: false,
            center: true,
            clamp_components: false,
        }
    }

    /// Sets `whiten`.
    pub fn whiten(mut self, whiten: bool) -> Self {
        self.whiten = whiten;
        self
    }

    /// Sets `center`.
    pub fn center(mut self, center: bool) -> Self {
        self.center = center;
        self
    }

    /// Sets `clamp_components`.
    pub fn clamp_components(mut self, clamp: bool) -> Self {
        self.clamp_components = clamp;
        self
    }

    /// The number of components a fit on `n_samples` rows of dimension `dim`
    /// takes when clamping: $\min(\text{n\_components}, N, D)$ — e.g. the
    /// pipeline's "500, or fewer if D is smaller".
    pub fn n_components_clamped(&self, n_samples: usize, dim: usize) -> usize {
        self.n_components.min(n_samples).min(dim)
    }

    /// Checks every setting that does not depend on the data
    /// (`n_components` ≥ 1; the flags are all valid) and returns the checked
    /// parameters, which every fit runs on. `n_components` ≤ min(N, D)
    /// (unless clamping) and N ≥ 2 with centring are checked against the
    /// data when fitting.
    ///
    /// ```
    /// use fisherkit::pca::{PcaError, PcaParams};
    /// assert!(PcaParams::new(2).whiten(true).check().is_ok());
    /// let e = PcaParams::new(0).check().unwrap_err();
    /// assert_eq!(e, PcaError::NoComponents);
    /// assert!(e.to_string().contains("n_components"));
    /// ```
    pub fn check(&self) -> Result<ValidPcaParams, PcaError> {
        if self.n_components == 0 {
            return Err(PcaError::NoComponents);
        }
        Ok(ValidPcaParams(*self))
    }

    /// [`PcaParams::check`], then [`ValidPcaParams::fit`]: fits the PCA on
    /// `x` (N, D), rows are samples.
    ///
    /// # Errors
    /// Empty or non-finite data, `n_components` = 0, `n_components` >
    /// min(N, D) without `clamp_components`, N < 2 with centring.
    ///
    /// ```
    /// use fisherkit::pca::PcaParams;
    /// use ndarray::Array2;
    /// // 3-D points on the plane z = x + y
    /// let x = Array2::from_shape_fn((50, 3), |(i, j)| {
    ///     let (a, b) = ((i % 7) as f64, (i / 7) as f64);
    ///     [a, b, a + b][j]
    /// });
    /// let pca = PcaParams::new(2).fit(x.view()).unwrap();
    /// let y = pca.transform(x.view()).unwrap(); // (50, 2)
    /// assert_eq!(y.dim(), (50, 2));
    /// // two components keep all the variance: the third eigenvalue is 0
    /// let full = PcaParams::new(3).fit(x.view()).unwrap();
    /// assert!(full.explained_variance()[2] < 1e-9);
    /// ```
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<Pca<F>, PcaError> {
        self.check()?.fit(x)
    }

    /// [`PcaParams::check`], then [`ValidPcaParams::fit_moments`]: fits the
    /// PCA from streamed sums ([`PcaMoments`]) instead of a data matrix.
    ///
    /// # Errors
    /// As [`PcaParams::fit`] (no sample, too few samples, too many components).
    pub fn fit_moments<F: Float>(&self, m: &PcaMoments) -> Result<Pca<F>, PcaError> {
        self.check()?.fit_moments(m)
    }
}

/// [`PcaParams`] that passed [`PcaParams::check`]; only `check` makes one,
/// so its fits check the data but never the settings again (linfa's params
/// → checked params → fit). Reads as the parameters (`Deref`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidPcaParams(PcaParams);

impl std::ops::Deref for ValidPcaParams {
    type Target = PcaParams;
    fn deref(&self) -> &PcaParams {
        &self.0
    }
}

impl ValidPcaParams {
    /// Fits the PCA on `x` (N, D); see [`PcaParams::fit`]. Errors: those of
    /// the data only (empty or non-finite, too many components, N < 2 with
    /// centring).
    pub fn fit<F: Float>(&self, x: ArrayView2<'_, F>) -> Result<Pca<F>, PcaError> {
        check_matrix(x, None, "PCA training data")?;
        let (n, d) = x.dim();
        let k = self.components_for(n, d)?;

        let mean = if self.center {
            column_mean(x)
        } else {
            Array1::zeros(d)
        };
        let mut cov = scatter_matrix(x, &mean);
        let denom = if self.center { n - 1 } else { n } as f64;
        cov.mapv_inplace(|v| v / denom);

        self.pca_of_covariance(mean, cov, k)
    }

    /// Checks the request against N samples of dimension D; returns the
    /// number of components to keep, $\min(\text{n\_components}, N, D)$.
    fn components_for(&self, n: usize, d: usize) -> Result<usize, PcaError> {
        let max = n.min(d);
        if self.n_components > max && !self.clamp_components {
            return Err(PcaError::TooManyComponents {
                requested: self.n_components,
                max,
            });
        }
        if self.center && n < 2 {
            return Err(PcaError::TooFewSamples(n));
        }
        Ok(self.n_components_clamped(n, d))
    }

    /// The PCA of the covariance `cov` (D, D, lower triangle read) about
    /// `mean` (D), keeping `k` components: the eigen step shared by
    /// [`ValidPcaParams::fit`] and [`ValidPcaParams::fit_moments`].
    fn pca_of_covariance<F: Float>(
        &self,
        mean: Array1<f64>,
        cov: Array2<f64>,
        k: usize,
    ) -> Result<Pca<F>, PcaError> {
        let d = mean.len();
        let cov_ref =
            faer::MatRef::from_row_major_slice(cov.as_slice().expect("standard layout"), d, d);
        let evd = cov_ref
            .self_adjoint_eigen(faer::Side::Lower)
            .map_err(|_| PcaError::Eigen(d))?;
        let u = evd.U();
        let lambda = evd.S().column_vector();
        // Eigenvalues come in nondecreasing order: take the last k, reversed.
        let mut components = Array2::<f64>::zeros((k, d));
        let mut variance = Array1::<f64>::zeros(k);
        for j in 0..k {
            let src = d - 1 - j;
            variance[j] = lambda[src].max(0.0);
            let mut row = components.row_mut(j);
            for i in 0..d {
                row[i] = u[(i, src)];
            }
            // svd_flip: largest-|value| entry positive (first on ties).
            let mut arg = 0;
            for i in 1..d {
                if row[i].abs() > row[arg].abs() {
                    arg = i;
                }
            }
            if row[arg] < 0.0 {
                row.mapv_inplace(|v| -v);
            }
        }
        let total_variance: f64 = (0..d).map(|i| cov[[i, i]]).sum();
        // Built by `from_parts` from the rounded parameters, so that a PCA
        // rebuilt from its saved parts is identical (projection included).
        let pca = Pca::from_parts(
            mean.mapv(F::from_f64_lossy),
            components.mapv(F::from_f64_lossy),
            variance,
            self.whiten,
        )?;
        Ok(Pca {
            // the trace may fall below the kept eigenvalues' sum by rounding
            total_variance: total_variance.max(pca.explained_variance.sum()),
            ..pca
        })
    }

    /// Fits the PCA from streamed sums ([`PcaMoments`]) instead of a data
    /// matrix: the same covariance $S = \sum_i (x_i-\bar x)(x_i-\bar x)^\top/(N-1)$
    /// (or about 0 without centring, divided by N), the same eigen step and
    /// sign rule as [`PcaParams::fit`]; equal to it up to the grouping of the sums.
    ///
    /// # Errors
    /// No sample, too few samples, too many components.
    pub fn fit_moments<F: Float>(&self, m: &PcaMoments) -> Result<Pca<F>, PcaError> {
        let (n, d) = (m.n, m.shift.len());
        if n == 0 {
            return Err(PcaError::Data(DataError::Empty {
                what: "PCA training data",
            }));
        }
        let k = self.components_for(n, d)?;
        // About the mean: Σ(x−x̄)(x−x̄)ᵀ = S_y − n δδᵀ with δ = ȳ = Σy/n;
        // about 0: Σxxᵀ = S_y + s(Σy)ᵀ + (Σy)sᵀ + n s sᵀ (s = shift).
        let nf = n as f64;
        let delta = &m.sum / nf;
        let (sh, sy) = (&m.shift, &m.sum);
        let mut cov = m.scatter.clone();
        for ((i, j), c) in cov.indexed_iter_mut() {
            *c += if self.center {
                -nf * delta[i] * delta[j]
            } else {
                sh[i] * sy[j] + sy[i] * sh[j] + nf * sh[i] * sh[j]
            };
        }
        let mean = if self.center {
            sh + &delta
        } else {
            Array1::zeros(d)
        };
        let denom = if self.center { n - 1 } else { n } as f64;
        cov.mapv_inplace(|v| v / denom);
        self.pca_of_covariance(mean, cov, k)
    }
}

/// Mergeable sums of a data set seen in blocks, for [`PcaParams::fit_moments`]:
/// the count N, $\sum_i y_i$ and $\sum_i y_i y_i^\top$ (D, D) of the rows
/// shifted by a fixed reference, $y_i = x_i - s$, in `f64` (a reference near
/// the data's mean, e.g. the first block's, avoids the cancellation of the raw
/// second moment). Memory $O(D^2)$ whatever N: the PCA of descriptors that
/// never fit in memory together (docs/pipeline.md §2).
#[derive(Debug, Clone, PartialEq)]
pub struct PcaMoments {
    shift: Array1<f64>,
    n: usize,
    sum: Array1<f64>,
    scatter: Array2<f64>,
}

impl PcaMoments {
    /// Empty sums about the reference `shift` (D).
    pub fn new(shift: Array1<f64>) -> Self {
        let d = shift.len();
        Self {
            shift,
            n: 0,
            sum: Array1::zeros(d),
            scatter: Array2::zeros((d, d)),
        }
    }

    /// Adds the rows of `x` (N, D).
    ///
    /// # Errors
    /// `x` not D wide, or not finite.
    pub fn add<F: Float>(&mut self, x: ArrayView2<'_, F>) -> Result<(), PcaError> {
        if x.nrows() == 0 {
            return Ok(());
        }
        check_matrix(x, Some(self.shift.len()), "PCA training data")?;
        self.scatter += &scatter_matrix(x, &self.shift);
        let n = x.nrows() as f64;
        self.sum += &(column_mean(x) * n - &self.shift * n);
        self.n += x.nrows();
        Ok(())
    }

    /// Adds the sums of `other`, taken about any reference $s'$: with
    /// $\delta = s' - s$, its rows about this reference are $y_i + \delta$, so
    /// $\sum (y_i + \delta) = \Sigma_1 + N'\delta$ and
    /// $\sum (y_i+\delta)(y_i+\delta)^\top = \Sigma_2 + \delta\Sigma_1^\top + \Sigma_1\delta^\top + N'\delta\delta^\top$
    /// (docs/pipeline.md §2: blocks of images summed apart, on other machines, merge exactly).
    ///
    /// # Errors
    /// Another dimension.
    pub fn merge(&mut self, other: &PcaMoments) -> Result<(), PcaError> {
        if other.shift.len() != self.shift.len() {
            return Err(PcaError::Data(DataError::DimensionMismatch {
                what: "PCA moments merged",
                got: other.shift.len(),
                expected: self.shift.len(),
            }));
        }
        if other.shift == self.shift {
            self.scatter += &other.scatter;
            self.sum += &other.sum;
        } else {
            let delta = &other.shift - &self.shift;
            let n = other.n as f64;
            let outer = |a: &Array1<f64>, b: &Array1<f64>| {
                Array2::from_shape_fn((a.len(), b.len()), |(i, j)| a[i] * b[j])
            };
            self.scatter += &other.scatter;
            self.scatter += &outer(&delta, &other.sum);
            self.scatter += &outer(&other.sum, &delta);
            self.scatter += &(outer(&delta, &delta) * n);
            self.sum += &(&other.sum + &(&delta * n));
        }
        self.n += other.n;
        Ok(())
    }

    /// The sums as arrays: (reference $s$ (D), count N, $\sum y_i$ (D),
    /// $\sum y_i y_i^\top$ (D, D)), to send them to another process.
    pub fn parts(&self) -> (&Array1<f64>, usize, &Array1<f64>, &Array2<f64>) {
        (&self.shift, self.n, &self.sum, &self.scatter)
    }

    /// Sums sent by [`PcaMoments::parts`].
    ///
    /// # Errors
    /// Shapes that do not agree, or values that are not finite.
    pub fn from_parts(
        shift: Array1<f64>,
        n: usize,
        sum: Array1<f64>,
        scatter: Array2<f64>,
    ) -> Result<Self, PcaError> {
        let d = shift.len();
        if sum.len() != d || scatter.dim() != (d, d) {
            return Err(PcaError::Data(DataError::DimensionMismatch {
                what: "PCA moments (sum and scatter against the reference)",
                got: sum.len().max(scatter.nrows()).max(scatter.ncols()),
                expected: d,
            }));
        }
        if let Some(&value) = shift
            .iter()
            .chain(&sum)
            .chain(scatter.iter())
            .find(|v| !v.is_finite())
        {
            return Err(PcaError::Data(DataError::NonFinite {
                what: "PCA moments",
                row: 0,
                col: 0,
                value,
            }));
        }
        Ok(Self {
            shift,
            n,
            sum,
            scatter,
        })
    }

    /// Rows added so far.
    pub fn n_samples(&self) -> usize {
        self.n
    }

    /// The dimension D.
    pub fn dim(&self) -> usize {
        self.shift.len()
    }
}

/// Column means of `x` (N, D) in `f64`, chunks in parallel, summed in chunk order.
fn column_mean<F: Float>(x: ArrayView2<'_, F>) -> Array1<f64> {
    let (n, d) = x.dim();
    let partial: Vec<Array1<f64>> = x
        .axis_chunks_iter(Axis(0), CHUNK_ROWS)
        .into_par_iter()
        .map(|c| {
            let mut s = Array1::<f64>::zeros(d);
            for row in c.outer_iter() {
                Zip::from(&mut s)
                    .and(&row)
                    .for_each(|a, &v| *a += v.as_f64());
            }
            s
        })
        .collect();
    let mut mean = Array1::<f64>::zeros(d);
    for p in &partial {
        mean += p;
    }
    mean / n as f64
}

/// $\sum_i (x_i - m)(x_i - m)^\top$ (D, D) in `f64`: each chunk of rows is
/// centred into an `f64` buffer and multiplied by its transpose (GEMM);
/// chunks run in parallel in rounds of [`ROUND_CHUNKS`], summed in order.
/// Only the lower block triangle is formed ($\approx N D^2/2$ multiply-adds).
fn scatter_matrix<F: Float>(x: ArrayView2<'_, F>, mean: &Array1<f64>) -> Array2<f64> {
    let (n, d) = x.dim();
    let mut acc = Array2::<f64>::zeros((d, d));
    let n_chunks = n.div_ceil(CHUNK_ROWS);
    let mut first = 0;
    while first < n_chunks {
        let last = (first + ROUND_CHUNKS).min(n_chunks);
        let grams: Vec<Array2<f64>> = (first..last)
            .into_par_iter()
            .map(|c| {
                let rows = x.slice(s![c * CHUNK_ROWS..((c + 1) * CHUNK_ROWS).min(n), ..]);
                // yt = (x - m)^T, (D, rows) row-major: row blocks are contiguous.
                let mut yt = Array2::<f64>::zeros((d, rows.nrows()));
                Zip::from(yt.columns_mut())
                    .and(rows.rows())
                    .for_each(|mut yr, xr| {
                        Zip::from(&mut yr)
                            .and(&xr)
                            .and(mean)
                            .for_each(|a, &v, &m| *a = v.as_f64() - m);
                    });
                // lower block triangle only: g[J, ..end(J)] = yt[J] yt[..end(J)]^T
                let mut g = Array2::<f64>::zeros((d, d));
                let mut gb = Array2::<f64>::zeros((0, 0));
                for j0 in (0..d).step_by(SYM_BLOCK) {
                    let end = (j0 + SYM_BLOCK).min(d);
                    if gb.dim() != (end - j0, end) {
                        gb = Array2::zeros((end - j0, end));
                    }
                    gemm(
                        gb.view_mut(),
                        false,
                        yt.slice(s![j0..end, ..]),
                        yt.slice(s![..end, ..]).t(),
                        1.0,
                        Par::Seq,
                    );
                    g.slice_mut(s![j0..end, ..end]).assign(&gb);
                }
                g
            })
            .collect();
        for g in &grams {
            acc += g;
        }
        first = last;
    }
    // Mirror the lower triangle (exact symmetry).
    for i in 0..d {
        for j in 0..i {
            acc[[j, i]] = acc[[i, j]];
        }
    }
    acc
}

/// A fitted PCA: $z = W (x - \bar x)$, optionally whitened $z_j / \sqrt{\lambda_j}$.
#[derive(Debug, Clone, PartialEq)]
pub struct Pca<F: Float> {
    /// (k, D), orthonormal rows.
    components: Array2<F>,
    /// (D).
    mean: Array1<F>,
    /// (k), in `f64`.
    explained_variance: Array1<f64>,
    total_variance: f64,
    whiten: bool,
    /// (D, k): components transposed, whitening scale folded in.
    projection: Array2<F>,
}

impl<F: Float> Pca<F> {
    /// Rebuilds a fitted PCA from its parts (e.g. read from a model file):
    /// `mean` (D), `components` (k, D) with orthonormal rows, `explained_variance`
    /// (k), $\lambda_j \ge 0$, and whether to whiten (with the rule of
    /// [`PcaParams::whiten`], $\lambda_1$ taken as the largest given variance).
    ///
    /// # Errors
    /// Shape mismatches, k = 0, D = 0, non-finite values, negative variances.
    pub fn from_parts(
        mean: Array1<F>,
        components: Array2<F>,
        explained_variance: Array1<f64>,
        whiten: bool,
    ) -> Result<Self, PcaError> {
        let (k, d) = components.dim();
        if k == 0 {
            return Err(PcaError::NoComponents);
        }
        check_matrix(components.view(), Some(mean.len()), "PCA components")?;
        check_matrix(mean.view().insert_axis(Axis(0)), Some(d), "PCA mean")?;
        if explained_variance.len() != k {
            return Err(PcaError::Data(DataError::DimensionMismatch {
                what: "PCA explained variances",
                got: explained_variance.len(),
                expected: k,
            }));
        }
        if let Some((j, v)) = explained_variance
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
        {
            return Err(PcaError::InvalidVariance {
                index: j,
                value: *v,
            });
        }
        let top = explained_variance.iter().cloned().fold(0.0, f64::max);
        let floor = top * d as f64 * f64::EPSILON;
        let scale = explained_variance.mapv(|l| {
            if !whiten {
                1.0
            } else if l > floor {
                1.0 / l.sqrt()
            } else {
                0.0
            }
        });
        let mut projection = Array2::<F>::zeros((d, k));
        for j in 0..k {
            for i in 0..d {
                projection[[i, j]] = F::from_f64_lossy(components[[j, i]].as_f64() * scale[j]);
            }
        }
        Ok(Self {
            components,
            mean,
            total_variance: explained_variance.sum(),
            explained_variance,
            whiten,
            projection,
        })
    }

    /// Number of components k.
    pub fn n_components(&self) -> usize {
        self.components.nrows()
    }

    /// Input dimension D.
    pub fn input_dim(&self) -> usize {
        self.components.ncols()
    }

    /// Principal axes (k, D), unit-norm rows in order of decreasing variance.
    pub fn components(&self) -> ArrayView2<'_, F> {
        self.components.view()
    }

    /// Training mean $\bar x$ (D) (zeros when fitted without centring).
    pub fn mean(&self) -> ndarray::ArrayView1<'_, F> {
        self.mean.view()
    }

    /// Variance along each component, $\lambda_j$ (k), decreasing; divisor
    /// N − 1 when centred (scikit-learn's `explained_variance_`), N otherwise.
    pub fn explained_variance(&self) -> ndarray::ArrayView1<'_, f64> {
        self.explained_variance.view()
    }

    /// $\lambda_j / \operatorname{tr} S$ (k): fraction of the total variance
    /// (for a PCA built by [`Pca::from_parts`], of the kept variance).
    pub fn explained_variance_ratio(&self) -> Array1<f64> {
        if self.total_variance > 0.0 {
            &self.explained_variance / self.total_variance
        } else {
            Array1::zeros(self.explained_variance.len())
        }
    }

    /// $\operatorname{tr} S$, the total variance of the training data (the
    /// denominator of [`Pca::explained_variance_ratio`]); for a PCA built by
    /// [`Pca::from_parts`], the sum of the kept variances.
    pub fn total_variance(&self) -> f64 {
        self.total_variance
    }

    /// Sets the total variance $\operatorname{tr} S$ (e.g. read from a model
    /// file), so that [`Pca::explained_variance_ratio`] is that of the fit.
    ///
    /// # Errors
    /// `total` not finite, or below $\sum_j \lambda_j (1 - 10^{-9})$ (the
    /// kept variances cannot exceed the total).
    pub fn with_total_variance(mut self, total: f64) -> Result<Self, PcaError> {
        let kept = self.explained_variance.sum();
        if !total.is_finite() || total < kept * (1.0 - 1e-9) {
            return Err(PcaError::InvalidTotalVariance { total, kept });
        }
        self.total_variance = total;
        Ok(self)
    }

    /// Whether [`Pca::transform`] whitens.
    pub fn whiten(&self) -> bool {
        self.whiten
    }

    /// Projects `x` (N, D) to (N, k): $z_i = W (x_i - \bar x)$, divided by
    /// $\sqrt{\lambda_j}$ when whitening. Chunks of rows in parallel, one GEMM each.
    ///
    /// # Errors
    /// Empty data, a width other than D, non-finite values.
    pub fn transform(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, PcaError> {
        check_matrix(x, Some(self.input_dim()), "data to project")?;
        let k = self.n_components();
        let mut out = Array2::<F>::zeros((x.nrows(), k));
        out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS)
            .into_par_iter()
            .zip(x.axis_chunks_iter(Axis(0), CHUNK_ROWS).into_par_iter())
            .for_each(|(mut o, xc)| {
                let mut y = xc.to_owned();
                y.rows_mut().into_iter().for_each(|mut r| r -= &self.mean);
                gemm(
                    o.view_mut(),
                    false,
                    y.view(),
                    self.projection.view(),
                    F::one(),
                    Par::Seq,
                );
            });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn two_dimensional_by_hand() {
        // Points on the line y = x (plus a small orthogonal spread).
        let x = array![[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [1.1, 0.9], [0.9, 1.1]];
        let pca = PcaParams::new(2).fit(x.view()).unwrap();
        let c = pca.components();
        let r = std::f64::consts::FRAC_1_SQRT_2;
        assert!((c[[0, 0]] - r).abs() < 1e-12 && (c[[0, 1]] - r).abs() < 1e-12);
        // variance along (1,1)/√2: values -√2,0,√2,0.1√2... computed directly.
        let proj: Vec<f64> = x
            .outer_iter()
            .map(|p| ((p[0] - 1.0) + (p[1] - 1.0)) * r)
            .collect();
        let v: f64 = proj.iter().map(|p| p * p).sum::<f64>() / 4.0;
        assert!((pca.explained_variance()[0] - v).abs() < 1e-12);
        let z = pca.transform(x.view()).unwrap();
        for (i, p) in proj.iter().enumerate() {
            assert!((z[[i, 0]] - p).abs() < 1e-12);
        }
    }

    #[test]
    fn errors() {
        let x = Array2::<f64>::zeros((3, 4));
        assert_eq!(
            PcaParams::new(4).fit(x.view()).unwrap_err(),
            PcaError::TooManyComponents {
                requested: 4,
                max: 3
            }
        );
        assert_eq!(
            PcaParams::new(0).fit(x.view()).unwrap_err(),
            PcaError::NoComponents
        );
        let pca = PcaParams::new(9)
            .clamp_components(true)
            .fit(x.view())
            .unwrap();
        assert_eq!(pca.n_components(), 3);
        assert!(pca.transform(Array2::<f64>::zeros((2, 5)).view()).is_err());
        let one = Array2::<f64>::zeros((1, 4));
        assert_eq!(
            PcaParams::new(1).fit(one.view()).unwrap_err(),
            PcaError::TooFewSamples(1)
        );
    }
}
