//! Shared by the CLI's integration tests: the binary under test and a
//! deterministic source of test data.
#![allow(dead_code)]

use assert_cmd::Command;
use fisherkit_io::{read_npy, Matrix};
use ndarray::Array2;
use std::path::Path;

/// The `fisherkit` binary of this build.
pub fn fk() -> Command {
    Command::cargo_bin("fisherkit").unwrap()
}

/// splitmix64 → uniform → Box–Muller: deterministic test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// An .npy file read as f64, whatever its float type.
pub fn read64(p: &Path) -> Array2<f64> {
    match read_npy(p).unwrap() {
        Matrix::F64(a) => a,
        Matrix::F32(a) => a.mapv(|v| v as f64),
    }
}

/// A path as the `&str` a command line takes.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The one check of a failed command, for every CLI test: exit status `code`;
/// stderr starts with `error: `, names every needle, has no panic or
/// backtrace text, and is exactly one line for a run-time error (`code` 1; a
/// usage error, code 2, is clap's message followed by its usage lines);
/// nothing on stdout; and none of `outputs` written, nor a temporary file
/// beside one (`.<name>.…`). Returns stderr.
pub fn assert_error(
    out: &std::process::Output,
    code: i32,
    needles: &[&str],
    outputs: &[&Path],
) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    if code == 1 {
        assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    }
    for n in needles {
        assert!(stderr.contains(n), "`{n}` not in: {stderr}");
    }
    assert!(
        out.stdout.is_empty(),
        "stdout of a failed command: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for output in outputs {
        assert_nothing_written(output);
    }
    stderr
}

/// `output` does not exist and no temporary file of it (`.<name>.…`) is left beside it.
pub fn assert_nothing_written(output: &Path) {
    assert!(!output.exists(), "{} was written", output.display());
    if let (Some(dir), Some(name)) = (output.parent(), output.file_name()) {
        if dir.is_dir() {
            let prefix = format!(".{}.", name.to_string_lossy());
            for e in std::fs::read_dir(dir).unwrap() {
                let n = e.unwrap().file_name().to_string_lossy().into_owned();
                assert!(!n.starts_with(&prefix), "temporary file {n} left behind");
            }
        }
    }
}
