//! The streamed `fisherkit run` (docs/pipeline.md): a run killed with SIGKILL
//! and started again gives the report of an uninterrupted run; a full disk and
//! an unusable work folder give one clear error; peak memory does not grow
//! with the number of images.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

#[path = "../../fisherkit-pipeline/tests/common/mod.rs"]
mod images;
use images::small_set;
mod common;
use common::fk;

const SMALL: [&str; 18] = [
    "--scales",
    "28",
    "--pca-dim",
    "8",
    "--gmm-components",
    "3",
    "--mfa-components",
    "2",
    "--mfa-factors",
    "2",
    "--gmm-max-iter",
    "10",
    "--mfa-max-iter",
    "5",
    "--encoders",
    "gmm-fv:mean+var,mfa-fs:loading",
    "--c-grid",
    "0.1,1",
];

fn run_args(t: &Path, cache: &Path, report: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--quiet".into(),
        "run".into(),
        "--train".into(),
        t.join("train").display().to_string(),
        "--test".into(),
        t.join("test").display().to_string(),
        "--cache".into(),
        cache.display().to_string(),
        "--report".into(),
        report.display().to_string(),
    ];
    v.extend(SMALL.iter().map(|s| s.to_string()));
    v
}

fn results(report: &Path) -> serde_json::Value {
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            serde_json::json!([
                row["spec"],
                row["accuracy"],
                row["cv"],
                row["confusion"],
                row["c"]
            ])
        })
        .collect()
}

/// Lines of the journals of every store under `cache`.
fn journalled(cache: &Path) -> usize {
    let mut n = 0;
    for run in std::fs::read_dir(cache.join("runs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for e in std::fs::read_dir(run.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(t) = std::fs::read_to_string(e.path().join("done")) {
                n += t.lines().count();
            }
        }
    }
    n
}

#[test]
fn a_killed_run_resumes_to_the_uninterrupted_report() {
    let t = small_set(&["bag", "sneaker", "trouser"], 16, 6);
    let whole = tempfile::tempdir().unwrap();
    let (cache_a, report_a) = (whole.path().join("cache"), whole.path().join("a.json"));
    fk().args(run_args(t.path(), &cache_a, &report_a))
        .assert()
        .success();

    // Kill the same run once its encode pass has committed a batch.
    let (cache_b, report_b) = (whole.path().join("cache-b"), whole.path().join("b.json"));
    let bin = assert_cmd::cargo::cargo_bin("fisherkit");
    let mut child = StdCommand::new(&bin)
        .args(run_args(t.path(), &cache_b, &report_b))
        .spawn()
        .unwrap();
    let start = Instant::now();
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break Err(format!(
                    "the run ended ({status}) before it could be killed"
                ))
            }
            Ok(None) => {}
            Err(e) => break Err(e.to_string()),
        }
        if journalled(&cache_b) > 0 {
            break Ok(());
        }
        if start.elapsed() > Duration::from_secs(300) {
            break Err("no batch was committed within 300 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = child.kill(); // SIGKILL: no clean-up runs
    let _ = child.wait();
    outcome.unwrap();
    assert!(!report_b.exists(), "a killed run writes no report");
    let done_before = journalled(&cache_b);

    // The same command again: it continues, and the report is the uninterrupted one.
    let out = fk()
        .args(
            run_args(t.path(), &cache_b, &report_b)
                .into_iter()
                .filter(|a| a != "--quiet"),
        )
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("reused from the run folder"),
        "the resumed run said: {err}"
    );
    assert!(journalled(&cache_b) >= done_before);
    assert_eq!(results(&report_a), results(&report_b));
}

/// Runs `args`, expects exit status 1 with one `error:` message and no panic; returns stderr.
fn failed_run(args: Vec<String>) -> String {
    common::assert_error(&fk().args(args).output().unwrap(), 1, &[], &[])
}

#[test]
fn an_unusable_work_folder_is_one_clear_error() {
    let t = small_set(&["bag", "trouser"], 3, 2);
    let w = tempfile::tempdir().unwrap();
    let not_a_dir = w.path().join("cache");
    std::fs::write(&not_a_dir, b"a file").unwrap();
    let err = failed_run(run_args(t.path(), &not_a_dir, &w.path().join("r.json")));
    assert!(err.contains("cache") && err.contains("run folder"), "{err}");
    assert!(!w.path().join("r.json").exists());
}

/// A tmpfs of `kb` kilobytes mounted on a new folder (root only), unmounted on drop.
struct TinyDisk(PathBuf);

impl TinyDisk {
    fn mount(kb: usize) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap().keep();
        let ok = StdCommand::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kb}k"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(TinyDisk(dir))
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_full_disk_is_one_clear_error_and_no_report() {
    let Some(disk) = TinyDisk::mount(24) else {
        assert!(
            std::env::var("FISHERKIT_REQUIRE_PEERS").as_deref() != Ok("1"),
            "mounting a tmpfs needs root; FISHERKIT_REQUIRE_PEERS=1 requires this test"
        );
        eprintln!("skipped: cannot mount a tmpfs (not root)");
        return;
    };
    let t = small_set(&["bag", "trouser"], 12, 4);
    let report = disk.0.join("r.json");
    let err = failed_run(run_args(t.path(), &disk.0.join("cache"), &report));
    // Refused by the disk estimate before any CNN work (or, had the estimate
    // passed, stopped by the full disk itself): one line naming the place.
    let refused = err.contains("not enough disk");
    assert!(
        refused || err.contains("No space left on device") || err.contains("os error 28"),
        "{err}"
    );
    assert!(
        err.contains(&disk.0.display().to_string()),
        "names the file: {err}"
    );
    assert!(!report.exists(), "no report after a failed run");
    if refused {
        for p in ["need", "free", "--cache"] {
            assert!(err.contains(p), "`{p}` missing: {err}");
        }
        let runs: Vec<_> = std::fs::read_dir(disk.0.join("cache/runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        for run in runs {
            let names: Vec<String> = std::fs::read_dir(&run)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                !names
                    .iter()
                    .any(|n| n == "images.tsv" || n.starts_with("sample")),
                "refused before any CNN work: {names:?}"
            );
        }
    }
}

/// Writes `n` PNG images per class of `side` px: textures that differ by class.
fn texture_set(root: &Path, n: usize, side: u32) {
    for (split, count) in [("train", n), ("test", 2)] {
        for c in 0..2u32 {
            let dir = root.join(split).join(format!("c{c}"));
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..count as u32 {
                let img = image::RgbImage::from_fn(side, side, |x, y| {
                    let v = ((x * (3 + c) + y * (5 + i % 7)) % 256) as u8;
                    image::Rgb([v, v.wrapping_mul(3), 255 - v])
                });
                img.save(dir.join(format!("{i:03}.png"))).unwrap();
            }
        }
    }
}

fn peak_mb(report: &Path) -> f64 {
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    r["peak_rss_mb"].as_f64().unwrap()
}

#[test]
fn peak_memory_does_not_grow_with_the_number_of_images() {
    // 56-px images at scale 28: ~ (2 × 13)² ≈ 700 descriptors, 2.8 MB each.
    let w = tempfile::tempdir().unwrap();
    let mut peaks = Vec::new();
    for n in [6usize, 24] {
        let root = w.path().join(format!("n{n}"));
        texture_set(&root, n, 56);
        let report = root.join("r.json");
        let mut args = run_args(&root, &root.join("cache"), &report);
        args.extend(["--sample-images", "4", "--model-sample", "2000"].map(String::from));
        fk().args(args).assert().success();
        peaks.push(peak_mb(&report));
    }
    // Holding every descriptor would add (48 − 12) × 2.8 MB ≈ 100 MB at 4N.
    let held = 36.0 * 700.0 * 1000.0 * 4.0 / 1e6;
    assert!(
        peaks[1] < 1.5 * peaks[0] && peaks[1] - peaks[0] < 0.5 * held,
        "peak RSS {:.0} MB at N and {:.0} MB at 4N (all descriptors: +{held:.0} MB)",
        peaks[0],
        peaks[1]
    );
}

#[test]
fn models_do_not_depend_on_the_encoder_list_and_the_report_may_go_in_the_output_folder() {
    let t = small_set(&["bag", "sneaker"], 6, 2);
    let w = tempfile::tempdir().unwrap();
    let mut gmm_bytes = Vec::new();
    for (i, encoders) in ["gmm-fv:mean+var,mfa-fs:loading", "cnn-global,gmm-fv:var"]
        .iter()
        .enumerate()
    {
        let out = w.path().join(format!("out{i}"));
        // --report inside a folder that --output-dir creates
        let mut args = run_args(
            t.path(),
            &w.path().join(format!("cache{i}")),
            &out.join("report.json"),
        );
        let at = args.iter().position(|a| a == "--encoders").unwrap();
        args[at + 1] = encoders.to_string();
        args.extend(["--output-dir".to_string(), out.display().to_string()]);
        fk().args(args).assert().success();
        assert!(out.join("report.json").exists());
        gmm_bytes.push(std::fs::read(out.join("gmm-K3-28.safetensors")).unwrap());
    }
    assert!(
        gmm_bytes[0] == gmm_bytes[1],
        "the GMM changed with the encoder list"
    );
}
