//! The in-memory forms of GMM and MFA model files: [`MfaArrays`], and the
//! file-dtype enums [`GmmModel`], [`MfaModel`] and [`Model`].

use crate::npy::Dtype;
use fisherkit::gmm::{DiagGmm, GmmError};
use fisherkit::mfa::{Mfa, MfaError};
use fisherkit::Float;
use ndarray::{Array1, Array2, Array3};

/// Tolerance on $|\sum_k w_k - 1|$ for MFA weights: the library's own
/// ([`fisherkit::mfa::WEIGHT_SUM_TOL`]), applied by `Mfa::new`, which
/// validates every MFA this crate reads or writes ([`MfaArrays::validate`]).
pub const MFA_WEIGHT_SUM_TOL: f64 = fisherkit::mfa::WEIGHT_SUM_TOL;

/// The parameters of a mixture of factor analysers as plain arrays.
///
/// * `weights`: (K), positive, summing to 1;
/// * `means`: (K, D);
/// * `loadings`: (K, D, R), the factor loading matrices $\Lambda_k$;
/// * `psi`: (1, D) for a noise variance $\Psi$ shared by all components, or
///   (K, D) for one per component; positive.
#[derive(Debug, Clone, PartialEq)]
pub struct MfaArrays<F> {
    /// Mixture weights (K).
    pub weights: Array1<F>,
    /// Component means (K, D).
    pub means: Array2<F>,
    /// Factor loadings (K, D, R).
    pub loadings: Array3<F>,
    /// Diagonal noise variances, (1, D) shared or (K, D) per component.
    pub psi: Array2<F>,
}

impl<F: Float> MfaArrays<F> {
    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.means.ncols()
    }

    /// Number of factors R.
    pub fn n_factors(&self) -> usize {
        self.loadings.dim().2
    }

    /// `true` when `psi` is shared by all components (one row).
    pub fn shared_psi(&self) -> bool {
        self.psi.nrows() == 1
    }

    /// Checks that the arrays are an MFA the library accepts, by building it
    /// with [`Mfa::new`] (the one place of these checks): shapes (K, D, R)
    /// consistent with K ≥ 1 and 0 < R < D, `psi` (1, D) or (K, D); values
    /// finite; weights positive, summing to 1 within [`MFA_WEIGHT_SUM_TOL`];
    /// `psi` positive; every $M_k = I + \Lambda_k^\top\Psi_k^{-1}\Lambda_k$
    /// positive definite. The error is the library's, naming the array and
    /// the index of the first bad value.
    ///
    /// ```
    /// use fisherkit_io::MfaArrays;
    /// use ndarray::{array, Array3};
    ///
    /// let mut m = MfaArrays {
    ///     weights: array![0.5, 0.5],
    ///     means: array![[0.0, 0.0], [1.0, 1.0]],
    ///     loadings: Array3::from_elem((2, 2, 1), 0.5),
    ///     psi: array![[1.0, 1.0]], // shared
    /// };
    /// m.validate()?;
    /// m.weights[1] = 0.4;
    /// let e = m.validate().unwrap_err().to_string();
    /// assert!(e.contains("weights sum to 0.9, not 1"), "{e}");
    /// # Ok::<(), fisherkit::mfa::MfaError>(())
    /// ```
    pub fn validate(&self) -> Result<(), MfaError> {
        self.to_mfa::<F>().map(|_| ())
    }

    /// The parameters of a library model.
    pub fn from_mfa(m: &Mfa<F>) -> Self {
        MfaArrays {
            weights: m.weights().to_owned(),
            means: m.means().to_owned(),
            loadings: m.loadings().to_owned(),
            psi: m.psi().to_owned(),
        }
    }

    /// The library model in element type `G` (validated by [`Mfa::new`],
    /// which also requires $0 < R < D$).
    pub fn to_mfa<G: Float>(&self) -> Result<Mfa<G>, MfaError> {
        let c = self.cast::<G>();
        Mfa::new(c.weights, c.means, c.loadings, c.psi)
    }

    /// The same arrays in another float type (rounding to nearest).
    pub fn cast<G: Float>(&self) -> MfaArrays<G> {
        let c = |v: &F| G::from_f64_lossy(v.as_f64());
        MfaArrays {
            weights: self.weights.map(c),
            means: self.means.map(c),
            loadings: self.loadings.map(c),
            psi: self.psi.map(c),
        }
    }
}

/// A diagonal GMM in the element type of its file.
#[derive(Debug, Clone, PartialEq)]
pub enum GmmModel {
    /// `F32` tensors.
    F32(DiagGmm<f32>),
    /// `F64` tensors.
    F64(DiagGmm<f64>),
}

impl GmmModel {
    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            GmmModel::F32(_) => Dtype::F32,
            GmmModel::F64(_) => Dtype::F64,
        }
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        match self {
            GmmModel::F32(g) => g.n_components(),
            GmmModel::F64(g) => g.n_components(),
        }
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        match self {
            GmmModel::F32(g) => g.dim(),
            GmmModel::F64(g) => g.dim(),
        }
    }

    /// The mixture in element type `F`, re-validated after a narrowing cast
    /// (an `f64` variance of 1e-50 becomes 0 in `f32` and is refused).
    pub fn to_dtype<F: Float>(&self) -> Result<DiagGmm<F>, GmmError> {
        fn conv<A: Float, B: Float>(g: &DiagGmm<A>) -> Result<DiagGmm<B>, GmmError> {
            let c = |v: &A| B::from_f64_lossy(v.as_f64());
            DiagGmm::new(g.weights().map(c), g.means().map(c), g.variances().map(c))
        }
        match self {
            GmmModel::F32(g) => conv(g),
            GmmModel::F64(g) => conv(g),
        }
    }
}

/// MFA parameters in the element type of their file.
#[derive(Debug, Clone, PartialEq)]
pub enum MfaModel {
    /// `F32` tensors.
    F32(MfaArrays<f32>),
    /// `F64` tensors.
    F64(MfaArrays<f64>),
}

impl MfaModel {
    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            MfaModel::F32(_) => Dtype::F32,
            MfaModel::F64(_) => Dtype::F64,
        }
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        match self {
            MfaModel::F32(m) => m.dim(),
            MfaModel::F64(m) => m.dim(),
        }
    }

    /// The library model in element type `F` (cast if the file's differs).
    pub fn to_dtype<F: Float>(&self) -> Result<Mfa<F>, MfaError> {
        match self {
            MfaModel::F32(m) => m.to_mfa(),
            MfaModel::F64(m) => m.to_mfa(),
        }
    }
}

/// A model loaded from a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// `kind` = `gmm`.
    Gmm(GmmModel),
    /// `kind` = `mfa`.
    Mfa(MfaModel),
}

impl Model {
    /// The `kind` metadata value (`"gmm"` or `"mfa"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Model::Gmm(_) => "gmm",
            Model::Mfa(_) => "mfa",
        }
    }

    /// Dimension D of the descriptors the model describes.
    pub fn dim(&self) -> usize {
        match self {
            Model::Gmm(g) => g.dim(),
            Model::Mfa(m) => m.dim(),
        }
    }

    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            Model::Gmm(g) => g.dtype(),
            Model::Mfa(m) => m.dtype(),
        }
    }
}
