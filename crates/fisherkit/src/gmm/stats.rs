//! Mergeable E-step sufficient statistics of a diagonal GMM and the M-step.
//!
//! For posteriors $q_{ik}$ and a reference point $c$ (D), with $y_i = x_i - c$:
//! $n_k = \sum_i q_{ik}$, $S^1_k = \sum_i q_{ik}\, y_i$,
//! $S^2_k = \sum_i q_{ik}\, y_i^2$ (element-wise square), plus the number of
//! rows and $\sum_i \log p(x_i)$. Sums over disjoint shards add up (after
//! shifting to a common $c$), so EM can run over streamed or distributed data:
//! `update_from_statistics(sum of shard statistics)` is exactly one batch EM
//! step. Centring on $c$ (the model's mixture mean) avoids the cancellation of
//! $E[x^2] - \mu^2$ when the data sit far from the origin.

use super::GmmError;
use crate::float::Float;
use crate::kernels::reduce::reduce_rows;
use crate::kernels::screen::DiagScreen;
use crate::linalg::Par;
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis, Zip};

/// Lower bound on the variances, applied in the M-step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VarianceFloor {
    /// $\sigma^2_{kd} \ge f \cdot \operatorname{Var}(x_d)$, the (1/N) variance
    /// of dimension d of the data (derived from the statistics themselves). A
    /// constant dimension uses instead the mean variance of the non-constant
    /// dimensions (or 1 if all are constant), so its floor does not depend on
    /// how many dimensions are constant (`docs/math.md` §2.4). The default is
    /// `Relative(1e-3)`.
    Relative(f64),
    /// $\sigma^2_{kd} \ge a$ (VLFeat uses 1e-4).
    Absolute(f64),
}

impl Default for VarianceFloor {
    fn default() -> Self {
        VarianceFloor::Relative(1e-3)
    }
}

impl VarianceFloor {
    pub(crate) fn validate(&self) -> Result<(), GmmError> {
        let (VarianceFloor::Relative(v) | VarianceFloor::Absolute(v)) = *self;
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(GmmError::InvalidHyperParameter {
                name: "variance_floor",
                reason: format!("must be finite and > 0, got {self:?}"),
            })
        }
    }

    /// The floor of each dimension (D), given the data variance (D).
    pub(crate) fn per_dim(&self, data_var: &Array1<f64>) -> Array1<f64> {
        match *self {
            VarianceFloor::Absolute(a) => Array1::from_elem(data_var.len(), a),
            VarianceFloor::Relative(f) => {
                let (sum, count) = data_var
                    .iter()
                    .filter(|&&v| v > 0.0)
                    .fold((0.0, 0usize), |(s, c), &v| (s + v, c + 1));
                let fallback = if count > 0 { sum / count as f64 } else { 1.0 };
                data_var.mapv(|v| f * if v > 0.0 { v } else { fallback })
            }
        }
    }
}

/// A component whose share $n_k / N$ falls below this is re-seeded.
pub const STARVED_FRACTION: f64 = 1e-6;

/// E-step sums of a diagonal GMM over some rows, in `f64` (see the module doc).
///
/// Shapes: `resp_sums` $n_k$ (K), `sum_y` $S^1$ (K, D), `sum_y2` $S^2$ (K, D),
/// `center` $c$ (D).
#[derive(Debug, Clone, PartialEq)]
pub struct GmmStats {
    pub(super) n_rows: f64,
    pub(super) log_likelihood: f64,
    pub(super) center: Array1<f64>,
    pub(super) resp_sums: Array1<f64>,
    pub(super) sum_y: Array2<f64>,
    pub(super) sum_y2: Array2<f64>,
}

impl GmmStats {
    /// Empty statistics (no rows) for K components in D dimensions about `center` (D).
    pub fn zeros(n_components: usize, center: Array1<f64>) -> Self {
        let d = center.len();
        Self {
            n_rows: 0.0,
            log_likelihood: 0.0,
            center,
            resp_sums: Array1::zeros(n_components),
            sum_y: Array2::zeros((n_components, d)),
            sum_y2: Array2::zeros((n_components, d)),
        }
    }

    /// Rebuilds statistics from their parts (e.g. received from another
    /// process), validating shapes and values: `n_rows` ≥ 0, finite
    /// `log_likelihood`, `center` (D), `resp_sums` (K) ≥ 0, `sum_y` and
    /// `sum_y2` (K, D) finite, `sum_y2` ≥ 0.
    pub fn from_parts(
        n_rows: f64,
        log_likelihood: f64,
        center: Array1<f64>,
        resp_sums: Array1<f64>,
        sum_y: Array2<f64>,
        sum_y2: Array2<f64>,
    ) -> Result<Self, GmmError> {
        let bad = |m: String| Err(GmmError::InvalidStatistics(m));
        let (k, d) = (resp_sums.len(), center.len());
        if sum_y.dim() != (k, d) || sum_y2.dim() != (k, d) {
            return bad(format!(
                "sum_y {:?} and sum_y2 {:?} must both be (K, D) = ({k}, {d})",
                sum_y.dim(),
                sum_y2.dim()
            ));
        }
        if !(n_rows.is_finite() && n_rows >= 0.0) {
            return bad(format!("n_rows is {n_rows}; it must be finite and >= 0"));
        }
        if !log_likelihood.is_finite() {
            return bad(format!("log_likelihood is {log_likelihood}"));
        }
        if center.iter().chain(sum_y.iter()).any(|v| !v.is_finite()) {
            return bad("center or sum_y has a non-finite value".into());
        }
        if resp_sums
            .iter()
            .chain(sum_y2.iter())
            .any(|v| !(v.is_finite() && *v >= 0.0))
        {
            return bad("resp_sums and sum_y2 must be finite and >= 0".into());
        }
        Ok(Self {
            n_rows,
            log_likelihood,
            center,
            resp_sums,
            sum_y,
            sum_y2,
        })
    }

    /// Number of rows summed (a float so that weighted or scaled statistics fit).
    pub fn n_rows(&self) -> f64 {
        self.n_rows
    }

    /// $\sum_i \log p(x_i)$ under the model that computed the posteriors.
    pub fn log_likelihood(&self) -> f64 {
        self.log_likelihood
    }

    /// $\frac1N \sum_i \log p(x_i)$ (0 when there are no rows).
    pub fn mean_log_likelihood(&self) -> f64 {
        if self.n_rows > 0.0 {
            self.log_likelihood / self.n_rows
        } else {
            0.0
        }
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.resp_sums.len()
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.center.len()
    }

    /// Reference point $c$ (D).
    pub fn center(&self) -> ArrayView1<'_, f64> {
        self.center.view()
    }

    /// $n_k = \sum_i q_{ik}$ (K).
    pub fn resp_sums(&self) -> ArrayView1<'_, f64> {
        self.resp_sums.view()
    }

    /// $\sum_i q_{ik} (x_i - c)$ (K, D).
    pub fn sum_y(&self) -> ArrayView2<'_, f64> {
        self.sum_y.view()
    }

    /// $\sum_i q_{ik} (x_i - c)^2$ (K, D).
    pub fn sum_y2(&self) -> ArrayView2<'_, f64> {
        self.sum_y2.view()
    }

    /// $\sum_i q_{ik} x_i = S^1_k + n_k c$ (K, D).
    pub fn sum_x(&self) -> Array2<f64> {
        let mut out = self.sum_y.clone();
        for (mut r, &n) in out.rows_mut().into_iter().zip(&self.resp_sums) {
            r.scaled_add(n, &self.center);
        }
        out
    }

    /// $\sum_i q_{ik} x_i^2 = S^2_k + 2 c S^1_k + n_k c^2$ (K, D).
    pub fn sum_x2(&self) -> Array2<f64> {
        let mut out = self.sum_y2.clone();
        for ((mut r, s1), &n) in out
            .rows_mut()
            .into_iter()
            .zip(self.sum_y.rows())
            .zip(&self.resp_sums)
        {
            Zip::from(&mut r)
                .and(&s1)
                .and(&self.center)
                .for_each(|o, &s, &c| *o += 2.0 * c * s + n * c * c);
        }
        out
    }

    /// Re-expresses the sums about another reference point `center` (D),
    /// exactly: $S^1{}' = S^1 + n (c - c')$,
    /// $S^2{}' = S^2 + 2 (c - c') S^1 + n (c - c')^2$.
    pub fn recenter(&mut self, center: ArrayView1<'_, f64>) -> Result<(), GmmError> {
        if center.len() != self.dim() {
            return Err(GmmError::InvalidStatistics(format!(
                "new center has {} values but the statistics have dimension {}",
                center.len(),
                self.dim()
            )));
        }
        if center == self.center {
            return Ok(());
        }
        let delta = &self.center - &center;
        for ((mut s1, mut s2), &n) in self
            .sum_y
            .rows_mut()
            .into_iter()
            .zip(self.sum_y2.rows_mut())
            .zip(&self.resp_sums)
        {
            Zip::from(&mut s1)
                .and(&mut s2)
                .and(&delta)
                .for_each(|a, b, &t| {
                    *b = (*b + 2.0 * t * *a + n * t * t).max(0.0);
                    *a += n * t;
                });
        }
        self.center = center.to_owned();
        Ok(())
    }

    /// Adds `other` into `self` (statistics of the union of the rows). If the
    /// centres differ, `other`'s sums are shifted exactly to `self`'s centre.
    ///
    /// Errors: different K or D.
    pub fn merge(&mut self, other: &GmmStats) -> Result<(), GmmError> {
        if other.n_components() != self.n_components() || other.dim() != self.dim() {
            return Err(GmmError::InvalidStatistics(format!(
                "cannot merge statistics of {} components in dimension {} into {} components in dimension {}",
                other.n_components(),
                other.dim(),
                self.n_components(),
                self.dim()
            )));
        }
        if other.center != self.center {
            let mut o = other.clone();
            o.recenter(self.center.view())?;
            self.add_same_center(&o);
        } else {
            self.add_same_center(other);
        }
        Ok(())
    }

    /// Back to no rows, keeping the centre and the allocations.
    pub(super) fn clear(&mut self) {
        self.n_rows = 0.0;
        self.log_likelihood = 0.0;
        self.resp_sums.fill(0.0);
        self.sum_y.fill(0.0);
        self.sum_y2.fill(0.0);
    }

    pub(super) fn add_same_center(&mut self, o: &GmmStats) {
        self.n_rows += o.n_rows;
        self.log_likelihood += o.log_likelihood;
        self.resp_sums += &o.resp_sums;
        self.sum_y += &o.sum_y;
        self.sum_y2 += &o.sum_y2;
    }

    /// Sums statistics of several shards (in the order given).
    ///
    /// Errors: no statistics, or different K or D.
    pub fn sum<'a>(stats: impl IntoIterator<Item = &'a GmmStats>) -> Result<GmmStats, GmmError> {
        let mut it = stats.into_iter();
        let mut acc = it
            .next()
            .ok_or_else(|| GmmError::InvalidStatistics("no statistics to sum".into()))?
            .clone();
        for s in it {
            acc.merge(s)?;
        }
        Ok(acc)
    }

    /// Per-dimension variance of the data the statistics summarise (D),
    /// $\frac1N \sum_k S^2_k - (\frac1N \sum_k S^1_k)^2$ (as $\sum_k q_{ik} = 1$).
    pub fn data_variance(&self) -> Array1<f64> {
        let n = self.n_rows.max(f64::MIN_POSITIVE);
        let m1 = self.sum_y.sum_axis(Axis(0)) / n;
        let m2 = self.sum_y2.sum_axis(Axis(0)) / n;
        Zip::from(&m2)
            .and(&m1)
            .map_collect(|&a, &b| (a - b * b).max(0.0))
    }

    /// Statistics of hard assignments: $q_{ik} = [l_i = k]$ for the rows of
    /// `x` (N, D) and `labels` (N), about `center` (D). Log-likelihood 0.
    pub(crate) fn from_labels<F: Float>(
        x: ArrayView2<'_, F>,
        labels: ArrayView1<'_, usize>,
        k: usize,
        center: Array1<f64>,
    ) -> Self {
        reduce_rows(
            x.nrows(),
            &|r| {
                let mut st = GmmStats::zeros(k, center.clone());
                for i in r {
                    let l = labels[i];
                    st.n_rows += 1.0;
                    st.resp_sums[l] += 1.0;
                    let (mut s1, mut s2) = (st.sum_y.row_mut(l), st.sum_y2.row_mut(l));
                    Zip::from(&mut s1)
                        .and(&mut s2)
                        .and(x.row(i))
                        .and(&center)
                        .for_each(|a, b, &v, &c| {
                            let y = v.as_f64() - c;
                            *a += y;
                            *b += y * y;
                        });
                }
                st
            },
            &|mut a, b| {
                a.add_same_center(&b);
                a
            },
        )
    }
}

/// Mean (D) and variance (D) of the rows of `x` (N, D), two-pass, in `f64`.
pub(crate) fn data_mean_var<F: Float>(x: ArrayView2<'_, F>) -> (Array1<f64>, Array1<f64>) {
    let (n, d) = x.dim();
    let pass = |m: Option<&Array1<f64>>| {
        reduce_rows(
            n,
            &|r| {
                let mut acc = Array1::<f64>::zeros(d);
                for row in x.slice(s![r, ..]).rows() {
                    match m {
                        None => Zip::from(&mut acc)
                            .and(&row)
                            .for_each(|a, &v| *a += v.as_f64()),
                        Some(m) => Zip::from(&mut acc).and(&row).and(m).for_each(|a, &v, &c| {
                            let t = v.as_f64() - c;
                            *a += t * t
                        }),
                    }
                }
                acc
            },
            &|a, b| a + b,
        ) / n.max(1) as f64
    };
    let mean = pass(None);
    let var = pass(Some(&mean));
    (mean, var)
}

/// Result of an M-step: the model and how many components were re-seeded.
pub(crate) struct MStep<M> {
    pub model: M,
    pub reseeded: usize,
}

/// The M-step: $w_k = n_k/N$, $\mu_k = c + S^1_k/n_k$,
/// $\sigma^2_k = \max(S^2_k/n_k - (S^1_k/n_k)^2, \text{floor})$; components with
/// $n_k < $ [`STARVED_FRACTION`]$\cdot N$ are re-seeded by splitting the
/// heaviest component along its largest-variance dimension.
pub(crate) fn m_step<F: Float, M: DiagMixture<F>>(
    st: &GmmStats,
    floor: VarianceFloor,
) -> Result<MStep<M>, GmmError> {
    floor.validate()?;
    let n = st.n_rows;
    if n.is_nan() || n <= 0.0 {
        return Err(GmmError::InvalidStatistics(
            "the statistics hold no rows: cannot update the model".into(),
        ));
    }
    let (k, d) = (st.n_components(), st.dim());
    // the smallest variance whose reciprocal stays finite in F
    let min_var = F::min_positive_value().as_f64().sqrt();
    let fl = floor.per_dim(&st.data_variance()).mapv(|v| v.max(min_var));
    let mut w = vec![0.0f64; k];
    let mut mu = Array2::<f64>::zeros((k, d));
    let mut var = Array2::<f64>::zeros((k, d));
    let mut starved = Vec::new();
    for kk in 0..k {
        let nk = st.resp_sums[kk];
        if nk.is_nan() || nk <= 0.0 || nk < STARVED_FRACTION * n {
            starved.push(kk);
            continue;
        }
        w[kk] = nk / n;
        let inv = 1.0 / nk;
        for dd in 0..d {
            let m1 = st.sum_y[[kk, dd]] * inv;
            let m2 = st.sum_y2[[kk, dd]] * inv;
            mu[[kk, dd]] = st.center[dd] + m1;
            var[[kk, dd]] = (m2 - m1 * m1).max(fl[dd]);
        }
    }
    if starved.len() == k {
        return Err(GmmError::InvalidStatistics(
            "every component has a zero responsibility sum".into(),
        ));
    }
    for &kk in &starved {
        // heaviest component (first on ties), split along its widest dimension
        let j = (0..k)
            .filter(|&j| w[j] > 0.0)
            .fold(None, |b: Option<usize>, j| match b {
                Some(b) if w[b] >= w[j] => Some(b),
                _ => Some(j),
            })
            .expect("a live component exists");
        let dstar = (0..d).fold(0, |b, dd| if var[[j, dd]] > var[[j, b]] { dd } else { b });
        let delta = 0.5 * var[[j, dstar]].sqrt();
        let row_mu = mu.row(j).to_owned();
        let row_var = var.row(j).to_owned();
        mu.row_mut(kk).assign(&row_mu);
        var.row_mut(kk).assign(&row_var);
        mu[[kk, dstar]] += delta;
        mu[[j, dstar]] -= delta;
        w[j] *= 0.5;
        w[kk] = w[j];
    }
    let total: f64 = w.iter().sum();
    let weights = Array1::from_iter(w.iter().map(|v| F::from_f64_lossy(v / total)));
    let means = mu.mapv(F::from_f64_lossy);
    let variances = var.mapv(|v| {
        let f = F::from_f64_lossy(v);
        if f > F::zero() {
            f
        } else {
            F::min_positive_value()
        }
    });
    Ok(MStep {
        model: M::from_valid(weights, means, variances),
        reseeded: starved.len(),
    })
}

/// The model side of the E- and M-steps: what the E-step of a leaf
/// (`gmm/estep.rs`) reads of a diagonal mixture and how [`m_step`] builds
/// one. `DiagGmm` (`gmm/model.rs`) is its one implementation; the steps are
/// written against it so that they never name the model, which calls them
/// (`model` → `stats`, `estep`, never back).
pub(crate) trait DiagMixture<F: Float>: Sized {
    /// Number of components K.
    fn n_components(&self) -> usize;
    /// Dimension D.
    fn dim(&self) -> usize;
    /// The screening data of the posterior kernel (docs/math.md §2.7).
    fn screen(&self) -> &DiagScreen<F>;
    /// $\log w_k \mathcal N(x_i; \mu_k, \sigma_k^2)$ of the rows of `x` (n, D)
    /// into `out` (n, K), leaving $[y^2, y]$, $y = x - c$, in `scratch` (n, 2D).
    fn log_joint_into(
        &self,
        x: ArrayView2<'_, F>,
        out: ArrayViewMut2<'_, F>,
        scratch: &mut Array2<F>,
        par: Par,
    );
    /// The mixture of parameters already known to be valid.
    fn from_valid(weights: Array1<F>, means: Array2<F>, variances: Array2<F>) -> Self;
}

#[cfg(test)]
mod tests;
