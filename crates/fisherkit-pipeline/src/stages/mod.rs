//! The streamed stages of a run, in order (docs/pipeline.md):
//! [`sample_chunk`] (a seeded subset of the training images, in fixed chunks
//! → per-scale PCA moments and model-sample rows) → [`fit_pca`] →
//! [`fit_model`] (an explicit list, each from its own settings, the sample and
//! the seed) → [`encode_images`] (every image once through the CNN, projected
//! and encoded with every model). The two passes over images only compute;
//! [`crate::job::Job`] owns the run folder and writes what they return (raw
//! encodings into on-disk stores), so the passes may run elsewhere (Ray).
//! Memory is bounded by the batch, the samples and the models, never by the
//! number of images.
//!
//! One stage per file: where descriptors come from ([`Source`],
//! `source.rs`); the sample pass (`sample.rs`); the PCA (`pca.rs`); the
//! background models, what they are (`models.rs`) and how each is fitted
//! (`fit.rs`); the encode pass (`encode.rs`). What the run folder holds
//! beside them: the folder itself and its keys (`run_folder.rs`), and the
//! journal of what each image gave (`image_log.rs`).

mod encode;
mod fit;
mod image_log;
mod models;
mod pca;
mod run_folder;
mod sample;
mod source;

pub use encode::EncodedPart;
pub use image_log::ImageEntry;
pub use sample::{Sample, SamplePart, SAMPLE_CHUNK};

pub(crate) use encode::{encode_images, EncodeTarget, KeptFolder, OnDescriptors};
pub(crate) use fit::{cap_note, fit_model, EmRecord};
pub(crate) use image_log::ImageLog;
pub(crate) use models::{
    raw_gmm_encoder, raw_mfa_encoder, FitSettings, Fitted, Learned, ModelKind, ModelSpec,
};
pub(crate) use pca::{fit_pca, project_sample};
pub(crate) use run_folder::{key, RunFolder};
pub(crate) use sample::{sample_chunk, sample_chunks, sample_images, SampleSettings};
pub(crate) use source::{BagFiles, Source};
