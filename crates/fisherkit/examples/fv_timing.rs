//! Timing of the Fisher vector encoder on synthetic data.
//!
//! A random diagonal GMM is drawn (seeded), bags of N = 1000 descriptors are
//! sampled from it, and every bag is encoded (f32) with `encode_batch`, which
//! is parallel over bags. Run with
//! `RAYON_NUM_THREADS=1 cargo run --release -p fisherkit --example fv_timing`.
//! Optional arguments: `D/K` pairs (default `128/256 500/50 500/256`) and
//! `--all-paths` to also time the forced sparse and dense accumulations.
//! Besides wall time, the CPU time of the process (all threads, from
//! `/proc/self/task/*/schedstat`, Linux) is shown: on a shared machine it is
//! the steadier figure.

use fisherkit::encode::{Accumulation, FisherVector, FisherVectorParams};
use fisherkit::gmm::DiagGmm;
use fisherkit::linalg::Par;
use fisherkit::Encoder;
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use std::time::Instant;

const N: usize = 1000;
const BAGS: usize = 16;
const REPEATS: usize = 5;

fn random_gmm(rng: &mut ChaCha8Rng, k: usize, d: usize) -> DiagGmm<f32> {
    let w: Vec<f32> = (0..k).map(|_| rng.random_range(0.5f32..1.5)).collect();
    let s: f32 = w.iter().sum();
    let means = Array2::from_shape_fn((k, d), |_| {
        let v: f32 = StandardNormal.sample(rng);
        v
    });
    let vars = Array2::from_shape_fn((k, d), |_| rng.random_range(0.25f32..1.0));
    DiagGmm::new(Array1::from_iter(w.iter().map(|v| v / s)), means, vars).expect("valid GMM")
}

fn sample_bag(rng: &mut ChaCha8Rng, g: &DiagGmm<f32>) -> Array2<f32> {
    let (k, d) = (g.n_components(), g.dim());
    let cdf: Vec<f32> = g
        .weights()
        .iter()
        .scan(0.0, |a, w| {
            *a += w;
            Some(*a)
        })
        .collect();
    let mut x = Array2::zeros((N, d));
    for mut row in x.rows_mut() {
        let u: f32 = rng.random();
        let c = cdf.iter().position(|&c| u <= c).unwrap_or(k - 1);
        for (j, v) in row.iter_mut().enumerate() {
            let z: f32 = StandardNormal.sample(rng);
            *v = g.means()[[c, j]] + g.variances()[[c, j]].sqrt() * z;
        }
    }
    x
}

/// CPU time of all threads of the process, in ms (None if unavailable).
fn cpu_ms() -> Option<f64> {
    let mut total = 0u64;
    for e in std::fs::read_dir("/proc/self/task").ok()? {
        let s = std::fs::read_to_string(e.ok()?.path().join("schedstat")).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total as f64 / 1e6)
}

/// Best (wall, CPU) time of `REPEATS` runs after a warm-up, in ms.
fn time_ms(f: impl Fn()) -> (f64, f64) {
    f();
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..REPEATS {
        let c = cpu_ms();
        let t = Instant::now();
        f();
        let wall = t.elapsed().as_secs_f64() * 1e3;
        let cpu = match (c, cpu_ms()) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        };
        best = (best.0.min(wall), best.1.min(cpu));
    }
    best
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let all_paths = args.iter().any(|a| a == "--all-paths");
    args.retain(|a| a != "--all-paths");
    let shapes: Vec<(usize, usize)> = if args.is_empty() {
        vec![(128, 256), (500, 50), (500, 256)]
    } else {
        args.iter()
            .map(|a| {
                let (d, k) = a.split_once('/').expect("D/K");
                (d.parse().expect("D"), k.parse().expect("K"))
            })
            .collect()
    };
    println!(
        "threads: {}, N = {N}, {BAGS} bags, f32, best of {REPEATS}; ms per bag",
        rayon::current_num_threads()
    );
    for (d, k) in shapes {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let g = random_gmm(&mut rng, k, d);
        let bags: Vec<Array2<f32>> = (0..BAGS).map(|_| sample_bag(&mut rng, &g)).collect();
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        // Posterior GEMM alone (the floor): log-joints of every bag.
        let (estep, estep_cpu) = time_ms(|| {
            use rayon::prelude::*;
            views.par_iter().for_each(|b| {
                let mut out = Array2::<f32>::zeros((N, k));
                let mut scratch = Array2::zeros((0, 0));
                g.log_joint_into(*b, out.view_mut(), &mut scratch, Par::Seq);
            })
        });
        let b = BAGS as f64;
        let mut line = format!(
            "D={d:4} K={k:4}  log-joint GEMM {:6.2} ms/bag (cpu {:6.2})",
            estep / b,
            estep_cpu / b
        );
        let paths: &[(&str, Accumulation)] = if all_paths {
            &[
                ("auto", Accumulation::Auto),
                ("sparse", Accumulation::Sparse),
                ("dense", Accumulation::Dense),
            ]
        } else {
            &[("auto", Accumulation::Auto)]
        };
        for &(name, path) in paths {
            let fv = FisherVector::new(&g, FisherVectorParams::default())
                .expect("valid params")
                .with_accumulation(path);
            let (ms, cpu) = time_ms(|| {
                fv.encode_batch(&views).expect("valid bags");
            });
            line += &format!("  FV {name} {:6.2} (cpu {:6.2})", ms / b, cpu / b);
        }
        let q = g.predict_proba(views[0]).expect("valid bag");
        let nnz = q.iter().filter(|&&v| v > 0.0).count();
        line += &format!(
            "  (non-zero posteriors {:.1}%)",
            100.0 * nnz as f64 / q.len() as f64
        );
        println!("{line}");
    }
}
