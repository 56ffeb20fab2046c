//! Times an ONNX export of SqueezeNet run by tract (`OnnxCnn`) against the built-in
//! `SqueezeNet::forward` on square inputs, 1 rayon thread for the built-in network (tract runs
//! one thread) and 2. Run (feature `onnx`; the export from `scripts/export_onnx.py`):
//!
//! `cargo run --release -p fisherkit-cnn --features onnx --example onnx_timing -- \
//!     DIR/squeezenet.onnx [--sizes 227,454] [--reps 7]`
use fisherkit_cnn::onnx::{OnnxCnn, OnnxOptions};
use fisherkit_cnn::{Cnn, SqueezeNet};
use ndarray::Array3;
use std::time::Instant;

fn median_ms(mut f: impl FnMut(), reps: usize) -> f64 {
    f(); // warm-up
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: onnx_timing MODEL.onnx [--sizes 227,454] [--reps 7]")?;
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .map(|i| args[i + 1].clone())
    };
    let sizes: Vec<usize> = value("--sizes")
        .unwrap_or_else(|| "227,454".into())
        .split(',')
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let reps: usize = value("--reps").map_or(Ok(7), |r| r.parse())?;
    let t = Instant::now();
    let onnx = OnnxCnn::load(path, &OnnxOptions::squeezenet())?;
    println!(
        "load + optimise + probe: {:.0} ms; {}",
        t.elapsed().as_secs_f64() * 1e3,
        onnx.summary()
    );
    let builtin = SqueezeNet::builtin()?;
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let two = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
    for side in sizes {
        let x = Array3::from_shape_fn((3, side, side), |(c, i, j)| {
            ((c * 31 + i * 7 + j * 13) % 255) as f32 - 120.0
        });
        let tract = median_ms(|| drop(onnx.score_map(x.view()).unwrap()), reps);
        let b1 = one.install(|| median_ms(|| drop(builtin.forward(x.view()).unwrap()), reps));
        let b2 = two.install(|| median_ms(|| drop(builtin.forward(x.view()).unwrap()), reps));
        println!(
            "{side}x{side}: tract {tract:.1} ms, built-in {b1:.1} ms (1 thread), {b2:.1} ms (2 threads); tract / built-in (1 thread) {:.2}",
            tract / b1
        );
    }
    Ok(())
}
