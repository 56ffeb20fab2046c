//! Timing of the Fisher vector encoder on synthetic data.
//!
//! A random diagonal GMM is drawn (seeded), bags of N = 1000 descriptors are
//! sampled from it, and every bag is encoded (f32) with `encode_batch`, which
//! is parallel over bags. Run with
//! `RAYON_NUM_THREADS=1 cargo run --release -p fisherkit --example fv_timing`.
//! Optional arguments: `D/K` pairs (default `128/256 500/50 500/256`).

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
const REPEATS: usize = 3;

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

fn time_ms(f: impl Fn()) -> f64 {
    f();
    (0..REPEATS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
        "threads: {}, N = {N}, {BAGS} bags, f32, best of {REPEATS}",
        rayon::current_num_threads()
    );
    for (d, k) in shapes {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let g = random_gmm(&mut rng, k, d);
        let bags: Vec<Array2<f32>> = (0..BAGS).map(|_| sample_bag(&mut rng, &g)).collect();
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        // Posterior GEMM alone (the floor): log-joints of every bag.
        let estep = time_ms(|| {
            use rayon::prelude::*;
            views.par_iter().for_each(|b| {
                let mut out = Array2::<f32>::zeros((N, k));
                let mut scratch = Array2::zeros((0, 0));
                g.log_joint_into(*b, out.view_mut(), &mut scratch, Par::Seq);
            })
        }) / BAGS as f64;
        let mut line = format!("D={d:4} K={k:4}  log-joint GEMM {estep:6.2} ms/bag");
        for (name, path) in [
            ("auto", Accumulation::Auto),
            ("sparse", Accumulation::Sparse),
            ("dense", Accumulation::Dense),
        ] {
            let fv = FisherVector::new(&g, FisherVectorParams::default())
                .expect("valid params")
                .with_accumulation(path);
            let ms = time_ms(|| {
                fv.encode_batch(&views).expect("valid bags");
            }) / BAGS as f64;
            line += &format!("  FV {name} {ms:6.2}");
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
