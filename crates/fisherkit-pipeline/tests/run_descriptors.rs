//! The pipeline on precomputed descriptors (`run_descriptors`): planted local
//! structure, the image → descriptor file → run round trip, and the file format
//! against numpy's own reader and writer.

use fisherkit_pipeline::descriptor_file::{
    bag_arrays, read_descriptor_file, write_descriptor_file, write_npz_arrays, NpyRef,
};
use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::{run, run_descriptors, NoProgress, RunConfig};
use ndarray::{Array2, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

mod common;
use common::{small_config, small_set};

const D: usize = 6;

/// An image of class `c`: 60 descriptors spread (normally) along the class's own
/// direction (e_0, e_1 or (e_0 + e_2)/√2) with small isotropic noise. Every
/// class has mean zero, so the classes differ only in their local structure
/// (the orientation of the descriptor cloud), not in their average descriptor.
fn planted_bag(c: usize, rng: &mut ChaCha8Rng) -> Array2<f32> {
    let s = std::f32::consts::FRAC_1_SQRT_2;
    let dir: [f32; D] = match c {
        0 => [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        1 => [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        _ => [s, 0.0, s, 0.0, 0.0, 0.0],
    };
    let mut b = Array2::zeros((60, D));
    // Standard normal by Box–Muller.
    let mut normal = || {
        let (u, v): (f32, f32) = (rng.random(), rng.random());
        (-2.0 * (1.0 - u).ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    };
    for mut row in b.rows_mut() {
        let t = 3.0 * normal();
        for j in 0..D {
            row[j] = t * dir[j] + 0.3 * normal();
        }
    }
    b
}

fn planted_config(train: PathBuf, test: PathBuf) -> RunConfig {
    let mut c = RunConfig::new(train, test);
    c.encoders = parse_encoders("gmm-fv:mean,gmm-fv:var,mfa-fs:loading").unwrap();
    c.pca_dim = D;
    c.gmm_components = 8;
    c.gmm_max_iter = 30;
    c.mfa_components = 2;
    c.mfa_factors = 1;
    c.mfa_max_iter = 20;
    c.c_grid = vec![0.1, 1.0, 10.0];
    c
}

#[test]
fn planted_local_structure_is_classified_from_both_file_layouts() {
    let t = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // Training file: one array per image, integer labels.
    let train_bags: Vec<Array2<f32>> = (0..36).map(|i| planted_bag(i % 3, &mut rng)).collect();
    let train_labels: Vec<i64> = (0..36).map(|i| (i % 3) as i64).collect();
    let names: Vec<String> = (0..36).map(|i| format!("arr_{i}")).collect();
    let views: Vec<_> = train_bags.iter().map(|b| b.view()).collect();
    let mut arrays = bag_arrays(&names, &views);
    arrays.push(("labels", NpyRef::Int(&train_labels)));
    write_npz_arrays(&t.path().join("train.npz"), &arrays).unwrap();
    // Test file: stacked layout, rows of the images interleaved.
    let test_bags: Vec<Array2<f32>> = (0..18).map(|i| planted_bag(i % 3, &mut rng)).collect();
    let test_labels: Vec<i64> = (0..18).map(|i| (i % 3) as i64).collect();
    let mut x = Array2::zeros((18 * 60, D));
    let mut index = Vec::new();
    for r in 0..60 {
        for (i, b) in test_bags.iter().enumerate() {
            x.row_mut(index.len()).assign(&b.row(r));
            index.push(i as i64);
        }
    }
    write_npz_arrays(
        &t.path().join("test.npz"),
        &[
            ("descriptors", NpyRef::Float(x.view())),
            ("image_index", NpyRef::Int(&index)),
            ("labels", NpyRef::Int(&test_labels)),
        ],
    )
    .unwrap();
    // The stacked layout gives back each image's rows in order.
    let back = read_descriptor_file(&t.path().join("test.npz")).unwrap();
    assert_eq!(back.bags, test_bags);
    assert_eq!(back.labels[4], "1");

    let cfg = planted_config(t.path().join("train.npz"), t.path().join("test.npz"));
    let r = run_descriptors(&cfg, &NoProgress).unwrap();
    assert_eq!(r.dataset.classes, vec!["0", "1", "2"]);
    assert_eq!((r.dataset.n_train, r.dataset.n_test), (36, 18));
    assert_eq!(r.dataset.descriptors_per_image, vec![60.0]);
    assert_eq!(r.dataset.pca_dims, vec![D]);
    // the report records the whole configuration, from which the run repeats
    assert!(r.config.data.train_descriptors.is_some() && r.config.data.train.is_none());
    let again = r.config.check().unwrap();
    assert_eq!(again.run_config().to_config(false), r.config);
    assert_eq!(r.results.len(), 3);
    // The report says how each background model was fitted.
    let kinds: Vec<_> = r
        .models
        .iter()
        .map(|m| (m.kind.as_str(), m.components, m.factors, m.max_iter))
        .collect();
    assert_eq!(kinds, vec![("gmm", 8, None, 30), ("mfa", 2, Some(1), 20)]);
    for m in &r.models {
        let it = m.iterations.expect("fitted in this run");
        assert!(it >= 1 && it <= m.max_iter, "{}: {it}", m.name);
        assert!(m.converged.is_some() && m.log_likelihood.unwrap().is_finite());
        // every iteration's log-likelihood, the last one the reported one
        assert_eq!(m.log_likelihood_history.len(), it, "{}", m.name);
        assert_eq!(m.log_likelihood_history.last().copied(), m.log_likelihood);
        // stopping before the cap means the rule was met
        if it < m.max_iter {
            assert_eq!(m.converged, Some(true), "{}", m.name);
        }
    }
    // A run that reads the models from its run folder reports the same.
    let mut cached = cfg.clone();
    cached.cache_dir = Some(t.path().join("cache"));
    let first = run_descriptors(&cached, &NoProgress).unwrap();
    let again = run_descriptors(&cached, &NoProgress).unwrap();
    assert_eq!(first.models, r.models);
    assert_eq!(again.models, r.models);
    // Chance is 1/3. The classes differ in the orientation of their descriptor
    // clouds: exactly what the MFA's local subspaces model (its loading scores
    // separate them perfectly); the diagonal GMM sees it less directly.
    for (row, at_least) in r.results.iter().zip([0.85, 0.6, 0.95]) {
        assert!(row.accuracy >= at_least, "{}: {}", row.spec, row.accuracy);
    }
    // The mean descriptor of an image carries no class information: a
    // nearest-class-mean rule on it stays far below the encoders.
    let mean = |b: &Array2<f32>| b.mean_axis(ndarray::Axis(0)).unwrap();
    let centre = |c: usize| {
        let m: Vec<_> = (0..36)
            .filter(|i| i % 3 == c)
            .map(|i| mean(&train_bags[i]))
            .collect();
        m.iter()
            .fold(ndarray::Array1::<f32>::zeros(D), |a, b| a + b)
            / m.len() as f32
    };
    let centres: Vec<_> = (0..3).map(centre).collect();
    let hits = (0..18)
        .filter(|&i| {
            let m = mean(&test_bags[i]);
            let d: Vec<f32> = centres
                .iter()
                .map(|c| (&m - c).mapv(|v| v * v).sum())
                .collect();
            let best = (0..3).min_by(|&a, &b| d[a].total_cmp(&d[b])).unwrap();
            best == i % 3
        })
        .count();
    assert!(
        hits <= 12,
        "mean pooling got {hits}/18: structure not only local"
    );
}

#[test]
fn run_descriptors_refuses_cnn_global_and_saving() {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = planted_config(t.path().join("a.npz"), t.path().join("b.npz"));
    cfg.encoders = parse_encoders("gmm-fv:mean,mfa-fs:loading&cnn-global").unwrap();
    let e = run_descriptors(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(
        e.contains("cnn-global") && e.contains("image folders"),
        "{e}"
    );
    let mut cfg = planted_config(t.path().join("a.npz"), t.path().join("b.npz"));
    cfg.save_descriptors = Some(t.path().to_path_buf());
    let e = run_descriptors(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("image folders"), "{e}");
}

#[test]
fn images_to_descriptor_files_to_run_gives_the_same_results() {
    let t = small_set(&["bag", "sneaker", "trouser"], 6, 3);
    // In the test split: the sample's per-image quotas are planned before an
    // image is found unreadable, so a broken training image changes them.
    std::fs::write(t.path().join("test/bag/broken.png"), b"not a png").unwrap();
    let mut cfg = small_config(t.path());
    cfg.encoders = parse_encoders("gmm-fv:mean+var,mfa-fs:mean,mfa-fs:loading").unwrap();
    cfg.cache_dir = None;
    cfg.save_descriptors = Some(t.path().join("feats"));
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    let from_images = run(&cfg, &net, &NoProgress).unwrap();
    assert_eq!(from_images.dataset.skipped.len(), 1);

    let saved = read_descriptor_file(&t.path().join("feats/train.npz")).unwrap();
    assert_eq!(saved.bags.len(), 18);
    let saved_test = read_descriptor_file(&t.path().join("feats/test.npz")).unwrap();
    assert_eq!(
        saved_test.bags.len(),
        9,
        "the unreadable image is not saved"
    );
    assert_eq!(saved.dim(), 1000);
    assert_eq!(saved.bags[0].nrows(), 169);
    assert!(saved.names[0].starts_with("bag/") && saved.names[0].ends_with(".png"));
    assert_eq!(saved.labels[0], "bag");
    assert_eq!(saved.labels[17], "trouser");

    let mut cfg2 = cfg.clone();
    cfg2.train = t.path().join("feats/train.npz");
    cfg2.test = t.path().join("feats/test.npz");
    cfg2.save_descriptors = None;
    let from_files = run_descriptors(&cfg2, &NoProgress).unwrap();
    assert_eq!(from_files.dataset.classes, from_images.dataset.classes);
    assert_eq!(from_files.dataset.pca_dims, from_images.dataset.pca_dims);
    assert_eq!(from_files.results.len(), 3);
    for (a, b) in from_images.results.iter().zip(&from_files.results) {
        assert_eq!(a.spec, b.spec);
        assert_eq!(a.dim, b.dim);
        assert_eq!(a.confusion, b.confusion, "{}", a.spec);
        assert_eq!(a.accuracy, b.accuracy, "{}", a.spec);
        assert_eq!(a.cv, b.cv, "{}", a.spec);
    }
}

/// Runs `python3 -c code`; `None` (test skipped) when python3 or numpy is
/// missing, unless FISHERKIT_REQUIRE_PEERS=1.
fn python(code: &str, args: &[&Path]) -> Option<String> {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .output();
    let skip = |why: String| {
        if std::env::var("FISHERKIT_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("peer numpy required (FISHERKIT_REQUIRE_PEERS=1): {why}");
        }
        println!("skipped: python3 with numpy is not available ({why})");
        None
    };
    match out {
        Err(e) => skip(e.to_string()),
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            if err.contains("No module named 'numpy'") {
                skip(err)
            } else {
                panic!("python failed: {err}")
            }
        }
        Ok(o) => Some(String::from_utf8(o.stdout).unwrap()),
    }
}

#[test]
fn the_format_matches_numpy() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    // numpy writes the layouts and dtypes a user would; we read them.
    let write = r#"
import sys, numpy as np
d = sys.argv[1]
bags = [np.arange(6 * (i + 1), dtype=np.float64).reshape(-1, 3) * 0.5 + i for i in range(3)]
np.savez(d + "/a.npz", *bags, labels=np.array(["coat", "bag", "coat"]))
np.savez_compressed(d + "/b.npz", bags[0].astype(np.float32), np.asfortranarray(bags[1]).astype(np.float32),
                    bags[2], labels=np.array([b"coat", b"bag", "x".encode()]))
X = np.concatenate(bags)
idx = np.concatenate([np.full(len(b), i, dtype=np.int32) for i, b in enumerate(bags)])
perm = np.random.default_rng(0).permutation(len(X))
np.savez(d + "/c.npz", descriptors=X[perm], image_index=idx[perm], labels=np.array([3, 1, 3], dtype=np.uint8))
np.savez(d + "/d.npz", labels=np.array([-2, 7], dtype=np.int16), first=bags[0], second=bags[1])
np.savez(d + "/e.npz", bags[0], labels=np.array(["a", 1], dtype=object))
np.savez(d + "/f.npz", bags[0].astype(">f8"), labels=np.array(["a"]))
np.savez(d + "/g.npz", bags[0].astype(np.float16), labels=np.array(["a"]))
"#;
    if python(write, &[dir]).is_none() {
        return;
    }
    let expect: Vec<Array2<f32>> = (0..3)
        .map(|i| {
            Array2::from_shape_fn((2 * (i + 1), 3), |(r, c)| {
                (r * 3 + c) as f32 * 0.5 + i as f32
            })
        })
        .collect();
    let a = read_descriptor_file(&dir.join("a.npz")).unwrap();
    assert_eq!(a.bags, expect);
    assert_eq!(a.labels, vec!["coat", "bag", "coat"]);
    assert_eq!(a.names, vec!["arr_0", "arr_1", "arr_2"]);
    assert_eq!(a.classes(), vec!["bag", "coat"]);
    let b = read_descriptor_file(&dir.join("b.npz")).unwrap();
    assert_eq!(b.bags, expect);
    assert_eq!(b.labels, vec!["coat", "bag", "x"]);
    let c = read_descriptor_file(&dir.join("c.npz")).unwrap();
    assert_eq!(c.labels, vec!["3", "1", "3"]);
    // Rows of each image in file order: the permutation reorders them.
    for (got, want) in c.bags.iter().zip(&expect) {
        let mut g: Vec<Vec<u32>> = got
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|v| v.to_bits()).collect())
            .collect();
        let mut w: Vec<Vec<u32>> = want
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|v| v.to_bits()).collect())
            .collect();
        g.sort();
        w.sort();
        assert_eq!(g, w);
    }
    let d = read_descriptor_file(&dir.join("d.npz")).unwrap();
    assert_eq!(d.labels, vec!["-2", "7"]);
    assert_eq!(d.names, vec!["first", "second"]);
    for (file, want) in [
        (
            "e.npz",
            "array `labels`: object arrays (pickled Python objects) are not supported",
        ),
        (
            "f.npz",
            "array `arr_0`: big-endian dtype '>f8' is not supported",
        ),
        ("g.npz", "array `arr_0`: unsupported dtype '<f2'"),
    ] {
        let e = read_descriptor_file(&dir.join(file))
            .unwrap_err()
            .to_string();
        assert!(e.contains(file) && e.contains(want), "{e}");
    }

    // We write; numpy reads.
    let labels: Vec<String> = vec!["bag".into(), "ünïcode".into()];
    let names: Vec<String> = vec!["bag/1.png".into(), "coat/2.png".into()];
    let views: Vec<ArrayView2<f32>> = expect[..2].iter().map(|b| b.view()).collect();
    write_descriptor_file(&dir.join("ours.npz"), &names, &views, &labels).unwrap();
    let read = r#"
import sys, numpy as np
f = np.load(sys.argv[1])
print(sorted(f.files))
print(list(f["labels"]), f["labels"].dtype.kind)
print(f["bag/1.png"].dtype, f["bag/1.png"].tolist())
print(f["coat/2.png"].shape)
"#;
    let out = python(read, &[&dir.join("ours.npz")]).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "['bag/1.png', 'coat/2.png', 'labels']");
    assert!(
        lines[1].contains("'bag'") && lines[1].contains("'ünïcode'") && lines[1].ends_with(" U"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "float32 [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]");
    assert_eq!(lines[3], "(4, 3)");
}

/// Writes `n` planted images per split (one array per image) into `dir`.
fn planted_files(dir: &Path, n_train: usize, n_test: usize, seed: u64) -> (PathBuf, PathBuf) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut write = |name: &str, n: usize| {
        let bags: Vec<Array2<f32>> = (0..n).map(|i| planted_bag(i % 3, &mut rng)).collect();
        let labels: Vec<i64> = (0..n).map(|i| (i % 3) as i64).collect();
        let names: Vec<String> = (0..n).map(|i| format!("arr_{i}")).collect();
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        let mut arrays = bag_arrays(&names, &views);
        arrays.push(("labels", NpyRef::Int(&labels)));
        let p = dir.join(name);
        write_npz_arrays(&p, &arrays).unwrap();
        p
    };
    (write("train.npz", n_train), write("test.npz", n_test))
}

#[test]
fn the_primal_path_and_q8_stores_agree_with_the_kernel_path() {
    use fisherkit_pipeline::{Classifier, StoreFormat};
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 60, 30, 11);
    let run_with = |classifier, store| {
        let mut cfg = planted_config(train.clone(), test.clone());
        cfg.classifier = classifier;
        cfg.store_format = store;
        cfg.cache_dir = Some(t.path().join("cache"));
        run_descriptors(&cfg, &NoProgress).unwrap()
    };
    let kernel = run_with(Classifier::Kernel, StoreFormat::F32);
    let primal = run_with(Classifier::Primal, StoreFormat::F32);
    // A run killed inside the classifier stage, on either path: the rows it
    // finished are kept in the run folder and reused as they are (their
    // timings too; on the kernel path without its kernels, removed here);
    // the others are trained again, to the same results.
    for (classifier, done, dir) in [
        (Classifier::Primal, &primal, "primal"),
        (Classifier::Kernel, &kernel, "kernel-rows"),
    ] {
        let runs: Vec<_> = t.path().join("cache/runs").read_dir().unwrap().collect();
        assert_eq!(runs.len(), 1);
        let folder = runs[0].as_ref().unwrap().path();
        let _ = std::fs::remove_dir_all(folder.join("kernels"));
        let again = run_with(classifier, StoreFormat::F32);
        assert_eq!(again.results, done.results, "{dir}: every row reused");
        let mut kept: Vec<_> = folder
            .join(dir)
            .read_dir()
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        kept.sort();
        assert_eq!(kept.len(), done.results.len(), "{dir}");
        std::fs::remove_file(&kept[1]).unwrap();
        let resumed = run_with(classifier, StoreFormat::F32);
        assert_eq!(
            without_times(&resumed.results),
            without_times(&done.results),
            "{dir}"
        );
        let retrained = resumed
            .results
            .iter()
            .zip(&done.results)
            .filter(|(a, b)| a.svm_seconds != b.svm_seconds)
            .count();
        assert_eq!(retrained, 1, "{dir}: only the removed row is trained again");
    }
    // the q8 run imports the f32 stores of the runs above
    let q8 = run_with(Classifier::Kernel, StoreFormat::Q8);
    assert_eq!(primal.config.svm.classifier, Classifier::Primal);
    for other in [&primal, &q8] {
        assert_eq!(other.results.len(), kernel.results.len());
        for (a, b) in kernel.results.iter().zip(&other.results) {
            assert_eq!((&a.spec, a.dim), (&b.spec, b.dim));
            // the same problem solved to the same tolerance: at most one test image apart
            assert!(
                (a.accuracy - b.accuracy).abs() <= 1.0 / 30.0 + 1e-9,
                "{}: {} vs {}",
                a.spec,
                a.accuracy,
                b.accuracy
            );
            for ((c1, s1), (c2, s2)) in a.cv.iter().zip(&b.cv) {
                assert_eq!(c1, c2);
                assert!(
                    (s1 - s2).abs() <= 0.06,
                    "{}: CV at C = {c1}: {s1} vs {s2}",
                    a.spec
                );
            }
        }
    }
    // With an output folder the finished SVM is kept too: a second run writes the same file.
    let svm_file = |out: &str| {
        let mut cfg = planted_config(train.clone(), test.clone());
        cfg.classifier = Classifier::Primal;
        cfg.cache_dir = Some(t.path().join("cache"));
        cfg.output_dir = Some(t.path().join(out));
        run_descriptors(&cfg, &NoProgress).unwrap();
        std::fs::read(t.path().join(out).join("svm-mfa-fs_loading.safetensors")).unwrap()
    };
    assert_eq!(svm_file("out1"), svm_file("out2"));
    // the compact variant needs the kernels: refused before any pass on the primal path
    let mut cfg = planted_config(train.clone(), test.clone());
    cfg.classifier = Classifier::Primal;
    cfg.compact_dim = Some(5);
    let e = run_descriptors(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(
        e.contains("--compact-pca") && e.contains("--classifier kernel"),
        "{e}"
    );
}

#[test]
fn finished_rows_are_not_reused_under_other_model_settings() {
    // The run folder is shared by runs that differ only in their background
    // models (its key holds the data, CNN, PCA and sample settings): a row
    // finished under GMM K = 8 must not be read back by a run with K = 4.
    use fisherkit_pipeline::Classifier;
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 30, 15, 5);
    for classifier in [Classifier::Kernel, Classifier::Primal] {
        for k in [8, 4] {
            let mut cfg = planted_config(train.clone(), test.clone());
            cfg.classifier = classifier;
            cfg.gmm_components = k;
            cfg.cache_dir = Some(t.path().join("cache"));
            let r = run_descriptors(&cfg, &NoProgress).unwrap();
            let row = r.results.iter().find(|x| x.spec == "gmm-fv:mean").unwrap();
            assert_eq!(row.dim, k * D, "{classifier:?} K = {k}");
        }
    }
}

/// A progress that asks the run to stop after `after` steps.
struct CancelAfter {
    after: u64,
    steps: std::sync::atomic::AtomicU64,
}

impl fisherkit_pipeline::Progress for CancelAfter {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, n: u64) {
        self.steps
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
    fn finish(&self, _: &str) {}
    fn warn(&self, _: &str) {}
    fn cancelled(&self) -> bool {
        self.steps.load(std::sync::atomic::Ordering::Relaxed) >= self.after
    }
}

/// Ctrl-C in Python (issue 30): a cancelled run stops with its own error at
/// the next step — in EM, between batches, between encoders — and the same
/// run started again finishes from its run folder with the uninterrupted
/// run's report.
#[test]
fn a_cancelled_run_stops_and_resumes_to_the_same_report() {
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 24, 12, 3);
    let mut cfg = planted_config(train, test);
    let whole = run_descriptors(&cfg, &NoProgress).unwrap();
    cfg.cache_dir = Some(t.path().join("cache"));
    let mut stops = 0;
    for after in [3, 40, 1_000_000] {
        let p = CancelAfter {
            after,
            steps: Default::default(),
        };
        match run_descriptors(&cfg, &p) {
            Err(fisherkit_pipeline::PipelineError::Cancelled) => stops += 1,
            Err(e) => panic!("{e}"),
            Ok(r) => {
                assert_eq!(without_times(&r.results), without_times(&whole.results));
                assert!(stops >= 1, "no run was cancelled");
                return;
            }
        }
    }
    panic!("the run never finished");
}

/// A progress that asks the run to stop from inside the first report row:
/// on its `at`-th question after the stage `stage` started.
struct CancelInside {
    stage: &'static str,
    at: usize,
    started: std::sync::atomic::AtomicBool,
    asked: std::sync::atomic::AtomicUsize,
}

impl fisherkit_pipeline::Progress for CancelInside {
    fn start(&self, stage: &str, _: u64) {
        if stage.starts_with(self.stage) {
            self.started
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    fn inc(&self, _: u64) {}
    fn finish(&self, _: &str) {}
    fn warn(&self, _: &str) {}
    fn cancelled(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
            && self
                .asked
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1
                >= self.at
    }
}

/// Ctrl-C inside the classifier stage (issue 29): a run of one encoder is
/// asked to stop while its only row computes its kernel (first question) or
/// cross-validates its SVM (a later one), on the kernel and the primal
/// path; it stops with its own error, and started again finishes from its
/// run folder with the uninterrupted run's rows.
#[test]
fn a_run_cancelled_inside_a_report_row_stops_there_and_resumes() {
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 24, 12, 4);
    for (path, stage) in [
        (
            fisherkit_pipeline::config::Classifier::Kernel,
            "kernel + SVM",
        ),
        (fisherkit_pipeline::config::Classifier::Primal, "primal SVM"),
    ] {
        let mut cfg = planted_config(train.clone(), test.clone());
        cfg.encoders = parse_encoders("gmm-fv:var").unwrap();
        cfg.classifier = path;
        let whole = run_descriptors(&cfg, &NoProgress).unwrap();
        cfg.cache_dir = Some(t.path().join(format!("cache-{stage}")));
        for at in [1, 4] {
            let p = CancelInside {
                stage,
                at,
                started: Default::default(),
                asked: Default::default(),
            };
            match run_descriptors(&cfg, &p) {
                Err(fisherkit_pipeline::PipelineError::Cancelled) => {}
                other => panic!("{stage}, question {at}: not cancelled: {:?}", other.err()),
            }
        }
        let r = run_descriptors(&cfg, &NoProgress).unwrap();
        assert_eq!(without_times(&r.results), without_times(&whole.results));
    }
}

/// A report's rows without their timings: what two runs of the same settings share.
#[allow(clippy::type_complexity)]
fn without_times(
    rows: &[fisherkit_pipeline::report::ResultRow],
) -> Vec<(String, f64, f64, Vec<(f64, f64)>, Vec<Vec<usize>>)> {
    rows.iter()
        .map(|x| {
            (
                x.spec.clone(),
                x.accuracy,
                x.c,
                x.cv.clone(),
                x.confusion.clone(),
            )
        })
        .collect()
}

/// The classifier stage task by task (issue 29 item 6, docs/pipeline.md §6):
/// the owner lists the tasks after the encode pass, each runs in a job of
/// its own opened on the same run folder (a worker), and the owner's
/// `finish_classifier_tasks` reports what `finish` reports in one process —
/// on the kernel path (one task per term kernel, the sweep's too) and on the
/// primal path (one task per report row), whitened rows included.
#[test]
fn the_classifier_stage_task_by_task_equals_finish() {
    use fisherkit_pipeline::{Classifier, Job, Whitening};
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 30, 15, 5);
    let strip = |r: &fisherkit_pipeline::report::Report| {
        let rows: Vec<_> = r
            .results
            .iter()
            .map(|x| {
                let mut x = x.clone();
                x.encode_seconds = 0.0;
                x.svm_seconds = 0.0;
                x
            })
            .collect();
        (rows, serde_json::to_string(&r.sweep).unwrap())
    };
    for (tag, classifier) in [
        ("kernel", Classifier::Kernel),
        ("primal", Classifier::Primal),
    ] {
        let mut cfg = planted_config(train.clone(), test.clone());
        cfg.classifier = classifier;
        cfg.whitening = Whitening::Both;
        cfg.sweep_gmm_components = vec![4];
        cfg.cache_dir = Some(t.path().join(format!("whole-{tag}")));
        let whole = run_descriptors(&cfg, &NoProgress).unwrap();
        cfg.cache_dir = Some(t.path().join(format!("tasks-{tag}")));
        let mut owner = Job::descriptor_files(&cfg, &NoProgress).unwrap();
        for chunk in owner.sample_chunks() {
            let part = owner.sample_chunk(&chunk).unwrap();
            owner.add_sample(part, &NoProgress).unwrap();
        }
        let mut owner = owner.fit(&NoProgress).unwrap();
        let todo = owner.encode_todo();
        let part = owner.encode_images(&todo).unwrap();
        owner.put_encoded(part).unwrap();
        let owner = owner.encoded().unwrap();
        let tasks = owner.classifier_tasks().unwrap();
        let rows = whole.results.len();
        match classifier {
            // one per report row (one scale: the all-scale row only)
            Classifier::Primal => assert_eq!(tasks.len(), rows, "{tasks:?}"),
            // kernels: gmm-fv:mean, gmm-fv:var, mfa-fs:loading twice, the
            // sweep's gmm-fv:var; then, reading them, one per report row
            _ => {
                let wave = |w| tasks.iter().filter(|t| t.wave == w).count();
                assert_eq!((wave(0), wave(1)), (5, rows), "{tasks:?}");
                assert!(tasks.windows(2).all(|p| p[0].wave <= p[1].wave));
            }
        }
        // a worker's job: opened, the models read, the stores opened
        let open_worker = || {
            Job::descriptor_files(&cfg, &NoProgress)
                .unwrap()
                .load_learned()
                .unwrap()
                .encoded()
                .unwrap()
        };
        for task in &tasks {
            open_worker()
                .run_classifier_task(&task.name, &NoProgress)
                .unwrap();
        }
        let worker = open_worker();
        assert!(
            worker.classifier_tasks().unwrap().is_empty(),
            "every result kept"
        );
        let e = worker
            .run_classifier_task("kernels/nothing", &NoProgress)
            .unwrap_err();
        assert!(e.to_string().contains("no classifier task"), "{e}");
        let names: Vec<String> = tasks.iter().map(|t| t.name.clone()).collect();
        let report = owner.finish_classifier_tasks(&names, &NoProgress).unwrap();
        assert_eq!(strip(&report), strip(&whole), "{tag}");
        // the driver computed no kernel and trained no report row itself
        assert!(
            !report.timings.iter().any(|(n, _)| n.starts_with("kernel ")
                || (n.starts_with("primal SVM ") && !n.contains("sweep"))),
            "{:?}",
            report.timings
        );
        // the kernel path's rows are the workers' (timings too), read back
        if classifier == Classifier::Kernel {
            let runs: Vec<_> = t
                .path()
                .join(format!("tasks-{tag}/runs"))
                .read_dir()
                .unwrap()
                .collect();
            let kept: Vec<fisherkit_pipeline::report::ResultRow> = runs[0]
                .as_ref()
                .unwrap()
                .path()
                .join("kernel-rows")
                .read_dir()
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
                .collect();
            assert_eq!(kept.len(), rows);
            assert!(report.results.iter().all(|r| kept.contains(r)), "{kept:?}");
        }
        // the kernel files (there for the workers above) are removed once
        // their last reader is done: the run folder keeps the stores only
        let mut left = Vec::new();
        let mut dirs = vec![t.path().join(format!("tasks-{tag}"))];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.to_string_lossy().ends_with(".gram32.npy") {
                    left.push(p);
                }
            }
        }
        assert!(left.is_empty(), "{left:?}");
        // a result the run folder lacks (a worker's folder not shared) is an error
        let e = open_worker()
            .finish_classifier_tasks(&["kernels/elsewhere".to_string()], &NoProgress)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not in the run folder"), "{e}");
    }
}

/// A phase the run folder has not reached is refused, with the call to
/// make: a worker's job before the owner fitted the models, the classifier
/// stage before the encode pass stored every image (the error says how
/// many are missing).
#[test]
fn a_phase_the_run_folder_has_not_reached_is_refused() {
    use fisherkit_pipeline::Job;
    let t = tempfile::tempdir().unwrap();
    let (train, test) = planted_files(t.path(), 30, 15, 5);
    let mut cfg = planted_config(train, test);
    cfg.cache_dir = Some(t.path().join("cache"));
    let open = || Job::descriptor_files(&cfg, &NoProgress).unwrap();
    let e = open().load_learned().err().unwrap().to_string();
    assert!(e.contains("holds no fitted PCA and models"), "{e}");

    let mut owner = open();
    for chunk in owner.sample_chunks() {
        let part = owner.sample_chunk(&chunk).unwrap();
        owner.add_sample(part, &NoProgress).unwrap();
    }
    let mut owner = owner.fit(&NoProgress).unwrap();
    let todo = owner.encode_todo();
    assert_eq!(todo.len(), 45);
    let part = owner.encode_images(&todo[..42]).unwrap();
    owner.put_encoded(part).unwrap();
    assert_eq!(owner.unstored(), todo[42..]);
    assert_eq!(owner.encode_todo(), todo[42..]);
    let worker = open().load_learned().unwrap();
    let e = worker.encoded().err().unwrap().to_string();
    assert!(
        e.contains("the stores lack 3 of the run's 45 images"),
        "{e}"
    );
    let e = owner.encoded().err().unwrap().to_string();
    assert!(
        e.contains("the stores lack 3 of the run's 45 images"),
        "{e}"
    );
}
