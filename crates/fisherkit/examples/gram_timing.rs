//! Times one block of the pipeline's kernel stage, $G \mathrel{+}= X_b X_b^\top$ for a random
//! (N, B) `f32` block, by the triangular product (`gram_add_lower`) and by the former GEMM per
//! chunk of 256 rows (`gram_add_lower_chunks`), and prints GFLOP/s over the N² B flops of the
//! lower triangle. Run:
//! `cargo run --release -p fisherkit --example gram_timing -- [N] [B] [reps]`
//! (default 6700 10016 3: the full MIT-Indoor-shaped set's 6 700 images and the pipeline's
//! block of 64 M floats / N columns).
use fisherkit::linalg::{gram_add_lower, gram_add_lower_chunks};
use ndarray::Array2;
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let n = args.first().copied().unwrap_or(6700);
    let b = args.get(1).copied().unwrap_or(10016);
    let reps = args.get(2).copied().unwrap_or(3);
    let x = Array2::from_shape_fn((n, b), |(i, j)| {
        ((i * 7 + j * 13) % 101) as f32 / 101.0 - 0.5
    });
    let flops = (n * n) as f64 * b as f64;
    type GramFn = fn(&mut Array2<f64>, ndarray::ArrayView2<'_, f32>);
    let ways: [(&str, GramFn); 2] = [
        ("triangular", gram_add_lower::<f32>),
        ("chunks of 256 rows", gram_add_lower_chunks::<f32>),
    ];
    let mut first: Option<Array2<f64>> = None;
    for (name, f) in ways {
        let mut times = Vec::new();
        let mut acc = Array2::<f64>::zeros((n, n));
        for _ in 0..reps {
            acc.fill(0.0);
            let t = Instant::now();
            f(&mut acc, x.view());
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let t = times[reps / 2];
        // The lower triangles must agree (f32 products, so up to rounding).
        let diff = first.as_ref().map_or(0.0, |g| {
            let mut d = 0.0f64;
            for i in 0..n {
                for j in 0..=i {
                    d = d.max((acc[[i, j]] - g[[i, j]]).abs() / (1.0 + g[[i, j]].abs()));
                }
            }
            d
        });
        println!(
            "gram {n}x{b} {name}: {:.3} s (median of {reps}), {:.1} GFLOP/s, max rel. diff to the first {:.1e}",
            t,
            flops / t / 1e9,
            diff
        );
        first.get_or_insert(acc);
    }
}
