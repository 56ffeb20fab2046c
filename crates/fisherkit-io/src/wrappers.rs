//! Thin wrappers over [`ModelFile`] for the one caller that cannot change
//! with the model module yet: crates/fisherkit-pipeline/src/job.rs, which
//! another change is rewriting. New code calls [`ModelFile`] directly.

use crate::error::Result;
use crate::linear_models::PcaModel;
use crate::model::{Metadata, Model, ModelFile};
use crate::npy::Element;
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::pca::Pca;
use std::path::Path;

/// [`Model::read_with_metadata`].
pub fn read_model_with_metadata(path: impl AsRef<Path>) -> Result<(Model, Metadata)> {
    Model::read_with_metadata(path)
}

/// [`PcaModel::read`].
pub fn read_pca(path: impl AsRef<Path>) -> Result<PcaModel> {
    PcaModel::read(path)
}

/// [`DiagGmm::write`](ModelFile::write).
pub fn write_gmm<F: Element>(
    path: impl AsRef<Path>,
    gmm: &DiagGmm<F>,
    extra: &Metadata,
) -> Result<()> {
    gmm.write(path, extra)
}

/// [`Mfa::write`](ModelFile::write).
pub fn write_mfa_model<F: Element>(
    path: impl AsRef<Path>,
    mfa: &Mfa<F>,
    extra: &Metadata,
) -> Result<()> {
    mfa.write(path, extra)
}

/// [`Pca::write`](ModelFile::write).
pub fn write_pca<F: Element>(path: impl AsRef<Path>, pca: &Pca<F>, extra: &Metadata) -> Result<()> {
    pca.write(path, extra)
}
