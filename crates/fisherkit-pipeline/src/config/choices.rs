//! The run's named choices: how the SVMs are trained ([`Classifier`]) and
//! whether MFA Fisher scores are whitened ([`Whitening`]).

use super::defaults;
use serde::{Deserialize, Serialize};

/// How the one-vs-rest SVMs of a run are trained (docs/pipeline.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Classifier {
    /// The kernel path while its kernels fit in [`defaults::KERNEL_MAX_BYTES`], the primal path above.
    #[default]
    Auto,
    /// Linear kernels (N, N) from the stores, dual solver on them: memory N².
    Kernel,
    /// Out-of-core primal solver on row blocks read from the stores: memory
    /// K × D weights plus one block.
    Primal,
}

impl Classifier {
    /// Bytes of the (N, N) `f64` kernels the kernel path holds for
    /// `n_images` (train + test) at `n_scales` scales.
    pub fn kernel_bytes(n_images: usize, n_scales: usize) -> u64 {
        let n = n_images as u64;
        (n_scales as u64 + 3)
            .saturating_mul(8)
            .saturating_mul(n.saturating_mul(n))
    }

    /// Whether a run of `n_images` (train + test) at `n_scales` scales takes the primal path.
    ///
    /// ```
    /// use fisherkit_pipeline::Classifier;
    /// assert!(!Classifier::Auto.primal_for(6_700, 3)); // MIT Indoor: 2.2 GB of kernels
    /// assert!(Classifier::Auto.primal_for(39_700, 1)); // SUN397: 50 GB
    /// assert!(Classifier::Primal.primal_for(10, 1));
    /// ```
    pub fn primal_for(self, n_images: usize, n_scales: usize) -> bool {
        match self {
            Classifier::Auto => Self::kernel_bytes(n_images, n_scales) > defaults::KERNEL_MAX_BYTES,
            Classifier::Kernel => false,
            Classifier::Primal => true,
        }
    }
}

/// Whether MFA Fisher scores are whitened by the diagonal Fisher-information
/// estimate (the empirical variance of the raw scores over the training images).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Whitening {
    /// The paper's scores (default).
    #[default]
    Off,
    /// Whitened scores only.
    On,
    /// Both, as two result rows.
    Both,
}
