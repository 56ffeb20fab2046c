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
mod classifier_tasks;
pub mod config;
pub mod dataset;
mod error;
/// The descriptor-file format (read and written by `fisherkit-io`).
pub use fisherkit_io::descriptor_file;
pub mod descriptors;
mod disk;
mod evaluate;
mod finished;
mod inputs;
pub mod job;
pub mod kept;
mod kernel;
pub mod output;
pub mod plot;
pub mod predict;
mod primal;
mod progress;
pub mod report;
pub mod run;
pub mod spec;
pub mod stages;
pub mod store;
mod trained;

pub use classifier::{RawEncodings, SceneClassifier, Scored};
pub use classifier_tasks::ClassifierTask;
pub use config::{
    defaults, CheckedConfig, Classifier, CnnChoice, InputKind, PipelineConfig, RunConfig, Whitening,
};
pub use job::{EncodedJob, FittedJob, Job, LearnedJob};
pub use kept::KeptCnn;
pub use report::ModelReport;
pub use run::{run, run_descriptors};
pub use stages::{EncodedPart, ImageEntry, Sample, SamplePart, SAMPLE_CHUNK};
pub use store::StoreFormat;

pub use error::PipelineError;
pub use progress::{NoProgress, Progress};
