//! MFA Fisher scores (Dixit & Vasconcelos, NIPS 2016, eqs. 14–15; docs/math.md §5).
//!
//! For a bag $X$ of N descriptors and a background [`Mfa`], with posteriors
//! $h_{ik}$, $d_{ik} = x_i - \mu_k$, $e_{ik} = \beta_k d_{ik}$ and
//! $r_{ik} = S_k^{-1} d_{ik}$:
//! $$G_{\mu_k} = \frac1N\sum_i h_{ik} r_{ik}, \qquad
//!   G_{\Lambda_k} = \frac1N\Big(\sum_i h_{ik} r_{ik} e_{ik}^\top - n_k \beta_k^\top\Big),$$
//! the exact gradients of the bag's mean log-likelihood with respect to
//! $\mu_k$ (D) and $\Lambda_k$ (D, R). They are computed in sufficient-statistic
//! form from one pass of the GEMM kernel of [`crate::mfa`]:
//! $G_{\mu_k} = \Psi_k^{-1}[\sum h y - n_k\mu'_k - \Lambda_k s_k]/N$,
//! $G_{\Lambda_k} = (\Psi_k^{-1}[\sum h y e^\top - \mu'_k s_k^\top - \Lambda_k \sum h e e^\top] - n_k\beta_k^\top)/N$.
//!
//! Layout: the `mean` block (K·D, component-major) then the `loading` block
//! (K·D·R: component, then dimension, then factor), then the optional
//! diagonal whitening, then [`Normalization`].

use super::{EncodeError, Encoder};
use crate::float::Float;
use crate::linalg::{gemm, Par};
use crate::mfa::kernel::{accumulate, GAcc, Want};
use crate::mfa::Mfa;
use crate::normalize::Normalization;
use ndarray::{s, Array1, Array2, Array3, ArrayView2, ArrayViewMut1, Axis};
use rayon::prelude::*;
use std::fmt;

/// A block of the MFA Fisher score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MfaPart {
    /// Gradient with respect to the means, K·D values.
    Mean,
    /// Gradient with respect to the factor loadings, K·D·R values.
    Loading,
}

impl MfaPart {
    /// All parts, in output order.
    pub const ALL: [MfaPart; 2] = [MfaPart::Mean, MfaPart::Loading];

    /// The canonical name used on the command line, in reports and in model
    /// files (`mean`, `loading`).
    pub fn name(self) -> &'static str {
        match self {
            MfaPart::Mean => "mean",
            MfaPart::Loading => "loading",
        }
    }

    /// Values in this block for K components, dimension D and R factors:
    /// K·D for the means, K·D·R for the loadings.
    pub fn n_values(self, k: usize, d: usize, r: usize) -> usize {
        match self {
            MfaPart::Mean => k * d,
            MfaPart::Loading => k * d * r,
        }
    }
}

impl fmt::Display for MfaPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a list of parts such as `"mean,loading"` (separators `,` or `+`,
/// case-insensitive; `"lambda"` is accepted for `loading`). The result is in
/// the canonical output order (mean, loading) without duplicates.
pub fn parse_mfa_parts(s: &str) -> Result<Vec<MfaPart>, EncodeError> {
    let mut mean = false;
    let mut loading = false;
    for tok in s.split([',', '+']) {
        match tok.trim().to_ascii_lowercase().as_str() {
            "mean" | "means" | "mu" => mean = true,
            "loading" | "loadings" | "lambda" => loading = true,
            other => {
                return Err(EncodeError::InvalidOption(format!(
                    "unknown MFA Fisher score part `{other}` in `{s}`; expected `mean` and/or `loading`"
                )))
            }
        }
    }
    let mut v = Vec::new();
    if mean {
        v.push(MfaPart::Mean);
    }
    if loading {
        v.push(MfaPart::Loading);
    }
    Ok(v)
}

/// Options of [`MfaFisherScore`].
#[derive(Debug, Clone, PartialEq)]
pub struct MfaFisherScoreParams<F: Float> {
    /// Blocks to output (any order; output is always mean then loading). Default `[Loading]`.
    pub parts: Vec<MfaPart>,
    /// Signed power and L2 (default power 0.5 + L2).
    pub normalization: Normalization,
    /// Optional diagonal Fisher-information estimate (`output_dim()` values,
    /// ≥ 0): the raw score is divided element-wise by its square root before
    /// normalisation. Estimate it with [`MfaFisherScore::fit_whitening`]. Off by default.
    pub whitening: Option<Array1<F>>,
}

impl<F: Float> Default for MfaFisherScoreParams<F> {
    fn default() -> Self {
        Self {
            parts: vec![MfaPart::Loading],
            normalization: Normalization::default(),
            whitening: None,
        }
    }
}

impl<F: Float> MfaFisherScoreParams<F> {
    /// Checks every setting that does not depend on the model (at least one
    /// part, power finite and > 0, whitening values finite and ≥ 0) and
    /// returns the checked parameters, which [`MfaFisherScore`] is built from.
    ///
    /// ```
    /// use fisherkit::encode::MfaFisherScoreParams;
    /// assert!(MfaFisherScoreParams::<f32>::default().check().is_ok());
    /// let none = MfaFisherScoreParams::<f32> { parts: vec![], ..Default::default() };
    /// assert!(none.check().unwrap_err().to_string().contains("at least one part"));
    /// ```
    pub fn check(&self) -> Result<ValidMfaFisherScoreParams<F>, EncodeError> {
        if self.parts.is_empty() {
            return Err(EncodeError::InvalidOption(
                "the MFA Fisher score needs at least one part (mean, loading)".into(),
            ));
        }
        self.normalization
            .validate()
            .map_err(EncodeError::InvalidOption)?;
        if let Some(w) = &self.whitening {
            check_whitening_values(w)?;
        }
        Ok(ValidMfaFisherScoreParams(self.clone()))
    }
}

/// [`MfaFisherScoreParams`] that passed [`MfaFisherScoreParams::check`]; only
/// `check` makes one (params → checked params → encoder). Reads as the
/// parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidMfaFisherScoreParams<F: Float>(MfaFisherScoreParams<F>);

impl<F: Float> std::ops::Deref for ValidMfaFisherScoreParams<F> {
    type Target = MfaFisherScoreParams<F>;
    fn deref(&self) -> &MfaFisherScoreParams<F> {
        &self.0
    }
}

impl<F: Float> ValidMfaFisherScoreParams<F> {
    /// The encoder of `model` with these settings; see [`MfaFisherScore::new`].
    pub fn build(self, model: Mfa<F>) -> Result<MfaFisherScore<F>, EncodeError> {
        MfaFisherScore::from_checked(model, self)
    }
}

/// Whitening values must be finite and ≥ 0 (a diagonal Fisher information).
fn check_whitening_values<F: Float>(fim: &Array1<F>) -> Result<(), EncodeError> {
    match fim
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= F::zero()))
    {
        Some((i, v)) => Err(EncodeError::InvalidOption(format!(
            "whitening value {i} is {v}; it must be finite and >= 0"
        ))),
        None => Ok(()),
    }
}

/// The MFA Fisher score encoder of one background model.
#[derive(Debug, Clone)]
pub struct MfaFisherScore<F: Float> {
    model: Mfa<F>,
    mean: bool,
    loading: bool,
    normalization: Normalization,
    /// (output_dim): $1/\sqrt{\hat F_{jj}}$.
    white_scale: Option<Array1<F>>,
    /// (K, D): $\mu'_k = \mu_k - c$.
    mu_p: Array2<f64>,
    /// (P, D): $1/\psi$.
    inv_psi: Array2<f64>,
    /// (K, R, D): $\tilde\Lambda_k^\top = (\Lambda_k C_k^{-\top})^\top$, stored
    /// transposed so that $\tilde\Lambda_k s_k$ runs along D.
    lam_tilde_t: Array3<f64>,
    /// (K, D, R): $\beta_k^\top = \Psi_k^{-1}\Lambda_k M_k^{-1}$.
    beta_t: Array3<f64>,
}

impl<F: Float> MfaFisherScore<F> {
    /// Builds the encoder for `model`: [`MfaFisherScoreParams::check`], then
    /// [`ValidMfaFisherScoreParams::build`].
    ///
    /// # Errors
    /// [`EncodeError::InvalidOption`] for an invalid setting, or a whitening
    /// whose length is not `output_dim()`.
    pub fn new(model: Mfa<F>, params: MfaFisherScoreParams<F>) -> Result<Self, EncodeError> {
        params.check()?.build(model)
    }

    fn from_checked(
        model: Mfa<F>,
        params: ValidMfaFisherScoreParams<F>,
    ) -> Result<Self, EncodeError> {
        let params = params.0;
        let (k, d, r) = (model.n_components(), model.dim(), model.n_factors());
        let center = model.kern.center.mapv(|v| v.as_f64());
        let mu_p =
            Array2::from_shape_fn((k, d), |(i, j)| model.means()[[i, j]].as_f64() - center[j]);
        let inv_psi = model.psi().mapv(|v| 1.0 / v.as_f64());
        let mut lam_tilde_t = Array3::<f64>::zeros((k, r, d));
        let mut beta_t = Array3::<f64>::zeros((k, d, r));
        for kk in 0..k {
            let lam = model
                .loadings()
                .index_axis(Axis(0), kk)
                .mapv(|v| v.as_f64());
            let ci = model.kern.c_inv.index_axis(Axis(0), kk);
            lam_tilde_t
                .index_axis_mut(Axis(0), kk)
                .assign(&ci.dot(&lam.t()));
            let ip = inv_psi.row(model.psi_row(kk));
            let mut bt = lam.dot(&model.kern.m_inv.index_axis(Axis(0), kk));
            for (mut row, &p) in bt.rows_mut().into_iter().zip(ip.iter()) {
                row.mapv_inplace(|v| v * p);
            }
            beta_t.index_axis_mut(Axis(0), kk).assign(&bt);
        }
        let mut enc = Self {
            model,
            mean: params.parts.contains(&MfaPart::Mean),
            loading: params.parts.contains(&MfaPart::Loading),
            normalization: params.normalization,
            white_scale: None,
            mu_p,
            inv_psi,
            lam_tilde_t,
            beta_t,
        };
        if let Some(w) = params.whitening {
            enc.set_whitening(w)?;
        }
        Ok(enc)
    }

    /// Uses the diagonal Fisher-information estimate `fim` (`output_dim()`, ≥ 0):
    /// raw scores are divided by $\sqrt{\max(\hat F_{jj}, 10^{-12}\,\overline{\hat F})}$.
    pub fn set_whitening(&mut self, fim: Array1<F>) -> Result<(), EncodeError> {
        if fim.len() != self.output_dim() {
            return Err(EncodeError::InvalidOption(format!(
                "whitening has {} values but the encoding has {}",
                fim.len(),
                self.output_dim()
            )));
        }
        check_whitening_values(&fim)?;
        let mean = fim.iter().map(|v| v.as_f64()).sum::<f64>() / fim.len() as f64;
        let floor = (1e-12 * mean).max(f64::MIN_POSITIVE);
        self.white_scale =
            Some(fim.mapv(|v| F::from_f64_lossy(1.0 / v.as_f64().max(floor).sqrt())));
        Ok(())
    }

    /// The background model.
    pub fn model(&self) -> &Mfa<F> {
        &self.model
    }

    /// The parts output, in output order.
    pub fn parts(&self) -> Vec<MfaPart> {
        let mut v = Vec::new();
        if self.mean {
            v.push(MfaPart::Mean);
        }
        if self.loading {
            v.push(MfaPart::Loading);
        }
        v
    }

    /// Writes the un-normalised, un-whitened score of `bag` (N, D) (validated) into `out`:
    /// the statistics of one pass of the kernel, then each component's blocks.
    fn raw_into(&self, bag: ArrayView2<'_, F>, mut out: ArrayViewMut1<'_, F>) {
        let m = &self.model;
        let want = if self.loading {
            Want::SCORES
        } else {
            Want::SCORES_MEAN
        };
        let g = accumulate(m, bag, want, false);
        match out.as_slice_mut() {
            Some(o) => self.finish(&g, o),
            None => {
                // a strided `out` (say a column of a matrix): finish into a
                // contiguous copy
                let mut o = vec![F::zero(); out.len()];
                self.finish(&g, &mut o);
                out.iter_mut().zip(o).for_each(|(dst, v)| *dst = v);
            }
        }
    }

    /// Each component's blocks of the score from the statistics `g` into `out`
    /// (`output_dim()`).
    fn finish(&self, g: &GAcc, out: &mut [F]) {
        let (k, d, r) = (
            self.model.n_components(),
            self.model.dim(),
            self.model.n_factors(),
        );
        let (means, loadings) = out.split_at_mut(if self.mean { k * d } else { 0 });
        let mut scratch = FinishScratch::new(d, r);
        // the element-wise passes compiled for this CPU's widest vectors
        crate::linalg::vectorized(
            #[inline(always)]
            || {
                for kk in 0..k {
                    if self.mean {
                        let o = &mut means[kk * d..(kk + 1) * d];
                        self.mean_block(g, kk, &mut scratch.ls, o);
                    }
                    if self.loading {
                        let o = &mut loadings[kk * d * r..(kk + 1) * d * r];
                        self.loading_block(g, kk, &mut scratch, o);
                    }
                }
            },
        )
    }

    /// $G_{\mu_k} = \Psi_k^{-1}[\sum h y - n_k\mu'_k - \tilde\Lambda_k s_k]/N$
    /// into `o` (D); `ls` (D) is scratch for $\tilde\Lambda_k s_k$.
    #[inline(always)]
    fn mean_block(&self, g: &GAcc, kk: usize, ls: &mut [f64], o: &mut [F]) {
        let (k, r) = (self.model.n_components(), self.model.n_factors());
        let inv_n = 1.0 / g.n_rows as f64;
        let nk = g.nk[kk];
        ls.fill(0.0);
        for (lt_a, &s_a) in self
            .lam_tilde_t
            .index_axis(Axis(0), kk)
            .rows()
            .into_iter()
            .zip(g.sg.row(kk))
        {
            let lt_a = lt_a.to_slice().expect("contiguous");
            ls.iter_mut().zip(lt_a).for_each(|(l, &v)| *l += v * s_a);
        }
        let ip = self.inv_psi.row(self.model.psi_row(kk));
        let mu = self.mu_p.row(kk);
        let sy = g.syg.column(k * r + kk);
        ndarray::Zip::from(o)
            .and(&ip)
            .and(&sy)
            .and(&mu)
            .and(&*ls)
            .for_each(|o, &ip, &sy, &mu, &ls| {
                *o = F::from_f64_lossy(ip * (sy - nk * mu - ls) * inv_n)
            });
    }

    /// $G_{\Lambda_k} = (\Psi_k^{-1} T C_k^{-1} - n_k\beta_k^\top)/N$ into `o`
    /// (D·R, row-major (D, R)), with
    /// $T = \sum h y g^\top - \mu'_k s_k^\top - \tilde\Lambda_k \sum h g g^\top$
    /// distributed over $C_k^{-1}$:
    /// $$T C^{-1} = \Big(\sum h y g^\top\Big) C^{-1} - \mu'_k (C^{-\top} s_k)^\top -
    ///   \tilde\Lambda_k \Big(\sum h g g^\top C^{-1}\Big),$$
    /// two (D, R)·(R, R) products and a fused element-wise pass, no (D, R)
    /// temporaries (docs/math.md §5.2).
    #[inline(always)]
    fn loading_block(&self, g: &GAcc, kk: usize, sc: &mut FinishScratch, o: &mut [F]) {
        let m = &self.model;
        let r = m.n_factors();
        let inv_n = 1.0 / g.n_rows as f64;
        let nk = g.nk[kk];
        let ci = m.kern.c_inv.index_axis(Axis(0), kk);
        // A = (Σ h g gᵀ) C⁻¹ and u = C⁻ᵀ s, (R, R) and (R)
        let sgg = g.sgg.index_axis(Axis(0), kk);
        let sg = g.sg.row(kk);
        for a in 0..r {
            for b in 0..r {
                sc.a[[a, b]] = -(0..r).map(|c| sgg[[a, c]] * ci[[c, b]]).sum::<f64>();
            }
            sc.u[a] = (0..r).map(|c| sg[c] * ci[[c, a]]).sum();
        }
        let syg_k = g.syg.slice(s![.., kk * r..(kk + 1) * r]);
        gemm(sc.t.view_mut(), false, syg_k, ci, 1.0, Par::Seq);
        let lt = self.lam_tilde_t.index_axis(Axis(0), kk);
        gemm(sc.t.view_mut(), true, lt.t(), sc.a.view(), 1.0, Par::Seq);
        let ip = self.inv_psi.row(m.psi_row(kk));
        let mu = self.mu_p.row(kk);
        let bt = self.beta_t.index_axis(Axis(0), kk);
        let bt = bt.as_slice().expect("contiguous");
        let t = sc.t.as_slice().expect("contiguous");
        let u = &sc.u;
        for (j, ((oj, tj), bj)) in o
            .chunks_exact_mut(r)
            .zip(t.chunks_exact(r))
            .zip(bt.chunks_exact(r))
            .enumerate()
        {
            let (ipj, muj) = (ip[j], mu[j]);
            for b in 0..r {
                oj[b] = F::from_f64_lossy((ipj * (tj[b] - muj * u[b]) - nk * bj[b]) * inv_n);
            }
        }
    }

    /// The un-normalised score $[G_\mu, G_\Lambda]/N$ of one bag (N, D), before
    /// whitening and normalisation.
    pub fn raw_score(&self, bag: ArrayView2<'_, F>) -> Result<Array1<F>, EncodeError> {
        crate::data::check_matrix(bag, Some(self.input_dim()), "bag")
            .map_err(|source| EncodeError::Bag { index: 0, source })?;
        let mut out = Array1::zeros(self.output_dim());
        self.raw_into(bag, out.view_mut());
        Ok(out)
    }

    /// Estimates the diagonal of the Fisher information as the empirical
    /// variance of the raw per-bag scores over `bags` (at least 2):
    /// $\hat F_{jj} = \frac1B\sum_b (G_{bj} - \bar G_j)^2$, shape (`output_dim()`).
    /// Pass it as [`MfaFisherScoreParams::whitening`] or to
    /// [`MfaFisherScore::set_whitening`].
    pub fn fit_whitening(&self, bags: &[ArrayView2<'_, F>]) -> Result<Array1<F>, EncodeError> {
        if bags.len() < 2 {
            return Err(EncodeError::InvalidOption(format!(
                "the whitening needs at least 2 bags, got {}",
                bags.len()
            )));
        }
        for (index, bag) in bags.iter().enumerate() {
            crate::data::check_matrix(*bag, Some(self.input_dim()), "bag")
                .map_err(|source| EncodeError::Bag { index, source })?;
        }
        let dim = self.output_dim();
        let raws: Vec<Array1<F>> = bags
            .par_iter()
            .map(|b| {
                let mut o = Array1::zeros(dim);
                self.raw_into(*b, o.view_mut());
                o
            })
            .collect();
        let nb = raws.len() as f64;
        let mut mean = Array1::<f64>::zeros(dim);
        for v in &raws {
            mean.zip_mut_with(v, |m, x| *m += x.as_f64());
        }
        mean /= nb;
        let mut var = Array1::<f64>::zeros(dim);
        for v in &raws {
            ndarray::Zip::from(&mut var)
                .and(v)
                .and(&mean)
                .for_each(|s, x, m| {
                    let t = x.as_f64() - m;
                    *s += t * t;
                });
        }
        Ok(var.mapv(|v| F::from_f64_lossy(v / nb)))
    }
}

/// Per-bag scratch of [`MfaFisherScore::mean_block`] and
/// [`MfaFisherScore::loading_block`].
struct FinishScratch {
    /// (D, R): $T C^{-1}$ before the μ' term.
    t: Array2<f64>,
    /// (R, R): $-\sum h g g^\top C^{-1}$.
    a: Array2<f64>,
    /// (R): $C^{-\top} s_k$.
    u: Vec<f64>,
    /// (D): $\tilde\Lambda_k s_k$ of [`MfaFisherScore::mean_block`].
    ls: Vec<f64>,
}

impl FinishScratch {
    fn new(d: usize, r: usize) -> Self {
        Self {
            t: Array2::zeros((d, r)),
            a: Array2::zeros((r, r)),
            u: vec![0.0; r],
            ls: vec![0.0; d],
        }
    }
}

impl<F: Float> Encoder<F> for MfaFisherScore<F> {
    fn input_dim(&self) -> usize {
        self.model.dim()
    }

    fn output_dim(&self) -> usize {
        let m = &self.model;
        let kd = m.n_components() * m.dim();
        (if self.mean { kd } else { 0 }) + (if self.loading { kd * m.n_factors() } else { 0 })
    }

    fn encode_unchecked(&self, bag: ArrayView2<'_, F>, mut out: ArrayViewMut1<'_, F>) {
        self.raw_into(bag, out.view_mut());
        if let Some(w) = &self.white_scale {
            out.zip_mut_with(w, |o, s| *o *= *s);
        }
        self.normalization.apply(out);
    }
}
