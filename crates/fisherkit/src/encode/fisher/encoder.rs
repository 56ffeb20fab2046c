//! The Fisher-vector encoder, [`FisherVector`]: the GMM's log-joint kernel
//! and the settings it encodes with, built once per model.

use super::params::{FisherVectorParams, FvPart, ValidFisherVectorParams, VLFEAT_SKIP};
use crate::encode::posterior::Assign;
use crate::encode::EncodeError;
use crate::float::Float;
use crate::gmm::DiagGmm;
use crate::kernels::diag_gauss::{log_joint_gemm, mixture_mean};
use ndarray::{Array1, Array2};

impl ValidFisherVectorParams {
    /// The encoder of `gmm` (cloned) with these settings; see
    /// [`FisherVector::new`].
    pub fn build<F: Float>(self, gmm: &DiagGmm<F>) -> Result<FisherVector<F>, EncodeError> {
        FisherVector::from_checked(gmm, self)
    }
}

/// Fisher vector encoder of a diagonal GMM with K components in D dimensions.
///
/// For a bag $x_1 \dots x_N$ (N, D), with posteriors $q_{ik}$ (computed in log
/// space) and $z_{ikd} = (x_{id} - \mu_{kd})/\sigma_{kd}$:
/// $$u_{kd} = \frac{1}{N\sqrt{w_k}} \sum_i q_{ik} z_{ikd}, \qquad
///   v_{kd} = \frac{1}{N\sqrt{2 w_k}} \sum_i q_{ik} (z_{ikd}^2 - 1),$$
/// $$d_{\pi,k} = \frac{\frac1N \sum_i q_{ik} - w_k}{\sqrt{w_k}}.$$
/// Output: the selected blocks in the order $[d_\pi]$ (K), $[u_1 \dots u_K]$
/// (K·D), $[v_1 \dots v_K]$ (K·D), then [`Normalization::apply`](crate::normalize::Normalization::apply). With power 1
/// and no L2 the mean and var blocks equal VLFeat's un-normalised
/// `vl_fisher_encode`; scikit-image's variance block is $-v$.
///
/// These are the gradients of $\frac1N\sum_i \log p(x_i)$ scaled by the
/// diagonal Fisher information: $u_{kd} = \frac{\sigma_{kd}}{\sqrt{w_k}}
/// \partial_{\mu_{kd}}$, $v_{kd} = \frac{2\sigma^2_{kd}}{\sqrt{2 w_k}}
/// \partial_{\sigma^2_{kd}}$.
#[derive(Debug, Clone)]
pub struct FisherVector<F: Float> {
    pub(super) gmm: DiagGmm<F>,
    pub(super) params: FisherVectorParams,
    /// $1/\sigma_{kd}$, (K, D).
    pub(super) inv_sigma: Array2<F>,
    /// Components used (false: skipped, prior < 1e-6 with `vlfeat_skips`).
    pub(super) active: Vec<bool>,
    /// Reference point $c$ of the log-joint GEMM and of the dense
    /// accumulation (the mixture mean), (D).
    pub(super) center: Array1<F>,
    /// (2D, K): rows 0..D hold $-1/(2\sigma^2_{kd})$, rows D..2D hold
    /// $(\mu_{kd} - c_d)/\sigma^2_{kd}$, so that $[y^2, y]$ times it plus
    /// `bias` is $\log w_k \mathcal N(x; \mu_k, \sigma^2_k)$ up to a constant.
    pub(super) kernel: Array2<F>,
    /// (K): $\log w_k - \frac12 \sum_d (\log\sigma^2_{kd} + (\mu_{kd}-c_d)^2/\sigma^2_{kd})$;
    /// $-\infty$ for skipped components (VLFeat's log-weight of a tiny prior).
    pub(super) bias: Vec<F>,
    pub(super) has_prior: bool,
    pub(super) has_mean: bool,
    pub(super) has_var: bool,
    pub(super) path: Accumulation,
    /// Whether chunks go through the screened kernel first (docs/math.md §2.7).
    pub(super) screening: bool,
}

/// How the sums $\sum_i q_{ik} z_{ikd}$, $\sum_i q_{ik} z^2_{ikd}$ are accumulated
/// (a performance knob; every path computes the same vector up to rounding).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulation {
    /// Per chunk of rows: sparse when few posteriors are non-zero, else GEMM.
    Auto,
    /// Always the loop over non-zero $(i, k)$ pairs.
    Sparse,
    /// Always the GEMMs $Q^\top [y^2, y]$.
    Dense,
}

impl<F: Float> FisherVector<F> {
    /// Builds the encoder: [`FisherVectorParams::check`], then
    /// [`ValidFisherVectorParams::build`]. The GMM is cloned.
    ///
    /// # Errors
    /// [`EncodeError::InvalidOption`] for an invalid setting, or for a model
    /// whose means or variances are so extreme that its log-density
    /// overflows `F`.
    pub fn new(gmm: &DiagGmm<F>, params: FisherVectorParams) -> Result<Self, EncodeError> {
        params.check()?.build(gmm)
    }

    fn from_checked(
        gmm: &DiagGmm<F>,
        params: ValidFisherVectorParams,
    ) -> Result<Self, EncodeError> {
        let params = params.into_inner();
        let inv_sigma = gmm.variances().mapv(|v| F::one() / v.sqrt());
        let active: Vec<bool> = gmm
            .weights()
            .iter()
            .map(|w| !(params.vlfeat_skips && w.as_f64() < VLFEAT_SKIP))
            .collect();
        let k = gmm.n_components();
        let center = mixture_mean(gmm.weights(), gmm.means());
        // The constant D/2·log 2π is left out: it cancels in the posteriors.
        let center64 = center.as_slice().expect("standard layout");
        let joint = log_joint_gemm(gmm.weights(), gmm.means(), gmm.variances(), center64, false);
        let kernel = joint.weights;
        let bias: Vec<F> = (0..k)
            .map(|kk| match active[kk] {
                true => F::from_f64_lossy(joint.bias[kk]),
                false => F::neg_infinity(),
            })
            .collect();
        // Means or variances so extreme that the log-joint's coefficients
        // overflow F would give NaN posteriors: refuse the model up front.
        if let Some(kk) = (0..k).find(|&kk| {
            let bad_bias = bias[kk].is_nan() || bias[kk] == F::infinity();
            bad_bias || kernel.column(kk).iter().any(|v| !v.is_finite())
        }) {
            return Err(EncodeError::InvalidOption(format!(
                "component {kk} of the model has means or variances too extreme for {} (its log-density overflows); rescale the data or use float64",
                F::NAME
            )));
        }
        let has = |p| params.parts.contains(&p);
        Ok(Self {
            gmm: gmm.clone(),
            inv_sigma,
            active,
            center: center.mapv(F::from_f64_lossy),
            kernel,
            bias,
            has_prior: has(FvPart::Prior),
            has_mean: has(FvPart::Mean),
            has_var: has(FvPart::Var),
            params,
            path: Accumulation::Auto,
            screening: true,
        })
    }

    /// Forces an accumulation path (for tests and benchmarks).
    /// `Accumulation::Dense` also turns the screening off (the screened
    /// kernel always accumulates pair by pair).
    #[doc(hidden)]
    pub fn with_accumulation(mut self, path: Accumulation) -> Self {
        self.path = path;
        if path == Accumulation::Dense {
            self.screening = false;
        }
        self
    }

    /// Turns the screened kernel (docs/math.md §2.7) on (the default) or off
    /// (every chunk through the GEMM kernel; for tests and benchmarks).
    #[doc(hidden)]
    pub fn with_screening(mut self, on: bool) -> Self {
        self.screening = on;
        self
    }

    /// The mixture the encoder was built from.
    pub fn gmm(&self) -> &DiagGmm<F> {
        &self.gmm
    }

    /// The encoder's options.
    pub fn params(&self) -> &FisherVectorParams {
        &self.params
    }

    pub(super) fn assign(&self) -> Assign {
        if self.params.fast {
            Assign::Hard
        } else if self.params.vlfeat_skips {
            Assign::SoftSkip(VLFEAT_SKIP)
        } else {
            Assign::Soft
        }
    }
}
