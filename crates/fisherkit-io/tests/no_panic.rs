//! Corrupt inputs never panic: arbitrary bytes, valid files with bytes
//! flipped, and valid files cut at every length give `Ok` or an `IoError`
//! naming the file.

use fisherkit::gmm::DiagGmm;
use fisherkit_io::{read_bags, read_npy, write_npy, write_npz, Model, ModelFile};
use ndarray::{array, Array2};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

/// Reads `bytes` with every reader; each must return (never panic), and an
/// error must name the file.
fn read_all(dir: &Path, bytes: &[u8]) {
    let p = dir.join("F.bin");
    std::fs::write(&p, bytes).unwrap();
    if let Err(e) = read_npy(&p) {
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
    }
    if let Err(e) = read_bags(&p) {
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
    }
    if let Err(e) = Model::read(&p) {
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
    }
}

/// Valid files of each kind, as bytes (made once: writers fsync).
fn samples() -> &'static [Vec<u8>] {
    static SAMPLES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SAMPLES.get_or_init(make_samples)
}

fn make_samples() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let a = Array2::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f32 * 0.5);
    let npy = dir.path().join("a.npy");
    write_npy(&npy, a.view()).unwrap();
    let npz = dir.path().join("a.npz");
    write_npz(&npz, &[("x", a.view()), ("y", a.view())], false).unwrap();
    let npzc = dir.path().join("c.npz");
    write_npz(&npzc, &[("x", a.view())], true).unwrap();
    let g = DiagGmm::new(
        array![0.5, 0.5],
        array![[0.0, 1.0], [2.0, 3.0]],
        array![[1.0, 2.0], [3.0, 4.0]],
    )
    .unwrap();
    let st = dir.path().join("g.safetensors");
    g.write(&st, &BTreeMap::new()).unwrap();
    [npy, npz, npzc, st]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn every_truncation_of_valid_files_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    // Every cut inside the headers, then every 13th byte (file writes are
    // slow on some file systems).
    for bytes in samples() {
        for len in (0..bytes.len()).filter(|&l| l < 140 || l % 13 == 0) {
            read_all(dir.path(), &bytes[..len]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().unwrap();
        read_all(dir.path(), &bytes);
    }

    #[test]
    fn flipped_bytes_never_panic(which in 0usize..4, pos in any::<prop::sample::Index>(), val in any::<u8>()) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = samples()[which].clone();
        let i = pos.index(bytes.len());
        bytes[i] = val;
        read_all(dir.path(), &bytes);
    }

    #[test]
    fn arbitrary_npy_headers_never_panic(header in "[ -~]{0,120}", tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&tail);
        read_all(dir.path(), &bytes);
    }
}
