//! [`PipelineConfig`]: the nested, serde configuration of a run (module docs
//! of [`super`]). Every leaf is named as its `fisherkit run` flag.

use super::choices::{Classifier, Whitening};
use super::defaults;
use super::serde_list;
use crate::spec::{parse_encoders, EncoderSpec, DEFAULT_ENCODERS};
use crate::store::StoreFormat;
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a pipeline run depends on, in groups. `Default` is the
/// paper's setting (scales 96/128/160 px, PCA 500, GMM K = 50, MFA K = 50
/// R = 10, the Table-1 encoders); missing fields of a JSON file take their
/// defaults, unknown ones are refused.
///
/// ```
/// use fisherkit_pipeline::PipelineConfig;
/// let mut cfg = PipelineConfig::images("scenes/train", "scenes/test");
/// cfg.set_option("pca_dim", serde_json::json!(100))?;
/// cfg.set_option("scales", serde_json::json!("96,128"))?;
/// let checked = cfg.check()?;
/// assert_eq!(checked.run_config().pca_dim, 100);
/// assert_eq!(checked.run_config().descriptors.scales, vec![96, 128]);
/// # Ok::<(), fisherkit_pipeline::PipelineError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// The training and test data.
    pub data: DataConfig,
    /// The CNN and its patches (image folders only).
    pub descriptors: DescriptorsConfig,
    /// The PCA of the descriptors.
    pub pca: PcaConfig,
    /// The background GMMs and MFAs.
    pub models: ModelsConfig,
    /// The encoders and their normalisation.
    pub encoding: EncodingConfig,
    /// The one-vs-rest linear SVMs.
    pub svm: SvmConfig,
    /// What the run keeps and writes.
    pub output: OutputConfig,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            data: DataConfig::default(),
            descriptors: DescriptorsConfig::default(),
            pca: PcaConfig::default(),
            models: ModelsConfig::default(),
            encoding: EncodingConfig::default(),
            svm: SvmConfig::default(),
            output: OutputConfig::default(),
            seed: defaults::SEED,
        }
    }
}

/// The training and test data: two image folders, or two descriptor files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// Training image folder `DIR/<class>/*.png|jpg`.
    pub train: Option<PathBuf>,
    /// Test image folder, classes among the training ones.
    pub test: Option<PathBuf>,
    /// Training descriptor file (.npz, [`crate::descriptor_file`]) instead of images.
    pub train_descriptors: Option<PathBuf>,
    /// Test descriptor file, same D.
    pub test_descriptors: Option<PathBuf>,
}

/// The CNN of the patch descriptors and its patches (image folders only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DescriptorsConfig {
    /// `efficientnet-lite0` (default), `squeezenet` or a path to an `.onnx` model.
    pub cnn: String,
    /// Patch sides in pixels.
    #[serde(deserialize_with = "serde_list::list")]
    pub scales: Vec<u32>,
    /// `dense` (one fully-convolutional pass per scale) or `exact`.
    #[serde(with = "serde_list::patch_mode")]
    pub patch_mode: PatchMode,
    /// Exact mode: step between patches as a fraction of the side, in (0, 1]
    /// (`None`: 0.5). Not for dense mode.
    pub stride: Option<f32>,
    /// Larger images are shrunk to this many pixels on their longer side (0: never).
    pub max_image_side: u32,
    /// ONNX model: side patches are resized to (`None`: the model's, else 224).
    pub onnx_input_side: Option<usize>,
    /// ONNX model: per-channel mean on the 0–1 scale (`None`: ImageNet's).
    #[serde(deserialize_with = "serde_list::three")]
    pub onnx_mean: Option<[f32; 3]>,
    /// ONNX model: per-channel standard deviation (`None`: ImageNet's).
    #[serde(deserialize_with = "serde_list::three")]
    pub onnx_std: Option<[f32; 3]>,
    /// ONNX model: takes BGR channels.
    pub onnx_bgr: bool,
    /// ONNX model: the tensor of class scores (`None`: the first output).
    pub onnx_output: Option<String>,
}

impl Default for DescriptorsConfig {
    fn default() -> Self {
        let d = DescriptorParams::default();
        Self {
            cnn: defaults::CNN.to_string(),
            scales: d.scales,
            patch_mode: d.mode,
            stride: None,
            max_image_side: d.max_image_side.unwrap_or(0),
            onnx_input_side: None,
            onnx_mean: None,
            onnx_std: None,
            onnx_bgr: false,
            onnx_output: None,
        }
    }
}

/// The PCA of the descriptors (one per scale).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PcaConfig {
    /// Descriptor dimension after PCA (at most the data's: the report's
    /// `dataset.pca_dims` gives the one used).
    pub pca_dim: usize,
    /// Training images (a seeded subset) the PCA and the models learn from.
    pub sample_images: usize,
    /// Descriptors per scale for the PCA, drawn evenly over the sample images.
    pub pca_sample: usize,
    /// Also evaluate each MFA-FS encoder reduced to this many dimensions by a
    /// PCA of the training encodings (the paper's Table 3: 5 000).
    pub compact_pca: Option<usize>,
}

impl Default for PcaConfig {
    fn default() -> Self {
        Self {
            pca_dim: defaults::PCA_DIM,
            sample_images: defaults::SAMPLE_IMAGES,
            pca_sample: defaults::PCA_SAMPLE,
            compact_pca: None,
        }
    }
}

/// The background models of each scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// Descriptors per scale the GMM and MFA learn from.
    pub model_sample: usize,
    /// GMM components K.
    pub gmm_components: usize,
    /// GMM EM iterations at most.
    pub gmm_max_iter: usize,
    /// MFA components K.
    pub mfa_components: usize,
    /// MFA factors R per component.
    pub mfa_factors: usize,
    /// MFA EM iterations at most.
    pub mfa_max_iter: usize,
    /// GMM sizes K of the `gmm-fv:var` accuracy-against-dimension sweep (empty: none).
    #[serde(deserialize_with = "serde_list::list")]
    pub sweep_gmm: Vec<usize>,
    /// MFA factor counts R of the `mfa-fs:loading` sweep (empty: none).
    #[serde(deserialize_with = "serde_list::list")]
    pub sweep_mfa: Vec<usize>,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        Self {
            model_sample: defaults::MODEL_SAMPLE,
            gmm_components: defaults::GMM_COMPONENTS,
            gmm_max_iter: defaults::GMM_MAX_ITER,
            mfa_components: defaults::MFA_COMPONENTS,
            mfa_factors: defaults::MFA_FACTORS,
            mfa_max_iter: defaults::MFA_MAX_ITER,
            sweep_gmm: Vec::new(),
            sweep_mfa: Vec::new(),
        }
    }
}

/// The encoders compared and how their encodings are normalised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncodingConfig {
    /// Encoder specs ([`crate::spec`]): an array, or `"gmm-fv:var,mfa-fs:loading"`.
    #[serde(with = "serde_list::encoders")]
    pub encoders: Vec<EncoderSpec>,
    /// Whitening of the MFA Fisher scores: `off`, `on` or `both`.
    pub whitening: Whitening,
    /// Exponent of the signed power normalisation (1 turns it off).
    pub power: f64,
    /// L2 normalisation after the power step.
    pub l2: bool,
}

impl Default for EncodingConfig {
    fn default() -> Self {
        let n = fisherkit::Normalization::default();
        Self {
            encoders: parse_encoders(DEFAULT_ENCODERS).expect("the default encoders parse"),
            whitening: Whitening::default(),
            power: n.power,
            l2: n.l2,
        }
    }
}

/// The one-vs-rest linear SVMs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SvmConfig {
    /// `auto`, `kernel` or `primal` ([`Classifier`]).
    pub classifier: Classifier,
    /// Costs C tried by cross-validation.
    #[serde(deserialize_with = "serde_list::list")]
    pub c_grid: Vec<f64>,
    /// Cross-validation folds.
    pub cv_folds: usize,
}

impl Default for SvmConfig {
    fn default() -> Self {
        Self {
            classifier: Classifier::default(),
            c_grid: defaults::C_GRID.to_vec(),
            cv_folds: defaults::CV_FOLDS,
        }
    }
}

/// What the run keeps (its run folder) and writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Root of the resumable run folders (`DIR/runs/<key>/`).
    pub cache: PathBuf,
    /// Keep the run folder in a temporary folder, removed at the end.
    pub no_cache: bool,
    /// How the run folder keeps the encodings: `f32` or `q8`.
    #[serde(with = "serde_list::store_format")]
    pub store: StoreFormat,
    /// Write the JSON report here.
    pub report: Option<PathBuf>,
    /// Write the accuracy-against-dimension SVG here (with a sweep).
    pub plot: Option<PathBuf>,
    /// Write the trained classifier (one .safetensors file) here.
    pub save_model: Option<PathBuf>,
    /// The saved classifier's encoder, one of `encoders` (`None`: the best
    /// cross-validated one).
    #[serde(with = "serde_list::encoder")]
    pub model_encoder: Option<EncoderSpec>,
    /// Write the trained PCA, GMM, MFA and SVM files here.
    pub output_dir: Option<PathBuf>,
    /// Also write each encoder's encodings to `output_dir`.
    pub save_encodings: bool,
    /// Also write the CNN descriptors to `DIR/train.npz` and `DIR/test.npz`.
    pub save_descriptors: Option<PathBuf>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            cache: PathBuf::from(defaults::CACHE_DIR),
            no_cache: false,
            store: StoreFormat::default(),
            report: None,
            plot: None,
            save_model: None,
            model_encoder: None,
            output_dir: None,
            save_encodings: false,
            save_descriptors: None,
        }
    }
}

impl PipelineConfig {
    /// The defaults on the image folders `train` and `test`.
    pub fn images(train: impl Into<PathBuf>, test: impl Into<PathBuf>) -> Self {
        let mut c = Self::default();
        c.data.train = Some(train.into());
        c.data.test = Some(test.into());
        c
    }

    /// The defaults on the descriptor files `train` and `test`.
    pub fn descriptor_files(train: impl Into<PathBuf>, test: impl Into<PathBuf>) -> Self {
        let mut c = Self::default();
        c.data.train_descriptors = Some(train.into());
        c.data.test_descriptors = Some(test.into());
        c
    }

    /// The settings of `fisherkit demo` on its bundled 28×28 images: each
    /// image is one 28-px patch (the CNN sees it at 227 px: 13×13
    /// descriptors with SqueezeNet), PCA to 100 dimensions, smaller samples
    /// and iteration caps so it runs in minutes, both whitening variants and
    /// the Figure-1 sweeps.
    pub fn demo(train: impl Into<PathBuf>, test: impl Into<PathBuf>) -> Self {
        let mut c = Self::images(train, test);
        c.descriptors.cnn = defaults::DEMO_CNN.to_string();
        c.descriptors.scales = vec![28];
        c.pca.pca_dim = 100;
        c.pca.sample_images = 1_000; // every training image of the bundled set
        c.pca.pca_sample = 50_000;
        c.models.model_sample = 30_000;
        c.models.gmm_max_iter = 50;
        c.models.mfa_max_iter = 20;
        c.models.sweep_gmm = vec![10, 25, 50, 100];
        c.models.sweep_mfa = vec![1, 2, 5, 10];
        c.encoding.encoders =
            parse_encoders("cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading")
                .expect("the demo's encoders parse");
        c.encoding.whitening = Whitening::Both;
        c.svm.c_grid = vec![0.1, 1.0, 10.0];
        c
    }
}
