//! Shows that scalar (legacy-SSE) code runs ~30x slower after a faer GEMM until `vzeroupper`:
//! faer's AVX-512 kernels return with dirty upper vector state. x86-64 with AVX only.
//! `cargo run --release -p fisherkit-cnn --example vzeroupper_repro`
use fisherkit::linalg::{matmul_new, Par};
use ndarray::Array2;
use std::time::Instant;

fn scalar_work(v: &[f32]) -> f64 {
    v.iter().map(|&d| (d.abs() as f64).sqrt()).sum::<f64>()
        + v.iter().map(|&d| d.exp() as f64).sum::<f64>()
}

fn timed(what: &str, v: &[f32]) {
    let t = Instant::now();
    let r = scalar_work(v);
    println!("{what}: {:.1} ms ({r:.3})", t.elapsed().as_secs_f64() * 1e3);
}

fn main() {
    let v: Vec<f32> = (0..1_000_000).map(|i| (i % 100) as f32 * -0.5).collect();
    timed("scalar loop before any GEMM", &v);
    let x = Array2::<f32>::from_elem((256, 256), 0.5);
    let _ = matmul_new(x.view(), x.view(), Par::Seq);
    timed("same loop after an f32 faer GEMM", &v);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present (checked); vzeroupper only clears upper register halves,
        // which this (non-AVX) code never holds live.
        unsafe { std::arch::x86_64::_mm256_zeroupper() };
        timed("same loop after vzeroupper", &v);
    }
}
