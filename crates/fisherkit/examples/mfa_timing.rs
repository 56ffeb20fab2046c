//! Timing of one MFA EM iteration and of MFA Fisher-score encoding, f32.
//!
//! N = 100 000 descriptors, D = 500, K = 50, R = 10; bags of 1 000
//! descriptors. Prints milliseconds and the effective GFLOP/s counting
//! 4·N·D·K·R flops (the two (N×D)·(D×KR) GEMMs) per E-step or per bag.
//!
//! `cargo run --release -p fisherkit --example mfa_timing [-- numpy] [--pipeline]`
//! (`--pipeline`: the scene pipeline's sizes, N = 50 000, D = 100, K = 50,
//! R = 10, bags of 169 rows; `profile-em` / `profile-encode` only run the
//! E-step / the encoder on one thread, for a profiler)
//! (`numpy` also times a straightforward numpy float64 implementation of the
//! same E-step and encoder, for comparison).

use fisherkit::encode::{MfaFisherScore, MfaFisherScoreParams, MfaPart};
use fisherkit::linalg::{gemm, Par};
use fisherkit::mfa::Mfa;
use fisherkit::Encoder;
use ndarray::{Array1, Array2, Array3, ArrayView2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use std::time::Instant;

/// Problem sizes: the default (N = 100 000, D = 500, bags of 1 000) or the
/// scene pipeline's (`--pipeline`: N = 50 000, D = 100, bags of 169 rows).
#[derive(Clone, Copy)]
struct Sizes {
    n: usize,
    d: usize,
    k: usize,
    r: usize,
    bag: usize,
    n_bags: usize,
}

const DEFAULT: Sizes = Sizes {
    n: 100_000,
    d: 500,
    k: 50,
    r: 10,
    bag: 1000,
    n_bags: 16,
};

const PIPELINE: Sizes = Sizes {
    n: 50_000,
    d: 100,
    k: 50,
    r: 10,
    bag: 169,
    n_bags: 256,
};

const NUMPY: &str = r#"
import numpy as np, time
N, D, K, R, BAG = SIZES
rng = np.random.default_rng(0)
mu = rng.normal(size=(K, D)) * 2
lam = rng.normal(size=(K, D, R)) * 0.3
psi = np.ones(D)
w = np.full(K, 1.0 / K)
X = mu[rng.integers(0, K, N)] + rng.normal(size=(N, D))
def estep(X, stats):
    n = X.shape[0]
    lp = np.empty((n, K)); E = []
    Minv = []
    for k in range(K):
        L = lam[k] / psi[:, None]
        M = np.eye(R) + lam[k].T @ L
        Mi = np.linalg.inv(M); Minv.append(Mi)
        d = X - mu[k]
        f = d @ L
        e = f @ Mi
        quad = ((d * d) / psi).sum(1) - (e * f).sum(1)
        logdet = np.log(psi).sum() + np.linalg.slogdet(M)[1]
        lp[:, k] = np.log(w[k]) - 0.5 * (D * np.log(2 * np.pi) + logdet + quad)
        E.append(e)
    m = lp.max(1, keepdims=True); h = np.exp(lp - m); s = h.sum(1, keepdims=True); h /= s
    if stats:
        out = []
        for k in range(K):
            he = h[:, k:k+1] * E[k]
            out.append((h[:, k].sum(), he.sum(0), he.T @ E[k], X.T @ h[:, k], X.T @ he))
        return out
for name, n, reps in [("E-step stats", N, 1), ("encode one bag", BAG, 5)]:
    Xs = X[:n]
    estep(Xs, True)
    t = time.perf_counter()
    for _ in range(reps): estep(Xs, True)
    dt = (time.perf_counter() - t) / reps
    print(f"numpy f64 {name}: {dt*1e3:.1f} ms, {4*n*D*K*R/dt/1e9:.1f} GFLOP/s")
"#;

#[allow(non_snake_case)]
fn model(rng: &mut ChaCha8Rng, sz: Sizes) -> Mfa<f32> {
    let Sizes {
        d: D, k: K, r: R, ..
    } = sz;
    let nrm = Normal::new(0.0f32, 1.0).unwrap();
    let w = Array1::from_elem(K, 1.0 / K as f32);
    let means = Array2::from_shape_fn((K, D), |_| 2.0 * nrm.sample(rng));
    let lam = Array3::from_shape_fn((K, D, R), |_| 0.3 * nrm.sample(rng));
    let psi = Array2::from_elem((1, D), 1.0f32);
    Mfa::new(w, means, lam, psi).unwrap()
}

/// CPU time (user + system) of the whole process in seconds, from
/// /proc/self/stat (Linux, 100 ticks/s); `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Mean wall-clock and CPU milliseconds per call (after one warm-up call).
/// On a loaded machine the CPU time is the fairer figure of the work done.
fn time_ms<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, f64) {
    std::hint::black_box(f());
    let c0 = cpu_seconds();
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(f());
    }
    let wall = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    let cpu = match (c0, cpu_seconds()) {
        (Some(a), Some(b)) => (b - a) * 1e3 / reps as f64,
        _ => f64::NAN,
    };
    (wall, cpu)
}

/// The problem every timing runs on: the model, its N descriptors drawn
/// around its means, and the two encoders (every part, mean only).
struct Problem {
    m: Mfa<f32>,
    x: Array2<f32>,
    enc: MfaFisherScore<f32>,
    enc_mean: MfaFisherScore<f32>,
}

#[allow(non_snake_case)]
impl Problem {
    /// The seeded model and descriptors of `sz` (seed 0).
    fn new(sz: Sizes) -> Self {
        let Sizes {
            n: N, d: D, k: K, ..
        } = sz;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let m = model(&mut rng, sz);
        let nrm = Normal::new(0.0f32, 1.0).unwrap();
        let mut x = Array2::<f32>::zeros((N, D));
        for (i, mut row) in x.axis_iter_mut(Axis(0)).enumerate() {
            let c = (i * 7919) % K;
            for (v, mu) in row.iter_mut().zip(m.means().row(c).iter()) {
                *v = mu + nrm.sample(&mut rng);
            }
        }
        let enc = MfaFisherScore::new(m.clone(), MfaFisherScoreParams::default()).unwrap();
        let enc_mean = MfaFisherScore::new(
            m.clone(),
            MfaFisherScoreParams {
                parts: vec![MfaPart::Mean],
                ..Default::default()
            },
        )
        .unwrap();
        Problem {
            m,
            x,
            enc,
            enc_mean,
        }
    }

    /// The first `n_bags` bags of `bag` consecutive descriptors.
    fn bags(&self, sz: Sizes) -> Vec<ArrayView2<'_, f32>> {
        let Sizes {
            bag: BAG,
            n_bags: N_BAGS,
            ..
        } = sz;
        (0..N_BAGS)
            .map(|b| self.x.slice(ndarray::s![b * BAG..(b + 1) * BAG, ..]))
            .collect()
    }
}

/// Runs `f` on a pool of `threads` threads.
fn on_threads(threads: usize, f: impl FnOnce() + Send) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(f);
}

/// `profile-encode`: only the two encoders, on one thread, for a profiler.
fn profile_encode(p: &Problem, bags: &[ArrayView2<'_, f32>]) {
    on_threads(1, || {
        for _ in 0..20 {
            std::hint::black_box(p.enc.encode_batch(bags).unwrap());
            std::hint::black_box(p.enc_mean.encode_batch(bags).unwrap());
        }
    });
}

/// `profile-em`: only the E-step, on one thread, for a profiler.
fn profile_em(p: &Problem) {
    on_threads(1, || {
        for _ in 0..3 {
            std::hint::black_box(p.m.sufficient_statistics(p.x.view()).unwrap());
        }
    });
}

/// Times the GEMM reference, one EM iteration and the encoders on a pool
/// of `threads` threads, and prints them.
#[allow(non_snake_case)]
fn time_on_threads(threads: usize, sz: Sizes, p: &Problem, bags: &[ArrayView2<'_, f32>]) {
    let Sizes {
        n: N,
        d: D,
        k: K,
        r: R,
        bag: BAG,
        n_bags: N_BAGS,
    } = sz;
    let Problem {
        m,
        x,
        enc,
        enc_mean,
    } = p;
    let flops_em = 4.0 * (N * D * K * R) as f64;
    let flops_bag = 4.0 * (BAG * D * K * R) as f64;
    on_threads(threads, || {
        // reference: the kernel's GEMM shape at the machine's rate
        let a = Array2::<f32>::from_elem((BAG, D), 0.5);
        let b = Array2::<f32>::from_elem((D, K * R + K), 0.25);
        let mut c = Array2::<f32>::zeros((BAG, K * R + K));
        let par = if threads == 1 {
            Par::Seq
        } else {
            Par::rayon(threads)
        };
        let (t_gemm, _) = time_ms(20, || {
            gemm(c.view_mut(), false, a.view(), b.view(), 1.0, par);
        });
        let gemm_rate = 2.0 * (BAG * D * (K * R + K)) as f64 / t_gemm / 1e6;
        let (t_e, c_e) = time_ms(2, || m.sufficient_statistics(x.view()).unwrap());
        let st = m.sufficient_statistics(x.view()).unwrap();
        let (t_m, _) = time_ms(2, || m.update_from_statistics(&st, 1e-3).unwrap());
        let (t_bags, c_bags) = time_ms(4, || enc.encode_batch(bags).unwrap());
        let (t_bags_mean, _) = time_ms(4, || enc_mean.encode_batch(bags).unwrap());
        let t_bag_mean = t_bags_mean / N_BAGS as f64;
        let t_bag = t_bags / N_BAGS as f64;
        let c_bag = c_bags / N_BAGS as f64;
        println!("threads={threads}: faer GEMM (1000x500)·(500x550) {gemm_rate:.1} GFLOP/s");
        println!(
            "threads={threads}: EM iteration {:.1} ms (E-step {t_e:.1} ms = {:.1} GFLOP/s effective, M-step {t_m:.1} ms); E-step CPU {c_e:.0} ms = {:.1} GFLOP/s per CPU-second",
            t_e + t_m,
            flops_em / t_e / 1e6,
            flops_em / c_e / 1e6
        );
        println!("threads={threads}: MFA-FS encoding, part mean only: {t_bag_mean:.3} ms per bag");
        println!(
            "threads={threads}: MFA-FS encoding (loading) {t_bag:.3} ms per bag ({:.1} GFLOP/s effective, {} bags per batch); CPU {c_bag:.2} ms per bag = {:.1} GFLOP/s per CPU-second",
            flops_bag / t_bag / 1e6,
            N_BAGS,
            flops_bag / c_bag / 1e6
        );
    });
}

/// `numpy`: the same E-step and encoder in numpy float64, one thread.
#[allow(non_snake_case)]
fn numpy_baseline(sz: Sizes) {
    let Sizes {
        n: N,
        d: D,
        k: K,
        r: R,
        bag: BAG,
        ..
    } = sz;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(NUMPY.replace("SIZES", &format!("{N}, {D}, {K}, {R}, {BAG}")))
        .env("OMP_NUM_THREADS", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .output();
    match out {
        Ok(o) => print!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => println!("numpy baseline unavailable: {e}"),
    }
}

#[allow(non_snake_case)]
fn main() {
    let sz = if std::env::args().any(|a| a == "--pipeline") {
        PIPELINE
    } else {
        DEFAULT
    };
    let p = Problem::new(sz);
    let bags = p.bags(sz);
    if std::env::args().any(|a| a == "profile-encode") {
        profile_encode(&p, &bags);
        return;
    }
    if std::env::args().any(|a| a == "profile-em") {
        profile_em(&p);
        return;
    }
    let Sizes {
        n: N,
        d: D,
        k: K,
        r: R,
        bag: BAG,
        ..
    } = sz;
    println!("MFA timing, f32: N={N} D={D} K={K} R={R}, bags of {BAG}");
    for threads in [1, 2] {
        time_on_threads(threads, sz, &p, &bags);
    }
    if std::env::args().any(|a| a == "numpy") {
        numpy_baseline(sz);
    }
}
