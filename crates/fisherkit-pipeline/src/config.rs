//! The settings of a run ([`RunConfig`]) and their defaults ([`defaults`]),
//! written once: the CLI's flags and the Python `fisherkit.pipeline.run`
//! options take their defaults from here.

use crate::spec::EncoderSpec;
use crate::store::StoreFormat;
use crate::PipelineError;
use fisherkit::Normalization;
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use std::path::PathBuf;

/// The defaults of [`RunConfig::new`]. The CNN's (scales, patch mode, image
/// size) are [`DescriptorParams::default`]'s, the normalisation's
/// [`Normalization::default`]'s.
pub mod defaults {
    /// Descriptor dimension after PCA (the paper: 500).
    pub const PCA_DIM: usize = 500;
    /// Training images the PCA and the models learn from.
    pub const SAMPLE_IMAGES: usize = 500;
    /// Descriptors per scale for the PCA.
    pub const PCA_SAMPLE: usize = 200_000;
    /// Descriptors per scale for the background models.
    pub const MODEL_SAMPLE: usize = 100_000;
    /// GMM components K.
    pub const GMM_COMPONENTS: usize = 50;
    /// GMM EM iterations at most.
    pub const GMM_MAX_ITER: usize = 100;
    /// MFA components K.
    pub const MFA_COMPONENTS: usize = 50;
    /// MFA factors R.
    pub const MFA_FACTORS: usize = 10;
    /// MFA EM iterations at most.
    pub const MFA_MAX_ITER: usize = 30;
    /// When the EM of the run's GMMs and MFAs stops (or at the iteration
    /// cap): the pipeline keeps its own rule, a relative change of the mean
    /// log-likelihood below 1e-6, under which every object-scene table of
    /// docs/evidence was measured, rather than the library's default
    /// (absolute 1e-3, scikit-learn's). On `fisherkit demo` both rules give
    /// the same eight fits and accuracies (every fit stops at its cap either
    /// way, docs/pipeline.md §2); the object-scene sets, where the rules could
    /// differ, are not yet compared, and issue 30 asks the pipeline to keep
    /// its setting until they are. Run-folder names carry any other rule.
    pub const EM_TOL: fisherkit::stream::EmTol = fisherkit::stream::EmTol::Relative(1e-6);
    /// SVM costs tried by cross-validation.
    pub const C_GRID: [f64; 4] = [0.01, 0.1, 1.0, 10.0];
    /// Cross-validation folds.
    pub const CV_FOLDS: usize = 3;
    /// Seed of every random choice.
    pub const SEED: u64 = 0;
    /// The CNN of `fisherkit run` (and of Python's `pipeline.run` and
    /// `cnn.Descriptors`), chosen by measurement on photo-sized scenes
    /// (README, docs/backbones.md): on the MIT-Indoor-shaped object-scene set
    /// (1/4 size) EfficientNet-Lite0 gives MFA-FS(Λ) 36.7 % against SqueezeNet's
    /// 24.8 % (±2.6) and GMM-FV(σ) 28.1 % against 17.6 %, at about the same
    /// pipeline time per image (fewer cells to encode, a slower network).
    /// [`fisherkit_cnn::BackboneKind::default`] is the same network (a test checks).
    pub const CNN: &str = "efficientnet-lite0";
    /// The CNN of `fisherkit demo`: its bundled images are 28 px, one patch
    /// each, where SqueezeNet's 13×13 cells beat EfficientNet-Lite0's 7×7
    /// (MFA-FS(Λ) 86.0 % against 83.2 %, ±1.7).
    pub const DEMO_CNN: &str = "squeezenet";
    /// The run-folder root of `fisherkit run`.
    pub const CACHE_DIR: &str = ".fisherkit-cache";
    /// Most bytes of (N, N) `f64` kernels [`super::Classifier::Auto`] lets
    /// the kernel path hold: it holds one per scale plus three (the total, the
    /// global term's, the training block the solver copies), (S + 3)·8N²
    /// bytes: 2.2 GB at MIT Indoor's 6 700 images and three scales, 3.4 GB at
    /// 10 322 images and one scale. Within it the kernel path is the faster
    /// and the measured one (a 397-class, 10 322-image, 25 000-dim run: 112 s
    /// against 1 568 s on the primal path,
    /// docs/evidence/sun397-classifier-2026-12-06.md); above it (SUN397's
    /// 39 700 images: 50 GB) the primal path, whose memory does not grow with N².
    pub const KERNEL_MAX_BYTES: u64 = 4 << 30;
}

/// How the one-vs-rest SVMs of a run are trained (docs/pipeline.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Classifier {
    /// The kernel path while its kernels fit in [`defaults::KERNEL_MAX_BYTES`], the primal path above.
    #[default]
    Auto,
    /// Linear kernels (N, N) from the stores, dual solver on them: memory N².
    Kernel,
    /// Out-of-core primal solver on row blocks read from the stores: memory
    /// K × D weights plus one block.
    Primal,
}

impl Classifier {
    /// Bytes of the (N, N) `f64` kernels the kernel path holds for
    /// `n_images` (train + test) at `n_scales` scales.
    pub fn kernel_bytes(n_images: usize, n_scales: usize) -> u64 {
        let n = n_images as u64;
        (n_scales as u64 + 3)
            .saturating_mul(8)
            .saturating_mul(n.saturating_mul(n))
    }

    /// Whether a run of `n_images` (train + test) at `n_scales` scales takes the primal path.
    ///
    /// ```
    /// use fisherkit_pipeline::Classifier;
    /// assert!(!Classifier::Auto.primal_for(6_700, 3)); // MIT Indoor: 2.2 GB of kernels
    /// assert!(Classifier::Auto.primal_for(39_700, 1)); // SUN397: 50 GB
    /// assert!(Classifier::Primal.primal_for(10, 1));
    /// ```
    pub fn primal_for(self, n_images: usize, n_scales: usize) -> bool {
        match self {
            Classifier::Auto => Self::kernel_bytes(n_images, n_scales) > defaults::KERNEL_MAX_BYTES,
            Classifier::Kernel => false,
            Classifier::Primal => true,
        }
    }
}

/// Whether MFA Fisher scores are whitened by the diagonal Fisher-information
/// estimate (the empirical variance of the raw scores over the training images).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Whitening {
    /// The paper's scores (default).
    #[default]
    Off,
    /// Whitened scores only.
    On,
    /// Both, as two result rows.
    Both,
}

/// Settings of one pipeline run. [`RunConfig::new`] gives the paper's defaults.
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
    /// How the run folder keeps the encodings. Default [`StoreFormat::F32`]
    /// (4 bytes a value, exact; `Q8`: about 1 byte a value, for runs whose
    /// stores would not fit the disk — its cost in accuracy on the
    /// MIT-shaped set is still to be measured, docs/pipeline.md §3).
    pub store_format: StoreFormat,
    /// Seed of every random choice.
    pub seed: u64,
    /// Descriptor cache folder (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// Folder for the trained models (PCA, GMM, MFA, SVMs) and, with
    /// `save_encodings`, the encodings (see [`crate::output`]).
    pub output_dir: Option<PathBuf>,
    /// Also write each encoder's train and test encodings to `output_dir`.
    pub save_encodings: bool,
    /// Write the trained classifier (PCA, background models, encoder, SVM,
    /// classes: everything from an image to a label) to this file
    /// ([`crate::SceneClassifier`]). Default `None`.
    pub save_model: Option<PathBuf>,
    /// The encoder of the saved classifier (one of `encoders`); `None`: the
    /// one with the best cross-validated training accuracy.
    pub model_encoder: Option<EncoderSpec>,
    /// GMM sizes K of the Figure-1 sweep of `gmm-fv:var` (empty: no sweep).
    pub sweep_gmm_components: Vec<usize>,
    /// MFA factor counts R of the Figure-1 sweep of `mfa-fs:loading` (empty: no sweep).
    pub sweep_mfa_factors: Vec<usize>,
}

impl RunConfig {
    /// The paper's defaults on the given folders: scales 96/128/160 px (dense),
    /// PCA 500, GMM K = 50, MFA K = 50 R = 10, the Table-1 encoders.
    pub fn new(train: PathBuf, test: PathBuf) -> Self {
        Self {
            train,
            test,
            encoders: crate::spec::parse_encoders(crate::spec::DEFAULT_ENCODERS)
                .expect("the default encoders parse"),
            save_descriptors: None,
            descriptors: DescriptorParams::default(),
            pca_dim: defaults::PCA_DIM,
            sample_images: defaults::SAMPLE_IMAGES,
            pca_sample: defaults::PCA_SAMPLE,
            model_sample: defaults::MODEL_SAMPLE,
            compact_dim: None,
            gmm_components: defaults::GMM_COMPONENTS,
            gmm_max_iter: defaults::GMM_MAX_ITER,
            mfa_components: defaults::MFA_COMPONENTS,
            mfa_factors: defaults::MFA_FACTORS,
            mfa_max_iter: defaults::MFA_MAX_ITER,
            whitening: Whitening::Off,
            normalization: Normalization::default(),
            c_grid: defaults::C_GRID.to_vec(),
            cv_folds: defaults::CV_FOLDS,
            classifier: Classifier::Auto,
            store_format: StoreFormat::F32,
            seed: defaults::SEED,
            cache_dir: None,
            output_dir: None,
            save_encodings: false,
            save_model: None,
            model_encoder: None,
            sweep_gmm_components: vec![],
            sweep_mfa_factors: vec![],
        }
    }

    pub(crate) fn validate(&self) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        if self.save_encodings && self.output_dir.is_none() {
            return bad("saving the encodings needs an output folder".into());
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
            ("pca dimension", self.pca_dim),
            ("sample images", self.sample_images),
            ("PCA sample size", self.pca_sample),
            ("model sample size", self.model_sample),
            ("GMM components", self.gmm_components),
            ("GMM iterations", self.gmm_max_iter),
            ("MFA components", self.mfa_components),
            ("MFA factors", self.mfa_factors),
            ("MFA iterations", self.mfa_max_iter),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        if self.cv_folds < 2 {
            return bad(format!(
                "cross-validation needs at least 2 folds, got {}",
                self.cv_folds
            ));
        }
        if let Some(c) = self.c_grid.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return bad(format!("SVM cost {c} must be a finite number > 0"));
        }
        if self.c_grid.is_empty() {
            return bad("the SVM cost grid is empty".into());
        }
        if let Some(k) = self.sweep_gmm_components.iter().find(|k| **k == 0) {
            return bad(format!("sweep GMM size {k} must be at least 1"));
        }
        if self.compact_dim == Some(0) {
            return bad("the compact PCA dimension must be at least 1".into());
        }
        if let Some(r) = self.sweep_mfa_factors.iter().find(|r| **r == 0) {
            return bad(format!("sweep MFA factor count {r} must be at least 1"));
        }
        self.normalization
            .validate()
            .map_err(PipelineError::Config)?;
        self.descriptors
            .validate()
            .map_err(|e| PipelineError::Config(e.to_string()))
    }

    /// The configuration as text; `images`: the input was image folders (else
    /// descriptor files, and the CNN settings did not apply).
    pub(crate) fn describe(&self, images: bool) -> Vec<(String, String)> {
        let d = &self.descriptors;
        let mut v = vec![(
            "encoders".to_string(),
            self.encoders
                .iter()
                .map(EncoderSpec::name)
                .collect::<Vec<_>>()
                .join(","),
        )];
        if images {
            v.push(("scales".into(), format!("{:?}", d.scales)));
            v.push(("patch_mode".into(), format!("{:?}", d.mode)));
            if d.mode == PatchMode::Exact {
                v.push(("stride".into(), d.stride.to_string()));
            }
            v.push(("max_image_side".into(), format!("{:?}", d.max_image_side)));
        } else {
            v.push(("input".into(), "descriptor files".into()));
        }
        v.extend([
            ("pca_dim".into(), self.pca_dim.to_string()),
            ("sample_images".into(), self.sample_images.to_string()),
            ("pca_sample".into(), self.pca_sample.to_string()),
            ("model_sample".into(), self.model_sample.to_string()),
            (
                "gmm".into(),
                format!("K={} max_iter={}", self.gmm_components, self.gmm_max_iter),
            ),
            (
                "mfa".into(),
                format!(
                    "K={} R={} max_iter={}",
                    self.mfa_components, self.mfa_factors, self.mfa_max_iter
                ),
            ),
            ("whitening".into(), format!("{:?}", self.whitening)),
            ("classifier".into(), format!("{:?}", self.classifier)),
            ("store_format".into(), self.store_format.name().into()),
            (
                "normalization".into(),
                format!(
                    "power {} l2 {}",
                    self.normalization.power, self.normalization.l2
                ),
            ),
            ("c_grid".into(), format!("{:?}", self.c_grid)),
            ("cv_folds".into(), self.cv_folds.to_string()),
            ("seed".into(), self.seed.to_string()),
        ]);
        if let Some(d) = self.compact_dim {
            v.push(("compact_dim".into(), d.to_string()));
        }
        if let Some(dir) = &self.save_descriptors {
            v.push(("save_descriptors".into(), dir.display().to_string()));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_default_cnn_everywhere() {
        let kind: fisherkit_cnn::BackboneKind = defaults::CNN.parse().unwrap();
        assert_eq!(kind, fisherkit_cnn::BackboneKind::default());
        let demo: fisherkit_cnn::BackboneKind = defaults::DEMO_CNN.parse().unwrap();
        assert_eq!(demo, fisherkit_cnn::BackboneKind::SqueezeNet);
    }
}
