//! Atomic file replacement: write a temporary file beside the target, sync
//! it, rename it over the target. A reader never sees a half-written file and
//! a failed write leaves nothing behind.

use crate::error::{IoError, Result};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes `path` through `write`, atomically. The temporary file is
/// `.<name>.<random>.tmp` in the target's directory (so the rename stays on
/// one file system); it is removed if `write`, the sync or the rename fails.
pub(crate) fn write_atomically<W>(path: &Path, write: W) -> Result<()>
where
    W: FnOnce(&mut BufWriter<&mut File>) -> io::Result<()>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| IoError::format(path, "is not a file name"))?;
    if path.is_dir() {
        return Err(IoError::format(path, "is a directory"));
    }
    let prefix = format!(".{}.", name.to_string_lossy());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Like `File::create`: 0o666 filtered by the umask (tempfile's default is 0o600).
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(|e| IoError::os(path, e))?;
    {
        let mut w = BufWriter::new(tmp.as_file_mut());
        write(&mut w).map_err(|e| IoError::os(path, e))?;
        w.flush().map_err(|e| IoError::os(path, e))?;
    }
    tmp.as_file().sync_all().map_err(|e| IoError::os(path, e))?;
    // On failure `persist` hands the temporary file back; dropping it deletes it.
    tmp.persist(path).map_err(|e| IoError::os(path, e.error))?;
    // Make the rename itself durable; failure here cannot corrupt the file.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        let err = write_atomically(&p, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("boom"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("out.bin"), "{err}");
        assert!(err.to_string().contains("boom"), "{err}");
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }

    #[test]
    fn failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        std::fs::write(&p, b"old").unwrap();
        write_atomically(&p, |_| Err(io::Error::other("boom"))).unwrap_err();
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(dir.path()), vec!["out.bin".to_string()]);
        write_atomically(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(entries(dir.path()), vec!["out.bin".to_string()]);
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/dir/out.npy");
        let err = write_atomically(&p, |w| w.write_all(b"x")).unwrap_err();
        assert!(err.to_string().contains("out.npy"), "{err}");
        assert!(!p.exists());
    }

    #[cfg(unix)]
    #[test]
    fn output_is_readable_by_others_like_a_created_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        write_atomically(&a, |w| w.write_all(b"x")).unwrap();
        std::fs::write(&b, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a), mode(&b));
    }
}
