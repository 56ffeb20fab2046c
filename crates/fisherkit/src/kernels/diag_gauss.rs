//! The log-joint of a diagonal Gaussian mixture in GEMM form (`docs/math.md`
//! §2.1), shared by the GMM's E-step ([`crate::gmm::DiagGmm`]) and the Fisher
//! vector encoder ([`crate::encode::FisherVector`]).
//!
//! With $y = x - c$ about a reference point $c$ (the mixture mean),
//! $$\log w_k \mathcal N(x;\mu_k,\sigma_k^2) = b_k + \sum_d y_d^2 \,(-\tfrac{1}{2\sigma^2_{kd}}) +
//!   \sum_d y_d\, \frac{\mu_{kd} - c_d}{\sigma^2_{kd}},$$
//! $b_k = \log w_k - \tfrac12 (D\log 2\pi + \sum_d \log\sigma^2_{kd} + \sum_d (\mu_{kd}-c_d)^2/\sigma^2_{kd})$:
//! one product of the (n, 2D) matrix $[y^2, y]$ with a (2D, K) matrix.

use crate::float::{Float, LN_2PI};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Zip};

/// The mixture mean $c = \sum_k w_k \mu_k$ accumulated in `f64`, (D), from
/// `weights` (K) and `means` (K, D).
pub(crate) fn mixture_mean<F: Float>(
    weights: ArrayView1<'_, F>,
    means: ArrayView2<'_, F>,
) -> Array1<f64> {
    let mut c = Array1::<f64>::zeros(means.ncols());
    for (w, m) in weights.iter().zip(means.outer_iter()) {
        let w = w.as_f64();
        Zip::from(&mut c)
            .and(&m)
            .for_each(|c, m| *c += w * m.as_f64());
    }
    c
}

/// The GEMM form of the log-joints about `center`.
pub(crate) struct LogJointGemm<F> {
    /// (2D, K): rows 0..D hold $-1/(2\sigma^2_{kd})$, rows D..2D hold
    /// $(\mu_{kd} - c_d)/\sigma^2_{kd}$.
    pub weights: Array2<F>,
    /// (K): $b_k$ in `f64`; without the $-\frac D2 \log 2\pi$ term when the
    /// caller only needs posteriors (it cancels in them).
    pub bias: Vec<f64>,
}

/// Builds [`LogJointGemm`] for `weights` (K, > 0), `means` (K, D) and
/// `variances` (K, D, > 0) about `center` (D). `with_normaliser` includes the
/// $-\frac D2\log 2\pi$ of a density in $b_k$ (needed for log-likelihoods).
pub(crate) fn log_joint_gemm<F: Float>(
    weights: ArrayView1<'_, F>,
    means: ArrayView2<'_, F>,
    variances: ArrayView2<'_, F>,
    center: &[f64],
    with_normaliser: bool,
) -> LogJointGemm<F> {
    let (k, d) = means.dim();
    let mut gemm_weights = Array2::<F>::zeros((2 * d, k));
    let mut bias = vec![0.0f64; k];
    for kk in 0..k {
        let mut acc = if with_normaliser {
            d as f64 * LN_2PI
        } else {
            0.0
        };
        for dd in 0..d {
            let var = variances[[kk, dd]].as_f64();
            let mu = means[[kk, dd]].as_f64() - center[dd];
            acc += var.ln() + mu * mu / var;
            gemm_weights[[dd, kk]] = F::from_f64_lossy(-0.5 / var);
            gemm_weights[[d + dd, kk]] = F::from_f64_lossy(mu / var);
        }
        bias[kk] = weights[kk].as_f64().ln() - 0.5 * acc;
    }
    LogJointGemm {
        weights: gemm_weights,
        bias,
    }
}
