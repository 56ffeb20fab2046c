//! Command-line grammar (clap derive).

use clap::{Args, Parser, Subcommand, ValueEnum};
use fisherkit::kmeans::kmeans_defaults;
use fisherkit::stream::em_defaults;
use fisherkit_pipeline::defaults;
use std::path::PathBuf;

const MAIN_EXAMPLES: &str = "\
Examples:
  fisherkit gmm fit --input descriptors.npy --components 64 --seed 0 --output gmm.safetensors
  fisherkit encode --model gmm.safetensors --input bags.npz --output fv.npy
  fisherkit kmeans fit --input descriptors.npy --clusters 64 --output centroids.npy
  fisherkit encode --encoder vlad --model centroids.npy --input bags.npz --output vlad.npy
  fisherkit mfa fit --input descriptors.npy --components 50 --factors 10 --output mfa.safetensors
  fisherkit encode --model mfa.safetensors --input bags.npz --parts mean,loading --output mfa_fs.npy
  fisherkit mfa whiten --model mfa.safetensors --input train_bags.npz --output mfa-w.safetensors

Arrays are .npy files of shape (N, D), float32 or float64 (numpy's np.save);
a set of bags is an .npz archive with one (N_i, D) array per bag (np.savez).
Models are safetensors files with metadata `kind` = gmm or mfa.";

/// Fisher vectors and MFA Fisher scores of bags of local descriptors.
#[derive(Debug, Parser)]
#[command(name = "fisherkit", version, about, after_help = MAIN_EXAMPLES)]
pub struct Cli {
    /// Number of worker threads (default: one per core).
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,

    /// No progress bars or summary lines on stderr (errors are still reported).
    #[arg(long, short, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line's definition, with `fisherkit run`'s help showing the
    /// pipeline configuration's defaults ([`with_config_defaults`]).
    pub fn definition() -> clap::Command {
        with_config_defaults(<Self as clap::CommandFactory>::command())
    }

    /// Parses `args` (the program name first) by [`Self::definition`].
    ///
    /// # Errors
    /// clap's error for a bad command line (and for `--help`, `--version`).
    pub fn try_parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Self::definition().try_get_matches_from(args)?;
        <Self as clap::FromArgMatches>::from_arg_matches(&matches)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagonal Gaussian mixture models.
    Gmm {
        #[command(subcommand)]
        command: GmmCommand,
    },
    /// k-means clustering (centroids for VLAD).
    Kmeans {
        #[command(subcommand)]
        command: KmeansCommand,
    },
    /// Mixtures of factor analysers.
    Mfa {
        #[command(subcommand)]
        command: MfaCommand,
    },
    /// Encode bags of descriptors with a model (GMM Fisher vector, MFA Fisher score or VLAD).
    Encode(EncodeArgs),
    /// The paper's scene-classification pipeline on image folders (or descriptor files):
    /// CNN descriptors, PCA, GMM-FV / MFA-FS, linear SVM, mean per-class accuracy.
    #[command(after_help = RUN_HELP)]
    Run(Box<RunArgs>),
    /// Label images (or descriptor bags) with a classifier saved by `fisherkit run --save-model`.
    #[command(after_help = PREDICT_HELP)]
    Predict(PredictArgs),
    /// Measure a saved classifier on a labelled test folder (or descriptor file): mean
    /// per-class accuracy, per-class accuracy and the confusion matrix.
    #[command(after_help = EVALUATE_HELP)]
    Evaluate(EvaluateArgs),
    /// Run the pipeline on the bundled Fashion-MNIST subset: the paper's Table 1
    /// comparison and its Figure 1 (accuracy against dimension) as an SVG.
    Demo(DemoArgs),
}

#[derive(Debug, Subcommand)]
pub enum GmmCommand {
    /// Fit a diagonal GMM by EM and save it as a safetensors model file.
    #[command(
        allow_negative_numbers = true,
        after_help = "\
Examples:
  fisherkit gmm fit --input X.npy --components 64 --output gmm.safetensors
  fisherkit gmm fit --input X.npy --components 256 --seed 3 --n-init 4 --max-iter 200 \\
      --variance-floor-absolute 1e-4 --output gmm.safetensors

Out of core (inputs larger than memory, read in chunks; Ctrl-C leaves the old output):
  fisherkit gmm fit -i part1.npy part2.npy -k 256 --chunk-rows 65536 --checkpoint 5 -o gmm.safetensors
  fisherkit gmm fit -i part1.npy part2.npy -k 256 --checkpoint 5 --resume -o gmm.safetensors

The model is computed in the dtype of X (float32 or float64) and saved in it."
    )]
    Fit(GmmFitArgs),
}

#[derive(Debug, Subcommand)]
pub enum KmeansCommand {
    /// Run k-means (k-means++ seeding, Lloyd iterations) and save the centroids (K, D) as .npy.
    #[command(
        allow_negative_numbers = true,
        after_help = "\
Example:
  fisherkit kmeans fit --input X.npy --clusters 64 --seed 0 --output centroids.npy"
    )]
    Fit(KmeansFitArgs),
}

#[derive(Debug, Subcommand)]
pub enum MfaCommand {
    /// Fit a mixture of factor analysers by EM and save it as a safetensors model file.
    #[command(
        allow_negative_numbers = true,
        after_help = "\
Examples:
  fisherkit mfa fit --input X.npy --components 50 --factors 10 --output mfa.safetensors
  fisherkit mfa fit -i a.npy b.npy -k 50 -r 10 --checkpoint 2 [--resume] -o mfa.safetensors"
    )]
    Fit(MfaFitArgs),
    /// Estimate the diagonal Fisher information of the MFA Fisher score on training bags
    /// and store it in a copy of the model, for `encode` to whiten with.
    #[command(after_help = "\
Examples:
  fisherkit mfa whiten --model mfa.safetensors --input train_bags.npz --parts mean,loading \\
      --output mfa-w.safetensors
  fisherkit encode --model mfa-w.safetensors --input bags.npz --output fs.npy   # whitened

F_jj is the variance over the bags of the raw score's entry j; encode divides
the raw score by sqrt(max(F_jj, 1e-12 mean F)) before the power and L2 steps.
The estimate is computed in the bags' dtype and stored in the model's, with
metadata whitening_parts naming the parts (encode applies it to those parts only).")]
    Whiten(MfaWhitenArgs),
}

/// EM initialisation.
/// What an EM tolerance bounds ([`fisherkit::stream::EmTol`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TolModeArg {
    /// |l_t - l_(t-1)| < T.
    Absolute,
    /// |l_t - l_(t-1)| / max(|l_(t-1)|, 1) < T.
    Relative,
}

impl TolModeArg {
    /// The library's rule with tolerance `tol`.
    pub fn with(self, tol: f64) -> fisherkit::stream::EmTol {
        match self {
            Self::Absolute => fisherkit::stream::EmTol::Absolute(tol),
            Self::Relative => fisherkit::stream::EmTol::Relative(tol),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitArg {
    /// k-means, then one M-step from the hard assignments.
    Kmeans,
    /// k-means++ seeds as means, the data variance for every component.
    Random,
}

#[derive(Debug, Args)]
pub struct GmmFitArgs {
    /// Training descriptors: one or more (N_i, D) .npy files of one dtype (float32 or
    /// float64), read in chunks as one (ΣN_i, D) matrix (`-i a.npy b.npy` or `-i a.npy -i b.npy`).
    #[arg(long, short, value_name = "X.npy", num_args = 1.., required = true)]
    pub input: Vec<PathBuf>,
    /// Number of mixture components K.
    #[arg(long, short = 'k', value_name = "K")]
    pub components: usize,
    #[command(flatten)]
    pub em: EmArgs,
    /// Initialisation.
    #[arg(long, value_enum, default_value_t = InitArg::Kmeans)]
    pub init: InitArg,
    /// Variance floor as a fraction of each dimension's data variance (default 1e-3).
    #[arg(long, value_name = "F", conflicts_with = "variance_floor_absolute")]
    pub variance_floor_relative: Option<f64>,
    /// Absolute variance floor (VLFeat uses 1e-4).
    #[arg(long, value_name = "F")]
    pub variance_floor_absolute: Option<f64>,
    /// Where to write the model (safetensors, kind = gmm).
    #[arg(long, short, value_name = "gmm.safetensors")]
    pub output: PathBuf,
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// The EM settings `gmm fit` and `mfa fit` share.
#[derive(Debug, Args)]
pub struct EmArgs {
    /// Seed of every random choice (same seed, same model).
    #[arg(long, default_value_t = em_defaults::SEED, value_name = "S")]
    pub seed: u64,
    /// Maximum EM iterations per restart.
    #[arg(long, default_value_t = em_defaults::MAX_ITER, value_name = "N")]
    pub max_iter: usize,
    /// Stop when the change of the mean log-likelihood per row between two
    /// iterations falls below T (absolute, as scikit-learn's GaussianMixture;
    /// see --tol-mode).
    #[arg(long, default_value_t = em_defaults::TOL, value_name = "T")]
    pub tol: f64,
    /// What --tol bounds: the absolute change |l_t - l_(t-1)|, or the relative
    /// change |l_t - l_(t-1)| / max(|l_(t-1)|, 1) (strict: e.g. --tol 1e-6).
    #[arg(long, value_enum, default_value_t = TolModeArg::Absolute)]
    pub tol_mode: TolModeArg,
    /// Number of EM restarts; the best log-likelihood wins.
    #[arg(long, default_value_t = em_defaults::N_INIT, value_name = "N")]
    pub n_init: usize,
}

/// Out-of-core reading, checkpoints and resumption (`gmm fit`, `mfa fit`).
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Rows read and processed at a time: memory is O(chunk rows × (K + D)), not O(N).
    #[arg(long, default_value_t = 65_536, value_name = "N")]
    pub chunk_rows: usize,
    /// Rows sampled (uniformly, seeded) to initialise EM; all of them if the data have fewer.
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    pub init_sample: usize,
    /// Save the model and EM state every N iterations to <output>.ckpt (removed on success).
    #[arg(long, value_name = "N")]
    pub checkpoint: Option<usize>,
    /// Continue from <output>.ckpt (same inputs and settings); the result equals an
    /// uninterrupted run. Without a checkpoint the fit starts from the beginning.
    #[arg(long)]
    pub resume: bool,
}

#[derive(Debug, Args)]
pub struct KmeansFitArgs {
    /// Training descriptors, an (N, D) float32/float64 .npy file.
    #[arg(long, short, value_name = "X.npy")]
    pub input: PathBuf,
    /// Number of clusters K.
    #[arg(long, short = 'k', value_name = "K")]
    pub clusters: usize,
    /// Seed of the k-means++ seeding.
    #[arg(long, default_value_t = kmeans_defaults::SEED, value_name = "S")]
    pub seed: u64,
    /// Maximum Lloyd iterations per restart.
    #[arg(long, default_value_t = kmeans_defaults::MAX_ITER, value_name = "N")]
    pub max_iter: usize,
    /// Number of restarts; the lowest inertia wins.
    #[arg(long, default_value_t = kmeans_defaults::N_INIT, value_name = "N")]
    pub n_init: usize,
    /// Where to write the centroids, a (K, D) .npy file in the dtype of the input.
    #[arg(long, short, value_name = "centroids.npy")]
    pub output: PathBuf,
}

/// Noise variance of the MFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PsiArg {
    /// One diagonal Ψ for all components (the paper's choice).
    Shared,
    /// One diagonal Ψ_k per component.
    PerComponent,
}

#[derive(Debug, Args)]
pub struct MfaFitArgs {
    /// Training descriptors: one or more (N_i, D) .npy files of one dtype (float32 or
    /// float64), read in chunks as one (ΣN_i, D) matrix (`-i a.npy b.npy` or `-i a.npy -i b.npy`).
    #[arg(long, short, value_name = "X.npy", num_args = 1.., required = true)]
    pub input: Vec<PathBuf>,
    /// Number of components K.
    #[arg(long, short = 'k', value_name = "K")]
    pub components: usize,
    /// Number of factors R per component.
    #[arg(long, short = 'r', value_name = "R")]
    pub factors: usize,
    #[command(flatten)]
    pub em: EmArgs,
    /// Shared or per-component noise variance Ψ.
    #[arg(long, value_enum, default_value_t = PsiArg::Shared)]
    pub psi: PsiArg,
    /// Where to write the model (safetensors, kind = mfa).
    #[arg(long, short, value_name = "mfa.safetensors")]
    pub output: PathBuf,
    #[command(flatten)]
    pub stream: StreamArgs,
}

#[derive(Debug, Args)]
pub struct MfaWhitenArgs {
    /// The MFA model (safetensors, kind = mfa); a whitening it already holds is replaced.
    #[arg(long, short, value_name = "mfa.safetensors")]
    pub model: PathBuf,
    /// Training bags: an .npz archive of (N_i, D) arrays, at least 2 bags.
    #[arg(long, short, value_name = "BAGS.npz")]
    pub input: PathBuf,
    /// MFA Fisher score parts, comma-separated, among mean, loading [default: loading].
    #[arg(long, value_name = "LIST")]
    pub parts: Option<String>,
    /// Where to write the model with its whitening block (may be --model itself).
    #[arg(long, short, value_name = "mfa-w.safetensors")]
    pub output: PathBuf,
}

/// Which encoding to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EncoderArg {
    /// Fisher vector of a GMM (VLFeat layout).
    Fv,
    /// VLAD on a GMM's means or on k-means centroids (.npy).
    Vlad,
}

#[derive(Debug, Args)]
#[command(
    allow_negative_numbers = true,
    after_help = "\
Examples:
  fisherkit encode --model gmm.safetensors --input bag.npy --output fv.npy       # (1, dim)
  fisherkit encode --model gmm.safetensors --input bags.npz --output fv.npy      # (n_bags, dim)
  fisherkit encode --model gmm.safetensors --input bags.npz --parts prior,mean,var \\
      --power 1 --no-l2 --output raw_fv.npy
  fisherkit encode --encoder vlad --model centroids.npy --input bags.npz --output vlad.npy
  fisherkit encode --model mfa.safetensors --input bags.npz --parts mean,loading --output fs.npy

The Fisher vector blocks come in the order prior, mean, var, each
component-major (VLFeat's layout); --power 1 --no-l2 gives the raw gradient.
With an MFA model the parts are mean and loading (default loading), in that
order; the loading block is component-major, then dimension, then factor.
An MFA model that carries a whitening (`fisherkit mfa whiten`) whitens the
score for the parts it was estimated for (also the default --parts then);
other --parts are an error unless --no-whitening is given.
Rows of the output follow the order of the arrays in the .npz archive.
The computation runs in the dtype of the bags; the model is converted to it."
)]
pub struct EncodeArgs {
    /// Model file: a GMM or MFA (.safetensors); for VLAD also k-means centroids (.npy).
    #[arg(long, short, value_name = "M.safetensors")]
    pub model: PathBuf,
    /// One bag (N, D) as .npy, or many as an .npz archive.
    #[arg(long, short, value_name = "BAG.npy|BAGS.npz")]
    pub input: PathBuf,
    /// Where to write the encodings, an (n_bags, dim) .npy file.
    #[arg(long, short, value_name = "OUT.npy")]
    pub output: PathBuf,
    /// Encoder.
    #[arg(long, value_enum, default_value_t = EncoderArg::Fv)]
    pub encoder: EncoderArg,
    /// Blocks, comma-separated: GMM among prior, mean, var [default: mean,var]; MFA among mean, loading [default: loading].
    #[arg(long, value_name = "LIST")]
    pub parts: Option<String>,
    /// Signed power exponent applied before L2 (1 disables it) [default: 0.5 for fv, 1 for vlad].
    #[arg(long, value_name = "P")]
    pub power: Option<f64>,
    /// Skip the final L2 normalisation.
    #[arg(long)]
    pub no_l2: bool,
    /// Hard assignment of each descriptor to its most likely component (VLFeat's FAST).
    #[arg(long)]
    pub fast: bool,
    /// Skip components with prior < 1e-6 and posteriors < 1e-6 exactly as VLFeat does.
    #[arg(long)]
    pub vlfeat_skips: bool,
    /// Ignore the whitening stored in an MFA model (see `fisherkit mfa whiten`).
    #[arg(long)]
    pub no_whitening: bool,
}

mod run;
use run::RUN_HELP;
pub use run::{
    with_config_defaults, ClassifierArg, DataArgs, DescriptorArgs, EncodingArgs, ModelArgs,
    OnnxArgs, OutputArgs, PatchModeArg, PcaArgs, RunArgs, StoreArg, SvmArgs, WhiteningArg,
};

const PREDICT_HELP: &str = "\
Examples:
  fisherkit run --train scenes/train --test scenes/test --save-model scene.safetensors
  fisherkit predict --model scene.safetensors photos/ new.jpg > labels.csv
  fisherkit predict --model scene.safetensors photos/ --top-k 3 --format jsonl --output labels.jsonl
  fisherkit predict --model bags.safetensors --descriptors new.npz

Folders are walked recursively (.jpg, .jpeg, .png), in sorted order. One row per
image, in input order: path,label,score[,label_2,score_2,...],error. The score is
the winning class's SVM score w_k.x + b_k. An unreadable, corrupt or truncated image
gets an empty label and the reason in `error`; the exit status is then 0 unless
--strict. --save-encodings writes the (images, dim) f32 features the SVM saw, one row
per input row (zeros for a row with an error).";

const EVALUATE_HELP: &str = "\
Examples:
  fisherkit evaluate --model scene.safetensors --test scenes/test --report eval.json --plot confusion.svg
  fisherkit evaluate --model bags.safetensors --test-descriptors test.npz

The test folder is DIR/<class>/*.{jpg,jpeg,png} with classes among the classifier's.
On the test split of the run that saved the classifier, the accuracy equals the
report's `model.test_accuracy`.";

/// Output format of `fisherkit predict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PredictFormat {
    /// Comma-separated values with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

/// Arguments of `fisherkit predict`.
#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    /// The classifier file (`fisherkit run --save-model`).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Image files or folders (walked recursively, sorted).
    #[arg(
        value_name = "PATH",
        required_unless_present = "descriptors",
        conflicts_with = "descriptors"
    )]
    pub paths: Vec<PathBuf>,
    /// A descriptor file (.npz) to label instead of images (classifiers trained on
    /// descriptor files).
    #[arg(long, value_name = "FILE")]
    pub descriptors: Option<PathBuf>,
    /// Write the predictions here instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also give the 2nd … Nth best classes and their scores.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub top_k: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PredictFormat::Csv)]
    pub format: PredictFormat,
    /// Exit with status 1 if any input could not be labelled.
    #[arg(long)]
    pub strict: bool,
    /// Also write the features (inputs × dim, f32 .npy) here.
    #[arg(long, value_name = "FILE.npy")]
    pub save_encodings: Option<PathBuf>,
    /// The ONNX model of a classifier trained with `--cnn FILE.onnx`, with the same
    /// `--onnx-*` options (built-in networks are loaded by the name the file records).
    #[arg(long, value_name = "FILE.onnx")]
    pub cnn: Option<PathBuf>,
    #[command(flatten)]
    pub onnx: OnnxArgs,
}

/// Arguments of `fisherkit evaluate`.
#[derive(Debug, Clone, Args)]
pub struct EvaluateArgs {
    /// The classifier file (`fisherkit run --save-model`).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Labelled test folder: DIR/<class>/*.png|jpg.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "test_descriptors",
        conflicts_with = "test_descriptors"
    )]
    pub test: Option<PathBuf>,
    /// Labelled descriptor file (.npz) instead of a folder.
    #[arg(long, value_name = "FILE")]
    pub test_descriptors: Option<PathBuf>,
    /// Write the JSON report (accuracy, per-class accuracy, confusion matrix, every prediction) here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the confusion matrix as an SVG here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// The ONNX model of a classifier trained with `--cnn FILE.onnx` (see `predict`).
    #[arg(long, value_name = "FILE.onnx")]
    pub cnn: Option<PathBuf>,
    #[command(flatten)]
    pub onnx: OnnxArgs,
}

/// Arguments of `fisherkit demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The demo image folder (default: the bundled data/fashion-mnist-demo).
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Folder for report.json, figure1.svg and the descriptor cache.
    #[arg(long, value_name = "DIR", default_value = "fisherkit-demo-out")]
    pub out: PathBuf,
    /// The CNN of the patch descriptors: squeezenet (the demo's default: its 28-px images are
    /// one patch each, where SqueezeNet's 13x13 cells measure better), efficientnet-lite0 or
    /// FILE.onnx (see `fisherkit run --help`).
    #[arg(long, value_name = "CNN", default_value = defaults::DEMO_CNN)]
    pub cnn: String,
    #[command(flatten)]
    pub onnx: OnnxArgs,
}
