//! VLAD (vector of locally aggregated descriptors), VLFeat's `vl_vlad_encode`.

use super::posterior::{Assign, SparsePosteriors};
use super::{EncodeError, Encoder};
use crate::float::Float;
use crate::gmm::DiagGmm;
use crate::kernels::reduce::CHUNK_ROWS;
use crate::linalg::{gemm, Par};
use crate::normalize::L2_FLOOR;
use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut1, Axis, Zip};

/// Options of [`Vlad`]: VLFeat's flags, applied in VLFeat's order
/// (mass, square root, per-component L2, global L2). The default is VLFeat's
/// default: hard assignment and global L2 only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VladParams {
    /// Divide each component's block by its mass $\sum_i q_{ik}$
    /// (`VL_VLAD_FLAG_NORMALIZE_MASS`).
    pub normalize_mass: bool,
    /// Signed square root of every entry (`VL_VLAD_FLAG_SQUARE_ROOT`).
    pub square_root: bool,
    /// L2-normalise each component's block (`VL_VLAD_FLAG_NORMALIZE_COMPONENTS`).
    pub normalize_components: bool,
    /// Skip the final global L2 normalisation (`VL_VLAD_FLAG_UNNORMALIZED`).
    pub unnormalized: bool,
    /// Hard assignment of each descriptor to its nearest mean (Euclidean), as
    /// VLFeat is used with k-means; `false`: soft assignment by the posteriors
    /// of a GMM (only for [`Vlad::from_gmm`]).
    pub hard_assignment: bool,
}

impl Default for VladParams {
    fn default() -> Self {
        Self {
            normalize_mass: false,
            square_root: false,
            normalize_components: false,
            unnormalized: false,
            hard_assignment: true,
        }
    }
}

impl VladParams {
    /// Checks the settings that do not depend on the centres and returns the
    /// checked parameters, which [`Vlad`] is built from. Every combination
    /// of VLFeat's flags is valid, so this succeeds for every value today;
    /// the one rule that depends on the model — soft assignment
    /// (`hard_assignment` = false) needs a GMM's posteriors — is checked by
    /// [`ValidVladParams::build`] (bare centres), with the error of
    /// [`Vlad::new`].
    ///
    /// ```
    /// use fisherkit::encode::VladParams;
    /// use ndarray::array;
    /// let soft = VladParams { hard_assignment: false, ..VladParams::default() };
    /// let checked = soft.check().unwrap();
    /// // soft assignment on bare centres: refused when the encoder is built
    /// let e = checked.build(array![[0.0, 1.0], [2.0, 3.0]]).unwrap_err();
    /// assert!(e.to_string().contains("soft-assignment VLAD needs a GMM"));
    /// ```
    pub fn check(&self) -> Result<ValidVladParams, EncodeError> {
        Ok(ValidVladParams(self.clone()))
    }
}

/// [`VladParams`] that passed [`VladParams::check`]; only `check` makes one
/// (params → checked params → encoder). Reads as the parameters (`Deref`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidVladParams(VladParams);

impl std::ops::Deref for ValidVladParams {
    type Target = VladParams;
    fn deref(&self) -> &VladParams {
        &self.0
    }
}

impl ValidVladParams {
    /// The hard-assignment encoder of the centres `means` (K, D); see
    /// [`Vlad::new`]. Errors: soft assignment (`hard_assignment` = false:
    /// bare centres have no posteriors), K = 0 or D = 0, a non-finite centre.
    pub fn build<F: Float>(self, means: Array2<F>) -> Result<Vlad<F>, EncodeError> {
        if !self.hard_assignment {
            return Err(EncodeError::InvalidOption(
                "soft-assignment VLAD needs a GMM (use Vlad::from_gmm)".into(),
            ));
        }
        Vlad::build(means, self.0, None)
    }

    /// The encoder of the means of `gmm` (K, D), with soft assignment by its
    /// posteriors when `hard_assignment` is false; see [`Vlad::from_gmm`].
    pub fn build_from_gmm<F: Float>(self, gmm: &DiagGmm<F>) -> Result<Vlad<F>, EncodeError> {
        let g = (!self.hard_assignment).then(|| gmm.clone());
        Vlad::build(gmm.means().to_owned(), self.0, g)
    }
}

/// VLAD encoder with K centres in D dimensions.
///
/// For a bag $x_1 \dots x_N$ (N, D) and assignments $q_{ik}$ (1 for the
/// nearest centre, or GMM posteriors),
/// $$v_k = \sum_i q_{ik} (x_i - \mu_k) \quad (\text{or } / \textstyle\sum_i q_{ik}
/// \text{ with } \texttt{normalize\_mass}),$$
/// output $[v_1 \dots v_K]$ (K·D, component-major), then the options of
/// [`VladParams`] in VLFeat's order; L2 norms are floored at `1e-12` as in
/// VLFeat.
#[derive(Debug, Clone)]
pub struct Vlad<F: Float> {
    /// Centres $\mu_k$, (K, D).
    means: Array2<F>,
    params: VladParams,
    gmm: Option<DiagGmm<F>>,
    /// Mean of the centres, (D): reference point of the distance GEMM.
    center: Array1<F>,
    /// $(\mu_k - c)^\top$, (D, K).
    centred_t: Array2<F>,
    /// $\frac12 \|\mu_k - c\|^2$, (K).
    half_sq_norm: Array1<F>,
}

impl<F: Float> Vlad<F> {
    /// VLAD on centres `means` (K, D) (e.g. k-means centroids), with hard
    /// assignment to the nearest centre. `params.hard_assignment` must be true
    /// ([`VladParams::check`], then [`ValidVladParams::build`]).
    ///
    /// ```
    /// use fisherkit::encode::{Vlad, VladParams};
    /// use fisherkit::Encoder;
    /// use ndarray::array;
    ///
    /// let vlad = Vlad::new(array![[0.0, 0.0], [10.0, 0.0]], VladParams::default()).unwrap();
    /// // Both rows go to centre 0; the residuals sum to (1, 2); global L2.
    /// let v = vlad.encode(array![[1.0, 0.0], [0.0, 2.0]].view()).unwrap();
    /// let n = 5.0f64.sqrt();
    /// assert_eq!(v.len(), 4);
    /// assert!((v[0] - 1.0 / n).abs() < 1e-12 && (v[1] - 2.0 / n).abs() < 1e-12);
    /// assert_eq!((v[2], v[3]), (0.0, 0.0));
    /// ```
    pub fn new(means: Array2<F>, params: VladParams) -> Result<Self, EncodeError> {
        params.check()?.build(means)
    }

    /// VLAD on the means of `gmm`; soft assignment by its posteriors when
    /// `params.hard_assignment` is false ([`VladParams::check`], then
    /// [`ValidVladParams::build_from_gmm`]).
    pub fn from_gmm(gmm: &DiagGmm<F>, params: VladParams) -> Result<Self, EncodeError> {
        params.check()?.build_from_gmm(gmm)
    }

    /// The encoder of the checked `params` on centres `means` (K, D), with
    /// the posteriors of `gmm` when given; checks the centres.
    fn build(
        means: Array2<F>,
        params: VladParams,
        gmm: Option<DiagGmm<F>>,
    ) -> Result<Self, EncodeError> {
        let (k, d) = means.dim();
        if k == 0 || d == 0 {
            return Err(EncodeError::InvalidOption(format!(
                "VLAD needs at least one centre of dimension ≥ 1, got means of shape ({k}, {d})"
            )));
        }
        if let Some(((i, j), v)) = means.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(EncodeError::InvalidOption(format!(
                "VLAD centre [{i}, {j}] is {v}; centres must be finite"
            )));
        }
        let means = means.as_standard_layout().into_owned();
        let center = means
            .map(|v| v.as_f64())
            .mean_axis(Axis(0))
            .expect("k > 0")
            .mapv(F::from_f64_lossy);
        let centred = &means - &center;
        let half_sq_norm = centred
            .rows()
            .into_iter()
            .map(|r| F::from_f64_lossy(0.5 * r.iter().map(|v| v.as_f64().powi(2)).sum::<f64>()))
            .collect();
        Ok(Self {
            centred_t: centred.t().as_standard_layout().into_owned(),
            means,
            params,
            gmm,
            center,
            half_sq_norm,
        })
    }

    /// The centres $\mu_k$, (K, D).
    pub fn means(&self) -> ArrayView2<'_, F> {
        self.means.view()
    }

    /// The encoder's options.
    pub fn params(&self) -> &VladParams {
        &self.params
    }

    /// Index of the nearest centre of each row of `x` (n, D) into `out` (n):
    /// the arg-max of $y \cdot \mu'_k - \frac12\|\mu'_k\|^2$ with $y = x - c$.
    fn nearest(
        &self,
        x: ArrayView2<'_, F>,
        y: &mut Array2<F>,
        dots: &mut Array2<F>,
        out: &mut Vec<u32>,
    ) {
        let (n, d) = x.dim();
        let k = self.means.nrows();
        if y.dim() != (n, d) {
            *y = Array2::zeros((n, d));
            *dots = Array2::zeros((n, k));
        }
        Zip::from(y.rows_mut())
            .and(x.rows())
            .for_each(|mut yr, xr| {
                Zip::from(&mut yr)
                    .and(&xr)
                    .and(&self.center)
                    .for_each(|y, &x, &c| *y = x - c);
            });
        gemm(
            dots.view_mut(),
            false,
            y.view(),
            self.centred_t.view(),
            F::one(),
            Par::Seq,
        );
        out.clear();
        for row in dots.rows() {
            let mut best = 0usize;
            let mut best_v = F::neg_infinity();
            for (kk, (&v, &h)) in row.iter().zip(&self.half_sq_norm).enumerate() {
                let s = v - h;
                if s > best_v {
                    best_v = s;
                    best = kk;
                }
            }
            out.push(best as u32);
        }
    }

    fn encode_raw(&self, x: ArrayView2<'_, F>, out: &mut [F]) {
        let (k, d) = self.means.dim();
        out.fill(F::zero());
        let means = self.means.as_slice().expect("standard layout");
        let mut mass = vec![0.0f64; k];
        let mut add = |kk: usize, q: F, xr: &[F]| {
            mass[kk] += q.as_f64();
            let r = kk * d..(kk + 1) * d;
            for ((o, &x), &m) in out[r.clone()].iter_mut().zip(xr).zip(&means[r]) {
                *o += q * (x - m);
            }
        };
        match &self.gmm {
            None => {
                let mut y = Array2::zeros((0, 0));
                let mut dots = Array2::zeros((0, 0));
                let mut idx = Vec::new();
                for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
                    self.nearest(xc, &mut y, &mut dots, &mut idx);
                    for (xr, &kk) in xc.outer_iter().zip(&idx) {
                        add(
                            kk as usize,
                            F::one(),
                            xr.to_slice().expect("standard layout"),
                        );
                    }
                }
            }
            Some(g) => {
                let mut lp = Array2::<F>::zeros((x.nrows().min(CHUNK_ROWS), k));
                let mut scratch = Array2::zeros((0, 0));
                let mut sp = SparsePosteriors::default();
                for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
                    let mut l = lp.slice_mut(s![..xc.nrows(), ..]);
                    g.log_joint_into(xc, l.view_mut(), &mut scratch, Par::Seq);
                    sp.fill_from_log_joint(l.view(), Assign::Soft);
                    for (i, xr) in xc.outer_iter().enumerate() {
                        let xr = xr.to_slice().expect("standard layout");
                        for j in sp.start[i]..sp.start[i + 1] {
                            add(sp.comp[j] as usize, sp.q[j], xr);
                        }
                    }
                }
            }
        }
        let p = &self.params;
        for (kk, blk) in out.chunks_exact_mut(d).enumerate() {
            if p.normalize_mass && mass[kk] > 0.0 {
                let inv = F::from_f64_lossy(1.0 / mass[kk]);
                blk.iter_mut().for_each(|v| *v *= inv);
            }
            if p.square_root {
                blk.iter_mut()
                    .for_each(|v| *v = v.signum() * v.abs().sqrt());
            }
            if p.normalize_components {
                scale_by_norm(blk);
            }
        }
        if !p.unnormalized {
            scale_by_norm(out);
        }
    }
}

/// Divides `v` by $\max(\|v\|_2, 10^{-12})$ (VLFeat's floor).
fn scale_by_norm<F: Float>(v: &mut [F]) {
    let n = v.iter().map(|x| x.as_f64().powi(2)).sum::<f64>().sqrt();
    let inv = F::from_f64_lossy(1.0 / n.max(L2_FLOOR));
    v.iter_mut().for_each(|x| *x *= inv);
}

impl<F: Float> Encoder<F> for Vlad<F> {
    fn input_dim(&self) -> usize {
        self.means.ncols()
    }

    fn output_dim(&self) -> usize {
        self.means.len()
    }

    fn encode_unchecked(&self, bag: ArrayView2<'_, F>, mut out: ArrayViewMut1<'_, F>) {
        let x = bag.as_standard_layout();
        match out.as_slice_mut() {
            Some(o) => self.encode_raw(x.view(), o),
            None => {
                let mut tmp = vec![F::zero(); out.len()];
                self.encode_raw(x.view(), &mut tmp);
                out.iter_mut().zip(tmp).for_each(|(o, t)| *o = t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// VLAD straight from the definition: nearest centre by explicit
    /// distances (or given soft weights), then the flags in VLFeat's order.
    fn naive(
        means: &Array2<f64>,
        x: &Array2<f64>,
        q: Option<&Array2<f64>>,
        p: &VladParams,
    ) -> Vec<f64> {
        let (k, d) = means.dim();
        let mut v = vec![0.0; k * d];
        let mut mass = vec![0.0; k];
        for (i, r) in x.outer_iter().enumerate() {
            let dist = |kk: usize| (0..d).map(|j| (r[j] - means[[kk, j]]).powi(2)).sum::<f64>();
            let nearest = (0..k).fold(0, |a, b| if dist(b) < dist(a) { b } else { a });
            for kk in 0..k {
                let w = match q {
                    Some(q) => q[[i, kk]],
                    None => f64::from(u8::from(kk == nearest)),
                };
                mass[kk] += w;
                for j in 0..d {
                    v[kk * d + j] += w * (r[j] - means[[kk, j]]);
                }
            }
        }
        let norm = |s: &[f64]| s.iter().map(|a| a * a).sum::<f64>().sqrt().max(1e-12);
        for kk in 0..k {
            let b = &mut v[kk * d..(kk + 1) * d];
            if p.normalize_mass && mass[kk] > 0.0 {
                b.iter_mut().for_each(|a| *a /= mass[kk]);
            }
            if p.square_root {
                b.iter_mut().for_each(|a| *a = a.signum() * a.abs().sqrt());
            }
            if p.normalize_components {
                let n = norm(b);
                b.iter_mut().for_each(|a| *a /= n);
            }
        }
        if !p.unnormalized {
            let n = norm(&v);
            v.iter_mut().for_each(|a| *a /= n);
        }
        v
    }

    fn all_flag_sets() -> Vec<VladParams> {
        (0..16)
            .map(|b| VladParams {
                normalize_mass: b & 1 != 0,
                square_root: b & 2 != 0,
                normalize_components: b & 4 != 0,
                unnormalized: b & 8 != 0,
                hard_assignment: true,
            })
            .collect()
    }

    #[test]
    fn hard_vlad_matches_definition_for_every_flag() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let means = Array2::from_shape_fn((5, 3), |_| rng.random_range(-3.0..3.0));
        // 600 rows: several chunks; a far offset checks the centring.
        for off in [0.0, 1e3] {
            let m = means.mapv(|v| v + off);
            let x = Array2::from_shape_fn((600, 3), |_| rng.random_range(-4.0..4.0) + off);
            for p in all_flag_sets() {
                let got = Vlad::new(m.clone(), p.clone())
                    .unwrap()
                    .encode(x.view())
                    .unwrap();
                let want = naive(&m, &x, None, &p);
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9 * (1.0 + b.abs()), "{p:?}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn soft_vlad_uses_gmm_posteriors() {
        let g = DiagGmm::new(
            array![0.3, 0.7],
            array![[0.0, 0.0], [1.0, 0.5]],
            array![[1.0, 0.5], [0.7, 2.0]],
        )
        .unwrap();
        let x = array![[0.2, 0.1], [0.9, 0.3], [-1.0, 2.0]];
        let q = g.predict_proba(x.view()).unwrap();
        let p = VladParams {
            hard_assignment: false,
            unnormalized: true,
            ..VladParams::default()
        };
        let got = Vlad::from_gmm(&g, p.clone())
            .unwrap()
            .encode(x.view())
            .unwrap();
        let want = naive(&g.means().to_owned(), &x, Some(&q), &p);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
        // The hard variant of a GMM-built VLAD is nearest-mean VLAD.
        let hard = Vlad::from_gmm(&g, VladParams::default())
            .unwrap()
            .encode(x.view())
            .unwrap();
        let want = naive(&g.means().to_owned(), &x, None, &VladParams::default());
        for (a, b) in hard.iter().zip(&want) {
            assert!((a - b).abs() < 1e-12);
        }
    }

    #[test]
    fn bad_centres_and_options_are_errors() {
        let soft = VladParams {
            hard_assignment: false,
            ..VladParams::default()
        };
        assert!(Vlad::new(array![[0.0, 1.0]], soft)
            .unwrap_err()
            .to_string()
            .contains("needs a GMM"));
        assert!(Vlad::<f64>::new(Array2::zeros((0, 2)), VladParams::default()).is_err());
        let e = Vlad::new(array![[0.0, f64::INFINITY]], VladParams::default()).unwrap_err();
        assert!(e.to_string().contains("[0, 1]"), "{e}");
        let v = Vlad::new(array![[0.0, 1.0]], VladParams::default()).unwrap();
        assert_eq!(v.output_dim(), 2);
        assert!(v.encode(array![[0.0]].view()).is_err());
        assert!(v.encode(Array2::<f64>::zeros((0, 2)).view()).is_err());
    }
}
