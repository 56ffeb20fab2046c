//! Rough timing of one diagonal-GMM EM iteration (E-step statistics + M-step).
//!
//!     RAYON_NUM_THREADS=1 cargo run --release -p fisherkit --example em_timing -- [N D K ITERS MODE]
//!
//! (add a 6th argument `em-only` to skip the timings of the model's own
//! posterior kernel, or `fit` to time a whole `GmmParams::fit` with its
//! k-means initialisation). Defaults: N=100000, D=500, K=256, 3 iterations, f32. MODE `blobs` (default):
//! rows drawn around 256 random centres (spread 3) with unit noise; `noise`:
//! i.i.d. standard normal rows. The model starts from K random rows with unit
//! variances and uniform weights (no k-means: only the EM iteration is timed).

use fisherkit::gmm::{DiagGmm, GmmParams, VarianceFloor};
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().unwrap());
    let (n, d, k, iters) = (get(0, 100_000), get(1, 500), get(2, 256), get(3, 3));
    let mode = args.get(4).map_or("blobs", |s| s.as_str()).to_string();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let centres = Array2::from_shape_fn((256, d), |_| {
        let z: f32 = StandardNormal.sample(&mut rng);
        3.0 * z
    });
    let t = Instant::now();
    let mut x = Array2::<f32>::zeros((n, d));
    for (i, mut row) in x.rows_mut().into_iter().enumerate() {
        let c = rng.random_range(0..256);
        for (j, v) in row.iter_mut().enumerate() {
            let z: f32 = StandardNormal.sample(&mut rng);
            *v = if mode == "noise" {
                z
            } else {
                centres[[c, j]] + z
            };
        }
        let _ = i;
    }
    eprintln!("data {n}x{d} ({mode}) generated in {:.2?}", t.elapsed());
    if args.get(5).is_some_and(|a| a == "fit") {
        // the whole fit: k-means++ and k-means initialisation, then EM
        let t0 = Instant::now();
        let c0 = cpu_seconds();
        let mut last = (0.0, 0.0);
        let fit = GmmParams::<f32>::new(k)
            .max_iter(iters)
            .tol(0.0)
            .fit_with_progress(x.view(), &mut |it| {
                let now = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
                if it.iter == 0 {
                    println!(
                        "initialisation + iteration 0: {:.3} s wall, {:.3} s CPU",
                        now.0, now.1
                    );
                } else {
                    println!(
                        "iteration {}: {:.3} s wall, {:.3} s CPU, mean loglik {:.4}",
                        it.iter,
                        now.0 - last.0,
                        now.1 - last.1,
                        it.log_likelihood
                    );
                }
                last = now;
            })
            .unwrap();
        println!("fit: {} iterations", fit.n_iter);
        return;
    }
    let means = Array2::from_shape_fn((k, d), |(a, b)| x[[(a * 7919) % n, b]]);
    let mut g = DiagGmm::new(
        Array1::from_elem(k, 1.0 / k as f32),
        means,
        Array2::from_elem((k, d), 1.0f32),
    )
    .unwrap();
    println!(
        "threads={} N={n} D={d} K={k} f32 mode={mode}",
        rayon::current_num_threads()
    );
    for it in 0..iters {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let st = g.sufficient_statistics(x.view()).unwrap();
        let t1 = t0.elapsed();
        g = g
            .update_from_statistics(&st, VarianceFloor::default())
            .unwrap();
        let (t2, c2) = (t0.elapsed(), cpu_seconds() - c0);
        println!(
            "iter {it}: E-step+stats {:.3} s, total {:.3} s wall, {:.3} s CPU, mean loglik {:.4}",
            t1.as_secs_f64(),
            t2.as_secs_f64(),
            c2,
            st.mean_log_likelihood()
        );
    }
    if args.get(5).is_some_and(|a| a == "em-only") {
        return;
    }
    // breakdown of the model's own posterior kernel, sequentially over chunks
    {
        use fisherkit::gmm::CHUNK_ROWS;
        use fisherkit::linalg::Par;
        use ndarray::Axis;
        let mut q = Array2::<f32>::zeros((CHUNK_ROWS, k));
        let mut scratch = Array2::<f32>::zeros((0, 0));
        let mut ll = vec![0.0f64; CHUNK_ROWS];
        let c0 = cpu_seconds();
        for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
            let mut qc = q.slice_mut(ndarray::s![..xc.nrows(), ..]);
            g.log_joint_into(xc, qc.view_mut(), &mut scratch, Par::Seq);
        }
        let c1 = cpu_seconds();
        for xc in x.axis_chunks_iter(Axis(0), CHUNK_ROWS) {
            let mut qc = q.slice_mut(ndarray::s![..xc.nrows(), ..]);
            g.log_joint_into(xc, qc.view_mut(), &mut scratch, Par::Seq);
            DiagGmm::log_joint_to_posteriors(qc, &mut ll[..xc.nrows()]);
        }
        let c2 = cpu_seconds();
        println!(
            "log_joint_into: {:.3} s CPU, + log_joint_to_posteriors: {:.3} s CPU",
            c1 - c0,
            c2 - c1
        );
    }
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let ll = g.score(x.view()).unwrap();
    println!(
        "posteriors only (score): {:.3} s wall, {:.3} s CPU ({ll:.4})",
        t0.elapsed().as_secs_f64(),
        cpu_seconds() - c0
    );
}

/// CPU time (user + system) of this process, from /proc (Linux; 0 elsewhere):
/// the machine is shared, so wall time alone overstates the cost.
fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let after = &s[s.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
    ticks / 100.0
}
