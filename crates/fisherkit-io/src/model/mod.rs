//! Model files: safetensors with metadata `kind` = `gmm` or `mfa` (and `pca`,
//! `linear-svm`: see [`crate::linear_models`]; [`Model::read`] refuses those
//! with a message naming their kind).
//!
//! The contract (docs/formats.md §2), tensors all `F32` or all `F64`:
//!
//! | kind | tensor | shape |
//! |---|---|---|
//! | gmm | `weights` | (K) |
//! | gmm | `means` | (K, D) |
//! | gmm | `variances` | (K, D), the diagonal $\sigma^2$ |
//! | mfa | `weights` | (K) |
//! | mfa | `means` | (K, D) |
//! | mfa | `loadings` | (K, D, R), $\Lambda_k$ |
//! | mfa | `psi` | (D) shared, or (K, D) per component |
//! | mfa, optional | `fisher_information` | (P), see below |
//!
//! An MFA file may carry a whitening block: the tensor `fisher_information`,
//! a diagonal Fisher-information estimate $\hat F$ of the MFA Fisher score
//! (what `fisherkit::encode::MfaFisherScore::fit_whitening` returns), in the
//! model's dtype, plus the metadata key `whitening_parts` naming the score
//! parts it was estimated for: `mean`, `loading` or `mean,loading` (canonical
//! order), so that P = K·D for `mean`, K·D·R for `loading`, their sum for
//! both. Values are finite and ≥ 0; the tensor and the key come together or
//! not at all. See [`MfaWhitening`].
//!
//! Metadata written: `kind`, `format_version` (= [`FORMAT_VERSION`]),
//! `fisherkit_version`, `dtype`, plus any extra keys the caller passes: the
//! command line and the Python module store a fit's hyper-parameters and
//! state as the optional keys of docs/formats.md §2.2/§2.3 (`max_iter`,
//! `tol`, `n_init`, `init`, `variance_floor`, `seed`, `psi`, `psi_floor`,
//! `n_iter`, `converged`, `mean_log_likelihood`). They are returned by
//! [`ModelFile::read_with_metadata`] and never needed to read the model, so files
//! without them load as before. Readers accept a
//! missing `format_version` (files written by other tools) and refuse any
//! other version than [`FORMAT_VERSION`].
//!
//! Every model file is one type with [`ModelFile::read`] and
//! [`ModelFile::write`]: [`Model`] (a GMM or an MFA file), [`GmmModel`],
//! [`MfaModel`], [`Whitened`] (an MFA with its whitening block),
//! [`crate::PcaModel`] and [`crate::LinearSvmModel`] read a file in its own
//! element type; the library's [`DiagGmm`], [`Mfa`], [`MfaArrays`],
//! [`fisherkit::pca::Pca`] and [`crate::LabelledSvm`] are written as they
//! are, and read only from a file of their element type.
//!
//! The files are split by concern: [`framing`] (the safetensors layout and
//! the checks every kind shares), `types` (the in-memory forms),
//! `whitening` (the MFA's optional block), `gmm_mfa` (the two kinds'
//! tensors).

pub(crate) mod framing;
mod gmm_mfa;
mod types;
mod whitening;

pub(crate) use framing::{
    check_dtype_metadata, check_head, dims, get_tensor, open_model, read_file_checked, to_le_bytes,
    write_safetensors_typed, wrong_kind, RawTensor,
};
pub use framing::{read_model_kind, MODEL_KINDS};
pub use types::{GmmModel, MfaArrays, MfaModel, Model, MFA_WEIGHT_SUM_TOL};
pub use whitening::{
    mfa_parts_len, mfa_parts_string, MfaWhitening, WHITENING_PARTS_KEY, WHITENING_TENSOR,
};

use crate::error::{IoError, Result};
use crate::npy::Dtype;
#[cfg(doc)]
use fisherkit::{gmm::DiagGmm, mfa::Mfa};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;

/// Version of the model file layout this crate writes and reads.
pub const FORMAT_VERSION: &str = "1";

/// The metadata of a model file: every key, including `kind`,
/// `format_version`, `fisherkit_version` and `dtype`.
pub type Metadata = BTreeMap<String, String>;

/// A model that is one kind of file: read from one, written as one.
///
/// Readers check, in order: that the file is safetensors; `kind` is present
/// and the one the type reads; `format_version`, if present, is
/// [`FORMAT_VERSION`]; every required tensor is present, `F32` or `F64`, all
/// of one dtype; ranks and shapes agree; every value is finite; then the
/// model's own validation; finally that the `dtype` metadata key, if
/// present, names the tensors' type. Every error names the file.
///
/// Writers are atomic (a temporary file beside the target, synced and
/// renamed) and byte-for-byte deterministic; `extra` metadata keys are
/// stored too (the standard keys and the model's own win over them).
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{GmmModel, MfaArrays, ModelFile};
/// use ndarray::{array, Array3};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![1.0f32], array![[0.0f32, 1.0]], array![[1.0f32, 2.0]])?;
/// gmm.write(&path, &Default::default())?;
/// assert_eq!(GmmModel::read(&path)?, GmmModel::F32(gmm.clone()));
/// // in the file's element type only
/// assert_eq!(DiagGmm::<f32>::read(&path)?, gmm);
/// let e = DiagGmm::<f64>::read(&path).unwrap_err().to_string();
/// assert!(e.contains("gmm.safetensors") && e.contains("holds float32 tensors, expected float64"), "{e}");
/// // an MFA file is not a GMM
/// let mfa = MfaArrays {
///     weights: array![1.0],
///     means: array![[0.0, 0.0]],
///     loadings: Array3::from_elem((1, 2, 1), 1.0),
///     psi: array![[1.0, 1.0]],
/// };
/// mfa.write(dir.path().join("mfa.safetensors"), &Default::default())?;
/// let e = GmmModel::read(dir.path().join("mfa.safetensors")).unwrap_err().to_string();
/// assert!(e.contains("mfa.safetensors") && e.contains("is an MFA model"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ModelFile: sealed::Parse {
    /// Writes the model to `path` with the `extra` metadata keys, atomically.
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()>;

    /// Reads a model file and its metadata (all keys, including `kind`).
    fn read_with_metadata(path: impl AsRef<Path>) -> Result<(Self, Metadata)> {
        let path = path.as_ref();
        let buf = read_file_checked(path)?;
        Self::parse(&buf, path)
    }

    /// [`ModelFile::read_with_metadata`] on the bytes of a file (the same
    /// checks); `name` stands for the file in error messages.
    fn read_bytes(bytes: &[u8], name: impl AsRef<Path>) -> Result<(Self, Metadata)> {
        let path = name.as_ref();
        check_head(path, &bytes[..bytes.len().min(8)], bytes.len() as u64)?;
        Self::parse(bytes, path)
    }

    /// Reads a model file (see [`ModelFile::read_with_metadata`]).
    fn read(path: impl AsRef<Path>) -> Result<Self> {
        Self::read_with_metadata(path).map(|(m, _)| m)
    }
}

pub(crate) mod sealed {
    use super::Metadata;
    use crate::error::Result;
    use std::path::Path;

    /// The model in the bytes of a file whose framing has been checked (a
    /// private supertrait: the model kinds are this crate's).
    pub trait Parse: Sized {
        /// `path` names the file in errors.
        fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)>;
    }
}

/// A model with the optional whitening block of an MFA file (see
/// [`MfaWhitening`]; always `None` for a GMM). The block is checked on every
/// read of an MFA file, by every reader: `fisher_information` and
/// `whitening_parts` both present or both absent, the parts a canonical
/// list, the tensor (P) in the model's dtype with P the parts' score length,
/// finite, ≥ 0. Written, the block is validated against the model's
/// (K, D, R), also after rounding to the model's element type.
///
/// ```
/// use fisherkit::encode::MfaPart;
/// use fisherkit_io::{MfaArrays, MfaWhitening, Model, ModelFile, Whitened};
/// use ndarray::{array, Array1, Array3};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("mfa.safetensors");
/// // K = 2 components in D = 2 with R = 1 factor, shared psi
/// let mfa = MfaArrays {
///     weights: array![0.5, 0.5],
///     means: array![[0.0, 0.0], [3.0, 1.0]],
///     loadings: Array3::from_shape_vec((2, 2, 1), vec![1.0, 0.0, 0.0, 1.0])?,
///     psi: array![[0.5, 0.5]],
/// };
/// // the `mean` part of the score has K·D = 4 entries
/// let w = MfaWhitening::new(&[MfaPart::Mean], &Array1::from(vec![1.0, 2.0, 3.0, 4.0]));
/// Whitened { model: mfa, whitening: Some(w.clone()) }.write(&path, &Default::default())?;
/// let (back, meta) = Whitened::<Model>::read_with_metadata(&path)?;
/// assert_eq!(back.model.kind(), "mfa");
/// assert_eq!(back.whitening, Some(w));
/// assert_eq!(meta["whitening_parts"], "mean");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Whitened<M> {
    /// The model.
    pub model: M,
    /// The MFA's whitening block, if the file has one.
    pub whitening: Option<MfaWhitening>,
}

/// `value`, a model read in the file's element type `got`, as the model `T`
/// of element type `want`: an error naming both if they differ.
pub(crate) fn exact<T: 'static>(
    path: &Path,
    got: Dtype,
    want: Dtype,
    value: impl Any,
) -> Result<T> {
    if got != want {
        return Err(IoError::model(
            path,
            format!("holds {got} tensors, expected {want}"),
        ));
    }
    let value: Box<dyn Any> = Box::new(value);
    Ok(*value
        .downcast::<T>()
        .expect("a model of the element type asked for"))
}
