//! Replays the fuzzing corpora (`fuzz/corpus/{npy,npz,model}`) and the crash
//! reproducers (`fuzz/regressions/<target>/`) through the same readers the
//! fuzz targets call: every input returns `Ok` or an error naming the file,
//! never a panic. Runs on stable in CI; the fuzzing itself (nightly,
//! `cargo fuzz run`) runs outside CI, see `fuzz/README.md`.

use fisherkit_io::{read_model_bytes, read_npy_bytes, read_npz_bytes, Model};
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

fn replay<T>(target: &str, read: impl Fn(&[u8], &Path) -> fisherkit_io::Result<T>) -> usize {
    let files = inputs(target);
    assert!(
        files.len() >= 5,
        "fuzz/corpus/{target} holds {} files; the committed corpus is missing",
        files.len()
    );
    let mut ok = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let name = Path::new("input.bin");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read(&bytes, name).map(|_| ())
        }));
        match r {
            Err(_) => panic!("{target}: {} panics", f.display()),
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
    let ok = replay("npy", |b, p| read_npy_bytes(b, p));
    assert!(ok >= 1, "no valid .npy in the corpus");
}

#[test]
fn npz_corpus_replays_without_panic() {
    let ok = replay("npz", |b, p| read_npz_bytes(b, p));
    assert!(ok >= 1, "no valid .npz in the corpus");
}

#[test]
fn model_corpus_replays_without_panic() {
    let ok = replay("model", |b, p| {
        let (m, meta) = read_model_bytes(b, p)?;
        // A model that loads is valid in both precisions' library types or
        // refused with an error (an f64 variance can underflow in f32).
        assert_eq!(meta.get("kind").map(String::as_str), Some(m.kind()));
        match &m {
            Model::Gmm(g) => {
                let _ = g.to_dtype::<f32>();
                g.to_dtype::<f64>()
                    .expect("a loaded f32/f64 GMM converts to f64");
            }
            Model::Mfa(a) => {
                let _ = a.to_dtype::<f32>();
                let _ = a.to_dtype::<f64>();
            }
        }
        Ok(m)
    });
    assert!(ok >= 2, "the corpus should hold valid GMM and MFA files");
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
        ("model", &|p: &Path| fisherkit_io::read_model(p).map(|_| ())),
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
                _ => read_model_bytes(&bytes, "input.bin").map(|_| ()),
            }
            .map_err(|e| e.to_string());
            assert_eq!(from_path, from_bytes, "{target}: {}", f.display());
        }
    }
}
