//! The flags of `fisherkit run`, one group per group of
//! [`fisherkit_pipeline::PipelineConfig`]. Each flag is named as the setting
//! it sets (`--pca-dim` ↔ `pca.pca_dim`) and has no default of its own: a
//! flag given on the command line overrides the setting of `--config FILE`
//! (or the default configuration), and the help shows the configuration's
//! defaults ([`with_config_defaults`]), so the two cannot disagree.

use clap::{Args, ValueEnum};
use fisherkit_pipeline::{PipelineConfig, PipelineError};
use serde_json::Value;
use std::path::PathBuf;

pub(crate) const RUN_HELP: &str = "\
Examples:
  fisherkit run --train scenes/train --test scenes/test --report report.json
  fisherkit run --train tr --test te --encoders 'gmm-fv:mean+var,mfa-fs:loading&cnn-global' \\
      --scales 128 --pca-dim 100 --whitening both
  fisherkit run --train tr --test te --scales 28 --save-descriptors feats   # also writes feats/{train,test}.npz
  fisherkit run --train-descriptors feats/train.npz --test-descriptors feats/test.npz
  fisherkit run --train tr --test te --pca-dim 100 --print-config > run.json
  fisherkit run --config run.json --seed 3          # flags override the file's settings
  fisherkit run --config report.json                # repeats the run a report records

Image folders: DIR/<class name>/*.{jpg,jpeg,png}; test classes must exist in training.
Encoders (comma list; parts joined by +; terms joined by & are concatenated):
  gmm-fv[:prior+mean+var]   GMM Fisher vector (default parts mean+var)
  mfa-fs[:mean+loading]     MFA Fisher score (default part loading)
  cnn-global                the CNN's own image-level log-probabilities (images only)
Each scale gets its own PCA and background models; scales are concatenated.
Descriptors are cached in --cache, so a second run with other encoders skips the CNN.
Unreadable images are skipped with a warning and listed in the report.

Configuration files (--config) are JSON with the groups data, descriptors, pca,
models, encoding, svm, output (each setting named as its flag, with underscores)
and seed; missing settings take their defaults (docs/formats.md).

Descriptor files (--train-descriptors/--test-descriptors, one .npz per split, for
descriptors from another network; --save-descriptors writes the same format):
  labels        1-D, one entry per image: class names (str) or integers
  and either one (n_i, D) float32/float64 array per image, in archive order
      np.savez('train.npz', *bags, labels=labels)
  or all rows stacked with each row's image number 0..n-1
      np.savez('train.npz', descriptors=X, image_index=idx, labels=labels)
Every image needs >= 1 finite descriptor; train and test must have the same D.
The file's descriptors are one scale; cnn-global is not available.";

/// Sets each given flag `self.$name` as the setting `$name`: `value` flags by
/// their JSON value, `word` flags (value enums) by their command-line word,
/// `switch` flags when present.
macro_rules! overlay {
    ($cfg:ident, $s:ident; value: $($v:ident),*; word: $($w:ident),*; switch: $($b:ident),*) => {{
        $(if let Some(v) = &$s.$v {
            $cfg.set_option(stringify!($v), to_json(stringify!($v), v)?)?;
        })*
        $(if let Some(v) = &$s.$w {
            $cfg.set_option(stringify!($w), word(v))?;
        })*
        $(if $s.$b {
            $cfg.set_option(stringify!($b), Value::Bool(true))?;
        })*
        Ok(())
    }};
}

/// A flag's value as JSON; NaN and infinities (which JSON writes as `null`,
/// "not given") are refused.
fn to_json(name: &str, v: &impl serde::Serialize) -> Result<Value, PipelineError> {
    let flag = name.replace('_', "-");
    match serde_json::to_value(v) {
        Ok(Value::Null) => Err(PipelineError::Config(format!(
            "option {name} (--{flag}): not a finite number"
        ))),
        Ok(v) => Ok(v),
        Err(e) => Err(PipelineError::Config(format!(
            "option {name} (--{flag}): {e}"
        ))),
    }
}

fn word(v: &impl ValueEnum) -> Value {
    Value::String(
        v.to_possible_value()
            .expect("no skipped variants")
            .get_name()
            .to_string(),
    )
}

/// Arguments of `fisherkit run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Read the settings from this JSON file: a configuration (`--print-config`
    /// writes one) or the report of an earlier run (`--report`), which records
    /// its own. Flags given too override its settings.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the checked configuration as JSON and exit without running.
    #[arg(long)]
    pub print_config: bool,
    /// Seed of every random choice.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub descriptors: DescriptorArgs,
    #[command(flatten)]
    pub onnx: OnnxArgs,
    #[command(flatten)]
    pub pca: PcaArgs,
    #[command(flatten)]
    pub models: ModelArgs,
    #[command(flatten)]
    pub encoding: EncodingArgs,
    #[command(flatten)]
    pub svm: SvmArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl RunArgs {
    /// The configuration of this command line: `--config` (else the
    /// defaults) with every flag given set over it.
    ///
    /// # Errors
    /// An unreadable `--config` file, or a bad flag value (named).
    pub fn pipeline_config(&self) -> Result<PipelineConfig, PipelineError> {
        let mut cfg = match &self.config {
            Some(path) => PipelineConfig::read(path)?,
            None => PipelineConfig::default(),
        };
        self.data.overlay(&mut cfg)?;
        self.descriptors.overlay(&mut cfg)?;
        self.onnx.overlay(&mut cfg)?;
        self.pca.overlay(&mut cfg)?;
        self.models.overlay(&mut cfg)?;
        self.encoding.overlay(&mut cfg)?;
        self.svm.overlay(&mut cfg)?;
        self.output.overlay(&mut cfg)?;
        let s = self;
        overlay!(cfg, s; value: seed; word: ; switch: ).map(|()| cfg)
    }
}

/// The data of a run.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Data")]
pub struct DataArgs {
    /// Training image folder: DIR/<class>/*.png|jpg.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["train_descriptors", "test_descriptors"])]
    pub train: Option<PathBuf>,
    /// Test image folder, same class names.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["train_descriptors", "test_descriptors"])]
    pub test: Option<PathBuf>,
    /// Training descriptor file (.npz, see below) instead of an image folder.
    #[arg(long, value_name = "FILE")]
    pub train_descriptors: Option<PathBuf>,
    /// Test descriptor file (.npz), same D, classes among the training ones.
    #[arg(long, value_name = "FILE")]
    pub test_descriptors: Option<PathBuf>,
}

impl DataArgs {
    /// Image folders given here replace the descriptor files of `--config`, and the other way round.
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        if self.train.is_some() || self.test.is_some() {
            cfg.data.train_descriptors = None;
            cfg.data.test_descriptors = None;
        }
        if self.train_descriptors.is_some() || self.test_descriptors.is_some() {
            cfg.data.train = None;
            cfg.data.test = None;
        }
        overlay!(cfg, self; value: train, test, train_descriptors, test_descriptors; word: ; switch: )
    }
}

/// How patches are run through the CNN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatchModeArg {
    /// One fully-convolutional CNN pass per scale; each score-map cell is a patch.
    Dense,
    /// Every patch cropped, resized to the CNN's input (227 or 224 px) and classified on its own (slow).
    Exact,
}

/// The CNN and its patches.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "CNN and patches (image folders)")]
pub struct DescriptorArgs {
    /// The CNN of the patch descriptors: efficientnet-lite0 (224-px patches, 7x7 cells, 32 px
    /// apart; the more accurate on photos), squeezenet (227-px patches, 13x13 cells, 16 px
    /// apart) or FILE.onnx, any ONNX image classifier (built with the `onnx` feature;
    /// options below).
    #[arg(long, value_name = "CNN")]
    pub cnn: Option<String>,
    /// Patch sizes in pixels, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub scales: Option<String>,
    /// How patches are run through the CNN.
    #[arg(long, value_enum)]
    pub patch_mode: Option<PatchModeArg>,
    /// Exact mode: step between patches as a fraction of the patch side, in (0, 1]
    /// [default: 0.5]. Dense mode has no stride of its own: its cells are 16 px
    /// apart at the CNN's 227-px-per-patch resolution (EfficientNet-Lite0: 32 px at 224).
    #[arg(long, value_name = "F")]
    pub stride: Option<f32>,
    /// Larger images are shrunk to this many pixels on their longer side first (0: never).
    #[arg(long, value_name = "PX")]
    pub max_image_side: Option<u32>,
}

impl DescriptorArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: cnn, scales, stride, max_image_side; word: patch_mode; switch: )
    }
}

/// Options of an ONNX model given as `--cnn FILE.onnx` (see docs/backbones.md).
#[derive(Debug, Clone, Default, PartialEq, Args)]
#[command(next_help_heading = "ONNX model (--cnn FILE.onnx)")]
pub struct OnnxArgs {
    /// Side patches are resized to [default: the model's fixed input side, else 224].
    #[arg(long, value_name = "PX")]
    pub onnx_input_side: Option<usize>,
    /// Per-channel mean on the 0-1 scale, in the model's channel order
    /// [default: 0.485,0.456,0.406].
    #[arg(long, value_name = "M,M,M")]
    pub onnx_mean: Option<String>,
    /// Per-channel standard deviation on the 0-1 scale [default: 0.229,0.224,0.225].
    #[arg(long, value_name = "S,S,S")]
    pub onnx_std: Option<String>,
    /// The model takes BGR channels (Caffe models) instead of RGB.
    #[arg(long)]
    pub onnx_bgr: bool,
    /// The tensor holding the class scores (a graph output or any tensor of the graph)
    /// [default: the first graph output].
    #[arg(long, value_name = "NAME")]
    pub onnx_output: Option<String>,
}

impl OnnxArgs {
    /// Whether any ONNX option was given.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }

    /// Sets the given options in `cfg`.
    ///
    /// # Errors
    /// A bad value (named).
    pub fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: onnx_input_side, onnx_mean, onnx_std, onnx_output; word: ; switch: onnx_bgr)
    }

    /// The network `cnn` (a built-in name or FILE.onnx) with these options, checked.
    ///
    /// # Errors
    /// A bad name or option value, ONNX options for a built-in network.
    pub fn choice(&self, cnn: &str) -> Result<fisherkit_pipeline::CnnChoice, PipelineError> {
        let mut cfg = PipelineConfig::default();
        cfg.set_option("cnn", Value::String(cnn.to_string()))?;
        self.overlay(&mut cfg)?;
        fisherkit_pipeline::CnnChoice::from_config(&cfg.descriptors)
    }
}

/// The PCA of the descriptors.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "PCA")]
pub struct PcaArgs {
    /// Descriptor dimension after PCA (at most the data's).
    #[arg(long, value_name = "D")]
    pub pca_dim: Option<usize>,
    /// Training images (a seeded subset) the PCA and the background models learn from.
    #[arg(long, value_name = "N")]
    pub sample_images: Option<usize>,
    /// Descriptors per scale for the PCA, drawn evenly over the sample images.
    #[arg(long, value_name = "N")]
    pub pca_sample: Option<usize>,
    /// Also evaluate each MFA-FS encoder reduced to D dimensions by a PCA of the
    /// training encodings (the paper's Table 3: 5000).
    #[arg(long, value_name = "D")]
    pub compact_pca: Option<usize>,
}

impl PcaArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: pca_dim, sample_images, pca_sample, compact_pca; word: ; switch: )
    }
}

/// The background models.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Background models")]
pub struct ModelArgs {
    /// Descriptors per scale to learn the background GMM and MFA, drawn evenly over the
    /// sample images.
    #[arg(long, value_name = "N")]
    pub model_sample: Option<usize>,
    /// GMM components.
    #[arg(long, value_name = "K")]
    pub gmm_components: Option<usize>,
    /// GMM EM iterations at most.
    #[arg(long, value_name = "N")]
    pub gmm_max_iter: Option<usize>,
    /// MFA components.
    #[arg(long, value_name = "K")]
    pub mfa_components: Option<usize>,
    /// MFA factors per component.
    #[arg(long, value_name = "R")]
    pub mfa_factors: Option<usize>,
    /// MFA EM iterations at most.
    #[arg(long, value_name = "N")]
    pub mfa_max_iter: Option<usize>,
    /// GMM sizes K for the gmm-fv:var accuracy-against-dimension sweep, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub sweep_gmm: Option<String>,
    /// MFA factor counts R for the mfa-fs:loading sweep, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub sweep_mfa: Option<String>,
}

impl ModelArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: model_sample, gmm_components, gmm_max_iter, mfa_components,
            mfa_factors, mfa_max_iter, sweep_gmm, sweep_mfa; word: ; switch: )
    }
}

/// Whitening of the MFA Fisher scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WhiteningArg {
    /// The paper's MFA Fisher scores.
    Off,
    /// MFA Fisher scores divided by the root of a diagonal Fisher-information estimate.
    On,
    /// Both, as separate results.
    Both,
}

/// The encoders.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Encoders")]
pub struct EncodingArgs {
    /// Encoders to compare (see below).
    #[arg(long, value_name = "LIST")]
    pub encoders: Option<String>,
    /// Whitening of the MFA Fisher scores by a diagonal Fisher-information estimate.
    #[arg(long, value_enum)]
    pub whitening: Option<WhiteningArg>,
    /// Exponent of the signed power normalisation (1 turns it off).
    #[arg(long, value_name = "P")]
    pub power: Option<f64>,
}

impl EncodingArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: encoders, power; word: whitening; switch: )
    }
}

/// `--classifier`: fisherkit_pipeline::Classifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClassifierArg {
    /// Kernel path while its training kernels fit in 4 GiB, primal above.
    Auto,
    /// Linear kernels over the training images (n x n, f32), dual solver.
    Kernel,
    /// Out-of-core primal solver.
    Primal,
}

/// The SVMs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "SVM")]
pub struct SvmArgs {
    /// How the SVMs are trained: `kernel` (linear kernels over the n training
    /// images from the stores, f32, memory n^2), `primal` (out of core on row
    /// blocks: memory K x D weights plus one block, any n), `auto` (kernel while
    /// its kernels fit in 4 GiB: 2 of them at any number of scales, up to 23 170
    /// training images; 3 with cnn-global, 18 918; primal above).
    #[arg(long, value_enum)]
    pub classifier: Option<ClassifierArg>,
    /// SVM costs tried by cross-validation, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub c_grid: Option<String>,
    /// Cross-validation folds.
    #[arg(long, value_name = "N")]
    pub cv_folds: Option<usize>,
}

impl SvmArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: c_grid, cv_folds; word: classifier; switch: )
    }
}

/// `--store`: fisherkit_pipeline::StoreFormat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreArg {
    /// 4 bytes a value, exact.
    F32,
    /// About 1 byte a value.
    Q8,
}

/// What the run keeps and writes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the accuracy-against-dimension plot (SVG) here (needs --sweep-gmm or --sweep-mfa).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Write the trained classifier to FILE (one .safetensors file: the CNN's identity,
    /// the scales, the PCAs, the background models, the encoder, the SVM and the class
    /// names), for `fisherkit predict` and `fisherkit evaluate`.
    #[arg(long, value_name = "FILE")]
    pub save_model: Option<PathBuf>,
    /// The encoder of the saved classifier, one of --encoders [default: the one with the
    /// best cross-validated training accuracy].
    #[arg(long, value_name = "SPEC")]
    pub model_encoder: Option<String>,
    /// Write the trained models here: pca-<scale>, gmm-K<K>-<scale>, mfa-K<K>-R<R>-<scale>
    /// and svm-<encoder> .safetensors files (reload with `fisherkit encode` or Python's
    /// `load`).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Also write each encoder's encodings to the output folder: <encoder>.train.npy,
    /// <encoder>.test.npy (images × dim, f32) and images.train.txt / images.test.txt
    /// (each row's image and class). They are the encodings the SVMs were trained on:
    /// read from the run folder's stores, so rounded by q8 (the default); --store f32
    /// for exact ones.
    #[arg(long)]
    pub save_encodings: bool,
    /// Also write the CNN descriptors of the images to DIR/train.npz and DIR/test.npz
    /// (descriptor files; several scales are stacked in one bag per image).
    #[arg(long, value_name = "DIR")]
    pub save_descriptors: Option<PathBuf>,
    /// Work folder of resumable runs: models, samples and the per-image encodings
    /// (DIR/runs/<key>/, keyed by the data and settings). A killed run started
    /// again with the same command continues from what it finished.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Keep the run's work files in a temporary folder, removed at the end.
    #[arg(long)]
    pub no_cache: bool,
    /// How the run folder keeps the encodings: q8 (the default; about 1 byte a value,
    /// square-root-companded 8-bit codes with a scale per 256 values: a quarter of f32's
    /// disk, within 0.4 points of its accuracy on the MIT-shaped set) or f32 (4 bytes a
    /// value, exact). A q8 run reuses the f32 encodings of an earlier run of the same
    /// settings.
    #[arg(long, value_enum)]
    pub store: Option<StoreArg>,
}

impl OutputArgs {
    fn overlay(&self, cfg: &mut PipelineConfig) -> Result<(), PipelineError> {
        overlay!(cfg, self; value: report, plot, save_model, model_encoder, output_dir,
            save_descriptors, cache; word: store; switch: save_encodings, no_cache)
    }
}

/// The `run` subcommand of `cmd` with each flag's help ending in the
/// default of the setting it sets (`[default: 500]`), taken from
/// [`PipelineConfig::default`]: the configuration's defaults are the help's.
pub fn with_config_defaults(cmd: clap::Command) -> clap::Command {
    let defaults = PipelineConfig::default();
    cmd.mut_subcommand("run", |mut run| {
        let ids: Vec<String> = run
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        for id in ids {
            if let Some(text) = defaults.option_value(&id).and_then(|v| default_text(&v)) {
                run = run.mut_arg(id.as_str(), |a| {
                    let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                    a.help(format!("{help} [default: {text}]"))
                });
            }
        }
        run
    })
}

/// A default as the help shows it (as the flag is written: `0.01,0.1,1,10`);
/// `None` for no default (`null`, `false`, `[]`).
fn default_text(v: &Value) -> Option<String> {
    match v {
        Value::Null | Value::Bool(false) => None,
        Value::Array(a) if a.is_empty() => None,
        Value::Array(a) => Some(
            a.iter()
                .filter_map(default_text)
                .collect::<Vec<_>>()
                .join(","),
        ),
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_f64() => n.as_f64().map(|f| f.to_string()),
        other => Some(other.to_string()),
    }
}
