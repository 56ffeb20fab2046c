//! Times SqueezeNet's forward pass at 227×227 with 1 and 2 rayon threads, batch throughput,
//! and dense descriptor extraction. Run:
//! `cargo run --release -p fisherkit-cnn --example cnn_timing [-- --forward-only]`
//!
//! `-- --sizes 227,454,681,907 --threads 1,2 --reps 7` instead times only `SqueezeNet::forward`
//! on square inputs of those sides, one line per (side, threads):
//! `forward 454x454, 2 thread(s): 12.34 ms (median of 7)` (what `scripts/bench_cnn.py` reads).
//! With `--cnn efficientnet-lite0` that mode times `EfficientNetLite0::forward` (the per-cell
//! score map) instead.
//!
//! `-- --images DIR [--n 40] [--cnn …] [--threads 1,2]` times what the pipeline does per
//! photo: `extract_batch` with the default descriptor settings (dense, scales 96/128/160,
//! images capped at 512 px) on the first N image files under DIR (by path), in batches of
//! 8, and prints images per second: `images 40 (…), efficientnet-lite0, 2 thread(s): 1.23
//! images/s, 3 scales, 1094 descriptors per image on average`.
use fisherkit_cnn::{
    extract, extract_batch, Backbone, BackboneKind, Cnn, DescriptorParams, SqueezeNet,
};
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
    let net = SqueezeNet::builtin()?;
    let x = Array3::from_shape_fn((3, 227, 227), |(c, i, j)| {
        ((c * 31 + i * 7 + j * 13) % 255) as f32 - 120.0
    });
    let img = Array3::from_shape_fn((256, 256, 3), |(i, j, c)| {
        ((i * 3 + j * 5 + c * 70) % 256) as f32
    });
    let params = DescriptorParams::default();
    let args: Vec<String> = std::env::args().collect();
    let list = |flag: &str| -> Option<Vec<usize>> {
        let i = args.iter().position(|a| a == flag)?;
        let v = args.get(i + 1).expect("a value after the flag");
        Some(
            v.split(',')
                .map(|t| t.trim().parse().expect("a number"))
                .collect(),
        )
    };
    if let Some(sizes) = list("--sizes") {
        let kind: BackboneKind = match args.iter().position(|a| a == "--cnn") {
            Some(i) => args.get(i + 1).expect("a network after --cnn").parse()?,
            None => BackboneKind::SqueezeNet,
        };
        let net = Backbone::builtin(kind)?;
        let threads = list("--threads").unwrap_or_else(|| vec![1, 2]);
        let reps = list("--reps").map_or(7, |r| r[0].max(1));
        for &side in &sizes {
            let x = Array3::from_shape_fn((3, side, side), |(c, i, j)| {
                ((c * 31 + i * 7 + j * 13) % 255) as f32 - 120.0
            });
            for &t in &threads {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
                let ms =
                    pool.install(|| median_ms(|| drop(net.score_map(x.view()).unwrap()), reps));
                println!("forward {side}x{side}, {t} thread(s): {ms:.2} ms (median of {reps})");
            }
        }
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--images") {
        let dir = std::path::PathBuf::from(args.get(i + 1).expect("a folder after --images"));
        let kind: BackboneKind = match args.iter().position(|a| a == "--cnn") {
            Some(i) => args.get(i + 1).expect("a network after --cnn").parse()?,
            None => BackboneKind::SqueezeNet,
        };
        let n = list("--n").map_or(40, |v| v[0].max(1));
        let threads = list("--threads").unwrap_or_else(|| vec![1, 2]);
        return time_photos(&dir, kind, n, &threads);
    }
    if std::env::args().any(|a| a == "--forward-only") {
        // For scripts/bench_cnn.py: one line, one thread.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
        let ms = pool.install(|| median_ms(|| drop(net.forward(x.view()).unwrap()), 51));
        println!("forward 227x227, 1 thread(s): {ms:.2} ms (median of 51)");
        return Ok(());
    }
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        pool.install(|| {
            let ms = median_ms(|| drop(net.forward(x.view()).unwrap()), 21);
            println!("forward 227x227, {threads} thread(s): {ms:.1} ms (median of 21)");
            let imgs = vec![x.view(); 8];
            let ms = median_ms(|| drop(net.forward_batch(&imgs).unwrap()), 5) / 8.0;
            println!("forward_batch of 8 at 227x227, {threads} thread(s): {ms:.1} ms per image");
            let ms = median_ms(|| drop(extract(&net, img.view(), &params).unwrap()), 5);
            println!(
                "extract dense 256x256 image, scales {:?}, {threads} thread(s): {ms:.1} ms",
                params.scales
            );
            let imgs = vec![img.view(); 4];
            let ms = median_ms(|| drop(extract_batch(&net, &imgs, &params).unwrap()), 3) / 4.0;
            println!("extract_batch of 4 such images, {threads} thread(s): {ms:.1} ms per image");
        });
    }
    Ok(())
}

/// Image files under `dir` (recursively), sorted by path.
fn image_files(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(image_files(&p)?);
        } else if p.extension().is_some_and(|x| {
            ["jpg", "jpeg", "png"].contains(&x.to_string_lossy().to_lowercase().as_str())
        }) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The pipeline's per-photo CNN work on real files: images per second.
fn time_photos(
    dir: &std::path::Path,
    kind: BackboneKind,
    n: usize,
    threads: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<_> = image_files(dir)?.into_iter().take(n).collect();
    let images = files
        .iter()
        .map(fisherkit_cnn::load_image)
        .collect::<Result<Vec<_>, _>>()?;
    let net = Backbone::builtin(kind)?;
    let params = DescriptorParams::default();
    for &t in threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
        let (secs, rows) = pool.install(|| -> Result<(f64, usize), fisherkit_cnn::CnnError> {
            let start = Instant::now();
            let mut rows = 0;
            for batch in images.chunks(8) {
                let views: Vec<_> = batch.iter().map(|x| x.view()).collect();
                for per_scale in extract_batch(&net, &views, &params)? {
                    rows += per_scale.iter().map(|x| x.nrows()).sum::<usize>();
                }
            }
            Ok((start.elapsed().as_secs_f64(), rows))
        })?;
        println!(
            "images {} ({}), {}, {t} thread(s): {:.2} images/s, {} scales, {} descriptors per image on average",
            images.len(),
            dir.display(),
            net.name(),
            images.len() as f64 / secs,
            params.scales.len(),
            rows / images.len()
        );
    }
    Ok(())
}
