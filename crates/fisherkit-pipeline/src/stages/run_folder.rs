//! The run folder ([`RunFolder`]) and the keys of what it holds ([`key`]).

use crate::descriptors::fnv1a64;
use std::path::PathBuf;

/// The run folder: models, samples, stores and the image journal of one data
/// set and one set of CNN/PCA/sample settings (docs/pipeline.md §3).
pub(crate) struct RunFolder {
    pub dir: PathBuf,
    /// Removed when the run ends (no cache folder was given).
    pub temporary: bool,
}

impl RunFolder {
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A 64-bit key of `parts`, in hex.
pub(crate) fn key(parts: &[String]) -> String {
    format!("{:016x}", fnv1a64(parts.join("\u{1f}").as_bytes(), 0))
}
