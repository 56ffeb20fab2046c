//! The sample pass is checkpointed chunk by chunk (docs/pipeline.md §2): a
//! run that stops during it continues after its last finished chunk and ends
//! with the same models and results as an uninterrupted run.

use fisherkit_pipeline::{run, Job, NoProgress, RunConfig, SAMPLE_CHUNK};
use std::path::{Path, PathBuf};

mod common;
use common::{small_config, small_set};

/// Every model and PCA file of the run folders under `cache`, by file name.
fn model_files(cache: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for run in std::fs::read_dir(cache.join("runs")).unwrap() {
        for f in std::fs::read_dir(run.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "safetensors") {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn part_files(folder: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(folder) else {
        return vec![];
    };
    let mut out: Vec<PathBuf> = dirs
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|d| {
            d.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sample-")
        })
        .flat_map(|d| std::fs::read_dir(d).unwrap().map(|f| f.unwrap().path()))
        .collect();
    out.sort();
    out
}

/// 3 classes × 24 training images, all of them sample images: 72 = 3 chunks
/// of [`SAMPLE_CHUNK`]; the set, the network and the settings.
fn three_chunk_run() -> (tempfile::TempDir, fisherkit_cnn::Backbone, RunConfig) {
    let t = small_set(&["bag", "sneaker", "trouser"], 24, 2);
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    let mut cfg = small_config(t.path());
    cfg.sample_images = 72;
    assert_eq!(72usize.div_ceil(SAMPLE_CHUNK), 3);
    (t, net, cfg)
}

#[test]
fn a_sample_pass_stopped_after_two_chunks_resumes_to_the_same_models() {
    let (t, net, cfg) = three_chunk_run();

    // Uninterrupted, in its own cache.
    let mut whole = cfg.clone();
    whole.cache_dir = Some(t.path().join("cache-whole"));
    let want = run(&whole, &net, &NoProgress).unwrap();

    // Two chunks, then the job goes away (as a killed process would).
    let folder = {
        let mut job = Job::images(&cfg, &net).unwrap();
        let chunks = job.sample_chunks();
        assert_eq!(chunks.len(), 3);
        for c in &chunks[..2] {
            let part = job.sample_chunk(c).unwrap();
            job.add_sample(part, &NoProgress).unwrap();
        }
        job.folder().to_path_buf()
    };
    let parts = part_files(&folder);
    assert_eq!(parts.len(), 2, "{parts:?}");

    // A new job sees the two finished chunks and is left with the third.
    let job = Job::images(&cfg, &net).unwrap();
    let left = job.sample_chunks();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].len(), 72 - 2 * SAMPLE_CHUNK);
    drop(job);

    let got = run(&cfg, &net, &NoProgress).unwrap();
    assert_eq!(
        model_files(cfg.cache_dir.as_ref().unwrap()),
        model_files(whole.cache_dir.as_ref().unwrap()),
        "the resumed run's PCA and models differ from the uninterrupted run's"
    );
    assert_eq!(got.results.len(), want.results.len());
    for (a, b) in got.results.iter().zip(&want.results) {
        assert_eq!((a.accuracy, a.c), (b.accuracy, b.c), "{}", a.spec);
    }
    assert_eq!(got.dataset.n_train, 72);
    // Once the models exist the checkpoint is removed.
    assert!(part_files(&folder).is_empty(), "{:?}", part_files(&folder));
}

#[test]
fn an_unreadable_sample_part_is_one_clear_error() {
    let (_t, net, cfg) = three_chunk_run();
    let folder = {
        let mut job = Job::images(&cfg, &net).unwrap();
        let c = job.sample_chunks()[0].clone();
        let part = job.sample_chunk(&c).unwrap();
        job.add_sample(part, &NoProgress).unwrap();
        job.folder().to_path_buf()
    };
    let parts = part_files(&folder);
    assert_eq!(parts.len(), 1);
    // Truncated (e.g. a disk error after the rename): named, with the way out.
    let bytes = std::fs::read(&parts[0]).unwrap();
    std::fs::write(&parts[0], &bytes[..bytes.len() / 2]).unwrap();
    let e = run(&cfg, &net, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("part-00000.safetensors"), "{e}");
    assert!(e.contains("delete the file"), "{e}");
    // Deleting it, as the message says, computes the chunk again.
    std::fs::remove_file(&parts[0]).unwrap();
    assert!(run(&cfg, &net, &NoProgress).is_ok());
}
