//! Shared by the tests that compare against a Python peer script.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// `FISHERKIT_REQUIRE_PEERS=1`: a missing peer fails the test instead of skipping it.
pub fn require_peers() -> bool {
    std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

/// Runs `python3 script OUT_DIR` and returns the folder it wrote, or `None` (after a
/// `SKIP:` message) when the script exits with status 3 (a missing package) or python3
/// cannot run. Any other failure of the script, or any skip under [`require_peers`],
/// panics: a crash of the peer itself is always a failure. `what` names it in messages.
pub fn run_peer_script(script: &Path, what: &str) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().expect("tempdir");
    match Command::new("python3").arg(script).arg(dir.path()).output() {
        Ok(o) if o.status.success() => Some(dir),
        Ok(o) => {
            let msg = format!(
                "{what} unavailable ({}, status {:?}): {}{}",
                script.display(),
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            if require_peers() || o.status.code() != Some(3) {
                panic!("{msg}");
            }
            eprintln!("SKIP: {msg}");
            None
        }
        Err(e) => {
            assert!(!require_peers(), "python3 not runnable: {e}");
            eprintln!("SKIP: python3 not runnable: {e}");
            None
        }
    }
}
