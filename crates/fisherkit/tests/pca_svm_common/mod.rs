//! Helpers shared by the PCA/SVM integration tests: running a Python peer and
//! exchanging matrices with it as text.
#![allow(dead_code)]

use ndarray::{Array2, ArrayView2};
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// Exit code a peer script uses to say "my imports are missing".
pub const SKIP_CODE: i32 = 77;

/// Prefix for peer scripts: imports that exit with [`SKIP_CODE`] when missing,
/// and `emit(name, array)` which prints an array in the format [`parse`] reads.
pub const PRELUDE: &str = r#"
import sys
try:
    import numpy as np
    MODULES
except ImportError as e:
    print(e, file=sys.stderr)
    sys.exit(77)
def emit(name, a):
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    print(name, a.shape[0], a.shape[1])
    for row in a:
        print(" ".join(repr(float(v)) for v in row))
def read(name):
    head = sys.stdin.readline().split()
    assert head[0] == name, head
    r, c = int(head[1]), int(head[2])
    return np.array([[float(v) for v in sys.stdin.readline().split()] for _ in range(r)]).reshape(r, c)
"#;

/// Writes `a` in the text format `read(name)` of [`PRELUDE`] parses
/// (shortest round-trip decimal: exact in f64).
pub fn write_matrix(out: &mut String, name: &str, a: ArrayView2<f64>) {
    out.push_str(&format!("{name} {} {}\n", a.nrows(), a.ncols()));
    for r in a.outer_iter() {
        let s: Vec<String> = r.iter().map(|v| format!("{v:e}")).collect();
        out.push_str(&s.join(" "));
        out.push('\n');
    }
}

/// Parses the output of `emit` calls.
pub fn parse(text: &str) -> HashMap<String, Array2<f64>> {
    let mut lines = text.lines();
    let mut out = HashMap::new();
    while let Some(head) = lines.next() {
        let h: Vec<&str> = head.split_whitespace().collect();
        if h.len() != 3 {
            continue;
        }
        let (r, c): (usize, usize) = (h[1].parse().unwrap(), h[2].parse().unwrap());
        let mut v = Vec::with_capacity(r * c);
        for _ in 0..r {
            v.extend(
                lines
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .map(|t| t.parse::<f64>().unwrap()),
            );
        }
        out.insert(h[0].to_string(), Array2::from_shape_vec((r, c), v).unwrap());
    }
    out
}

fn require_peers() -> bool {
    std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

fn skip(why: &str) -> Option<HashMap<String, Array2<f64>>> {
    if require_peers() {
        panic!("peer unavailable and FISHERKIT_REQUIRE_PEERS=1: {why}");
    }
    eprintln!("SKIPPED (peer unavailable: {why}; set FISHERKIT_REQUIRE_PEERS=1 to make this fail)");
    None
}

/// Runs `python3` on PRELUDE (with `modules`, e.g. `"import sklearn"`) + `body`,
/// feeding `stdin`; returns the emitted arrays, or `None` (skip) when python3 or
/// a module is missing — a failure instead when FISHERKIT_REQUIRE_PEERS=1.
/// Any other script failure panics.
pub fn run_python(modules: &str, body: &str, stdin: &str) -> Option<HashMap<String, Array2<f64>>> {
    let script = PRELUDE.replace("MODULES", modules) + body;
    let child = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return skip(&format!("cannot run python3: {e}")),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(SKIP_CODE) {
        return skip(&format!("python import failed: {}", stderr.trim()));
    }
    assert!(out.status.success(), "python peer failed:\n{stderr}");
    Some(parse(&String::from_utf8(out.stdout).unwrap()))
}
