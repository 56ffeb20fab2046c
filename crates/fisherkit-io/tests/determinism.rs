//! Determinism of the files (issue #6, item 4): the same seed gives the same
//! bytes in model files and in encoding files, with 1 or 2 rayon threads.

use fisherkit::encode::{FisherVector, FisherVectorParams, MfaFisherScore, MfaFisherScoreParams};
use fisherkit::gmm::GmmParams;
use fisherkit::mfa::{MfaParams, PsiMode};
use fisherkit::Encoder;
use fisherkit_io::ModelFile;
use ndarray::{Array2, ArrayView2};
use std::collections::BTreeMap;
use std::path::Path;

/// Three clusters in D = 5 with deterministic pseudo-noise (a hash of the
/// index, uniform in [-1, 1)).
fn data(n: usize, seed: u64) -> Array2<f32> {
    Array2::from_shape_fn((n, 5), |(i, j)| {
        let mut h = (seed << 40) ^ ((i as u64) << 8) ^ j as u64;
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 32;
        let z = (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        ((i % 3) as f32 - 1.0) * 4.0 + 0.3 * j as f32 + z
    })
}

/// Fits a GMM and an MFA with `seed`, encodes a batch, writes all four files
/// to `dir` and returns their bytes.
fn write_all(dir: &Path, seed: u64) -> Vec<Vec<u8>> {
    let x = data(4000, 1);
    let gmm = GmmParams::<f32>::new(3)
        .seed(seed)
        .max_iter(10)
        .fit(x.view())
        .unwrap();
    let mfa = MfaParams::new(3, 2)
        .psi_mode(PsiMode::PerComponent)
        .seed(seed)
        .max_iter(8)
        .fit(x.view())
        .unwrap();
    let mut extra = BTreeMap::new();
    extra.insert("seed".to_string(), seed.to_string());
    let bags: Vec<Array2<f32>> = (0..4).map(|b| data(200 + 100 * b, 20 + b as u64)).collect();
    let views: Vec<ArrayView2<'_, f32>> = bags.iter().map(|b| b.view()).collect();
    let fv = FisherVector::new(&gmm.model, FisherVectorParams::default())
        .unwrap()
        .encode_batch(&views)
        .unwrap();
    let fs = MfaFisherScore::new(mfa.model.clone(), MfaFisherScoreParams::default())
        .unwrap()
        .encode_batch(&views)
        .unwrap();
    let files = ["gmm.safetensors", "mfa.safetensors", "fv.npy", "fs.npy"].map(|f| dir.join(f));
    gmm.model.write(&files[0], &extra).unwrap();
    mfa.model.write(&files[1], &extra).unwrap();
    fisherkit_io::write_npy(&files[2], fv.view()).unwrap();
    fisherkit_io::write_npy(&files[3], fs.view()).unwrap();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn same_seed_same_file_bytes_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["GMM file", "MFA file", "FV file", "MFA-FS file"];
    let a = in_pool(2, || write_all(dir.path(), 4));
    let b = in_pool(2, || write_all(dir.path(), 4));
    let one = in_pool(1, || write_all(dir.path(), 4));
    for i in 0..4 {
        assert!(
            a[i] == b[i],
            "{}: seed 4 twice gave different bytes",
            names[i]
        );
        assert!(
            a[i] == one[i],
            "{}: 1 and 2 threads gave different bytes",
            names[i]
        );
    }
    // Another seed changes the model file (so the comparison can fail).
    let c = in_pool(2, || write_all(dir.path(), 5));
    assert!(a[0] != c[0], "seeds 4 and 5 gave the same GMM file");
}
