//! The bundled Fashion-MNIST subset is exactly what its script writes: the
//! script is re-run into a temporary folder and every file compared byte for
//! byte, and the layout and counts are checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLASSES: [&str; 10] = [
    "t-shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
];

fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn demo_subset_layout_and_counts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fashion-mnist-demo");
    for (split, per) in [("train", 100), ("test", 50)] {
        for c in CLASSES {
            let dir = root.join(split).join(c);
            let pngs: Vec<_> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.unwrap().path())
                .collect();
            assert_eq!(pngs.len(), per, "{}", dir.display());
            for p in pngs {
                let b = std::fs::read(&p).unwrap();
                assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display());
                // IHDR: 28 x 28, 8-bit greyscale
                assert_eq!(&b[16..26], &[0, 0, 0, 28, 0, 0, 0, 28, 8, 0]);
            }
        }
    }
    let lic = std::fs::read_to_string(root.join("LICENSE")).unwrap();
    assert!(lic.contains("Copyright (c) 2017 Zalando SE"));
}

#[test]
fn demo_subset_is_reproduced_by_its_script() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !Path::new("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").exists() {
        if std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
            panic!("Debian's dataset-fashion-mnist is missing and FISHERKIT_REQUIRE_PEERS=1");
        }
        eprintln!("SKIPPED (dataset-fashion-mnist not installed)");
        return;
    }
    let out = std::env::temp_dir().join(format!("fisherkit-fashion-{}", std::process::id()));
    let status = Command::new("python3")
        .arg(repo.join("scripts/make_fashion_subset.py"))
        .arg("--out")
        .arg(&out)
        .output();
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            if std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
                panic!("cannot run python3: {e}");
            }
            eprintln!("SKIPPED (cannot run python3: {e})");
            return;
        }
    };
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let fresh = files(&out);
    let committed = files(&repo.join("data/fashion-mnist-demo"));
    std::fs::remove_dir_all(&out).unwrap();
    assert_eq!(fresh.len(), committed.len());
    for (p, bytes) in &committed {
        let f = fresh
            .get(p)
            .unwrap_or_else(|| panic!("{} not produced", p.display()));
        assert!(
            f == bytes,
            "{} differs from the script's output",
            p.display()
        );
    }
}
