//! Replays the fuzzing corpora (`fuzz/corpus/{npy,npz,model,classifier}`) and the crash
//! reproducers (`fuzz/regressions/<target>/`) through the fuzz targets' own
//! checks (`fuzz/checks.rs`: the same reader, the same properties — backed
//! sizes, weight sums, MFA validation, dtype conversions, classifier
//! consistency and write/read round trips): every input passes
//! them or returns an error naming the file, never a panic. Runs on stable in
//! CI; the fuzzing itself (nightly, `cargo fuzz run`) runs outside CI, see
//! `fuzz/README.md`.

#[path = "../../../fuzz/checks.rs"]
mod checks;

use fisherkit_io::{read_classifier_bytes, read_npy_bytes, read_npz_bytes, Model, ModelFile};
use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for dir in [
        root.join("corpus").join(target),
        root.join("regressions").join(target),
    ] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            files.extend(rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    files
}

fn replay(target: &str, check: impl Fn(&[u8], &str) -> fisherkit_io::Result<()>) -> usize {
    let files = inputs(target);
    assert!(
        files.len() >= 5,
        "fuzz/corpus/{target} holds {} files; the committed corpus is missing",
        files.len()
    );
    let mut ok = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&bytes, "input.bin")));
        match r {
            Err(_) => panic!("{target}: {} panics or fails a check", f.display()),
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                let m = e.to_string();
                assert!(m.starts_with("input.bin: "), "{}: {m}", f.display());
                assert!(m.len() > "input.bin: ".len() + 5, "{}: {m}", f.display());
            }
        }
    }
    ok
}

#[test]
fn npy_corpus_replays_without_panic() {
    let ok = replay("npy", checks::npy);
    assert!(ok >= 1, "no valid .npy in the corpus");
}

#[test]
fn npz_corpus_replays_without_panic() {
    let ok = replay("npz", checks::npz);
    assert!(ok >= 1, "no valid .npz in the corpus");
}

#[test]
fn model_corpus_replays_without_panic() {
    let ok = replay("model", checks::model);
    assert!(ok >= 2, "the corpus should hold valid GMM and MFA files");
}

#[test]
fn classifier_corpus_replays_without_panic() {
    let ok = replay("classifier", checks::classifier);
    assert!(
        ok >= 1,
        "the corpus should hold a valid scene-classifier file"
    );
}

/// The replay's error path is exercised: corrupt inputs come back as errors
/// from the checks, not as passes.
#[test]
fn corrupt_inputs_are_errors_of_the_checks() {
    // a valid npy whose header is rewritten to claim more rows than follow
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.npy");
    fisherkit_io::write_npy(&p, ndarray::Array2::<f32>::zeros((3, 2)).view()).unwrap();
    let good = std::fs::read(&p).unwrap();
    assert!(checks::npy(&good, "input.bin").is_ok());
    let at = good
        .windows(6)
        .position(|w| w == b"(3, 2)")
        .expect("shape in the header");
    let mut bad = good.clone();
    bad[at + 1] = b'9';
    assert!(
        checks::npy(&bad, "input.bin").is_err(),
        "a truncated .npy must be refused"
    );
    // an npz of zero bags is refused
    assert!(checks::npz(
        b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        "input.bin"
    )
    .is_err());
}

#[test]
fn bytes_readers_agree_with_the_path_readers() {
    let dir = tempfile::tempdir().unwrap();
    for (target, read_path) in [
        (
            "npy",
            &(|p: &Path| fisherkit_io::read_npy(p).map(|_| ())) as &dyn Fn(&Path) -> _,
        ),
        ("npz", &|p: &Path| fisherkit_io::read_npz(p).map(|_| ())),
        ("model", &|p: &Path| Model::read(p).map(|_| ())),
        ("classifier", &|p: &Path| {
            fisherkit_io::read_classifier(p).map(|_| ())
        }),
    ] {
        for f in inputs(target) {
            let bytes = std::fs::read(&f).unwrap();
            let p = dir.path().join("input.bin");
            std::fs::write(&p, &bytes).unwrap();
            let from_path = read_path(&p).map_err(|e| {
                e.to_string()
                    .replacen(&p.display().to_string(), "input.bin", 1)
            });
            let from_bytes = match target {
                "npy" => read_npy_bytes(&bytes, "input.bin").map(|_| ()),
                "npz" => read_npz_bytes(&bytes, "input.bin").map(|_| ()),
                "classifier" => read_classifier_bytes(&bytes, Path::new("input.bin")).map(|_| ()),
                _ => Model::read_bytes(&bytes, "input.bin").map(|_| ()),
            }
            .map_err(|e| e.to_string());
            assert_eq!(
                from_path.map_err(|e| framing(&e)),
                from_bytes.map_err(|e| framing(&e)),
                "{target}: {}",
                f.display()
            );
        }
    }
}

/// `e`, cut after "not a valid safetensors file": which of several bad
/// tensors the safetensors crate names depends on its hash-map order, so
/// two reads of the same bytes may name different ones.
fn framing(e: &str) -> String {
    const BAD: &str = "not a valid safetensors file";
    match e.find(BAD) {
        Some(i) => e[..i + BAD.len()].to_string(),
        None => e.to_string(),
    }
}
