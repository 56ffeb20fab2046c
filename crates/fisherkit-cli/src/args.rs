//! Command-line grammar (clap derive).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const MAIN_EXAMPLES: &str = "\
Examples:
  fisherkit gmm fit --input descriptors.npy --components 64 --seed 0 --output gmm.safetensors
  fisherkit encode --model gmm.safetensors --input bags.npz --output fv.npy
  fisherkit kmeans fit --input descriptors.npy --clusters 64 --output centroids.npy
  fisherkit encode --encoder vlad --model centroids.npy --input bags.npz --output vlad.npy
  fisherkit mfa fit --input descriptors.npy --components 50 --factors 10 --output mfa.safetensors
  fisherkit encode --model mfa.safetensors --input bags.npz --parts mean,loading --output mfa_fs.npy

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
Example:
  fisherkit mfa fit --input X.npy --components 50 --factors 10 --output mfa.safetensors"
    )]
    Fit(MfaFitArgs),
}

/// EM initialisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitArg {
    /// k-means, then one M-step from the hard assignments.
    Kmeans,
    /// k-means++ seeds as means, the data variance for every component.
    Random,
}

#[derive(Debug, Args)]
pub struct GmmFitArgs {
    /// Training descriptors, an (N, D) float32/float64 .npy file.
    #[arg(long, short, value_name = "X.npy")]
    pub input: PathBuf,
    /// Number of mixture components K.
    #[arg(long, short = 'k', value_name = "K")]
    pub components: usize,
    /// Seed of every random choice (same seed, same model).
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Maximum EM iterations per restart.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_iter: usize,
    /// Stop when the relative change of the mean log-likelihood falls below T.
    #[arg(long, default_value_t = 1e-6, value_name = "T")]
    pub tol: f64,
    /// Number of EM restarts; the best log-likelihood wins.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub n_init: usize,
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
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Maximum Lloyd iterations per restart.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_iter: usize,
    /// Number of restarts; the lowest inertia wins.
    #[arg(long, default_value_t = 1, value_name = "N")]
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
    /// Training descriptors, an (N, D) float32/float64 .npy file.
    #[arg(long, short, value_name = "X.npy")]
    pub input: PathBuf,
    /// Number of components K.
    #[arg(long, short = 'k', value_name = "K")]
    pub components: usize,
    /// Number of factors R per component.
    #[arg(long, short = 'r', value_name = "R")]
    pub factors: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Maximum EM iterations per restart.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_iter: usize,
    /// Stop when the relative change of the mean log-likelihood falls below T.
    #[arg(long, default_value_t = 1e-6, value_name = "T")]
    pub tol: f64,
    /// Number of EM restarts.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub n_init: usize,
    /// Shared or per-component noise variance Ψ.
    #[arg(long, value_enum, default_value_t = PsiArg::Shared)]
    pub psi: PsiArg,
    /// Where to write the model (safetensors, kind = mfa).
    #[arg(long, short, value_name = "mfa.safetensors")]
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
}
