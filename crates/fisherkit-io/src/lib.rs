//! # fisherkit-io
//!
//! The files of fisherkit, with errors that name the file and the problem:
//!
//! * [`read_npy`] / [`write_npy`]: (N, D) float32 or float64 `.npy` arrays
//!   (C order, little-endian) — data matrices, bags, encoder outputs;
//! * [`read_npz`] / [`write_npz`]: `.npz` archives of bags, one (N_i, D)
//!   array per bag, in archive order; [`read_bags`] takes either format;
//! * [`ModelFile`]: safetensors model files, one type per kind with
//!   [`ModelFile::read`] and [`ModelFile::write`]: [`Model`], [`GmmModel`],
//!   [`MfaModel`] and [`Whitened`] (metadata `kind` = `gmm` or `mfa`, see
//!   [`model`] for the tensor table), [`PcaModel`] and [`LinearSvmModel`]
//!   (the pipeline's PCA, `kind` = `pca`, and one-vs-rest linear SVM, `kind`
//!   = `linear-svm`, see [`linear_models`]); the library's models
//!   (`DiagGmm`, `Mfa`, [`MfaArrays`], `Pca`, [`LabelledSvm`]) are written
//!   as they are; [`read_model_kind`] tells which type a model file needs;
//! * [`read_classifier`] / [`write_classifier`]: a trained scene classifier
//!   in one file (`kind` = `scene-classifier`, see [`classifier`]);
//! * [`read_sample_part`] / [`write_sample_part`]: the pipeline's sample-pass
//!   checkpoint, one file per finished chunk of sample images (`kind` =
//!   `sample-part`, see [`sample_part`]).
//!
//! Every writer is atomic: the file is written beside its target under a
//! temporary name, synced and renamed, so a failure never leaves a
//! half-written output. Readers check sizes against the file before
//! allocating, so a corrupt header cannot make them allocate terabytes.

mod atomic;
pub mod checkpoint;
pub mod chunked;
pub mod classifier;
pub mod descriptor_file;
mod error;
pub mod linear_models;
pub mod model;
pub mod npy;
pub mod npz;
pub mod sample_part;
mod space;

pub use chunked::{NpyInfo, NpySource};
pub use classifier::{
    read_classifier, read_classifier_bytes, write_classifier, ClassifierFile, ClassifierInfo,
    CnnInfo, InputInfo, PartInfo, CLASSIFIER_KIND, CLASSIFIER_VERSION,
};
pub use error::{IoError, Result};
pub use space::available_space;

/// Writes `bytes` to `path` atomically (temporary file beside it, sync, rename):
/// for reports and plots; a failure leaves the old file or none.
pub fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    atomic::write_atomically(path, |w| std::io::Write::write_all(w, bytes))
}

/// Fails early, before any long computation, if `path` cannot be written as
/// a file (by [`write_file`] or any atomic writer here): it must not be a
/// directory, and its directory must exist. The error names the path.
pub fn check_writable(path: &std::path::Path) -> Result<()> {
    if path.is_dir() {
        return Err(IoError::format(path, "is a directory; give a file name"));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Err(IoError::format(
            path,
            format!("directory {} does not exist", dir.display()),
        )),
        _ => Ok(()),
    }
}
pub use linear_models::{
    validate_pca_parts, ClassLabels, LabelledSvm, LinearSvmModel, PcaModel, PCA_ORTHONORMAL_TOL,
};
pub use model::{
    mfa_parts_len, mfa_parts_string, read_model_kind, GmmModel, Metadata, MfaArrays, MfaModel,
    MfaWhitening, Model, ModelFile, Whitened, FORMAT_VERSION, MODEL_KINDS, WHITENING_PARTS_KEY,
    WHITENING_TENSOR,
};
pub use npy::{
    read_npy, read_npy_as, read_npy_bytes, write_matrix, write_npy, Dtype, Element, Matrix,
    NpyBlockWriter,
};
pub use npz::{
    file_kind, read_bags, read_npz, read_npz_bytes, write_npz, Bags, FileKind, NamedBags,
};
pub use sample_part::{read_sample_part, write_sample_part, SamplePartFile, SampleScale};
