//! [`RunConfig`]: the flat, checked settings a run's job reads (made by
//! [`super::PipelineConfig::check`]), with the SVM path ([`Classifier`]) and
//! the MFA-FS whitening ([`Whitening`]).

use super::choices::{Classifier, Whitening};
use super::cnn::CnnChoice;
use crate::spec::EncoderSpec;
use crate::store::StoreFormat;
use crate::PipelineError;
use fisherkit::Normalization;
use fisherkit_cnn::descriptors::DescriptorParams;
use std::path::PathBuf;

/// The checked settings of one pipeline run, flat, as the job reads them.
/// Made by [`super::PipelineConfig::check`]; [`RunConfig::new`] gives the
/// paper's defaults ([`super::PipelineConfig`]'s). A run validates them
/// again, since the fields are public.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Training image folder `DIR/<class>/*.png|jpg` ([`run`]), or descriptor
    /// file ([`run_descriptors`], see [`crate::descriptor_file`]).
    pub train: PathBuf,
    /// Test image folder (same layout, classes among the training ones) or descriptor file.
    pub test: PathBuf,
    /// Encoders to evaluate.
    pub encoders: Vec<EncoderSpec>,
    /// Image runs only: also write the descriptors of the readable images to
    /// `DIR/train.npz` and `DIR/test.npz` (descriptor files, one array per image
    /// named `<class>/<file>`, the rows of all scales stacked), the input of
    /// [`run_descriptors`]. Default `None`.
    pub save_descriptors: Option<PathBuf>,
    /// Patch scales and mode of the CNN descriptors (image runs only).
    pub descriptors: DescriptorParams,
    /// The CNN (image runs only): recorded in the report's configuration;
    /// [`crate::run`] is given the loaded network, which must be this one.
    pub cnn: CnnChoice,
    /// Descriptor dimension after PCA (clamped to what the data allow). Default 500.
    pub pca_dim: usize,
    /// Training images (a seeded subset) the PCA and the background models
    /// learn from; the CNN runs on them once more. Default 500.
    pub sample_images: usize,
    /// Descriptors per scale, drawn evenly over the sample images (seeded),
    /// whose covariance gives the PCA. Default 200 000.
    pub pca_sample: usize,
    /// Descriptors per scale, drawn the same way, to learn the background models. Default 100 000.
    pub model_sample: usize,
    /// Also evaluate each MFA-FS encoder compressed by a PCA of the training
    /// encodings to this many dimensions (the paper's Table 3, 5 000). Default `None`.
    pub compact_dim: Option<usize>,
    /// GMM components K. Default 50.
    pub gmm_components: usize,
    /// GMM EM iterations at most. Default 100.
    pub gmm_max_iter: usize,
    /// MFA components K. Default 50.
    pub mfa_components: usize,
    /// MFA factors R. Default 10.
    pub mfa_factors: usize,
    /// MFA EM iterations at most. Default 30.
    pub mfa_max_iter: usize,
    /// MFA-FS whitening.
    pub whitening: Whitening,
    /// Signed power and L2 of every encoding.
    pub normalization: Normalization,
    /// SVM costs tried by cross-validation. Default 0.01, 0.1, 1, 10.
    pub c_grid: Vec<f64>,
    /// Cross-validation folds. Default 3.
    pub cv_folds: usize,
    /// Kernel or primal SVM training. Default [`Classifier::Auto`].
    pub classifier: Classifier,
    /// How the run folder keeps the encodings. Default [`StoreFormat::Q8`]
    /// (about 1 byte a value; `F32`: 4 bytes a value, exact;
    /// docs/pipeline.md §3).
    pub store_format: StoreFormat,
    /// Seed of every random choice.
    pub seed: u64,
    /// Descriptor cache folder (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// Folder for the trained models (PCA, GMM, MFA, SVMs) and, with
    /// `save_encodings`, the encodings (see [`crate::output`]).
    pub output_dir: Option<PathBuf>,
    /// Also write each encoder's train and test encodings to `output_dir`
    /// (the SVMs' inputs, read from the stores: rounded by `StoreFormat::Q8`,
    /// exact with `StoreFormat::F32`).
    pub save_encodings: bool,
    /// Write the trained classifier (PCA, background models, encoder, SVM,
    /// classes: everything from an image to a label) to this file
    /// ([`crate::SceneClassifier`]). Default `None`.
    pub save_model: Option<PathBuf>,
    /// The encoder of the saved classifier (one of `encoders`); `None`: the
    /// one with the best cross-validated training accuracy.
    pub model_encoder: Option<EncoderSpec>,
    /// Where the report is written as JSON at the end of the run (`None`: not written).
    pub report: Option<PathBuf>,
    /// Where the accuracy-against-dimension SVG is written, if the run has a sweep.
    pub plot: Option<PathBuf>,
    /// GMM sizes K of the Figure-1 sweep of `gmm-fv:var` (empty: no sweep).
    pub sweep_gmm_components: Vec<usize>,
    /// MFA factor counts R of the Figure-1 sweep of `mfa-fs:loading` (empty: no sweep).
    pub sweep_mfa_factors: Vec<usize>,
}

impl RunConfig {
    /// The paper's defaults on the given folders (or descriptor files):
    /// scales 96/128/160 px (dense), PCA 500, GMM K = 50, MFA K = 50 R = 10,
    /// the Table-1 encoders — [`super::PipelineConfig::default`]'s settings.
    pub fn new(train: PathBuf, test: PathBuf) -> Self {
        let checked = super::PipelineConfig::images(train, test)
            .check()
            .expect("the default settings are valid (a test checks)");
        checked.run_config().clone()
    }

    /// Whether an evaluated encoder has a `cnn-global` term (the run keeps
    /// the CNN's image-level vectors, and the kernel path holds their kernel).
    pub fn with_global(&self) -> bool {
        self.encoders
            .iter()
            .any(|s| s.terms.contains(&crate::spec::Term::CnnGlobal))
    }

    /// Whether this run's SVMs take the primal path with `n_train` training
    /// images ([`super::Classifier::primal_for`]).
    pub fn primal_for(&self, n_train: usize) -> bool {
        self.classifier.primal_for(n_train, self.with_global())
    }

    pub(crate) fn validate(&self) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        if self.save_encodings && self.output_dir.is_none() {
            return bad("saving the encodings (save_encodings) needs an output folder (output_dir, --output-dir)".into());
        }
        if let Some(m) = &self.model_encoder {
            if self.save_model.is_none() {
                return bad("the model encoder is chosen for a saved model: give the model file too (--save-model)".into());
            }
            if !self.encoders.contains(m) {
                return bad(format!(
                    "the model encoder `{}` is not among the encoders evaluated ({})",
                    m.name(),
                    self.encoders
                        .iter()
                        .map(EncoderSpec::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if self.plot.is_some()
            && self.sweep_gmm_components.is_empty()
            && self.sweep_mfa_factors.is_empty()
        {
            return bad("the plot (--plot) draws the accuracy-against-dimension sweep: give sweep_gmm or sweep_mfa (--sweep-gmm, --sweep-mfa) too".into());
        }
        if self.save_model.is_some() && self.encoders.is_empty() {
            return bad("a saved model needs at least one encoder (--encoders)".into());
        }
        if self.encoders.is_empty()
            && self.sweep_gmm_components.is_empty()
            && self.sweep_mfa_factors.is_empty()
        {
            return bad("no encoder to evaluate".into());
        }
        for (name, v) in [
            ("pca_dim (--pca-dim)", self.pca_dim),
            ("sample_images (--sample-images)", self.sample_images),
            ("pca_sample (--pca-sample)", self.pca_sample),
            ("model_sample (--model-sample)", self.model_sample),
            ("gmm_components (--gmm-components)", self.gmm_components),
            ("gmm_max_iter (--gmm-max-iter)", self.gmm_max_iter),
            ("mfa_components (--mfa-components)", self.mfa_components),
            ("mfa_factors (--mfa-factors)", self.mfa_factors),
            ("mfa_max_iter (--mfa-max-iter)", self.mfa_max_iter),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        if self.cv_folds < 2 {
            return bad(format!(
                "cv_folds (--cv-folds): cross-validation needs at least 2 folds, got {}",
                self.cv_folds
            ));
        }
        if let Some(c) = self.c_grid.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return bad(format!(
                "c_grid (--c-grid): SVM cost {c} must be a finite number > 0"
            ));
        }
        if self.c_grid.is_empty() {
            return bad("c_grid (--c-grid): the SVM cost grid is empty".into());
        }
        if let Some(k) = self.sweep_gmm_components.iter().find(|k| **k == 0) {
            return bad(format!(
                "sweep_gmm (--sweep-gmm): GMM size {k} must be at least 1"
            ));
        }
        if self.compact_dim == Some(0) {
            return bad("compact_pca (--compact-pca) must be at least 1".into());
        }
        if let Some(r) = self.sweep_mfa_factors.iter().find(|r| **r == 0) {
            return bad(format!(
                "sweep_mfa (--sweep-mfa): MFA factor count {r} must be at least 1"
            ));
        }
        self.normalization
            .validate()
            .map_err(PipelineError::Config)?;
        self.descriptors
            .validate()
            .map_err(|e| PipelineError::Config(e.to_string()))
    }
}
