//! The CNN pass of `fisherkit predict` alone — the same images, batches,
//! descriptor settings, global vector and threads, without the encoding and
//! the SVM — for issue 30's throughput ratio (predict ÷ CNN pass ≥ 0.9).
//!
//! `cargo run --release -p fisherkit-pipeline --example cnn_pass -- MODEL.safetensors PATH…`
//! prints `cnn pass: N images in S s, R images/s (T threads)`; run it and
//! `fisherkit predict --model MODEL.safetensors PATH…` one after the other on
//! an otherwise idle machine (docs/evidence/classifier-throughput.sh).
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::classifier::SceneClassifier;
use fisherkit_pipeline::predict::Predictor;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let (model, inputs) = args
        .split_first()
        .ok_or("usage: cnn_pass MODEL.safetensors PATH…")?;
    let clf = SceneClassifier::load(model)?;
    let info = clf
        .info()
        .input
        .cnn
        .as_ref()
        .ok_or("a classifier of images")?;
    let kind: BackboneKind = info.name.parse().map_err(|_| "a built-in CNN")?;
    let net = Backbone::builtin(kind)?;
    let params = clf.descriptor_params().ok_or("a classifier of images")?;
    let files = fisherkit_pipeline::dataset::collect_images(inputs)?;
    let batch_len = Predictor::new(&clf, Some(&net))?.batch_len();
    let t = Instant::now();
    let mut descriptors = 0usize;
    for batch in files.chunks(batch_len) {
        let paths: Vec<&Path> = batch.iter().map(PathBuf::as_path).collect();
        let out = fisherkit_pipeline::descriptors::compute_batch(
            &net,
            &paths,
            &params,
            clf.needs_global(),
        )?;
        descriptors += out
            .iter()
            .flatten()
            .map(|d| d.scales.iter().map(|s| s.nrows()).sum::<usize>())
            .sum::<usize>();
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "cnn pass: {} images in {s:.1} s, {:.2} images/s ({} threads), {:.0} descriptors per image",
        files.len(),
        files.len() as f64 / s,
        rayon::current_num_threads(),
        descriptors as f64 / files.len().max(1) as f64
    );
    Ok(())
}
