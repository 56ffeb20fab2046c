//! # fisherkit-pipeline
//!
//! The scene-classification system of Dixit & Vasconcelos (NIPS 2016) on image
//! folders: patches at several scales → ImageNet CNN (SqueezeNet v1.1) class
//! scores → natural parameters (log-probabilities) → PCA → background GMM / MFA
//! → GMM Fisher vectors / MFA Fisher scores → signed square root + L2 → one-vs-rest
//! linear SVM with cross-validated C → mean per-class accuracy.
//!
//! [`run_descriptors`] starts from precomputed descriptors instead (descriptor
//! files, see [`descriptor_file`]), for features from another network.
//!
//! This crate reads images and keeps a descriptor cache on disk; it never prints:
//! progress and warnings go through [`Progress`], results come back as a
//! [`report::Report`].

pub mod classifier;
pub mod config;
pub mod dataset;
/// The descriptor-file format (read and written by `fisherkit-io`).
pub use fisherkit_io::descriptor_file;
pub mod descriptors;
mod disk;
mod evaluate;
mod inputs;
pub mod job;
pub mod kept;
mod kernel;
pub mod output;
pub mod plot;
pub mod predict;
mod primal;
pub mod report;
pub mod run;
pub mod spec;
pub mod stages;
pub mod store;
mod trained;

pub use classifier::{RawEncodings, SceneClassifier, Scored};
pub use config::{defaults, Classifier, RunConfig, Whitening};
pub use job::Job;
pub use kept::KeptCnn;
pub use report::ModelReport;
pub use run::{run, run_descriptors};
pub use stages::{EncodedPart, ImageEntry, Sample, SamplePart, SAMPLE_CHUNK};
pub use store::StoreFormat;

/// Errors of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A file or folder that cannot be read or written.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// A fisherkit file (descriptor file, model, array) that cannot be read or
    /// written; `fisherkit-io`'s error names the file.
    #[error(transparent)]
    File(#[from] fisherkit_io::IoError),
    /// A data set that cannot be used (empty class, unknown test class…).
    #[error("{0}")]
    Dataset(String),
    /// A bad `--encoders` specification.
    #[error("invalid encoder specification: {0}")]
    Spec(String),
    /// A bad pipeline option.
    #[error("invalid option: {0}")]
    Config(String),
    /// A failure of one of the computing stages, with the stage named.
    #[error("{stage}: {message}")]
    Stage {
        stage: &'static str,
        message: String,
    },
}

impl PipelineError {
    /// A `map_err` adaptor naming the stage that failed.
    pub(crate) fn stage<E: std::fmt::Display>(stage: &'static str) -> impl Fn(E) -> Self {
        move |e| Self::at(stage, e)
    }

    /// The error `e` of the named stage.
    pub(crate) fn at(stage: &'static str, e: impl std::fmt::Display) -> Self {
        PipelineError::Stage {
            stage,
            message: e.to_string(),
        }
    }
}

/// Receives progress and warnings (the CLI draws bars; tests ignore them).
pub trait Progress: Sync {
    /// A stage with `len` steps starts.
    fn start(&self, stage: &str, len: u64);
    /// `n` more steps of the current stage are done.
    fn inc(&self, n: u64);
    /// The current stage ends, with a short summary.
    fn finish(&self, summary: &str);
    /// Something the user should know (a skipped image…).
    fn warn(&self, message: &str);
}

/// A [`Progress`] that ignores everything.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, _: u64) {}
    fn finish(&self, _: &str) {}
    fn warn(&self, _: &str) {}
}
