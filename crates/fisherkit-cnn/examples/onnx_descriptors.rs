//! The patch descriptors an ONNX classifier gives one image, written as .npy files, with the
//! load time and the median time of one `extract` (for checking an export against the
//! framework it came from, e.g. `scripts/check_vgg_guide.py`). Run (feature `onnx`):
//!
//! `cargo run --release -p fisherkit-cnn --features onnx --example onnx_descriptors -- \
//!     MODEL.onnx IMAGE.png [--scales 224] [--mode dense|exact] [--stride 0.5] [--reps 3] \
//!     [--out PREFIX]`
//!
//! Default preprocessing (torchvision's); no image-size cap. Writes PREFIX-<scale>.npy
//! ((patches, classes) f32, the log-softmax rows of `extract`) when `--out` is given.
use fisherkit_cnn::onnx::{OnnxCnn, OnnxOptions};
use fisherkit_cnn::{extract, load_image, Cnn, DescriptorParams, PatchMode};
use ndarray_npy::write_npy;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: onnx_descriptors MODEL.onnx IMAGE [--scales 224] [--mode dense|exact] \
                 [--stride 0.5] [--reps 3] [--out PREFIX]";
    let (model, image) = match (args.get(1), args.get(2)) {
        (Some(m), Some(i)) => (m, i),
        _ => return Err(usage.into()),
    };
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let scales: Vec<u32> = value("--scales")
        .unwrap_or_else(|| "224".into())
        .split(',')
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let mode = match value("--mode").as_deref().unwrap_or("dense") {
        "dense" => PatchMode::Dense,
        "exact" => PatchMode::Exact,
        other => return Err(format!("--mode {other}: dense or exact").into()),
    };
    let stride: f32 = value("--stride").map_or(Ok(0.5), |s| s.parse())?;
    let reps: usize = value("--reps").map_or(Ok(3), |r| r.parse())?;

    let t = Instant::now();
    let net = OnnxCnn::load(model, &OnnxOptions::default())?;
    println!(
        "load + optimise + probe: {:.0} ms; {}",
        t.elapsed().as_secs_f64() * 1e3,
        net.summary()
    );
    println!(
        "dense: {}, input side {}, smallest input {}, cell stride {}, classes {}",
        net.dense(),
        net.input_side(),
        net.min_input_side(),
        net.cell_stride(),
        net.num_classes()
    );
    let img = load_image(image)?;
    let params = DescriptorParams {
        scales: scales.clone(),
        mode,
        stride,
        max_image_side: None,
    };
    let mut times = Vec::new();
    let mut out = Vec::new();
    for _ in 0..reps.max(1) {
        let s = Instant::now();
        out = extract(&net, img.view(), &params)?;
        times.push(s.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "image {}x{}: extract median {:.0} ms over {} runs (min {:.0} ms)",
        img.dim().0,
        img.dim().1,
        times[times.len() / 2],
        times.len(),
        times[0]
    );
    for (scale, d) in scales.iter().zip(&out) {
        println!("scale {scale}: {} descriptors x {}", d.nrows(), d.ncols());
        if let Some(prefix) = value("--out") {
            write_npy(format!("{prefix}-{scale}.npy"), d)?;
        }
    }
    Ok(())
}
