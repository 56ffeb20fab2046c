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
    /// path holds at once for `n_train` training images: a row's kernel and
    /// the part being added to it (read back from the run folder one at a
    /// time, at any number of scales), and with a `cnn-global` term
    /// (`global`) its kernel, which joins every row: 2 or 3. The
    /// cross-validation's buffers (one fold's training block, 4/9 of a
    /// kernel, and its held-out block, 2/9) come after the parts are added,
    /// within the same count.
    pub fn kernel_bytes(n_train: usize, global: bool) -> u64 {
        let n = n_train as u64;
        let held = 2 + u64::from(global);
        held.saturating_mul(4).saturating_mul(n.saturating_mul(n))
    }

    /// Whether a run with `n_train` training images (and a `cnn-global`
    /// term: `global`) takes the primal path.
    ///
    /// ```
    /// use fisherkit_pipeline::Classifier;
    /// assert!(!Classifier::Auto.primal_for(5_360, true)); // MIT Indoor: 0.3 GB of kernels
    /// assert!(!Classifier::Auto.primal_for(19_850, false)); // SUN397, any number of scales: 3.2 GB
    /// assert!(Classifier::Auto.primal_for(19_850, true)); // with cnn-global: 4.7 GB
    /// assert!(Classifier::Auto.primal_for(23_171, false));
    /// assert!(Classifier::Primal.primal_for(10, false));
    /// ```
    pub fn primal_for(self, n_train: usize, global: bool) -> bool {
        match self {
            Classifier::Auto => Self::kernel_bytes(n_train, global) > defaults::KERNEL_MAX_BYTES,
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
