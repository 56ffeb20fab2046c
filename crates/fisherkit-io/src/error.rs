//! The error type of the crate.

use fisherkit::gmm::GmmError;
use fisherkit::mfa::MfaError;
use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing a fisherkit file.
///
/// Every variant names the file; the `Display` form is one line,
/// `<file>: <what is wrong>`, meant to be shown to the user as is.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The operating system refused (missing file, permissions, disk full…).
    #[error("{}: {source}", path.display())]
    Os {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file is not in the expected format or holds an array fisherkit
    /// cannot use (wrong dtype, rank, order, truncated data…).
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. `dtype int64 not supported; expected float32 or float64`.
        reason: String,
    },
    /// One array of an `.npz` archive is unusable.
    #[error("{}: array `{name}`: {reason}", path.display())]
    NpzArray {
        /// The archive.
        path: PathBuf,
        /// The array's name in the archive (without `.npy`).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A model file whose metadata or tensors are missing or inconsistent.
    #[error("{}: {reason}", path.display())]
    Model {
        /// The model file.
        path: PathBuf,
        /// What is wrong, naming the tensor or metadata key.
        reason: String,
    },
    /// GMM parameters rejected by [`fisherkit::gmm::DiagGmm::new`].
    #[error("{}: {source}", path.display())]
    Gmm {
        /// The model file.
        path: PathBuf,
        /// The library's diagnosis.
        source: GmmError,
    },
    /// MFA parameters rejected by [`fisherkit::mfa::Mfa::new`].
    #[error("{}: {source}", path.display())]
    Mfa {
        /// The model file.
        path: PathBuf,
        /// The library's diagnosis.
        source: MfaError,
    },
}

impl IoError {
    pub(crate) fn os(path: &Path, source: std::io::Error) -> Self {
        IoError::Os {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn format(path: &Path, reason: impl Into<String>) -> Self {
        IoError::Format {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    pub(crate) fn model(path: &Path, reason: impl Into<String>) -> Self {
        IoError::Model {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            IoError::Os { path, .. }
            | IoError::Format { path, .. }
            | IoError::NpzArray { path, .. }
            | IoError::Model { path, .. }
            | IoError::Gmm { path, .. }
            | IoError::Mfa { path, .. } => path,
        }
    }
}

/// `Result` with [`IoError`].
pub type Result<T, E = IoError> = std::result::Result<T, E>;
