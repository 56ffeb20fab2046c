//! Parameters of a mixture of factor analysers and the precomputed Woodbury kernel.

use super::kernel::{self, KernelParams, Want, MFA_CHUNK_ROWS};
use super::MfaError;
use crate::data::check_matrix;
use crate::float::Float;
use crate::linalg::Par;
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, ArrayView3, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// Tolerance on $|\sum_k w_k - 1|$ accepted by [`Mfa::new`].
pub const WEIGHT_SUM_TOL: f64 = 1e-4;

/// How the diagonal noise covariance $\Psi$ is parametrised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PsiMode {
    /// One $\Psi$ for all components (the paper's model): `psi` is (1, D).
    #[default]
    Shared,
    /// One $\Psi_k$ per component: `psi` is (K, D).
    PerComponent,
}

/// A mixture of K factor analysers with R factors in D dimensions:
/// $p(x) = \sum_k w_k \mathcal N(x; \mu_k, S_k)$, $S_k = \Lambda_k\Lambda_k^\top + \Psi_k$.
///
/// Besides the parameters it keeps the Woodbury kernel (docs/math.md §4.2), with
/// $c$ the mixture mean, $y = x - c$, $\mu'_k = \mu_k - c$,
/// $M_k = I_R + \Lambda_k^\top\Psi_k^{-1}\Lambda_k = C_k C_k^\top$ (Cholesky) and
/// $W_k = \Psi_k^{-1}\Lambda_k C_k^{-\top}$ (D, R):
/// $g = W_k^\top (y - \mu'_k)$ (whitened posterior factor mean, $E[z|x,k] = C_k^{-\top} g$),
/// $(x-\mu_k)^\top S_k^{-1}(x-\mu_k) = \textstyle\sum_d y_d^2/\psi_{kd} - 2\, y^\top\Psi_k^{-1}\mu'_k + \mu'^\top_k\Psi_k^{-1}\mu'_k - \lVert g\rVert^2$,
/// $\log\det S_k = \sum_d \log\psi_{kd} + \log\det M_k$.
/// All $y$-dependent terms are products of a chunk of rows with the stacked
/// (D, K·R + K) matrix $[W_1 \dots W_K \,|\, \Psi_1^{-1}\mu'_1 \dots]$ and of
/// $y^2$ with $\Psi^{-1}$.
#[derive(Debug, Clone)]
pub struct Mfa<F: Float> {
    weights: Array1<F>,
    means: Array2<F>,
    loadings: Array3<F>,
    psi: Array2<F>,
    pub(crate) kern: KernelParams<F>,
}

/// The E-step kernel takes the model's kernel arrays, never the model
/// (`docs/architecture.md` §2): callers in `mfa` and `encode` pass an `&Mfa`.
impl<F: Float> AsRef<KernelParams<F>> for Mfa<F> {
    fn as_ref(&self) -> &KernelParams<F> {
        &self.kern
    }
}

impl<F: Float> PartialEq for Mfa<F> {
    fn eq(&self, other: &Self) -> bool {
        self.weights == other.weights
            && self.means == other.means
            && self.loadings == other.loadings
            && self.psi == other.psi
    }
}

impl<F: Float> Mfa<F> {
    /// Builds a mixture from its parameters, validating them.
    ///
    /// * `weights`: (K), K ≥ 1, finite, > 0, summing to 1 within [`WEIGHT_SUM_TOL`]
    ///   (renormalised exactly);
    /// * `means`: (K, D), finite;
    /// * `loadings`: (K, D, R), $\Lambda_k$, finite, with 0 < R < D;
    /// * `psi`: (1, D) for a shared $\Psi$ or (K, D) per component, finite and > 0.
    ///
    /// Errors name the array and the index of the first bad value (a shared
    /// `psi` by its dimension alone, `psi [d]`).
    ///
    /// ```
    /// use fisherkit::mfa::Mfa;
    /// use ndarray::{array, Array3};
    ///
    /// // One component in D = 2 with one factor along the first axis:
    /// // covariance ΛΛᵀ + Ψ = diag(1 + 1, 1).
    /// let lam = Array3::from_shape_vec((1, 2, 1), vec![1.0, 0.0]).unwrap();
    /// let m = Mfa::new(array![1.0], array![[0.0, 0.0]], lam, array![[1.0, 1.0]]).unwrap();
    /// let ll = m.score_samples(array![[0.0, 0.0]].view()).unwrap();
    /// let want = -(2.0 * std::f64::consts::PI).ln() - 0.5 * 2.0f64.ln();
    /// assert!((ll[0] - want).abs() < 1e-12);
    /// // a negative variance is an error naming the problem, not a panic
    /// let bad = Mfa::new(
    ///     array![1.0],
    ///     array![[0.0, 0.0]],
    ///     Array3::zeros((1, 2, 1)),
    ///     array![[1.0, -1.0]],
    /// );
    /// assert!(bad.is_err());
    /// ```
    pub fn new(
        weights: Array1<F>,
        means: Array2<F>,
        loadings: Array3<F>,
        psi: Array2<F>,
    ) -> Result<Self, MfaError> {
        let bad = |s: String| Err(MfaError::InvalidModel(s));
        let k = weights.len();
        if k == 0 {
            return bad("the mixture has 0 components".into());
        }
        let (km, d) = means.dim();
        if km != k {
            return bad(format!("means have {km} rows but there are {k} weights"));
        }
        if d == 0 {
            return bad("means have 0 columns".into());
        }
        let (kl, dl, r) = loadings.dim();
        if kl != k || dl != d {
            return bad(format!(
                "loadings have shape ({kl}, {dl}, {r}) but must be (K, D, R) = ({k}, {d}, R)"
            ));
        }
        if r == 0 || r >= d {
            return bad(format!(
                "the number of factors R = {r} must satisfy 0 < R < D = {d}"
            ));
        }
        let (p, dp) = psi.dim();
        if dp != d || (p != 1 && p != k) {
            return bad(format!(
                "psi has shape ({p}, {dp}) but must be (1, {d}) (shared) or ({k}, {d}) (per component)"
            ));
        }
        if let Some((i, w)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !(w.is_finite() && **w > F::zero()))
        {
            return bad(format!("weight {i} is {w}; weights must be finite and > 0"));
        }
        let sum: f64 = weights.iter().map(|w| w.as_f64()).sum();
        if (sum - 1.0).abs() > WEIGHT_SUM_TOL {
            return bad(format!("weights sum to {sum}, not 1"));
        }
        if let Some(((i, j), m)) = means.indexed_iter().find(|(_, m)| !m.is_finite()) {
            return bad(format!("mean [{i}, {j}] is {m}; means must be finite"));
        }
        if let Some(((i, j, l), m)) = loadings.indexed_iter().find(|(_, m)| !m.is_finite()) {
            return bad(format!(
                "loading [{i}, {j}, {l}] is {m}; loadings must be finite"
            ));
        }
        if let Some(((i, j), v)) = psi
            .indexed_iter()
            .find(|(_, v)| !(v.is_finite() && **v > F::zero()))
        {
            // A shared Ψ is one (D) vector (a (D) tensor in a model file):
            // indexed by the dimension alone.
            return bad(if p == 1 {
                format!("psi [{j}] is {v}; psi must be finite and > 0")
            } else {
                format!("psi [{i}, {j}] is {v}; psi must be finite and > 0")
            });
        }
        let weights = weights.mapv(|w| F::from_f64_lossy(w.as_f64() / sum));
        Self::from_valid(weights, means, loadings, psi)
    }

    /// Builds the kernel for parameters already known to be valid in shape and
    /// range. Fails only if some $M_k$ is numerically not positive definite.
    pub(crate) fn from_valid(
        weights: Array1<F>,
        means: Array2<F>,
        loadings: Array3<F>,
        psi: Array2<F>,
    ) -> Result<Self, MfaError> {
        let kern = KernelParams::new(weights.view(), means.view(), loadings.view(), psi.view())?;
        Ok(Self {
            weights,
            means,
            loadings,
            psi,
            kern,
        })
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Dimension D of the descriptors.
    pub fn dim(&self) -> usize {
        self.means.ncols()
    }

    /// Number of factors R per component.
    pub fn n_factors(&self) -> usize {
        self.loadings.dim().2
    }

    /// Whether $\Psi$ is shared or per component.
    pub fn psi_mode(&self) -> PsiMode {
        if self.psi.nrows() == 1 {
            PsiMode::Shared
        } else {
            PsiMode::PerComponent
        }
    }

    /// Mixture weights $w_k$, shape (K).
    pub fn weights(&self) -> ArrayView1<'_, F> {
        self.weights.view()
    }

    /// Means $\mu_k$, shape (K, D).
    pub fn means(&self) -> ArrayView2<'_, F> {
        self.means.view()
    }

    /// Factor loadings $\Lambda_k$, shape (K, D, R).
    pub fn loadings(&self) -> ArrayView3<'_, F> {
        self.loadings.view()
    }

    /// Diagonal noise variances: (1, D) when shared, (K, D) per component.
    pub fn psi(&self) -> ArrayView2<'_, F> {
        self.psi.view()
    }

    /// Consumes the model, returning `(weights, means, loadings, psi)`.
    pub fn into_parts(self) -> (Array1<F>, Array2<F>, Array3<F>, Array2<F>) {
        (self.weights, self.means, self.loadings, self.psi)
    }

    /// The same mixture in another float type.
    pub fn cast<G: Float>(&self) -> Result<Mfa<G>, MfaError> {
        let c = |v: &F| G::from_f64_lossy(v.as_f64());
        Mfa::from_valid(
            self.weights.map(c),
            self.means.map(c),
            self.loadings.map(c),
            self.psi.map(c),
        )
    }

    /// Row index of $\Psi_k$ in `psi`.
    #[inline]
    pub(crate) fn psi_row(&self, k: usize) -> usize {
        if self.psi.nrows() == 1 {
            0
        } else {
            k
        }
    }

    /// Runs the kernel over all rows of `x` (N, D) in parallel chunks, writing
    /// per-row log-likelihoods and (optionally) posteriors.
    fn rowwise(&self, x: ArrayView2<'_, F>, proba: Option<&mut Array2<F>>) -> Vec<f64> {
        let n = x.nrows();
        let mut ll = vec![0.0f64; n];
        let run = |xc: ArrayView2<'_, F>, llc: &mut [f64], qc: Option<ArrayViewMut2<'_, F>>| {
            kernel::with_cached_workspace(|ws| {
                kernel::process_chunk(&self.kern, xc, ws, Want::NONE, None, llc, qc, Par::Seq)
            })
        };
        match proba {
            Some(q) => q
                .axis_chunks_iter_mut(Axis(0), MFA_CHUNK_ROWS)
                .into_par_iter()
                .zip(x.axis_chunks_iter(Axis(0), MFA_CHUNK_ROWS).into_par_iter())
                .zip(ll.par_chunks_mut(MFA_CHUNK_ROWS))
                .for_each(|((qc, xc), llc)| run(xc, llc, Some(qc))),
            None => x
                .axis_chunks_iter(Axis(0), MFA_CHUNK_ROWS)
                .into_par_iter()
                .zip(ll.par_chunks_mut(MFA_CHUNK_ROWS))
                .for_each(|(xc, llc)| run(xc, llc, None)),
        }
        ll
    }

    /// Log-likelihood $\log p(x_i)$ of each row of `x` (N, D), shape (N).
    pub fn score_samples(&self, x: ArrayView2<'_, F>) -> Result<Array1<f64>, MfaError> {
        check_matrix(x, Some(self.dim()), "data")?;
        Ok(Array1::from(self.rowwise(x, None)))
    }

    /// Mean log-likelihood per row of `x` (N, D), in nats.
    pub fn score(&self, x: ArrayView2<'_, F>) -> Result<f64, MfaError> {
        let ll = self.score_samples(x)?;
        Ok(ll.sum() / ll.len() as f64)
    }

    /// Posterior probabilities $h_{ik} = p(k | x_i)$, shape (N, K). `x`: (N, D).
    pub fn predict_proba(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, MfaError> {
        check_matrix(x, Some(self.dim()), "data")?;
        let mut q = Array2::<F>::zeros((x.nrows(), self.n_components()));
        self.rowwise(x, Some(&mut q));
        Ok(q)
    }
}
