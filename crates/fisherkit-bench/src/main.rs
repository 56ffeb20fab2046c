//! `fisherkit-bench`: times fisherkit on the data `scripts/bench.py` writes and
//! prints one JSON object on stdout. Not published; the script is the user
//! interface (`python3 scripts/bench.py`).
//!
//! The number of threads is rayon's global pool size, set by the caller
//! through `RAYON_NUM_THREADS` (reported back as `threads`). Every timing is
//! repeated `--reps` times after one untimed warm-up run; the JSON carries all
//! repetitions and their median.

use clap::{Parser, Subcommand};
use fisherkit::gmm::DiagGmm;
use fisherkit::linalg::{gemm, par_all, Par};
use fisherkit::mfa::Mfa;
use ndarray::{Array1, Array2, Array3, ArrayView2, Axis};
use ndarray_npy::{read_npy, write_npy};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

mod gmm_work;
mod mfa_work;

#[derive(Parser)]
#[command(about = "Times fisherkit's EM iterations and encoders (JSON on stdout)")]
struct Cli {
    #[command(subcommand)]
    work: Work,
    /// Timed repetitions (after one warm-up run).
    #[arg(long, default_value_t = 3, global = true)]
    reps: usize,
}

/// Model files of a diagonal GMM: weights (K), means (K, D), variances (K, D), f32 .npy.
#[derive(clap::Args)]
struct GmmFiles {
    #[arg(long)]
    weights: PathBuf,
    #[arg(long)]
    means: PathBuf,
    #[arg(long)]
    variances: PathBuf,
}

/// Model files of an MFA: weights (K), means (K, D), loadings (K, D, R), psi (1, D), f32 .npy.
#[derive(clap::Args)]
struct MfaFiles {
    #[arg(long)]
    weights: PathBuf,
    #[arg(long)]
    means: PathBuf,
    #[arg(long)]
    loadings: PathBuf,
    #[arg(long)]
    psi: PathBuf,
}

#[derive(Subcommand)]
enum Work {
    /// f32 GEMM rate of `fisherkit::linalg::gemm` (faer) on a square and an E-step-like shape.
    Gemm {
        /// Side of the square product.
        #[arg(long, default_value_t = 2048)]
        n: usize,
        /// D and K of the E-step-like product (n_rows × 2D)·(2D × K).
        #[arg(long, default_value_t = 500)]
        d: usize,
        #[arg(long, default_value_t = 256)]
        k: usize,
    },
    /// The MFA kernel's large products alone (its shapes and layouts, random data): an EM
    /// iteration's on N rows and a Fisher score's on one bag, the floor under `mfa-em` and
    /// `mfa-fs` (docs/math.md §5.2).
    MfaProducts {
        #[arg(long, default_value_t = 100_000)]
        n: usize,
        #[arg(long, default_value_t = 1000)]
        bag: usize,
        #[arg(long, default_value_t = 500)]
        d: usize,
        #[arg(long, default_value_t = 50)]
        k: usize,
        #[arg(long, default_value_t = 10)]
        r: usize,
    },
    /// One GMM EM iteration (E-step statistics + M-step) on X (N, D) from the given model.
    GmmEm {
        #[arg(long)]
        x: PathBuf,
        #[command(flatten)]
        model: GmmFiles,
        /// Where to write the means after the iteration (K, D) f32 .npy.
        #[arg(long)]
        out_means: Option<PathBuf>,
    },
    /// Improved Fisher vectors (mean + var, signed sqrt + L2) of bags (B, M, D).
    Fv {
        #[arg(long)]
        bags: PathBuf,
        #[command(flatten)]
        model: GmmFiles,
        /// Where to write the encoding of bag 0 (1, 2KD) f32 .npy.
        #[arg(long)]
        out_fv0: Option<PathBuf>,
        /// Accumulation path of Σq·z, Σq·z²: auto (the library's choice), sparse or dense.
        #[arg(long, default_value = "auto")]
        accumulation: String,
        /// Turn the screened posterior kernel (docs/math.md §2.7) off: every
        /// chunk through the GEMM kernel, as before the screening existed.
        #[arg(long)]
        no_screening: bool,
    },
    /// One MFA EM iteration (E-step statistics + M-step) on X (N, D) from the given model.
    MfaEm {
        #[arg(long)]
        x: PathBuf,
        #[command(flatten)]
        model: MfaFiles,
        /// Where to write the means after the iteration (K, D) f32 .npy.
        #[arg(long)]
        out_means: Option<PathBuf>,
        /// Where to write psi after the iteration (1, D) f32 .npy.
        #[arg(long)]
        out_psi: Option<PathBuf>,
    },
    /// MFA Fisher scores (mean + loading, signed sqrt + L2) of bags (B, M, D).
    MfaFs {
        #[arg(long)]
        bags: PathBuf,
        #[command(flatten)]
        model: MfaFiles,
        /// Where to write the score of bag 0 (1, K·D·(R+1)) f32 .npy.
        #[arg(long)]
        out_fs0: Option<PathBuf>,
    },
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// Runs `f` once untimed, then `reps` times; returns the seconds of each timed run.
fn time_reps(reps: usize, mut f: impl FnMut()) -> Vec<f64> {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect()
}

fn load<A: ndarray_npy::ReadableElement, D: ndarray::Dimension>(
    path: &Path,
) -> Result<ndarray::Array<A, D>, String> {
    read_npy(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn load_gmm(files: &GmmFiles) -> Result<DiagGmm<f32>, String> {
    let w: Array1<f32> = load(&files.weights)?;
    let mu: Array2<f32> = load(&files.means)?;
    let var: Array2<f32> = load(&files.variances)?;
    DiagGmm::new(w, mu, var).map_err(|e| format!("model: {e}"))
}

fn save(path: &Option<PathBuf>, a: &Array2<f32>) -> Result<(), String> {
    if let Some(p) = path {
        write_npy(p, a).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

fn load_mfa(files: &MfaFiles) -> Result<Mfa<f32>, String> {
    let w: Array1<f32> = load(&files.weights)?;
    let mu: Array2<f32> = load(&files.means)?;
    let lam: Array3<f32> = load(&files.loadings)?;
    let psi: Array2<f32> = load(&files.psi)?;
    Mfa::new(w, mu, lam, psi).map_err(|e| format!("model: {e}"))
}

/// GFLOP/s of `flops` floating-point operations done in `secs`.
/// Worst ‖a − b‖ / ‖b‖ over `bags` between `e32`'s encoding of a bag and
/// `e64`'s of the same bag widened to `f64` (the same model in both types).
fn worst_f32_vs_f64(
    e32: &impl fisherkit::Encoder<f32>,
    e64: &impl fisherkit::Encoder<f64>,
    bags: &[ndarray::ArrayView2<'_, f32>],
) -> Result<f64, String> {
    let mut worst = 0.0f64;
    for b in bags {
        let a = e32.encode(*b).map_err(|e| e.to_string())?;
        let r = e64
            .encode(b.mapv(f64::from).view())
            .map_err(|e| e.to_string())?;
        let (mut num, mut den) = (0.0f64, 0.0f64);
        for (x, r) in a.iter().zip(r.iter()) {
            num += (f64::from(*x) - r).powi(2);
            den += r * r;
        }
        worst = worst.max((num / den.max(f64::MIN_POSITIVE)).sqrt());
    }
    Ok(worst)
}

fn gflops(flops: f64, secs: f64) -> f64 {
    flops / secs / 1e9
}

fn gemm_rate(n: usize, d: usize, k: usize, reps: usize) -> Value {
    let exp_before = exp_ns_per_call();
    let par = if rayon::current_num_threads() <= 1 {
        Par::Seq
    } else {
        par_all()
    };
    let fill = |r: usize, c: usize, s: f32| {
        Array2::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 13) % 17) as f32 * s - 0.5)
    };
    let a = fill(n, n, 0.03);
    let b = fill(n, n, 0.05);
    let mut c = Array2::<f32>::zeros((n, n));
    let sq = time_reps(reps, || {
        gemm(c.view_mut(), false, a.view(), b.view(), 1.0, par);
    });
    // E-step-like: a tall (rows × 2D) block against the (2D × K) model matrix.
    let rows = 16384;
    let x = fill(rows, 2 * d, 0.03);
    let m = fill(2 * d, k, 0.05);
    let mut y = Array2::<f32>::zeros((rows, k));
    let tall = time_reps(reps, || {
        gemm(y.view_mut(), false, x.view(), m.view(), 1.0, par);
    });
    // Scalar (SSE-encoded) code right after a GEMM: on x86-64 a wide-vector
    // kernel that leaves the upper register state dirty (no `vzeroupper`) makes
    // every later SSE instruction pay a transition penalty. Probed on this
    // thread with `Par::Seq`, as the E-step's chunk loop runs inside rayon tasks.
    let mut small = Array2::<f32>::zeros((256, k));
    gemm(
        small.view_mut(),
        false,
        x.slice(ndarray::s![..256, ..]),
        m.view(),
        1.0,
        Par::Seq,
    );
    let exp_after = exp_ns_per_call();
    let sq_rate = gflops(2.0 * (n * n * n) as f64, median(&sq));
    let tall_rate = gflops(2.0 * (rows * 2 * d * k) as f64, median(&tall));
    json!({
        "work": "gemm",
        "square_n": n,
        "square_s_all": sq,
        "square_gflops": sq_rate,
        "tall_shape": [rows, 2 * d, k],
        "tall_s_all": tall,
        "tall_gflops": tall_rate,
        "gflops": sq_rate.max(tall_rate),
        "scalar_exp_ns_before_gemm": exp_before,
        "scalar_exp_ns_after_gemm": exp_after,
    })
}

/// Nanoseconds per `f32::exp` plus an `f64` accumulation, over 2^21 values in
/// [-30, 0] (the range of centred log-posteriors), on the calling thread.
fn exp_ns_per_call() -> f64 {
    let n = 1usize << 21;
    let mut v: Vec<f32> = (0..n)
        .map(|i| -30.0 * ((i.wrapping_mul(2_654_435_761) % 1000) as f32) / 1000.0)
        .collect();
    let t = Instant::now();
    let mut sum = 0.0f64;
    for x in v.iter_mut() {
        let e = x.exp();
        sum += f64::from(e);
        *x = e;
    }
    std::hint::black_box(sum);
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// Splits bags (B, M, D) into B views (M, D).
fn bag_views(bags: &Array3<f32>) -> Vec<ArrayView2<'_, f32>> {
    bags.axis_iter(Axis(0)).collect()
}

fn run(cli: Cli) -> Result<Value, String> {
    let reps = cli.reps.max(1);
    let mut out = match cli.work {
        Work::Gemm { n, d, k } => gemm_rate(n, d, k, reps),
        Work::MfaProducts { n, bag, d, k, r } => mfa_work::products_only(n, bag, d, k, r, reps),
        Work::GmmEm {
            x,
            model,
            out_means,
        } => {
            let x: Array2<f32> = load(&x)?;
            let gmm = load_gmm(&model)?;
            let (v, means) = gmm_work::em_iteration(&gmm, x.view(), reps)?;
            save(&out_means, &means)?;
            v
        }
        Work::Fv {
            bags,
            model,
            out_fv0,
            accumulation,
            no_screening,
        } => {
            let path = gmm_work::parse_accumulation(&accumulation)?;
            let bags: Array3<f32> = load(&bags)?;
            let gmm = load_gmm(&model)?;
            let views = bag_views(&bags);
            let (v, fv0) = gmm_work::fisher_vectors(&gmm, &views, reps, path, !no_screening)?;
            save(&out_fv0, &fv0)?;
            v
        }
        Work::MfaEm {
            x,
            model,
            out_means,
            out_psi,
        } => {
            let x: Array2<f32> = load(&x)?;
            let mfa = load_mfa(&model)?;
            let (v, means, psi) = mfa_work::em_iteration(&mfa, x.view(), reps)?;
            save(&out_means, &means)?;
            save(&out_psi, &psi)?;
            v
        }
        Work::MfaFs {
            bags,
            model,
            out_fs0,
        } => {
            let bags: Array3<f32> = load(&bags)?;
            let mfa = load_mfa(&model)?;
            let views = bag_views(&bags);
            let (v, fs0) = mfa_work::fisher_scores(&mfa, &views, reps)?;
            save(&out_fs0, &fs0)?;
            v
        }
    };
    out["threads"] = json!(rayon::current_num_threads());
    out["reps"] = json!(reps);
    Ok(out)
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fisherkit-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
