//! Runs on descriptor files read their bags batch by batch (issue 29): the
//! layout of a file does not change the report, and a bag that turns out
//! corrupt when a pass reads it stops the run with one error naming the file.

use fisherkit_pipeline::descriptor_file::{bag_arrays, write_npz_arrays, NpyRef};
use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::{run_descriptors, NoProgress, RunConfig};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

const D: usize = 4;

/// An image of class `c`: 10..30 descriptors around the class's own axis.
fn bag(c: usize, rng: &mut ChaCha8Rng) -> Array2<f32> {
    let n = rng.random_range(10..30);
    Array2::from_shape_fn((n, D), |(_, j)| {
        let noise: f32 = rng.random_range(-0.3..0.3);
        if j == c {
            rng.random_range(-3.0..3.0)
        } else {
            noise
        }
    })
}

fn bags(n: usize, rng: &mut ChaCha8Rng) -> (Vec<Array2<f32>>, Vec<i64>) {
    let labels: Vec<i64> = (0..n as i64).map(|i| i % 3).collect();
    (
        labels.iter().map(|&c| bag(c as usize, rng)).collect(),
        labels,
    )
}

fn per_image(path: &Path, bags: &[Array2<f32>], labels: &[i64]) {
    let names: Vec<String> = (0..bags.len()).map(|i| format!("arr_{i}")).collect();
    let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
    let mut arrays = bag_arrays(&names, &views);
    arrays.push(("labels", NpyRef::Int(labels)));
    write_npz_arrays(path, &arrays).unwrap();
}

/// The stacked layout with the images' rows interleaved (row r of every
/// image, then row r + 1, …).
fn stacked(path: &Path, bags: &[Array2<f32>], labels: &[i64]) {
    let longest = bags.iter().map(|b| b.nrows()).max().unwrap();
    let mut rows = Vec::new();
    let mut index = Vec::new();
    for r in 0..longest {
        for (i, b) in bags.iter().enumerate() {
            if r < b.nrows() {
                rows.extend(b.row(r).iter().copied());
                index.push(i as i64);
            }
        }
    }
    let x = Array2::from_shape_vec((index.len(), D), rows).unwrap();
    write_npz_arrays(
        path,
        &[
            ("descriptors", NpyRef::Float(x.view())),
            ("image_index", NpyRef::Int(&index)),
            ("labels", NpyRef::Int(labels)),
        ],
    )
    .unwrap();
}

fn config(train: PathBuf, test: PathBuf) -> RunConfig {
    let mut c = RunConfig::new(train, test);
    c.encoders = parse_encoders("gmm-fv:mean+var,mfa-fs:loading").unwrap();
    c.pca_dim = D;
    c.gmm_components = 4;
    c.gmm_max_iter = 15;
    c.mfa_components = 2;
    c.mfa_factors = 1;
    c.mfa_max_iter = 10;
    c.c_grid = vec![0.1, 1.0];
    c
}

#[test]
fn both_layouts_give_the_same_report() {
    let t = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    let (train, train_labels) = bags(30, &mut rng);
    let (test, test_labels) = bags(15, &mut rng);
    let p = |name: &str| t.path().join(name);
    per_image(&p("train-a.npz"), &train, &train_labels);
    per_image(&p("test-a.npz"), &test, &test_labels);
    stacked(&p("train-s.npz"), &train, &train_labels);
    stacked(&p("test-s.npz"), &test, &test_labels);
    let a = run_descriptors(&config(p("train-a.npz"), p("test-a.npz")), &NoProgress).unwrap();
    let s = run_descriptors(&config(p("train-s.npz"), p("test-s.npz")), &NoProgress).unwrap();
    assert_eq!((s.dataset.n_train, s.dataset.n_test), (30, 15));
    assert_eq!(
        a.dataset.descriptors_per_image,
        s.dataset.descriptors_per_image
    );
    assert_eq!(a.results.len(), 2);
    for (x, y) in a.results.iter().zip(&s.results) {
        assert_eq!(
            (&x.spec, x.dim, &x.cv, &x.confusion, x.accuracy),
            (&y.spec, y.dim, &y.cv, &y.confusion, y.accuracy)
        );
    }
}

#[test]
fn a_bag_found_corrupt_during_the_run_is_one_error_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let (train, train_labels) = bags(12, &mut rng);
    let (test, test_labels) = bags(6, &mut rng);
    let (tr, te) = (t.path().join("train.npz"), t.path().join("test.npz"));
    per_image(&tr, &train, &train_labels);
    per_image(&te, &test, &test_labels);
    // One byte of a test bag's data flipped: the file opens (its headers are
    // intact), the encode pass finds the entry's CRC wrong.
    let mut bytes = std::fs::read(&te).unwrap();
    let needle = test[4][[1, 2]].to_le_bytes();
    let at = bytes
        .windows(4)
        .position(|w| w == needle)
        .expect("value present");
    bytes[at] ^= 0x01;
    std::fs::write(&te, &bytes).unwrap();
    let e = run_descriptors(&config(tr.clone(), te.clone()), &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(e.contains("test.npz") && e.contains("array `arr_4`"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
