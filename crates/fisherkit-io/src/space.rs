//! Free space of a file system, for the disk estimate a run checks before it starts.

use crate::error::IoError;
use std::path::Path;

/// Bytes an unprivileged process can still write on the file system that
/// holds `path` (statvfs: available blocks × fragment size).
///
/// ```
/// let free = fisherkit_io::available_space(std::path::Path::new(".")).unwrap();
/// assert!(free > 0);
/// ```
///
/// # Errors
/// `path` missing or the call refused.
pub fn available_space(path: &Path) -> Result<u64, IoError> {
    let s = rustix::fs::statvfs(path).map_err(|e| IoError::Os {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}
