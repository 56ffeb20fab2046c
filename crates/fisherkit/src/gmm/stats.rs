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

use super::model::DiagGmm;
use super::GmmError;
use crate::data::check_matrix;
use crate::float::{Float, LN_2PI};
use crate::kernels::reduce::{add_column_sums, reduce_rows, Pool, CHUNK_ROWS};
use crate::kernels::screen::{ScreenScratch, SparseRows, REFINE_MIN};
use crate::kernels::softmax::{flush_cutoff, log_joint_to_posteriors_flushed};
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis, Zip};

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
    n_rows: f64,
    log_likelihood: f64,
    center: Array1<f64>,
    resp_sums: Array1<f64>,
    sum_y: Array2<f64>,
    sum_y2: Array2<f64>,
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
    fn clear(&mut self) {
        self.n_rows = 0.0;
        self.log_likelihood = 0.0;
        self.resp_sums.fill(0.0);
        self.sum_y.fill(0.0);
        self.sum_y2.fill(0.0);
    }

    fn add_same_center(&mut self, o: &GmmStats) {
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
pub(crate) struct MStep<F: Float> {
    pub model: DiagGmm<F>,
    pub reseeded: usize,
}

/// The M-step: $w_k = n_k/N$, $\mu_k = c + S^1_k/n_k$,
/// $\sigma^2_k = \max(S^2_k/n_k - (S^1_k/n_k)^2, \text{floor})$; components with
/// $n_k < $ [`STARVED_FRACTION`]$\cdot N$ are re-seeded by splitting the
/// heaviest component along its largest-variance dimension.
pub(crate) fn m_step<F: Float>(st: &GmmStats, floor: VarianceFloor) -> Result<MStep<F>, GmmError> {
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
        model: DiagGmm::from_valid(weights, means, variances),
        reseeded: starved.len(),
    })
}

/// A chunk whose posterior matrix has at most 1/`SPARSE_DENSITY_INV` non-zero
/// entries is accumulated entry by entry (exactly, in `f64`) instead of by
/// the dense GEMM $Q^\top [y^2, y]$: at D = 500 most posteriors underflow.
const SPARSE_DENSITY_INV: usize = 10;

/// Dense chunks whose GEMM sums $Q^\top [y^2, y]$ are added up in `F` before
/// they are added into the `f64` totals: 4 · [`CHUNK_ROWS`] = 1024 rows, few
/// enough that `f32` keeps about 6 significant digits of the partial sums, and
/// the conversion pass (K·2D per flush) is a small fraction of the GEMM.
const FLUSH_CHUNKS: usize = 4;

/// Adds $\sum_i q_{ik} y_i^2$ and $\sum_i q_{ik} y_i$ over the non-zero
/// entries of `q` (n, K), with `yy` = $[y^2, y]$ (n, 2D), into `st` in `f64`.
fn accumulate_sparse<F: Float>(st: &mut GmmStats, q: ArrayView2<'_, F>, yy: ArrayView2<'_, F>) {
    let d = st.dim();
    for (qr, yr) in q.rows().into_iter().zip(yy.rows()) {
        let (y2, y1) = yr.split_at(Axis(0), d);
        for (k, &qv) in qr.iter().enumerate() {
            if qv == F::zero() {
                continue;
            }
            let w = qv.as_f64();
            Zip::from(st.sum_y2.row_mut(k))
                .and(&y2)
                .for_each(|a, &v| *a += w * v.as_f64());
            Zip::from(st.sum_y.row_mut(k))
                .and(&y1)
                .for_each(|a, &v| *a += w * v.as_f64());
        }
    }
}

/// The E-step of one reduction leaf (its chunks, sequentially): the
/// statistics so far and the buffers reused across chunks (and, through a
/// [`Pool`], across the leaves of one E-step).
struct EStepLeaf<F: Float> {
    st: GmmStats,
    /// Dense chunks' GEMM sums $Q^\top [y^2, y]$ (K, 2D) in `F` since the last flush.
    acc: Array2<F>,
    pending: usize,
    /// (CHUNK_ROWS, K) log-joints, then posteriors, of a dense chunk.
    q: Array2<F>,
    /// (n, 2D) $[y^2, y]$ of a dense chunk.
    scratch: Array2<F>,
    /// (CHUNK_ROWS) row log-likelihoods.
    ll: Vec<f64>,
    screen: ScreenScratch<F>,
    rows: SparseRows,
    /// (D) one row's $y = x - c$ in `f64`.
    y64: Vec<f64>,
}

impl<F: Float> EStepLeaf<F> {
    /// Buffers for `g`; [`Self::start`] gives them statistics to add to.
    fn new(g: &DiagGmm<F>) -> Self {
        let (k, d) = (g.n_components(), g.dim());
        Self {
            st: GmmStats::zeros(0, Array1::zeros(0)),
            acc: Array2::zeros((k, 2 * d)),
            pending: 0,
            q: Array2::zeros((CHUNK_ROWS, k)),
            scratch: Array2::zeros((0, 0)),
            ll: vec![0.0; CHUNK_ROWS],
            screen: ScreenScratch::default(),
            rows: SparseRows::default(),
            y64: vec![0.0; d],
        }
    }

    /// Starts a leaf on the statistics `st` (cleared here): nothing pending and
    /// no screening skip carried over from the leaf these buffers served before,
    /// so that a leaf's result depends only on its rows.
    fn start(&mut self, mut st: GmmStats) {
        st.clear();
        self.st = st;
        self.pending = 0;
        self.screen.reset();
    }

    /// The chunk `xc` (n, D) through the screened kernel (docs/math.md §2.7):
    /// exact posteriors of the survivors, sums in `f64`. False (nothing
    /// added) when the chunk is dense.
    fn screened_chunk(&mut self, g: &DiagGmm<F>, xc: ArrayView2<'_, F>) -> bool {
        if !g
            .screen()
            .survivors(xc, None, &mut self.screen, &mut self.rows)
        {
            return false;
        }
        self.add_rows(g, xc);
        true
    }

    /// Adds the rows of `xc` (n, D) whose exact log-joints are in `self.rows` (per row, the
    /// components that matter): their softmax, the sums in `f64` and the log-likelihood.
    fn add_rows(&mut self, g: &DiagGmm<F>, xc: ArrayView2<'_, F>) {
        let n = xc.nrows();
        self.rows.softmax(flush_cutoff::<F>(), &mut self.ll[..n]);
        let st = &mut self.st;
        let c = st.center.as_slice().expect("standard layout");
        for (i, xr) in xc.rows().into_iter().enumerate() {
            self.y64
                .iter_mut()
                .zip(xr.iter())
                .zip(c)
                .for_each(|((y, &x), &c)| *y = x.as_f64() - c);
            for j in self.rows.start[i]..self.rows.start[i + 1] {
                let (k, w) = (self.rows.comp[j] as usize, self.rows.val[j]);
                st.resp_sums[k] += w;
                let s1 = st.sum_y.row_mut(k).into_slice().expect("standard layout");
                let s2 = st.sum_y2.row_mut(k).into_slice().expect("standard layout");
                for ((a1, a2), &y) in s1.iter_mut().zip(s2.iter_mut()).zip(&self.y64) {
                    let wy = w * y;
                    *a1 += wy;
                    *a2 += wy * y;
                }
            }
        }
        // The kernel's log-joints leave out −D/2·log 2π.
        let norm = -0.5 * g.dim() as f64 * LN_2PI;
        st.log_likelihood += self.ll[..n].iter().map(|l| l + norm).sum::<f64>();
        st.n_rows += n as f64;
    }

    /// `f32` only (docs/math.md §2.8): the posteriors of the GEMM in the first n rows of
    /// `self.q` that carry the mass ($q \ge$ [`REFINE_MIN`]) get their log-joints again in
    /// the centred direct form in `f64`, the others being dropped; then [`Self::add_rows`].
    fn add_refined(&mut self, g: &DiagGmm<F>, xc: ArrayView2<'_, F>) {
        let n = xc.nrows();
        self.rows
            .set_from_dense(self.q.slice(s![..n, ..]), REFINE_MIN);
        g.screen().exact_log_joints(xc, &mut self.rows);
        self.add_rows(g, xc);
    }

    /// The chunk `xc` (n, D) through the GEMM kernel: log-space posteriors
    /// $Q$ (n, K), then the sparse sums in `f64` when at most
    /// 1/[`SPARSE_DENSITY_INV`] of $Q$ is non-zero, else the GEMM
    /// $Q^\top [y^2, y]$ in `F` (flushed into `f64` every [`FLUSH_CHUNKS`]).
    fn dense_chunk(&mut self, g: &DiagGmm<F>, xc: ArrayView2<'_, F>) {
        let (n, k, d) = (xc.nrows(), g.n_components(), g.dim());
        let mut qc = self.q.slice_mut(s![..n, ..]);
        g.log_joint_into(xc, qc.view_mut(), &mut self.scratch, Par::Seq);
        let nnz = log_joint_to_posteriors_flushed(qc.view_mut(), &mut self.ll[..n]);
        // `log_joint_into` leaves [y², y], y = x − c, in `scratch` (n, 2D)
        debug_assert_eq!(self.scratch.dim(), (n, 2 * d));
        if nnz * SPARSE_DENSITY_INV <= n * k && F::EPS.as_f64() > 1e-12 {
            self.add_refined(g, xc);
            return;
        }
        if nnz * SPARSE_DENSITY_INV <= n * k {
            accumulate_sparse(&mut self.st, qc.view(), self.scratch.view());
        } else {
            gemm(
                self.acc.view_mut(),
                self.pending > 0,
                qc.t(),
                self.scratch.view(),
                F::one(),
                Par::Seq,
            );
            self.pending += 1;
            if self.pending == FLUSH_CHUNKS {
                flush_dense(&mut self.st, &self.acc);
                self.pending = 0;
            }
        }
        add_column_sums(
            self.st.resp_sums.as_slice_mut().expect("standard layout"),
            qc.view(),
        );
        self.st.log_likelihood += self.ll[..n].iter().sum::<f64>();
        self.st.n_rows += n as f64;
    }

    /// The leaf's statistics; the buffers stay for [`Self::start`].
    fn finish(&mut self) -> GmmStats {
        if self.pending > 0 {
            flush_dense(&mut self.st, &self.acc);
            self.pending = 0;
        }
        std::mem::replace(&mut self.st, GmmStats::zeros(0, Array1::zeros(0)))
    }
}

/// Adds dense GEMM sums `acc` = $Q^\top [y^2, y]$ (K, 2D) into the `f64` statistics.
fn flush_dense<F: Float>(st: &mut GmmStats, acc: &Array2<F>) {
    let d = st.dim();
    Zip::from(&mut st.sum_y2)
        .and(acc.slice(s![.., ..d]))
        .for_each(|a, &v| *a += v.as_f64());
    Zip::from(&mut st.sum_y)
        .and(acc.slice(s![.., d..]))
        .for_each(|a, &v| *a += v.as_f64());
}

impl<F: Float> DiagGmm<F> {
    /// E-step sums over the rows of `x` (N, D) about the model's mixture mean
    /// $c = \sum_k w_k \mu_k$ (see [`GmmStats`]).
    ///
    /// Per chunk of [`CHUNK_ROWS`] rows, first the screened kernel
    /// (docs/math.md §2.7): when few components per row can have a posterior
    /// above $e^{-50}$ of the row's largest, only those are evaluated, exactly
    /// (centred direct form in `f64`), and their sums are added in `f64`.
    /// Otherwise: log-space posteriors $Q$ (n, K)
    /// from [`DiagGmm::log_joint_into`] (terms below $10^{-19}$ of a row's
    /// largest in `f32`, $10^{-154}$ in `f64`, flushed to 0), then one GEMM
    /// $Q^\top [y^2, y]$ (K, 2D) in `F`, added into `f64` totals — or, when at
    /// most a tenth of $Q$ is non-zero (typical at large D), a sparse sum
    /// directly in `f64`; $n_k$ and the log-likelihood are summed in `f64`.
    /// Memory O(chunk·(K + D) + K·D) per thread. Chunks run in parallel; the
    /// result does not depend on the number of threads.
    ///
    /// Errors: a matrix that is empty, of the wrong width, or non-finite.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, GmmStats};
    /// use ndarray::{array, s, Array2, Axis};
    ///
    /// let g = DiagGmm::new(array![0.4, 0.6], array![[-2.0, 0.0], [2.0, 1.0]], array![[1.0, 0.5], [2.0, 1.0]])?;
    /// let x = Array2::from_shape_fn((40, 2), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 2.0 - 2.5);
    /// let whole = g.sufficient_statistics(x.view())?;
    /// let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + b.abs());
    /// // n_k = Σ_i q_ik, Σ_i q_ik x_i and Σ_i log p(x_i), with q (N, K) the posteriors
    /// let q = g.predict_proba(x.view())?;
    /// assert!(whole.resp_sums().iter().zip(&q.sum_axis(Axis(0))).all(|(a, b)| close(*a, *b)));
    /// assert!(whole.sum_x().iter().zip(&q.t().dot(&x)).all(|(a, b)| close(*a, *b)));
    /// assert!(close(whole.log_likelihood(), g.score_samples(x.view())?.sum()));
    /// // the statistics of two shards, summed, are the batch's
    /// let shards = [
    ///     g.sufficient_statistics(x.slice(s![..15, ..]))?,
    ///     g.sufficient_statistics(x.slice(s![15.., ..]))?,
    /// ];
    /// let sum = GmmStats::sum(&shards)?;
    /// assert_eq!(sum.n_rows(), 40.0);
    /// assert!(close(sum.log_likelihood(), whole.log_likelihood()));
    /// assert!(sum.resp_sums().iter().zip(&whole.resp_sums()).all(|(a, b)| close(*a, *b)));
    /// for (a, b) in [(sum.sum_y(), whole.sum_y()), (sum.sum_y2(), whole.sum_y2())] {
    ///     assert!(a.iter().zip(&b).all(|(u, v)| close(*u, *v)));
    /// }
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn sufficient_statistics(&self, x: ArrayView2<'_, F>) -> Result<GmmStats, GmmError> {
        check_matrix(x, Some(self.dim()), "data")?;
        Ok(self.statistics_unchecked(x))
    }

    pub(crate) fn statistics_unchecked(&self, x: ArrayView2<'_, F>) -> GmmStats {
        self.statistics_with(x, true)
    }

    /// [`DiagGmm::sufficient_statistics`] with the screening of
    /// docs/math.md §2.7 on (the default) or off (the dense GEMM path for
    /// every chunk; tests compare the two).
    pub(crate) fn statistics_with(&self, x: ArrayView2<'_, F>, screening: bool) -> GmmStats {
        let center = self.center().mapv(|v| v.as_f64());
        let (buffers, stats) = (Pool::new(), Pool::new());
        reduce_rows(
            x.nrows(),
            &|r| {
                let mut leaf = buffers.take(|| EStepLeaf::new(self));
                let st = stats.take(|| GmmStats::zeros(self.n_components(), center.clone()));
                let st = self.leaf_statistics(&mut leaf, st, x.slice(s![r, ..]), screening);
                buffers.give(leaf);
                st
            },
            &|mut a, b| {
                a.add_same_center(&b);
                stats.give(b);
                a
            },
        )
    }

    /// The statistics of one reduction leaf, the rows `x` (n, D), chunk by chunk on the
    /// buffers of `leaf`, added to `st` once it is cleared.
    fn leaf_statistics(
        &self,
        leaf: &mut EStepLeaf<F>,
        st: GmmStats,
        x: ArrayView2<'_, F>,
        screening: bool,
    ) -> GmmStats {
        leaf.start(st);
        for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
            if !(screening && leaf.screened_chunk(self, xc)) {
                leaf.dense_chunk(self, xc);
            }
        }
        leaf.finish()
    }

    /// The M-step from (merged) statistics `st` of K components in D
    /// dimensions: a new model (see [`GmmStats`] and the module doc for the
    /// formulas; starved components are re-seeded by splitting the heaviest).
    ///
    /// Errors: K or D different from this model's, no rows, invalid `floor`.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, VarianceFloor};
    /// use ndarray::{array, Array2};
    ///
    /// let g = DiagGmm::new(array![0.5, 0.5], array![[-1.0, 0.0], [1.0, 0.0]], array![[1.0, 1.0], [1.0, 1.0]])?;
    /// // two clusters, around -3 and +3 on both axes
    /// let x = Array2::from_shape_fn((60, 2), |(i, j)| {
    ///     ((i * 7 + j * 3) % 11) as f64 / 5.0 - 1.0 + if i % 2 == 0 { 3.0 } else { -3.0 }
    /// });
    /// let st = g.sufficient_statistics(x.view())?;
    /// let next = g.update_from_statistics(&st, VarianceFloor::default())?;
    /// // w_k = n_k / N and μ_k = Σ_i q_ik x_i / n_k
    /// let (nk, sx) = (st.resp_sums(), st.sum_x());
    /// for k in 0..2 {
    ///     assert!((next.weights()[k] - nk[k] / 60.0).abs() < 1e-12);
    ///     for d in 0..2 {
    ///         assert!((next.means()[[k, d]] - sx[[k, d]] / nk[k]).abs() < 1e-9);
    ///     }
    /// }
    /// // an EM step does not lower the mean log-likelihood
    /// assert!(next.score(x.view())? >= g.score(x.view())? - 1e-12);
    /// // statistics of K = 2 components do not fit a model of K = 1
    /// let one = DiagGmm::new(array![1.0], array![[0.0, 0.0]], array![[1.0, 1.0]])?;
    /// assert!(one.update_from_statistics(&st, VarianceFloor::default()).is_err());
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn update_from_statistics(
        &self,
        st: &GmmStats,
        floor: VarianceFloor,
    ) -> Result<DiagGmm<F>, GmmError> {
        if st.n_components() != self.n_components() || st.dim() != self.dim() {
            return Err(GmmError::InvalidStatistics(format!(
                "statistics of {} components in dimension {} do not fit a model of {} components in dimension {}",
                st.n_components(),
                st.dim(),
                self.n_components(),
                self.dim()
            )));
        }
        Self::from_statistics(st, floor)
    }

    /// A model from statistics alone (the M-step; see
    /// [`DiagGmm::update_from_statistics`]).
    pub fn from_statistics(st: &GmmStats, floor: VarianceFloor) -> Result<DiagGmm<F>, GmmError> {
        Ok(m_step(st, floor)?.model)
    }

    /// [`DiagGmm::from_statistics`], also returning how many starved
    /// components were re-seeded: EM has not converged while it re-seeds
    /// ([`crate::stream::em_stopping_rule`]), so a driver outside the library
    /// (the Python bindings) needs the count.
    ///
    /// ```
    /// use fisherkit::gmm::{DiagGmm, VarianceFloor};
    /// use ndarray::{array, Array2};
    ///
    /// // the third component is far from every row: n_3 = 0, it starves
    /// let g = DiagGmm::new(array![0.4, 0.4, 0.2], array![[-3.0], [3.0], [1000.0]], array![[1.0], [1.0], [1.0]])?;
    /// let x = Array2::from_shape_fn((50, 1), |(i, _)| (i % 5) as f64 * 0.1 + if i % 2 == 0 { -3.0 } else { 3.0 });
    /// let st = g.sufficient_statistics(x.view())?;
    /// assert_eq!(st.resp_sums()[2], 0.0);
    /// let floor = VarianceFloor::default();
    /// let (next, reseeded) = DiagGmm::<f64>::from_statistics_reseeded(&st, floor)?;
    /// assert_eq!(reseeded, 1);
    /// assert!(next.means()[[2, 0]].abs() < 10.0); // re-seeded among the data
    /// // the model is `from_statistics`'s
    /// assert_eq!(next, DiagGmm::from_statistics(&st, floor)?);
    /// # Ok::<(), fisherkit::gmm::GmmError>(())
    /// ```
    pub fn from_statistics_reseeded(
        st: &GmmStats,
        floor: VarianceFloor,
    ) -> Result<(DiagGmm<F>, usize), GmmError> {
        let m = m_step(st, floor)?;
        Ok((m.model, m.reseeded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_data(n: usize, d: usize, seed: u64) -> Array2<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |(i, j)| {
            rng.random::<f64>() * (1.0 + j as f64) + 5.0 * ((i % 3) as f64) + 100.0
        })
    }

    fn model(d: usize) -> DiagGmm<f64> {
        let k = 3;
        let means = Array2::from_shape_fn((k, d), |(a, b)| 100.0 + 5.0 * a as f64 + 0.1 * b as f64);
        let vars = Array2::from_shape_fn((k, d), |(a, b)| 0.5 + 0.1 * (a + b) as f64);
        DiagGmm::new(array![0.2, 0.3, 0.5], means, vars).unwrap()
    }

    /// Statistics computed directly from the posteriors, in f64, about 0.
    fn direct(g: &DiagGmm<f64>, x: &Array2<f64>) -> (Array1<f64>, Array2<f64>, Array2<f64>, f64) {
        let q = g.predict_proba(x.view()).unwrap();
        let ll = g.score_samples(x.view()).unwrap().sum();
        let nk = q.sum_axis(Axis(0));
        let sx = q.t().dot(x);
        let sx2 = q.t().dot(&x.mapv(|v| v * v));
        (nk, sx, sx2, ll)
    }

    fn close(a: &Array2<f64>, b: &Array2<f64>, rtol: f64) {
        assert_eq!(a.dim(), b.dim());
        for (u, v) in a.iter().zip(b) {
            assert!(
                (u - v).abs() <= rtol * (1.0 + u.abs().max(v.abs())),
                "{u} vs {v}"
            );
        }
    }

    #[test]
    fn statistics_equal_direct_sums() {
        let x = random_data(700, 4, 1);
        let g = model(4);
        let st = g.sufficient_statistics(x.view()).unwrap();
        let (nk, sx, sx2, ll) = direct(&g, &x);
        assert_eq!(st.n_rows(), 700.0);
        assert!((st.log_likelihood() - ll).abs() < 1e-9 * ll.abs());
        for (a, b) in st.resp_sums().iter().zip(&nk) {
            assert!((a - b).abs() < 1e-9 * 700.0);
        }
        close(&st.sum_x(), &sx, 1e-10);
        close(&st.sum_x2(), &sx2, 1e-10);
    }

    #[test]
    fn sparse_accumulation_equals_direct_sums() {
        // clusters 1000 apart: all but one posterior per row flush to 0, so
        // every chunk takes the sparse path, in f64 and f32
        let g = DiagGmm::new(
            array![0.25, 0.25, 0.5],
            array![[0.0, 0.0], [1000.0, 0.0], [0.0, 1000.0]],
            array![[1.0, 2.0], [1.0, 1.0], [3.0, 1.0]],
        )
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let x = Array2::from_shape_fn((600, 2), |(i, j)| {
            let c = g.means()[[i % 3, j]];
            c + rng.random::<f64>() - 0.5
        });
        let mut ll = vec![0.0; 600];
        let mut lj = Array2::zeros((600, 3));
        g.log_joint_into(
            x.view(),
            lj.view_mut(),
            &mut Array2::zeros((0, 0)),
            Par::Seq,
        );
        let nnz = log_joint_to_posteriors_flushed(lj.view_mut(), &mut ll);
        assert_eq!(nnz, 600);
        let st = g.sufficient_statistics(x.view()).unwrap();
        // direct sums about the same centre (re-adding a far centre would
        // lose more digits than the statistics themselves)
        let y = &x - &st.center().insert_axis(Axis(0));
        let shifted = DiagGmm::new(
            g.weights().to_owned(),
            &g.means() - &st.center().insert_axis(Axis(0)),
            g.variances().to_owned(),
        )
        .unwrap();
        let (nk, sy, sy2, llsum) = direct(&shifted, &y);
        assert!((st.log_likelihood() - llsum).abs() < 1e-9 * llsum.abs());
        for (a, b) in st.resp_sums().iter().zip(&nk) {
            assert!((a - b).abs() < 1e-9);
        }
        close(&st.sum_y().to_owned(), &sy, 1e-12);
        close(&st.sum_y2().to_owned(), &sy2, 1e-12);
        let st32 = g
            .cast::<f32>()
            .sufficient_statistics(x.mapv(|v| v as f32).view())
            .unwrap();
        let mut st32 = st32;
        st32.recenter(st.center()).unwrap();
        close(&st32.sum_y().to_owned(), &sy, 1e-5);
        close(&st32.sum_y2().to_owned(), &sy2, 1e-5);
    }

    #[test]
    fn merged_shards_equal_the_whole_and_the_batch_m_step() {
        let x = random_data(1000, 5, 2);
        let g = model(5);
        let whole = g.sufficient_statistics(x.view()).unwrap();
        for cuts in [
            vec![0, 1, 1000],
            vec![0, 300, 301, 777, 1000],
            vec![0, 999, 1000],
        ] {
            let parts: Vec<GmmStats> = cuts
                .windows(2)
                .filter(|w| w[1] > w[0])
                .map(|w| {
                    g.sufficient_statistics(x.slice(s![w[0]..w[1], ..]))
                        .unwrap()
                })
                .collect();
            let merged = GmmStats::sum(&parts).unwrap();
            assert_eq!(merged.n_rows(), whole.n_rows());
            assert!(
                (merged.log_likelihood() - whole.log_likelihood()).abs()
                    < 1e-9 * whole.log_likelihood().abs()
            );
            close(&merged.sum_y().to_owned(), &whole.sum_y().to_owned(), 1e-10);
            close(
                &merged.sum_y2().to_owned(),
                &whole.sum_y2().to_owned(),
                1e-10,
            );
            let a = g
                .update_from_statistics(&merged, VarianceFloor::default())
                .unwrap();
            let b = g
                .update_from_statistics(&whole, VarianceFloor::default())
                .unwrap();
            close(&a.means().to_owned(), &b.means().to_owned(), 1e-10);
            close(&a.variances().to_owned(), &b.variances().to_owned(), 1e-10);
        }
    }

    #[test]
    fn merging_different_centres_shifts_exactly() {
        let x = random_data(400, 3, 3);
        let g1 = model(3);
        let st_a = g1.sufficient_statistics(x.slice(s![..150, ..])).unwrap();
        let mut st_b = g1.sufficient_statistics(x.slice(s![150.., ..])).unwrap();
        st_b.recenter(array![1.0, -2.0, 50.0].view()).unwrap();
        let mut m = st_a.clone();
        m.merge(&st_b).unwrap();
        let whole = g1.sufficient_statistics(x.view()).unwrap();
        close(&m.sum_x(), &whole.sum_x(), 1e-10);
        close(&m.sum_x2(), &whole.sum_x2(), 1e-10);
        let bad = GmmStats::zeros(2, Array1::zeros(3));
        assert!(m
            .merge(&bad)
            .unwrap_err()
            .to_string()
            .contains("2 components"));
    }

    #[test]
    fn m_step_matches_direct_formulas() {
        let x = random_data(600, 4, 4);
        let g = model(4);
        let st = g.sufficient_statistics(x.view()).unwrap();
        let new = g
            .update_from_statistics(&st, VarianceFloor::Absolute(1e-12))
            .unwrap();
        let q = g.predict_proba(x.view()).unwrap();
        for k in 0..3 {
            let nk: f64 = q.column(k).sum();
            assert!((new.weights()[k] - nk / 600.0).abs() < 1e-12);
            for d in 0..4 {
                let mu: f64 = (0..600).map(|i| q[[i, k]] * x[[i, d]]).sum::<f64>() / nk;
                let var: f64 = (0..600)
                    .map(|i| q[[i, k]] * (x[[i, d]] - mu).powi(2))
                    .sum::<f64>()
                    / nk;
                assert!((new.means()[[k, d]] - mu).abs() < 1e-10 * mu.abs());
                assert!((new.variances()[[k, d]] - var).abs() < 1e-9 * var);
            }
        }
    }

    #[test]
    fn starved_component_is_split_not_nan() {
        let mut st = GmmStats::zeros(3, array![0.0, 0.0]);
        st.n_rows = 10.0;
        st.resp_sums = array![6.0, 4.0, 0.0];
        st.sum_y = array![[6.0, 12.0], [-4.0, 0.0], [0.0, 0.0]];
        st.sum_y2 = array![[6.0 + 6.0 * 4.0, 24.0 + 6.0], [4.0 + 4.0, 4.0], [0.0, 0.0]];
        let m = m_step::<f64>(&st, VarianceFloor::default()).unwrap();
        assert_eq!(m.reseeded, 1);
        let g = m.model;
        assert!(g
            .means()
            .iter()
            .chain(g.variances().iter())
            .all(|v| v.is_finite()));
        // component 0 (weight 0.6, mean (1, 2), variances (4, 1)) is split in
        // two along dim 0, ± half a standard deviation
        assert!((g.weights()[0] - 0.3).abs() < 1e-12 && (g.weights()[2] - 0.3).abs() < 1e-12);
        assert_eq!(g.means()[[0, 1]], g.means()[[2, 1]]);
        assert!((g.means()[[0, 0]] - 0.0).abs() < 1e-12);
        assert!((g.means()[[2, 0]] - 2.0).abs() < 1e-12);
        assert_eq!(g.variances().row(0), g.variances().row(2));
    }

    #[test]
    fn floors_and_invalid_statistics() {
        // a constant column: its floor falls back to the mean variance of the
        // non-constant columns, here Var(1, 2, 3, 4) = 1.25
        let x: Array2<f64> = array![[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0]];
        let g = DiagGmm::new(array![1.0], array![[2.5, 5.0]], array![[1.0, 1.0]]).unwrap();
        let st = g.sufficient_statistics(x.view()).unwrap();
        let new: DiagGmm<f64> = g
            .update_from_statistics(&st, VarianceFloor::Relative(0.01))
            .unwrap();
        assert!((new.variances()[[0, 0]] - 1.25).abs() < 1e-12);
        assert!((new.variances()[[0, 1]] - 0.01 * 1.25).abs() < 1e-12);
        let new = g
            .update_from_statistics(&st, VarianceFloor::Absolute(0.5))
            .unwrap();
        assert_eq!(new.variances()[[0, 1]], 0.5);
        assert!(g
            .update_from_statistics(&st, VarianceFloor::Absolute(0.0))
            .is_err());
        assert!(g
            .update_from_statistics(&st, VarianceFloor::Relative(f64::NAN))
            .is_err());
        let empty = GmmStats::zeros(1, array![0.0, 0.0]);
        assert!(g
            .update_from_statistics(&empty, VarianceFloor::default())
            .is_err());
        let wrong = GmmStats::zeros(2, array![0.0, 0.0]);
        assert!(g
            .update_from_statistics(&wrong, VarianceFloor::default())
            .is_err());
        assert!(GmmStats::from_parts(
            1.0,
            0.0,
            array![0.0],
            array![1.0],
            array![[0.0]],
            array![[-1.0]]
        )
        .is_err());
    }
}

/// The screened E-step (docs/math.md §2.7) against the GEMM one.
#[cfg(test)]
mod screen_tests {
    use super::*;
    use crate::kernels::reduce::reduce_rows;
    use ndarray::Array1;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Separated components (sparse posteriors) around `offset`, decaying
    /// per-dimension scale; n rows drawn near them.
    fn planted(
        seed: u64,
        k: usize,
        d: usize,
        n: usize,
        spread: f64,
        offset: f64,
    ) -> (DiagGmm<f64>, Array2<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let w = Array1::from_elem(k, 1.0 / k as f64);
        let scale: Vec<f64> = (0..d).map(|j| (-(j as f64) / 8.0).exp() + 0.1).collect();
        let mu = Array2::from_shape_fn((k, d), |(_, j)| {
            offset + spread * scale[j] * rng.random_range(-1.0..1.0)
        });
        let var = Array2::from_shape_fn((k, d), |(_, j)| {
            scale[j] * scale[j] * rng.random_range(0.1..0.4)
        });
        let x = Array2::from_shape_fn((n, d), |(i, j)| {
            let (a, b) = (i % k, (i * 7 + 3) % k);
            let t = if i % 5 == 0 { 0.5 } else { 0.0 };
            (1.0 - t) * mu[[a, j]]
                + t * mu[[b, j]]
                + var[[a, j]].sqrt() * rng.random_range(-1.5..1.5)
        });
        (DiagGmm::new(w, mu, var).unwrap(), x)
    }

    fn rel(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        (num / b.iter().map(|y| y * y).sum::<f64>()).sqrt()
    }

    /// Blocks of [`CHUNK_ROWS`] rows: every third block near a group of nine almost equal
    /// components (nine live posteriors per row: a dense chunk, which sends the leaf to the
    /// GEMM path and makes its next chunks skip the screening), the others near a lone
    /// component far away (screened chunks). 60 000 rows are 235 chunks in 59 leaves of 4
    /// (the last of 3), so leaves share pooled buffers (`Pool`) whose pending dense sums and
    /// screening skips must not leak from one leaf into the next.
    fn mixed_chunks(seed: u64) -> (DiagGmm<f64>, Array2<f64>) {
        let (k, d, n) = (10, 8, 60_000);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mu = Array2::from_shape_fn((k, d), |(kk, j)| {
            if kk == 0 {
                0.0
            } else {
                30.0 + 0.01 * ((kk * 3 + j) % 5) as f64
            }
        });
        let var = Array2::from_shape_fn((k, d), |_| rng.random_range(0.9..1.1));
        let x = Array2::from_shape_fn((n, d), |(i, _)| {
            let near = if (i / CHUNK_ROWS).is_multiple_of(3) {
                30.0
            } else {
                0.0
            };
            near + rng.random_range(-1.0..1.0)
        });
        (
            DiagGmm::new(Array1::from_elem(k, 1.0 / k as f64), mu, var).unwrap(),
            x,
        )
    }

    fn stats_bits(st: &GmmStats) -> Vec<u64> {
        let mut b = vec![st.n_rows().to_bits(), st.log_likelihood().to_bits()];
        for a in [
            st.resp_sums().to_owned().into_dyn(),
            st.sum_y().to_owned().into_dyn(),
            st.sum_y2().to_owned().into_dyn(),
        ] {
            b.extend(a.iter().map(|v| v.to_bits()));
        }
        b
    }

    #[test]
    fn pooled_leaves_give_the_same_bits_for_any_thread_count() {
        let (g, x) = mixed_chunks(5);
        let (g32, x32): (DiagGmm<f32>, _) = (g.cast(), x.mapv(|v| v as f32));
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    (
                        stats_bits(&g.statistics_unchecked(x.view())),
                        stats_bits(&g32.statistics_unchecked(x32.view())),
                    )
                })
        };
        // the reference: every leaf on fresh buffers, reduced along the same tree
        let fresh = |g: &DiagGmm<f64>, x: ArrayView2<'_, f64>| {
            let c = g.center().to_owned();
            reduce_rows(
                x.nrows(),
                &|r| {
                    let st = GmmStats::zeros(g.n_components(), c.clone());
                    g.leaf_statistics(&mut EStepLeaf::new(g), st, x.slice(s![r, ..]), true)
                },
                &|mut a, b| {
                    a.add_same_center(&b);
                    a
                },
            )
        };
        let reference = stats_bits(&fresh(&g, x.view()));
        let one_thread_f32 = run(1).1;
        for t in [1, 2, 3] {
            let (b64, b32) = run(t);
            assert!(
                b64 == reference,
                "{t} thread(s): pooled leaves differ from fresh ones"
            );
            assert!(b32 == one_thread_f32, "f32, {t} threads differ from one");
        }
        // each leaf starts from zero: the pooled result is the reduction of fresh leaves,
        // whose sums match the direct formulas
        let st = g.statistics_unchecked(x.view());
        let q = g.predict_proba(x.view()).unwrap();
        let nk = q.sum_axis(Axis(0));
        for (a, b) in st.resp_sums().iter().zip(&nk) {
            assert!((a - b).abs() <= 1e-9 * b.max(1.0), "n_k {a} vs {b}");
        }
        assert_eq!(st.n_rows(), 60_000.0);
        // and the data do mix both kinds of chunks
        let mut rows = SparseRows::default();
        let mut ws = ScreenScratch::default();
        let kinds: Vec<bool> = x
            .axis_chunks_iter(Axis(0), CHUNK_ROWS)
            .take(6)
            .map(|c| {
                ws.reset();
                g.screen().survivors(c, None, &mut ws, &mut rows)
            })
            .collect();
        assert_eq!(kinds, [false, true, true, false, true, true]);
    }

    #[test]
    fn screened_statistics_equal_the_gemm_ones() {
        for spread in [12.0, 0.3] {
            let (g, x) = planted(21, 40, 36, 1500, spread, 2.0);
            let on = g.statistics_with(x.view(), true);
            let off = g.statistics_with(x.view(), false);
            let r = |a: &GmmStats, b: &GmmStats| {
                let n: f64 = a
                    .resp_sums()
                    .iter()
                    .zip(b.resp_sums())
                    .map(|(x, y)| (x - y).abs())
                    .sum();
                (
                    n / b.n_rows(),
                    rel(&a.sum_y().to_owned(), &b.sum_y().to_owned()),
                    rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned()),
                    (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs(),
                )
            };
            let (dn, d1, d2, dl) = r(&on, &off);
            assert!(
                dn < 1e-12 && d1 < 1e-12 && d2 < 1e-12 && dl < 1e-12,
                "spread {spread}: {dn:e} {d1:e} {d2:e} {dl:e}"
            );
        }
    }

    #[test]
    fn f32_statistics_are_within_1e_6_of_f64_far_from_the_origin() {
        let (g, x) = planted(22, 24, 64, 2000, 10.0, 1000.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        let g64: DiagGmm<f64> = g32.cast();
        let x64 = x32.mapv(|v| v as f64);
        let a = g32.statistics_with(x32.view(), true);
        let mut b = g64.statistics_with(x64.view(), true);
        // the f32 model's centre is its mixture mean rounded to f32
        b.recenter(a.center()).unwrap();
        let dl = (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs();
        let d1 = rel(&a.sum_y().to_owned(), &b.sum_y().to_owned());
        let d2 = rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned());
        assert!(dl < 1e-6 && d1 < 1e-6 && d2 < 1e-6, "{dl:e} {d1:e} {d2:e}");
    }

    #[test]
    fn gemm_path_f32_statistics_are_within_1e_6_of_f64_far_from_the_origin() {
        // Every chunk through the GEMM (as on real descriptors, where the bound prunes
        // nothing): the sparse posteriors are refined in f64 (docs/math.md §2.8).
        for (seed, sep) in [(23, 10.0), (24, 3.0)] {
            let (g, x) = planted(seed, 24, 64, 2000, sep, 1000.0);
            let g32: DiagGmm<f32> = g.cast();
            let x32 = x.mapv(|v| v as f32);
            let g64: DiagGmm<f64> = g32.cast();
            let x64 = x32.mapv(|v| v as f64);
            let a = g32.statistics_with(x32.view(), false);
            let mut b = g64.statistics_with(x64.view(), false);
            b.recenter(a.center()).unwrap();
            let dl = (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs();
            let d0 = (&a.resp_sums() - &b.resp_sums()).mapv(f64::abs).sum() / a.n_rows();
            let d1 = rel(&a.sum_y().to_owned(), &b.sum_y().to_owned());
            let d2 = rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned());
            assert!(
                dl < 1e-6 && d0 < 1e-6 && d1 < 1e-6 && d2 < 1e-6,
                "separation {sep}: {dl:e} {d0:e} {d1:e} {d2:e}"
            );
        }
    }
}

/// The shared softmax kernel (`crate::kernels::softmax`) against the
/// model's reference posteriors.
#[cfg(test)]
mod softmax_tests {
    use super::*;

    #[test]
    fn flushed_posteriors_equal_the_reference_kernel() {
        let mut lp = ndarray::array![
            [-1.0, -2.0, -3000.0],
            [5.0, 5.0, 4.0],
            [-50.0, -10.0, -10.0]
        ];
        let mut want = lp.clone();
        let (mut ll, mut ll2) = ([0.0; 3], [0.0; 3]);
        DiagGmm::<f64>::log_joint_to_posteriors(want.view_mut(), &mut ll2);
        let nnz = log_joint_to_posteriors_flushed(lp.view_mut(), &mut ll);
        assert_eq!(nnz, 8);
        for (a, b) in lp.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-15 * b.max(1e-300));
        }
        for (a, b) in ll.iter().zip(&ll2) {
            assert!((a - b).abs() < 1e-14);
        }
        // a column-major (non-contiguous rows) view takes the copying path
        let mut t = want.t().to_owned();
        let mut tt = t.view_mut().reversed_axes();
        tt.assign(&ndarray::array![
            [-1.0, -2.0, -3000.0],
            [5.0, 5.0, 4.0],
            [-50.0, -10.0, -10.0]
        ]);
        log_joint_to_posteriors_flushed(tt.view_mut(), &mut ll);
        for (a, b) in tt.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-15 * b.max(1e-300));
        }
    }
}

#[cfg(test)]
mod merge_props {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Statistics of shards, merged in any grouping, equal those of the
        /// whole, and so does the M-step from them; f32 and f64.
        #[test]
        fn shard_statistics_merge_to_the_whole(
            seed in 0u64..1000,
            n in 1usize..700,
            cuts in proptest::collection::vec(0.0f64..1.0, 0..5),
            shift in -100.0f64..100.0,
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let d = 1 + (seed % 4) as usize;
            let x = Array2::from_shape_fn((n, d), |(i, _)| {
                shift + rng.random::<f64>() + (i % 3) as f64
            });
            let k = 3;
            let means = Array2::from_shape_fn((k, d), |(a, _)| shift + a as f64 + rng.random::<f64>());
            let vars = Array2::from_shape_fn((k, d), |_| 0.2 + rng.random::<f64>());
            let g = DiagGmm::new(Array1::from_elem(k, 1.0 / 3.0), means, vars).unwrap();
            let mut bounds: Vec<usize> = cuts.iter().map(|c| (c * n as f64) as usize).collect();
            bounds.push(0);
            bounds.push(n);
            bounds.sort();
            bounds.dedup();
            let whole = g.sufficient_statistics(x.view()).unwrap();
            let parts: Vec<GmmStats> = bounds
                .windows(2)
                .map(|w| g.sufficient_statistics(x.slice(s![w[0]..w[1], ..])).unwrap())
                .collect();
            // merge right to left, to vary the grouping
            let mut merged = parts.last().unwrap().clone();
            for p in parts.iter().rev().skip(1) {
                merged.merge(p).unwrap();
            }
            let tol = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-9 * (scale + a.abs().max(b.abs()));
            prop_assert_eq!(merged.n_rows(), n as f64);
            prop_assert!(tol(merged.log_likelihood(), whole.log_likelihood(), 1.0));
            for (a, b) in merged.resp_sums().iter().zip(whole.resp_sums()) {
                prop_assert!(tol(*a, *b, 1.0));
            }
            for (a, b) in merged.sum_y().iter().zip(whole.sum_y()) {
                prop_assert!(tol(*a, *b, n as f64));
            }
            for (a, b) in merged.sum_y2().iter().zip(whole.sum_y2()) {
                prop_assert!(tol(*a, *b, n as f64));
            }
            let floor = VarianceFloor::Relative(1e-3);
            let ga = g.update_from_statistics(&merged, floor).unwrap();
            let gb = g.update_from_statistics(&whole, floor).unwrap();
            for (a, b) in ga.means().iter().zip(gb.means()) {
                prop_assert!(tol(*a, *b, 1.0));
            }
            for (a, b) in ga.variances().iter().zip(gb.variances()) {
                prop_assert!((a - b).abs() <= 1e-6 * b);
            }
            // f32: the same merge property at f32 precision
            let x32 = x.mapv(|v| v as f32);
            let g32: DiagGmm<f32> = g.cast();
            let w32 = g32.sufficient_statistics(x32.view()).unwrap();
            let parts32: Vec<GmmStats> = bounds
                .windows(2)
                .map(|w| g32.sufficient_statistics(x32.slice(s![w[0]..w[1], ..])).unwrap())
                .collect();
            let m32 = GmmStats::sum(&parts32).unwrap();
            for (a, b) in m32.sum_y2().iter().zip(w32.sum_y2()) {
                prop_assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs().max(b.abs())));
            }
        }
    }
}
