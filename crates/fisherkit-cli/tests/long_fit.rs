//! Out-of-core fits and lost-work protection, on the real binary:
//!
//! * the same rows in one file or split over three give the same model bytes;
//! * the streamed fit agrees with the library's in-memory fit;
//! * a real SIGINT / SIGTERM mid-EM exits 130 / 143, leaves the previous
//!   output byte for byte (or none) and no temporary file;
//! * a fit killed with SIGKILL after a checkpoint and rerun with `--resume`
//!   writes exactly the bytes of an uninterrupted run.

use fisherkit::gmm::{GmmParams, VarianceFloor};
use fisherkit::mfa::MfaParams;
use fisherkit_io::{write_npy, GmmModel, MfaModel, ModelFile};
use ndarray::{s, Array2};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_error, s, Rng};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fisherkit"))
}

/// `n` rows in D dims around `k` random centres (unit noise, centres ~ N(0, 9)).
fn blobs(n: usize, d: usize, k: usize, seed: u64) -> Array2<f32> {
    let mut rng = Rng(seed);
    let c = Array2::from_shape_fn((k, d), |_| 3.0 * rng.normal());
    Array2::from_shape_fn((n, d), |(i, j)| (c[[i % k, j]] + rng.normal()) as f32)
}

fn write(dir: &Path, name: &str, x: ndarray::ArrayView2<'_, f32>) -> PathBuf {
    let p = dir.join(name);
    write_npy(&p, x).unwrap();
    p
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn no_temp_files(dir: &Path) {
    let e = entries(dir);
    assert!(
        e.iter().all(|n| !n.ends_with(".tmp")),
        "temporary files left: {e:?}"
    );
}

/// Waits until `path` exists (the fit wrote its first checkpoint: it is
/// mid-EM), failing if the child exits first or after 60 s.
fn wait_for(child: &mut Child, path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the fit ended ({st:?}) before {} appeared", path.display());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kill(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn stderr_of(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn split_inputs_give_the_same_model_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = blobs(3000, 5, 4, 1);
    let whole = write(d, "x.npy", x.view());
    let a = write(d, "a.npy", x.slice(s![..1000, ..]));
    let b = write(d, "b.npy", x.slice(s![1000..1777, ..]));
    let c = write(d, "c.npy", x.slice(s![1777.., ..]));
    for (cmd, k_flags) in [
        ("gmm", vec!["-k", "4"]),
        ("mfa", vec!["-k", "3", "-r", "2"]),
    ] {
        let fit = |inputs: &[&str], out: &str| {
            let o = d.join(out);
            run_ok(
                bin()
                    .args(["--quiet", cmd, "fit"])
                    .args(inputs)
                    .args(&k_flags)
                    .args(["--max-iter", "8", "--chunk-rows", "256", "--init-sample"])
                    .args(["1000", "-o", s(&o)]),
            );
            std::fs::read(o).unwrap()
        };
        let one = fit(&["-i", s(&whole)], "one.st");
        let three = fit(&["-i", s(&a), s(&b), s(&c)], "three.st");
        let repeated = fit(&["-i", s(&a), "-i", s(&b), "-i", s(&c)], "rep.st");
        assert_eq!(one, three, "{cmd}: one file vs three");
        assert_eq!(one, repeated, "{cmd}: --input a b c vs -i a -i b -i c");
        let other = fit(&["-i", s(&whole)], "one.st");
        assert_eq!(one, other, "{cmd}: same run twice");
    }
    // a file of another width is named
    let narrow = write(d, "narrow.npy", x.slice(s![..10, ..3]));
    let bad = d.join("bad.st");
    let out = bin()
        .args(["gmm", "fit", "-i", s(&a), s(&narrow), "-k", "2", "-o"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_error(&out, 1, &["narrow.npy", "3 columns"], &[&bad]);
}

#[test]
fn streamed_fits_agree_with_the_in_memory_library_fits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = blobs(2500, 4, 3, 2);
    let xp = write(d, "x.npy", x.view());
    let out = d.join("g.st");
    // chunks of 300 rows; the init sample holds every row
    run_ok(
        bin()
            .args(["--quiet", "gmm", "fit", "-i", s(&xp), "-k", "3"])
            .args([
                "--seed",
                "4",
                "--max-iter",
                "20",
                "--chunk-rows",
                "300",
                "-o",
                s(&out),
            ]),
    );
    let GmmModel::F32(g) = GmmModel::read(&out).unwrap() else {
        panic!("f32 model expected")
    };
    let want = GmmParams::<f32>::new(3)
        .seed(4)
        .max_iter(20)
        .variance_floor(VarianceFloor::default())
        .fit(x.view())
        .unwrap()
        .model;
    let close = |a: f32, b: f32, what: &str| {
        assert!(
            (a - b).abs() <= 2e-5 * (1.0 + a.abs().max(b.abs())),
            "{what}: {a} vs {b}"
        );
    };
    for (a, b) in g.weights().iter().zip(want.weights()) {
        close(*a, *b, "weight");
    }
    for (a, b) in g.means().iter().zip(want.means()) {
        close(*a, *b, "mean");
    }
    for (a, b) in g.variances().iter().zip(want.variances()) {
        close(*a, *b, "variance");
    }
    let out = d.join("m.st");
    run_ok(bin().args(["--quiet", "mfa", "fit", "-i", s(&xp)]).args([
        "-k",
        "3",
        "-r",
        "2",
        "--max-iter",
        "10",
        "--chunk-rows",
        "300",
        "-o",
        s(&out),
    ]));
    let MfaModel::F32(m) = MfaModel::read(&out).unwrap() else {
        panic!("f32 model expected")
    };
    let want = MfaParams::new(3, 2)
        .max_iter(10)
        .fit(x.view())
        .unwrap()
        .model;
    for (a, b) in m.means.iter().zip(want.means()) {
        close(*a, *b, "MFA mean");
    }
    for (a, b) in m.psi.iter().zip(want.psi()) {
        close(*a, *b, "MFA psi");
    }
    // loadings: columns are defined up to sign only through the fit path,
    // which is the same here, so compare directly
    for (a, b) in m.loadings.iter().zip(want.loadings()) {
        close(*a, *b, "MFA loading");
    }
}

/// Data that take some seconds per 100 iterations in the test profile.
fn long_data(dir: &Path) -> PathBuf {
    write(dir, "x.npy", blobs(100_000, 16, 16, 3).view())
}

#[test]
fn sigint_mid_fit_keeps_the_previous_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xp = long_data(d);
    let out = d.join("gmm.safetensors");
    std::fs::write(&out, b"the previous model").unwrap();
    let ckpt = d.join("gmm.safetensors.ckpt");
    let child = bin()
        .args([
            "gmm",
            "fit",
            "-i",
            s(&xp),
            "-k",
            "16",
            "--max-iter",
            "100000",
        ])
        .args(["--tol", "0", "--chunk-rows", "8192", "--checkpoint", "1"])
        .args(["-o", s(&out)])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    wait_for(&mut child, &ckpt);
    kill(&child, "-INT");
    let (code, err) = stderr_of(child);
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(
        err.contains("is unchanged") && err.contains("--resume"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous model");
    no_temp_files(d);
    assert_eq!(
        entries(d),
        ["gmm.safetensors", "gmm.safetensors.ckpt", "x.npy"]
    );
    // the checkpoint belongs to K = 16: resuming with K = 8 is refused
    let o = bin()
        .args(["gmm", "fit", "-i", s(&xp), "-k", "8", "--tol", "0"])
        .args(["--chunk-rows", "8192", "--resume", "-o", s(&out)])
        .output()
        .unwrap();
    assert_error(&o, 1, &["components was 16 and is now 8"], &[]);
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous model");
    // with the same settings it resumes; --max-iter 1 is already reached, so
    // the checkpoint's model is written and the checkpoint removed
    let o = bin()
        .args(["gmm", "fit", "-i", s(&xp), "-k", "16", "--tol", "0"])
        .args(["--chunk-rows", "8192", "--resume", "--max-iter", "1"])
        .args(["-o", s(&out)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming from"), "{err}");
    assert_eq!(entries(d), ["gmm.safetensors", "x.npy"]);
    // … and it is the model of an uninterrupted one-iteration fit, byte for byte
    let reference = d.join("reference.safetensors");
    run_ok(
        bin()
            .args([
                "--quiet",
                "gmm",
                "fit",
                "-i",
                s(&xp),
                "-k",
                "16",
                "--tol",
                "0",
            ])
            .args([
                "--chunk-rows",
                "8192",
                "--max-iter",
                "1",
                "-o",
                s(&reference),
            ]),
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&reference).unwrap()
    );
}

#[test]
fn sigterm_mid_fit_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xp = long_data(d);
    let out = d.join("mfa.safetensors");
    let ckpt = d.join("mfa.safetensors.ckpt");
    let mut child = bin()
        .args(["mfa", "fit", "-i", s(&xp), "-k", "4", "-r", "2"])
        .args(["--max-iter", "100000", "--tol", "0", "--checkpoint", "1"])
        .args(["-o", s(&out)])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&mut child, &ckpt);
    kill(&child, "-TERM");
    let (code, err) = stderr_of(child);
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(err.contains("was not written"), "{err}");
    assert!(!out.exists());
    no_temp_files(d);
}

/// A fit killed by SIGKILL after a checkpoint, rerun with `--resume`, writes
/// the bytes of the uninterrupted run; the checkpoint is then removed.
fn kill9_then_resume(cmd: &str, model_flags: &[&str], max_iter: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xp = long_data(d);
    let flags = |out: &Path| -> Vec<String> {
        let mut v: Vec<String> = vec!["--quiet".into(), cmd.into(), "fit".into()];
        v.extend(["-i", s(&xp)].map(String::from));
        v.extend(model_flags.iter().map(|f| f.to_string()));
        v.extend(
            [
                "--max-iter",
                max_iter,
                "--tol",
                "0",
                "--seed",
                "9",
                "--chunk-rows",
                "10000",
                "--checkpoint",
                "2",
                "-o",
                s(out),
            ]
            .map(String::from),
        );
        v
    };
    let full = d.join("full.st");
    run_ok(bin().args(flags(&full)));
    assert!(!d.join("full.st.ckpt").exists(), "checkpoint not removed");
    let cut = d.join("cut.st");
    let ckpt = d.join("cut.st.ckpt");
    let mut child = bin().args(flags(&cut)).spawn().unwrap();
    wait_for(&mut child, &ckpt);
    child.kill().unwrap(); // SIGKILL
    let st = child.wait().unwrap();
    assert_eq!(st.code(), None, "killed by a signal");
    assert!(!cut.exists(), "the killed fit wrote its output");
    let mut resumed = flags(&cut);
    resumed.push("--resume".into());
    let o = bin().args(&resumed).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(&cut).unwrap(),
        std::fs::read(&full).unwrap(),
        "{cmd}: resumed model differs from the uninterrupted one"
    );
    assert!(!ckpt.exists(), "checkpoint not removed after success");
    no_temp_files(d);
}

#[test]
fn gmm_killed_and_resumed_equals_uninterrupted() {
    kill9_then_resume("gmm", &["-k", "16"], "10");
}

#[test]
fn mfa_killed_and_resumed_equals_uninterrupted() {
    kill9_then_resume("mfa", &["-k", "4", "-r", "2"], "8");
}

#[test]
fn resume_refuses_foreign_checkpoints_and_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xp = write(d, "x.npy", blobs(600, 3, 3, 5).view());
    let out = d.join("g.st");
    let ckpt = d.join("g.st.ckpt");
    run_ok(
        bin()
            .args(["--quiet", "gmm", "fit", "-i", s(&xp), "-k", "3"])
            .args(["--max-iter", "2", "-o", s(&out)]),
    );
    // a model file without checkpoint metadata is refused as a checkpoint
    std::fs::copy(&out, &ckpt).unwrap();
    let o = bin()
        .args([
            "gmm",
            "fit",
            "-i",
            s(&xp),
            "-k",
            "3",
            "--resume",
            "-o",
            s(&out),
        ])
        .output()
        .unwrap();
    assert_error(&o, 1, &["not a fisherkit checkpoint"], &[]);
    // --checkpoint with restarts, and --chunk-rows 0, are usage errors
    let fresh = d.join("fresh.safetensors");
    for (extra, needle) in [
        (&["--checkpoint", "1", "--n-init", "2"][..], "--n-init"),
        (&["--chunk-rows", "0"], "--chunk-rows"),
    ] {
        let o = bin()
            .args(["gmm", "fit", "-i", s(&xp), "-k", "3", "-o", s(&fresh)])
            .args(extra)
            .output()
            .unwrap();
        assert_error(&o, 2, &[needle], &[&fresh]);
    }
}
