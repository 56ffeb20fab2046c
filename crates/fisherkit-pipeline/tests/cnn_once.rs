//! No image through the CNN twice (docs/pipeline.md §2): the sample pass
//! keeps its CNN output in the run folder and the encode pass reads it back
//! instead of running the CNN again, with the same encodings and report.

use fisherkit_pipeline::report::Report;
use fisherkit_pipeline::{run, FittedJob, Job, NoProgress, RunConfig, SAMPLE_CHUNK};
use std::path::Path;

mod common;
use common::{small_config, small_set, Log};

/// A report's numbers (its rows without their timings, the sweep).
fn numbers(r: &Report) -> Vec<String> {
    let rows = r.results.iter().map(|x| {
        format!(
            "{} {} {} {} {:?} {:?} {:?} {:?}",
            x.spec, x.whitened, x.dim, x.c, x.accuracy, x.per_class_accuracy, x.cv, x.confusion
        )
    });
    let sweep = r.sweep.iter().map(|p| {
        format!(
            "{} {} {:?} {} {:?}",
            p.series, p.components, p.factors, p.dim, p.accuracy
        )
    });
    rows.chain(sweep).collect()
}

fn net() -> fisherkit_cnn::Backbone {
    fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap())
}

/// The kept files of the run folder `folder`.
fn kept_files(folder: &Path) -> usize {
    std::fs::read_dir(folder.join("cnn-sample")).map_or(0, |d| d.count())
}

/// Sample pass (kept or not) and fit; the job, ready to encode.
fn sampled<'a>(cfg: &RunConfig, net: &'a fisherkit_cnn::Backbone, keep: bool) -> FittedJob<'a> {
    let mut job = Job::images(cfg, net).unwrap();
    for c in job.sample_chunks() {
        if keep {
            let (part, kept) = job.sample_chunk_keeping(&c).unwrap();
            job.add_sample_keeping(part, kept, &NoProgress).unwrap();
        } else {
            let part = job.sample_chunk(&c).unwrap();
            job.add_sample(part, &NoProgress).unwrap();
        }
    }
    job.fit(&NoProgress).unwrap()
}

#[test]
fn the_encode_pass_reuses_the_sample_output_bit_for_bit_without_the_cnn() {
    // 3 classes × 12 training images (every one a sample image: 36 > one
    // chunk) and 4 test images each, every encoder family with cnn-global.
    let t = small_set(&["bag", "sneaker", "trouser"], 12, 4);
    let net = net();
    let mut cfg = small_config(t.path());
    assert!(cfg.sample_images >= 36 && 36 > SAMPLE_CHUNK);

    let mut plain_cfg = cfg.clone();
    plain_cfg.cache_dir = Some(t.path().join("cache-plain"));
    let mut plain = sampled(&plain_cfg, &net, false);
    assert_eq!(plain.images_through_cnn(), 36);
    assert_eq!(kept_files(plain.folder()), 0);

    cfg.cache_dir = Some(t.path().join("cache-kept"));
    let mut kept = sampled(&cfg, &net, true);
    assert_eq!(kept.images_through_cnn(), 36);
    assert_eq!(kept_files(kept.folder()), 36);

    let todo = kept.encode_todo();
    assert_eq!(todo, plain.encode_todo());
    assert_eq!(todo.len(), 48);
    let a = kept.encode_images(&todo).unwrap();
    let b = plain.encode_images(&todo).unwrap();
    // The sample images were read from the run folder: only the 12 test
    // images went through the CNN.
    assert_eq!(kept.images_through_cnn(), 36 + 12);
    assert_eq!(plain.images_through_cnn(), 36 + 48);
    assert_eq!(a.entries, b.entries);
    assert_eq!(a.rows.len(), 48);
    for ((i, x), (j, y)) in a.rows.iter().zip(&b.rows) {
        assert_eq!(i, j);
        assert_eq!(x, y, "image {i}: the reused encodings differ");
    }

    // Written to the stores, the kept files have served and are removed.
    kept.put_encoded(a).unwrap();
    plain.put_encoded(b).unwrap();
    assert_eq!(kept_files(kept.folder()), 0);
    let folder = kept.folder().to_path_buf();
    let (ra, rb) = (
        kept.encoded().unwrap().finish(&NoProgress).unwrap(),
        plain.encoded().unwrap().finish(&NoProgress).unwrap(),
    );
    assert!(!folder.join("cnn-sample").exists());
    assert_eq!(numbers(&ra), numbers(&rb));
}

#[test]
fn the_sample_images_files_are_not_read_again() {
    let t = small_set(&["bag", "sneaker", "trouser"], 8, 3);
    let net = net();
    let cfg = small_config(t.path());
    let want = {
        let mut c = cfg.clone();
        c.cache_dir = Some(t.path().join("cache-want"));
        run(&c, &net, &NoProgress).unwrap()
    };
    let mut job = sampled(&cfg, &net, true);
    assert_eq!(job.images_through_cnn(), 24);
    // Every training image is a sample image: without their files the
    // encode pass can only have used the kept output.
    std::fs::remove_dir_all(t.path().join("train")).unwrap();
    let todo = job.encode_todo();
    assert_eq!(todo.len(), 33);
    for batch in todo.chunks(10) {
        let part = job.encode_images(batch).unwrap();
        job.put_encoded(part).unwrap();
    }
    assert_eq!(job.images_through_cnn(), 24 + 9);
    let r = job.encoded().unwrap().finish(&NoProgress).unwrap();
    assert!(r.dataset.skipped.is_empty(), "{:?}", r.dataset.skipped);
    assert_eq!((r.dataset.n_train, r.dataset.n_test), (24, 9));
    assert_eq!(numbers(&r), numbers(&want));
}

#[test]
fn a_run_killed_after_the_sample_pass_resumes_from_the_kept_output() {
    // 72 sample images = 3 chunks; the first two finished, then a kill.
    let t = small_set(&["bag", "sneaker", "trouser"], 24, 2);
    let net = net();
    let mut cfg = small_config(t.path());
    cfg.sample_images = 72;
    let mut whole = cfg.clone();
    whole.cache_dir = Some(t.path().join("cache-whole"));
    let log_whole = Log::default();
    let want = run(&whole, &net, &log_whole).unwrap();
    assert!(
        log_whole.has("6 images through the CNN, 0 reused from the run folder, 72 encoded from the sample pass's CNN output"),
        "{:?}",
        log_whole.0.lock().unwrap()
    );
    assert!(log_whole.has("the CNN output of 72 images kept for the encode pass"));

    let folder = {
        let mut job = Job::images(&cfg, &net).unwrap();
        for c in &job.sample_chunks()[..2] {
            let (part, kept) = job.sample_chunk_keeping(c).unwrap();
            job.add_sample_keeping(part, kept, &NoProgress).unwrap();
        }
        job.folder().to_path_buf()
    };
    assert_eq!(kept_files(&folder), 2 * SAMPLE_CHUNK);
    // A kept file that cannot be used (truncated) is computed again.
    let first = std::fs::read_dir(folder.join("cnn-sample"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&first).unwrap();
    std::fs::write(&first, &bytes[..bytes.len() - 4]).unwrap();

    let log = Log::default();
    let got = run(&cfg, &net, &log).unwrap();
    assert!(
        log.has("7 images through the CNN, 0 reused from the run folder, 71 encoded from the sample pass's CNN output"),
        "{:?}",
        log.0.lock().unwrap()
    );
    assert_eq!(numbers(&got), numbers(&want));
    assert!(!folder.join("cnn-sample").exists());
}

#[test]
fn a_kept_output_of_another_image_is_refused() {
    let t = small_set(&["bag", "trouser"], 4, 1);
    let net = net();
    let cfg = small_config(t.path());
    let mut job = Job::images(&cfg, &net).unwrap();
    let c = job.sample_chunks()[0].clone();
    let (part, mut kept) = job.sample_chunk_keeping(&c).unwrap();
    assert_eq!(kept.len(), 8);
    kept[0].image = 99;
    let e = job
        .add_sample_keeping(part, kept, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(e.contains("image 99"), "{e}");
}
