//! Test helpers shared by the pipeline's and the CLI's integration tests (the
//! CLI includes this file with `#[path]`): small image sets copied from the
//! bundled demo data.
#![allow(dead_code)]

use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::RunConfig;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The bundled Fashion-MNIST subset (`data/fashion-mnist-demo`).
pub fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fashion-mnist-demo")
}

/// The first `n` image files of `dir`, by name.
pub fn first_files(dir: &Path, n: usize) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.truncate(n);
    files
}

/// Copies the first `n_train` + `n_test` images of each class into a temporary
/// image folder with `train/` and `test/`.
pub fn small_set(classes: &[&str], n_train: usize, n_test: usize) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for (split, n) in [("train", n_train), ("test", n_test)] {
        for c in classes {
            let dst = t.path().join(split).join(c);
            std::fs::create_dir_all(&dst).unwrap();
            for f in first_files(&demo().join(split).join(c), n) {
                std::fs::copy(&f, dst.join(f.file_name().unwrap())).unwrap();
            }
        }
    }
    t
}

/// Small, fast settings for an image set made by [`small_set`] (one 28-px
/// scale, PCA 16, GMM K = 4, MFA K = 3 R = 2), every encoder family, a cache in `t/cache`.
pub fn small_config(t: &Path) -> RunConfig {
    let mut c = RunConfig::new(t.join("train"), t.join("test"));
    c.encoders = parse_encoders("cnn-global,gmm-fv:mean,gmm-fv:var,gmm-fv:prior+mean+var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global").unwrap();
    c.descriptors.scales = vec![28];
    c.pca_dim = 16;
    c.pca_sample = 5000;
    c.model_sample = 3000;
    c.gmm_components = 4;
    c.gmm_max_iter = 20;
    c.mfa_components = 3;
    c.mfa_factors = 2;
    c.mfa_max_iter = 10;
    c.c_grid = vec![0.1, 1.0];
    c.cache_dir = Some(t.join("cache"));
    c
}

/// A progress that keeps every summary, result and warning line, for tests that read them.
#[derive(Default)]
pub struct Log(pub Mutex<Vec<String>>);

impl fisherkit_pipeline::Progress for Log {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, _: u64) {}
    fn finish(&self, s: &str) {
        self.0.lock().unwrap().push(s.to_string());
    }
    fn warn(&self, s: &str) {
        self.0.lock().unwrap().push(s.to_string());
    }
    fn note(&self, s: &str) {
        self.0.lock().unwrap().push(s.to_string());
    }
}

impl Log {
    /// Whether a line contains `part`.
    pub fn has(&self, part: &str) -> bool {
        self.0.lock().unwrap().iter().any(|l| l.contains(part))
    }
}
