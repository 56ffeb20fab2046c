//! The one configuration of a pipeline run.
//!
//! [`PipelineConfig`] is what a user writes: nested groups (data, CNN and
//! descriptors, PCA, background models, encoding, SVM, output), serde JSON
//! for `fisherkit run --config run.json`, for Python's
//! `fisherkit.pipeline.run(**options)` and for the report, which records it
//! whole so that a run can be repeated from its report. Every leaf is named
//! as the `fisherkit run` flag that sets it (`pca_dim` ↔ `--pca-dim`), so a
//! flat option name finds its one leaf ([`PipelineConfig::set_option`]).
//! Its defaults are [`defaults`]'s, written once.
//!
//! [`PipelineConfig::check`] validates it, delegating to each model's own
//! params check, into a [`CheckedConfig`]: the flat [`RunConfig`] the job
//! reads, which input it is, and the CNN to load.

mod check;
mod choices;
mod cnn;
pub mod defaults;
mod options;
mod pipeline;
mod run;
mod serde_list;

pub use check::{CheckedConfig, InputKind};
pub use choices::{Classifier, Whitening};
pub use cnn::{CnnChoice, OnnxSettings};
pub use pipeline::{
    DataConfig, DescriptorsConfig, EncodingConfig, ModelsConfig, OutputConfig, PcaConfig,
    PipelineConfig, SvmConfig,
};
pub use run::RunConfig;
