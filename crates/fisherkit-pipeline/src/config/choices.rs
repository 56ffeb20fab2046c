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
    /// Linear kernels over the training images (n_train², `f32`) from the
    /// stores, dual solver on them, test images scored through the columns.
    Kernel,
    /// Out-of-core primal solver on row blocks read from the stores: memory
    /// K × D weights plus one block.
    Primal,
}

impl Classifier {
    /// Bytes of the `f32` training kernels (n_train × n_train) the kernel
    /// path holds at once for `n_train` training images at `n_scales`
    /// scales: at one scale the encoder's kernel and the part being added to
    /// it (2); at several, the per-scale kernels, the all-scale one, the
    /// global one and the part being added (S + 3). The cross-validation's
    /// buffers (one fold's training block, 4/9 of a kernel, and its held-out
    /// block, 2/9) come after the parts are added, within the same count.
    pub fn kernel_bytes(n_train: usize, n_scales: usize) -> u64 {
        let n = n_train as u64;
        let held = if n_scales <= 1 {
            2
        } else {
            n_scales as u64 + 3
        };
        held.saturating_mul(4).saturating_mul(n.saturating_mul(n))
    }

    /// Whether a run with `n_train` training images at `n_scales` scales takes the primal path.
    ///
    /// ```
    /// use fisherkit_pipeline::Classifier;
    /// assert!(!Classifier::Auto.primal_for(5_360, 3)); // MIT Indoor: 0.7 GB of kernels
    /// assert!(!Classifier::Auto.primal_for(19_850, 1)); // SUN397's descriptors: 3.2 GB
    /// assert!(Classifier::Auto.primal_for(19_850, 3)); // SUN397's images at three scales: 9.5 GB
    /// assert!(Classifier::Primal.primal_for(10, 1));
    /// ```
    pub fn primal_for(self, n_train: usize, n_scales: usize) -> bool {
        match self {
            Classifier::Auto => Self::kernel_bytes(n_train, n_scales) > defaults::KERNEL_MAX_BYTES,
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
