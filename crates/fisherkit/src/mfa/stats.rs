//! Mergeable E-step sufficient statistics and the M-step (docs/math.md §4.4).

use super::kernel::{accumulate, GAcc, Want};
use super::model::{Mfa, PsiMode};
use super::MfaError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::linalg::{gemm, Cholesky, Par};
use ndarray::{s, Array1, Array2, Array3, ArrayView1, ArrayView2, ArrayView3, Axis};

/// E-step sufficient statistics of an MFA over a set of rows, in `f64`.
///
/// With $y_i = x_i - c$ ($c$ the model's reference point, its mixture mean),
/// $h_{ik}$ the posteriors and $e_{ik} = E[z | x_i, k]$:
/// $n_k = \sum_i h_{ik}$, $s_k = \sum_i h_{ik} e_{ik}$,
/// $\sum_i h_{ik} e_{ik} e_{ik}^\top$, $\sum_i h_{ik} y_i$,
/// $\sum_i h_{ik} y_i e_{ik}^\top$, and $\sum_i y_i^2$ (shared $\Psi$) or
/// $\sum_i h_{ik} y_i^2$ (per-component $\Psi$), plus the row count and the
/// total log-likelihood. Statistics of disjoint shards computed with the same
/// model add up ([`MfaStats::merge`]) to the statistics of their union, so an
/// EM step can be distributed.
#[derive(Debug, Clone, PartialEq)]
pub struct MfaStats {
    pub(crate) psi_mode: PsiMode,
    pub(crate) n_rows: usize,
    pub(crate) log_likelihood: f64,
    /// (D): the reference point $c$ the rows were centred on.
    pub(crate) center: Array1<f64>,
    /// (K)
    pub(crate) nk: Array1<f64>,
    /// (K, R)
    pub(crate) s: Array2<f64>,
    /// (K, R, R)
    pub(crate) see: Array3<f64>,
    /// (K, D)
    pub(crate) sy: Array2<f64>,
    /// (K, D, R)
    pub(crate) sye: Array3<f64>,
    /// (P, D)
    pub(crate) syy: Array2<f64>,
}

impl MfaStats {
    /// Rebuilds statistics from their parts (e.g. received from another
    /// process), validating shapes and values. With K components, D
    /// dimensions and R factors (all ≥ 1), and P = 1 for a shared $\Psi$,
    /// P = K per component:
    ///
    /// * `center` $c$ (D), finite;
    /// * `soft_counts` $n_k = \sum_i h_{ik}$ (K), finite and ≥ 0;
    /// * `sum_e` $\sum_i h_{ik} e_{ik}$ (K, R), finite;
    /// * `sum_ee` $\sum_i h_{ik} e_{ik} e_{ik}^\top$ (K, R, R), finite;
    /// * `sum_y` $\sum_i h_{ik} y_i$ (K, D), finite;
    /// * `sum_ye` $\sum_i h_{ik} y_i e_{ik}^\top$ (K, D, R), finite;
    /// * `sum_yy` $\sum_i y_i^2$ (1, D) or $\sum_i h_{ik} y_i^2$ (K, D), finite and ≥ 0;
    /// * `log_likelihood` finite.
    ///
    /// The inverse of the getters: `from_parts(st.psi_mode(), st.n_rows(), …,
    /// st.sum_yy().to_owned())` equals `st`.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        psi_mode: PsiMode,
        n_rows: usize,
        log_likelihood: f64,
        center: Array1<f64>,
        soft_counts: Array1<f64>,
        sum_e: Array2<f64>,
        sum_ee: Array3<f64>,
        sum_y: Array2<f64>,
        sum_ye: Array3<f64>,
        sum_yy: Array2<f64>,
    ) -> Result<Self, MfaError> {
        let bad = |m: String| Err(MfaError::StatisticsMismatch(m));
        let (k, d, r) = sum_ye.dim();
        if k == 0 || d == 0 || r == 0 {
            return bad(format!(
                "sum_ye has shape {:?}; (K, D, R) must all be >= 1",
                sum_ye.dim()
            ));
        }
        let p = match psi_mode {
            PsiMode::Shared => 1,
            PsiMode::PerComponent => k,
        };
        let shapes: [(&str, Vec<usize>, Vec<usize>, &str); 6] = [
            ("center", center.shape().to_vec(), vec![d], "(D)"),
            ("soft_counts", soft_counts.shape().to_vec(), vec![k], "(K)"),
            ("sum_e", sum_e.shape().to_vec(), vec![k, r], "(K, R)"),
            (
                "sum_ee",
                sum_ee.shape().to_vec(),
                vec![k, r, r],
                "(K, R, R)",
            ),
            ("sum_y", sum_y.shape().to_vec(), vec![k, d], "(K, D)"),
            (
                "sum_yy",
                sum_yy.shape().to_vec(),
                vec![p, d],
                if p == 1 { "(1, D)" } else { "(K, D)" },
            ),
        ];
        for (name, got, want, what) in shapes {
            if got != want {
                return bad(format!(
                    "{name} has shape {got:?}, expected {what} = {want:?} (K, D, R = {k}, {d}, {r} from sum_ye, {psi_mode:?} psi)"
                ));
            }
        }
        if !log_likelihood.is_finite() {
            return bad(format!(
                "log_likelihood is {log_likelihood}; it must be finite"
            ));
        }
        let finite: [(&str, bool); 6] = [
            ("center", center.iter().all(|v| v.is_finite())),
            ("soft_counts", soft_counts.iter().all(|v| v.is_finite())),
            ("sum_e", sum_e.iter().all(|v| v.is_finite())),
            ("sum_ee", sum_ee.iter().all(|v| v.is_finite())),
            ("sum_y", sum_y.iter().all(|v| v.is_finite())),
            ("sum_ye", sum_ye.iter().all(|v| v.is_finite())),
        ];
        if let Some((name, _)) = finite.iter().find(|(_, ok)| !ok) {
            return bad(format!("{name} has a non-finite value"));
        }
        if let Some(v) = soft_counts.iter().find(|v| **v < 0.0) {
            return bad(format!("soft_counts has a negative value {v}"));
        }
        if let Some(v) = sum_yy.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return bad(format!(
                "sum_yy has the value {v}; it must be finite and >= 0"
            ));
        }
        Ok(Self {
            psi_mode,
            n_rows,
            log_likelihood,
            center,
            nk: soft_counts,
            s: sum_e,
            see: sum_ee,
            sy: sum_y,
            sye: sum_ye,
            syy: sum_yy,
        })
    }

    /// Shared or per-component $\Psi$ (the shape of [`MfaStats::sum_yy`]).
    pub fn psi_mode(&self) -> PsiMode {
        self.psi_mode
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.sye.dim().0
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.sye.dim().1
    }

    /// Number of factors R.
    pub fn n_factors(&self) -> usize {
        self.sye.dim().2
    }

    /// $\frac1N \sum_i \log p(x_i)$ (0 when there are no rows).
    pub fn mean_log_likelihood(&self) -> f64 {
        if self.n_rows > 0 {
            self.log_likelihood / self.n_rows as f64
        } else {
            0.0
        }
    }

    /// Reference point $c$ (D) the rows were centred on ($y_i = x_i - c$).
    pub fn center(&self) -> ArrayView1<'_, f64> {
        self.center.view()
    }

    /// $\sum_i h_{ik} e_{ik}$, shape (K, R).
    pub fn sum_e(&self) -> ArrayView2<'_, f64> {
        self.s.view()
    }

    /// $\sum_i h_{ik} e_{ik} e_{ik}^\top$, shape (K, R, R).
    pub fn sum_ee(&self) -> ArrayView3<'_, f64> {
        self.see.view()
    }

    /// $\sum_i h_{ik} y_i$, shape (K, D).
    pub fn sum_y(&self) -> ArrayView2<'_, f64> {
        self.sy.view()
    }

    /// $\sum_i h_{ik} y_i e_{ik}^\top$, shape (K, D, R).
    pub fn sum_ye(&self) -> ArrayView3<'_, f64> {
        self.sye.view()
    }

    /// $\sum_i y_i^2$ (1, D) with a shared $\Psi$, $\sum_i h_{ik} y_i^2$ (K, D)
    /// per component.
    pub fn sum_yy(&self) -> ArrayView2<'_, f64> {
        self.syy.view()
    }

    /// Number of rows summed.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Total log-likelihood $\sum_i \log p(x_i)$ of the rows under the model
    /// that computed the statistics.
    pub fn log_likelihood(&self) -> f64 {
        self.log_likelihood
    }

    /// Soft counts $n_k = \sum_i h_{ik}$, shape (K).
    pub fn soft_counts(&self) -> ndarray::ArrayView1<'_, f64> {
        self.nk.view()
    }

    /// Adds the statistics of another shard computed with the same model.
    pub fn merge(&mut self, other: &MfaStats) -> Result<(), MfaError> {
        if self.psi_mode != other.psi_mode
            || self.sye.dim() != other.sye.dim()
            || self.syy.dim() != other.syy.dim()
        {
            return Err(MfaError::StatisticsMismatch(format!(
                "cannot merge statistics of shape (K, D, R) = {:?} ({:?} psi) with {:?} ({:?} psi)",
                self.sye.dim(),
                self.psi_mode,
                other.sye.dim(),
                other.psi_mode
            )));
        }
        if self.center != other.center {
            return Err(MfaError::StatisticsMismatch(
                "the statistics were computed with different models".into(),
            ));
        }
        self.n_rows += other.n_rows;
        self.log_likelihood += other.log_likelihood;
        self.nk += &other.nk;
        self.s += &other.s;
        self.see += &other.see;
        self.sy += &other.sy;
        self.sye += &other.sye;
        self.syy += &other.syy;
        Ok(())
    }
}

/// Converts g-space sums to e-space: $e = C^{-\top} g$, so
/// $s = C^{-\top}\sum h g$, $\sum h e e^\top = C^{-\top}(\sum h g g^\top) C^{-1}$,
/// $\sum h y e^\top = (\sum h y g^\top) C^{-1}$.
pub(crate) fn to_e_space<F: Float>(model: &Mfa<F>, g: &GAcc) -> MfaStats {
    let (k, d, r) = (model.n_components(), model.dim(), model.n_factors());
    let kr = k * r;
    let mut s = Array2::<f64>::zeros((k, r));
    let mut see = Array3::<f64>::zeros((k, r, r));
    let mut sy = Array2::<f64>::zeros((k, d));
    let mut sye = Array3::<f64>::zeros((k, d, r));
    for kk in 0..k {
        let ci = model.kern.c_inv.index_axis(Axis(0), kk);
        s.row_mut(kk).assign(&ci.t().dot(&g.sg.row(kk)));
        let tmp = ci.t().dot(&g.sgg.index_axis(Axis(0), kk)).dot(&ci);
        let mut dst = see.index_axis_mut(Axis(0), kk);
        for a in 0..r {
            for b in 0..r {
                dst[[a, b]] = 0.5 * (tmp[[a, b]] + tmp[[b, a]]);
            }
        }
        let syg_k = g.syg.slice(s![.., kk * r..(kk + 1) * r]);
        gemm(
            sye.index_axis_mut(Axis(0), kk),
            false,
            syg_k,
            ci,
            1.0,
            Par::Seq,
        );
        sy.row_mut(kk).assign(&g.syg.column(kr + kk));
    }
    MfaStats {
        psi_mode: model.psi_mode(),
        n_rows: g.n_rows,
        log_likelihood: g.ll,
        center: model.kern.center.mapv(|v| v.as_f64()),
        nk: g.nk.clone(),
        s,
        see,
        sy,
        sye,
        syy: g.syy.clone(),
    }
}

impl<F: Float> Mfa<F> {
    /// E-step over the rows of `x` (N, D): the [`MfaStats`] of the data under
    /// this model (parallel over blocks of rows; the result does not depend on
    /// the number of threads).
    ///
    /// The statistics of disjoint shards merge into those of their union, so
    /// one EM step can be computed shard by shard (out of core, or on several
    /// machines):
    ///
    /// ```
    /// use fisherkit::mfa::{Mfa, PSI_FLOOR};
    /// use ndarray::{array, s, Array2, Array3};
    ///
    /// let lam = Array3::from_shape_vec((2, 2, 1), vec![1.0, 0.0, 0.0, 1.0]).unwrap();
    /// let m = Mfa::new(array![0.5, 0.5], array![[-2.0, 0.0], [2.0, 0.0]], lam, array![[0.5, 0.5]])
    ///     .unwrap();
    /// let x = Array2::from_shape_fn((40, 2), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 2.0 - 2.5);
    /// let whole = m.sufficient_statistics(x.view()).unwrap();
    /// let mut shards = m.sufficient_statistics(x.slice(s![..15, ..])).unwrap();
    /// shards.merge(&m.sufficient_statistics(x.slice(s![15.., ..])).unwrap()).unwrap();
    /// assert_eq!(shards.n_rows(), 40);
    /// assert!((shards.log_likelihood() - whole.log_likelihood()).abs() < 1e-9);
    /// // one EM step from either gives the same model, and EM does not lower the likelihood
    /// let (a, b) = (
    ///     m.update_from_statistics(&whole, PSI_FLOOR).unwrap(),
    ///     m.update_from_statistics(&shards, PSI_FLOOR).unwrap(),
    /// );
    /// assert!((&a.means() - &b.means()).iter().all(|d| d.abs() < 1e-9));
    /// assert!(a.score(x.view()).unwrap() >= m.score(x.view()).unwrap() - 1e-12);
    /// ```
    pub fn sufficient_statistics(
        &self,
        x: ndarray::ArrayView2<'_, F>,
    ) -> Result<MfaStats, MfaError> {
        check_matrix(x, Some(self.dim()), "data")?;
        let g = accumulate(self, x, Want::EM, true);
        Ok(to_e_space(self, &g))
    }

    /// M-step (Ghahramani & Hinton 1997) from statistics computed by **this**
    /// model (merged over shards or not); returns the updated model.
    ///
    /// Per component, with $A_k = \begin{bmatrix} n_k M_k^{-1} + \sum h e e^\top & s_k \\ s_k^\top & n_k\end{bmatrix}$
    /// and $B_k = [\sum h y e^\top, \sum h y]$: $[\Lambda_k, \mu'_k] \leftarrow B_k A_k^{-1}$;
    /// $\Psi \leftarrow \frac1N \operatorname{diag}(\sum_i y_i y_i^\top - \sum_k [\Lambda_k \mu'_k] B_k^\top)$
    /// (per component: $\frac1{n_k}\operatorname{diag}(\sum_i h_{ik} y_i y_i^\top - [\Lambda_k\mu'_k]B_k^\top)$);
    /// $w_k = n_k/N$. $\psi_d$ is floored at `psi_floor` times the variance of
    /// dimension d (derived from the statistics; tiny absolute floor for
    /// constant dimensions). Starved components ($n_k$ below
    /// $\min(R+1, N/(2K))$, or a singular $A_k$) are re-seeded by splitting the
    /// heaviest component along its strongest factor.
    pub fn update_from_statistics(
        &self,
        st: &MfaStats,
        psi_floor: f64,
    ) -> Result<Mfa<F>, MfaError> {
        Ok(self.update_from_statistics_reseeded(st, psi_floor)?.0)
    }

    /// [`Mfa::update_from_statistics`], also returning how many starved
    /// components were re-seeded (the EM stopping rule needs it:
    /// [`crate::stream::em_stopping_rule`]; used by the library's driver and the
    /// Python bindings).
    pub fn update_from_statistics_reseeded(
        &self,
        st: &MfaStats,
        psi_floor: f64,
    ) -> Result<(Mfa<F>, usize), MfaError> {
        self.check_statistics(st, psi_floor)?;
        let (k, r) = (self.n_components(), self.n_factors());
        let n = st.n_rows as f64;
        let floor = psi_floors::<F>(st, psi_floor);
        let starve = ((r + 1) as f64).min(0.5 * n / k as f64).max(1e-10 * n);
        let mut up = self.update_components(st, starve);
        for mut row in up.psi.rows_mut() {
            row.zip_mut_with(&floor, |p, f| {
                if !(p.is_finite() && *p >= *f) {
                    *p = *f;
                }
            });
        }
        let mut w: Vec<f64> = st.nk.iter().map(|v| v / n).collect();
        if !up.healthy.iter().any(|h| *h) {
            return Err(MfaError::Numerical(
                "no component received enough responsibility to be updated".into(),
            ));
        }
        let reseeded = up.reseed_starved(&mut w);
        Ok((up.into_model(&w, st.center.view())?, reseeded))
    }

    /// The statistics fit this model (shape, Ψ mode, reference point), hold
    /// rows, and the floor is valid.
    fn check_statistics(&self, st: &MfaStats, psi_floor: f64) -> Result<(), MfaError> {
        let (k, d, r) = (self.n_components(), self.dim(), self.n_factors());
        if st.sye.dim() != (k, d, r) || st.psi_mode != self.psi_mode() {
            return Err(MfaError::StatisticsMismatch(format!(
                "statistics of shape (K, D, R) = {:?} ({:?} psi) do not fit this model ({k}, {d}, {r}, {:?} psi)",
                st.sye.dim(),
                st.psi_mode,
                self.psi_mode()
            )));
        }
        if st
            .center
            .iter()
            .zip(self.kern.center.iter())
            .any(|(a, b)| *a != b.as_f64())
        {
            return Err(MfaError::StatisticsMismatch(
                "the statistics were computed with a different model".into(),
            ));
        }
        if !(psi_floor.is_finite() && psi_floor >= 0.0) {
            return Err(MfaError::InvalidHyperParameter {
                name: "psi_floor",
                reason: format!("must be finite and >= 0, got {psi_floor}"),
            });
        }
        if st.n_rows == 0 {
            return Err(MfaError::StatisticsMismatch(
                "the statistics hold 0 rows".into(),
            ));
        }
        Ok(())
    }

    /// The closed-form update of every component that is not starved
    /// ($n_k$ ≥ `starve` and a positive definite $A_k$): $[\Lambda_k, \mu'_k]
    /// = B_k A_k^{-1}$ and the Ψ sums (before flooring).
    fn update_components(&self, st: &MfaStats, starve: f64) -> ComponentUpdate {
        let (k, d, r) = (self.n_components(), self.dim(), self.n_factors());
        let shared = self.psi_mode() == PsiMode::Shared;
        let mut up = ComponentUpdate {
            shared,
            lam: Array3::<f64>::zeros((k, d, r)),
            mu: Array2::<f64>::zeros((k, d)),
            psi: Array2::<f64>::zeros((if shared { 1 } else { k }, d)),
            healthy: vec![false; k],
        };
        if shared {
            up.psi.row_mut(0).assign(&st.syy.row(0));
        }
        let mut b = Array2::<f64>::zeros((d, r + 1));
        for kk in 0..k {
            let nk = st.nk[kk];
            if nk.is_nan() || nk < starve {
                continue;
            }
            let Some(xt) = self.solve_component(st, kk, &mut b) else {
                continue;
            };
            up.healthy[kk] = true;
            up.lam
                .index_axis_mut(Axis(0), kk)
                .assign(&xt.slice(s![..r, ..]).t());
            up.mu.row_mut(kk).assign(&xt.row(r));
            // diag([Λ μ'] Bᵀ)
            let mut prow = up.psi.row_mut(if shared { 0 } else { kk });
            if !shared {
                prow.assign(&st.syy.row(kk));
            }
            for dd in 0..d {
                let mut v = 0.0;
                for j in 0..=r {
                    v += xt[[j, dd]] * b[[dd, j]];
                }
                prow[dd] -= v;
            }
            if !shared {
                prow.mapv_inplace(|v| v / nk);
            }
        }
        if shared {
            up.psi.row_mut(0).mapv_inplace(|v| v / st.n_rows as f64);
        }
        up
    }

    /// $X_k^\top = A_k^{-1} B_k^\top$ ((R+1, D): the loadings' rows then
    /// $\mu'_k$) for component `kk`, with $B_k$ written into `b` (D, R+1);
    /// `None` when $A_k$ is not positive definite or X is not finite.
    fn solve_component(
        &self,
        st: &MfaStats,
        kk: usize,
        b: &mut Array2<f64>,
    ) -> Option<Array2<f64>> {
        let r = self.n_factors();
        let nk = st.nk[kk];
        let mut a = Array2::<f64>::zeros((r + 1, r + 1));
        let minv = self.kern.m_inv.index_axis(Axis(0), kk);
        let see = st.see.index_axis(Axis(0), kk);
        for i in 0..r {
            for j in 0..r {
                a[[i, j]] = nk * minv[[i, j]] + see[[i, j]];
            }
            a[[i, r]] = st.s[[kk, i]];
            a[[r, i]] = st.s[[kk, i]];
        }
        a[[r, r]] = nk;
        let chol = Cholesky::new(a.view()).ok()?;
        b.slice_mut(s![.., ..r])
            .assign(&st.sye.index_axis(Axis(0), kk));
        b.column_mut(r).assign(&st.sy.row(kk));
        // X = B A⁻¹  ⇔  Xᵀ = A⁻¹ Bᵀ
        let xt = chol.solve_mat(b.t());
        xt.iter().all(|v| v.is_finite()).then_some(xt)
    }
}

/// Per-dimension floor of ψ_d (D): `psi_floor` times the data variance of
/// dimension d about the reference point (from the statistics), at least
/// 1e-9 of the mean variance and an absolute backstop — 1e-30 when every
/// dimension is constant; otherwise only what keeps 1/ψ finite in F (f64:
/// 1.5e-154), so that data of scale 1e-15 (variances ~1e-30) are fitted like
/// any other scale.
fn psi_floors<F: Float>(st: &MfaStats, psi_floor: f64) -> Array1<f64> {
    let n = st.n_rows as f64;
    let tot_yy: Array1<f64> = st.syy.sum_axis(Axis(0));
    let tot_y: Array1<f64> = st.sy.sum_axis(Axis(0));
    let var: Array1<f64> = Array1::from_iter(
        tot_yy
            .iter()
            .zip(tot_y.iter())
            .map(|(yy, y)| (yy / n - (y / n) * (y / n)).max(0.0)),
    );
    floors_of_variances::<F>(&var, psi_floor)
}

/// ψ_d's floor (D) from the per-dimension variances `var` (D):
/// $\max(f v_d,\ 10^{-9}\bar v,\ t)$ (docs/math.md §4.5), the backstop t
/// 1e-30 when every dimension is constant, otherwise only what keeps 1/ψ
/// finite in F (f64: 1.5e-154). Shared by the M-step and the initialisation.
pub(super) fn floors_of_variances<F: Float>(var: &Array1<f64>, psi_floor: f64) -> Array1<f64> {
    let mean_var = var.mean().unwrap_or(0.0);
    let tiny = if mean_var > 0.0 {
        F::min_positive_value().as_f64().sqrt().min(1e-30)
    } else {
        1e-30
    };
    var.mapv(|v| (psi_floor * v).max(1e-9 * mean_var).max(tiny))
}

/// The M-step's new parameters in f64, about the reference point: loadings
/// (K, D, R), centred means μ' (K, D), Ψ (1 or K, D), and which components
/// were updated (the others are starved).
struct ComponentUpdate {
    shared: bool,
    lam: Array3<f64>,
    mu: Array2<f64>,
    psi: Array2<f64>,
    healthy: Vec<bool>,
}

impl ComponentUpdate {
    /// Re-seeds every starved component by splitting the heaviest updated one
    /// (weights `w`, K) along its strongest factor (or ±√ψ without factors):
    /// both halves get half its weight. Returns the number re-seeded.
    fn reseed_starved(&mut self, w: &mut [f64]) -> usize {
        let (k, r) = (self.healthy.len(), self.lam.dim().2);
        let mut reseeded = 0;
        for kk in 0..k {
            if self.healthy[kk] {
                continue;
            }
            let j = (0..k)
                .filter(|&j| self.healthy[j])
                .fold(None, |best: Option<usize>, j| match best {
                    Some(b) if w[b] >= w[j] => Some(b),
                    _ => Some(j),
                })
                .expect("at least one healthy component");
            let lj = self.lam.index_axis(Axis(0), j).to_owned();
            let (col, norm) = (0..r)
                .map(|c| (c, lj.column(c).dot(&lj.column(c))))
                .fold((0, -1.0), |a, b| if b.1 > a.1 { b } else { a });
            let pj = if self.shared { 0 } else { j };
            let delta: Array1<f64> = if norm > 0.0 {
                lj.column(col).to_owned()
            } else {
                self.psi.row(pj).mapv(f64::sqrt)
            };
            let mj = self.mu.row(j).to_owned();
            self.mu.row_mut(kk).assign(&(&mj + &delta));
            self.mu.row_mut(j).assign(&(&mj - &delta));
            self.lam.index_axis_mut(Axis(0), kk).assign(&lj);
            if !self.shared {
                let pr = self.psi.row(j).to_owned();
                self.psi.row_mut(kk).assign(&pr);
            }
            w[j] *= 0.5;
            w[kk] = w[j];
            self.healthy[kk] = true;
            reseeded += 1;
        }
        reseeded
    }

    /// The model in `F`: weights `w` renormalised, means μ' + `center`;
    /// an error if a parameter is out of the float type's range.
    fn into_model<F: Float>(
        self,
        w: &[f64],
        center: ArrayView1<'_, f64>,
    ) -> Result<Mfa<F>, MfaError> {
        let (k, d) = self.mu.dim();
        let wsum: f64 = w.iter().sum();
        let cvt = |v: f64| F::from_f64_lossy(v);
        let weights = Array1::from_iter(w.iter().map(|v| cvt(v / wsum)));
        let means = Array2::from_shape_fn((k, d), |(i, j)| cvt(self.mu[[i, j]] + center[j]));
        let loadings = self.lam.mapv(cvt);
        let psi = self.psi.mapv(cvt);
        if weights.iter().any(|v| !(*v > F::zero() && v.is_finite()))
            || psi.iter().any(|v| !(*v > F::zero() && v.is_finite()))
            || means.iter().any(|v| !v.is_finite())
            || loadings.iter().any(|v| !v.is_finite())
        {
            return Err(MfaError::Numerical(format!(
                "the M-step produced out-of-range parameters in {} (data too large for the float type?)",
                F::NAME
            )));
        }
        Mfa::from_valid(weights, means, loadings, psi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn parts(st: &MfaStats) -> MfaStats {
        MfaStats::from_parts(
            st.psi_mode(),
            st.n_rows(),
            st.log_likelihood(),
            st.center().to_owned(),
            st.soft_counts().to_owned(),
            st.sum_e().to_owned(),
            st.sum_ee().to_owned(),
            st.sum_y().to_owned(),
            st.sum_ye().to_owned(),
            st.sum_yy().to_owned(),
        )
        .unwrap()
    }

    fn model(mode: PsiMode) -> Mfa<f64> {
        let psi = match mode {
            PsiMode::Shared => array![[0.5, 0.7, 0.9]],
            PsiMode::PerComponent => array![[0.5, 0.7, 0.9], [0.6, 0.4, 1.1]],
        };
        Mfa::new(
            array![0.4, 0.6],
            array![[0.0, 1.0, -1.0], [2.0, -1.0, 0.5]],
            array![[[1.0], [0.5], [-0.3]], [[0.2], [-0.8], [0.6]]],
            psi,
        )
        .unwrap()
    }

    #[test]
    fn from_parts_inverts_the_getters_and_validates() {
        let x = array![
            [0.1, 0.9, -1.2],
            [2.2, -0.7, 0.4],
            [1.0, 0.0, 0.0],
            [-0.5, 1.5, -0.8]
        ];
        for mode in [PsiMode::Shared, PsiMode::PerComponent] {
            let m = model(mode);
            let st = m.sufficient_statistics(x.view()).unwrap();
            assert_eq!(st.n_components(), 2);
            assert_eq!(st.dim(), 3);
            assert_eq!(st.n_factors(), 1);
            assert_eq!(st.psi_mode(), mode);
            assert_eq!(
                st.sum_yy().nrows(),
                if mode == PsiMode::Shared { 1 } else { 2 }
            );
            // independent truth for two parts: Σ_k n_k = N, Σ_k Σ h y = Σ_i (x_i - c)
            assert!((st.soft_counts().sum() - 4.0).abs() < 1e-12);
            let c = st.center().to_owned();
            let ysum = x.sum_axis(Axis(0)) - &c * 4.0;
            let got = st.sum_y().sum_axis(Axis(0));
            for (a, b) in got.iter().zip(ysum.iter()) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
            assert!((st.mean_log_likelihood() - st.log_likelihood() / 4.0).abs() < 1e-15);
            let back = parts(&st);
            assert_eq!(back, st);
            assert_eq!(
                m.update_from_statistics(&back, 1e-3).unwrap(),
                m.update_from_statistics(&st, 1e-3).unwrap()
            );
        }
        let st = model(PsiMode::Shared)
            .sufficient_statistics(x.view())
            .unwrap();
        let rebuild = |f: &dyn Fn(&mut MfaStats)| {
            let mut s = st.clone();
            f(&mut s);
            MfaStats::from_parts(
                s.psi_mode,
                s.n_rows,
                s.log_likelihood,
                s.center,
                s.nk,
                s.s,
                s.see,
                s.sy,
                s.sye,
                s.syy,
            )
            .unwrap_err()
            .to_string()
        };
        let e = rebuild(&|s| s.see = Array3::zeros((2, 2, 1)));
        assert!(e.contains("sum_ee has shape [2, 2, 1]"), "{e}");
        let e = rebuild(&|s| s.psi_mode = PsiMode::PerComponent);
        assert!(
            e.contains("sum_yy has shape [1, 3], expected (K, D)"),
            "{e}"
        );
        let e = rebuild(&|s| s.sye[[1, 2, 0]] = f64::NAN);
        assert!(e.contains("sum_ye has a non-finite value"), "{e}");
        let e = rebuild(&|s| s.nk[0] = -1.0);
        assert!(e.contains("soft_counts has a negative value"), "{e}");
        let e = rebuild(&|s| s.syy[[0, 1]] = -0.5);
        assert!(e.contains("sum_yy has the value -0.5"), "{e}");
        let e = rebuild(&|s| s.log_likelihood = f64::INFINITY);
        assert!(e.contains("log_likelihood is inf"), "{e}");
        let e = rebuild(&|s| s.sye = Array3::zeros((2, 3, 0)));
        assert!(e.contains("must all be >= 1"), "{e}");
    }
}
