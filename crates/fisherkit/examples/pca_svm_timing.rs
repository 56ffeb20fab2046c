//! Timings of PCA and the linear SVM at the pipeline's sizes (a benchmark,
//! not a test): `cargo run --release -p fisherkit --example pca_svm_timing`.
//! Environment: `PERF_SVM_DIM` (default 250000), `PERF_SVM_SOLVER`
//! (`direct`, `gram` or auto), `PERF_PCA_ROWS` (default 169000).

use fisherkit::metrics::mean_per_class_accuracy;
use fisherkit::pca::PcaParams;
use fisherkit::svm::{DualSolver, LinearSvcParams};
use ndarray::{Array1, Array2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// L2-normalised rows: a class signal plus uniform noise, like Fisher vectors.
fn fv_like(n: usize, d: usize, k: usize, signal: f32, seed: u64) -> (Array2<f32>, Vec<usize>) {
    // same class centres for every seed: training and test sets share them
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let centres = Array2::from_shape_simple_fn((k, d), || rng.random::<f32>() - 0.5);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = Array2::from_shape_simple_fn((n, d), || rng.random::<f32>() - 0.5);
    let y: Vec<usize> = (0..n).map(|i| i % k).collect();
    x.axis_iter_mut(Axis(0)).zip(&y).for_each(|(mut r, &c)| {
        r.scaled_add(signal, &centres.row(c));
        let n = r.iter().map(|v| v * v).sum::<f32>().sqrt();
        r /= n;
    });
    (x, y)
}

fn main() {
    svm_at_fisher_vector_size();
    pca_at_descriptor_size();
}

fn svm_at_fisher_vector_size() {
    let d: usize = std::env::var("PERF_SVM_DIM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250_000);
    let solver = match std::env::var("PERF_SVM_SOLVER").as_deref() {
        Ok("direct") => DualSolver::Direct,
        Ok("gram") => DualSolver::Gram,
        _ => DualSolver::Auto,
    };
    let base = LinearSvcParams {
        solver,
        ..Default::default()
    };
    let (x, y) = fv_like(1000, d, 10, 0.02, 1);
    let (xt, yt) = fv_like(500, d, 10, 0.02, 2);
    let t = Instant::now();
    let m = base.fit(x.view(), &y).unwrap();
    let fit = t.elapsed().as_secs_f64();
    let pred = m.predict(xt.view()).unwrap();
    let acc = mean_per_class_accuracy(&yt, &pred, 10).unwrap();
    eprintln!(
        "SVM fit N=1000 D={d} K=10 f32 C=1 {solver:?}: {fit:.2} s, iterations {:?}, test mean per-class acc {acc:.3}",
        m.n_iter()
    );
    let t = Instant::now();
    let (best, table) = base
        .select_c(x.view(), &y, &[0.1, 1.0, 10.0], 3, 0)
        .unwrap();
    eprintln!(
        "select_c 3 C x 3 folds: {:.2} s, best C {best}, {table:?}",
        t.elapsed().as_secs_f64()
    );
}

fn pca_at_descriptor_size() {
    let n: usize = std::env::var("PERF_PCA_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(169_000);
    let d = 1000;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let basis = Array2::from_shape_simple_fn((50, d), || rng.random::<f32>() - 0.5);
    let z = Array2::from_shape_simple_fn((n, 50), || rng.random::<f32>() - 0.5);
    let mut x = z.dot(&basis);
    x.mapv_inplace(|v| v + 0.01 * (rng.random::<f32>() - 0.5));
    let t = Instant::now();
    let pca = PcaParams::new(500).fit(x.view()).unwrap();
    let fit = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = pca.transform(x.view()).unwrap();
    let tr = t.elapsed().as_secs_f64();
    let ratio: Array1<f64> = pca.explained_variance_ratio();
    eprintln!(
        "PCA fit N={n} D={d} -> 500 f32: {fit:.2} s, transform {tr:.2} s ({:?}), variance kept by 50: {:.6}",
        out.dim(),
        ratio.slice(ndarray::s![..50]).sum()
    );
}
