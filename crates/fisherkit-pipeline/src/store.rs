//! The on-disk encoding store of a streamed run (docs/pipeline.md §3).
//!
//! One store per background model (or for the CNN's global vectors): a file
//! `rows.f32` of `n_rows × dim` little-endian `f32` values, row `i` the raw
//! (un-normalised) encoding of image `i` of the run, and a journal `done`
//! listing, one decimal index per line, the rows that are complete. A batch's
//! rows are written and synced before their indices are appended to the
//! journal (and synced), so a run killed at any point finds in the journal
//! only rows that were fully written; the others are computed again.
//! `meta.json` fixes the shape; a store whose shape differs is refused.
//!
//! Memory: nothing is held but the journal's index set; readers fetch column
//! blocks or single rows with positioned reads.

use crate::PipelineError;
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An open encoding store.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    n_rows: usize,
    dim: usize,
    data: File,
    journal: Mutex<File>,
    done: BTreeSet<usize>,
}

fn io(path: &Path, what: &str, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

impl Store {
    /// Opens the store in `dir`, creating it (shape `n_rows × dim`) if absent.
    ///
    /// # Errors
    /// An unwritable folder, a store of another shape, an unreadable journal.
    pub fn open(dir: &Path, n_rows: usize, dim: usize) -> Result<Self, PipelineError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "cannot create the store folder", e))?;
        let meta_path = dir.join("meta.json");
        let meta = format!("{{\"n_rows\": {n_rows}, \"dim\": {dim}, \"dtype\": \"<f4\"}}\n");
        match std::fs::read_to_string(&meta_path) {
            Ok(m) if m == meta => {}
            Ok(m) => {
                return Err(io(
                    &meta_path,
                    "the store holds another shape",
                    format!(
                        "{} (expected {}); remove the folder to start again",
                        m.trim(),
                        meta.trim()
                    ),
                ))
            }
            Err(_) => fisherkit_io::write_file(&meta_path, meta.as_bytes())
                .map_err(|e| io(&meta_path, "cannot write", e))?,
        }
        let data_path = dir.join("rows.f32");
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&data_path)
            .map_err(|e| io(&data_path, "cannot open", e))?;
        let size = (n_rows * dim * 4) as u64;
        if data.metadata().map(|m| m.len()).unwrap_or(0) < size {
            data.set_len(size)
                .map_err(|e| io(&data_path, "cannot size the store", e))?;
        }
        let journal_path = dir.join("done");
        let (done, valid_len) = read_journal(&journal_path, n_rows)?;
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .map_err(|e| io(&journal_path, "cannot open", e))?;
        // Drop a last line cut by a kill, so the next append starts a line.
        journal
            .set_len(valid_len)
            .map_err(|e| io(&journal_path, "cannot repair the journal", e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            n_rows,
            dim,
            data,
            journal: Mutex::new(journal),
            done,
        })
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Length of a row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether row `i` is complete.
    pub fn has(&self, i: usize) -> bool {
        self.done.contains(&i)
    }

    /// Writes row `i` (`dim` values); not yet journalled.
    ///
    /// # Errors
    /// A failed write (a full disk names the file).
    pub fn write_row(&self, i: usize, row: &[f32]) -> Result<(), PipelineError> {
        debug_assert!(i < self.n_rows && row.len() == self.dim);
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.data
            .write_all_at(&bytes, (i * self.dim * 4) as u64)
            .map_err(|e| io(&self.dir.join("rows.f32"), "cannot write encodings", e))
    }

    /// Syncs the rows written so far, then journals `rows` as complete.
    ///
    /// # Errors
    /// A failed sync or journal write.
    pub fn commit(&mut self, rows: &[usize]) -> Result<(), PipelineError> {
        if rows.is_empty() {
            return Ok(());
        }
        let data_path = self.dir.join("rows.f32");
        self.data
            .sync_data()
            .map_err(|e| io(&data_path, "cannot sync encodings", e))?;
        let text: String = rows.iter().map(|i| format!("{i}\n")).collect();
        let jp = self.dir.join("done");
        let mut j = self.journal.lock().expect("not poisoned");
        j.write_all(text.as_bytes())
            .and_then(|_| j.sync_data())
            .map_err(|e| io(&jp, "cannot write the journal", e))?;
        self.done.extend(rows.iter().copied());
        Ok(())
    }

    /// Reads columns `cols` of rows `rows` into `out` (`rows.len()` × `cols.len()`, row-major).
    ///
    /// # Errors
    /// A failed read.
    pub fn read_block(
        &self,
        rows: &[usize],
        cols: std::ops::Range<usize>,
        out: &mut [f32],
    ) -> Result<(), PipelineError> {
        let w = cols.len();
        debug_assert_eq!(out.len(), rows.len() * w);
        let mut buf = vec![0u8; w * 4];
        for (o, &r) in out.chunks_exact_mut(w).zip(rows) {
            self.data
                .read_exact_at(&mut buf, ((r * self.dim + cols.start) * 4) as u64)
                .map_err(|e| io(&self.dir.join("rows.f32"), "cannot read encodings", e))?;
            for (v, b) in o.iter_mut().zip(buf.chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        Ok(())
    }
}

/// The complete rows listed in a journal and the length of its complete
/// lines; a last line cut by a kill is ignored.
fn read_journal(path: &Path, n_rows: usize) -> Result<(BTreeSet<usize>, u64), PipelineError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeSet::new(), 0)),
        Err(e) => return Err(io(path, "cannot read the journal", e)),
    };
    let mut done = BTreeSet::new();
    let mut valid = 0u64;
    for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        valid += line.len() as u64;
        match line.trim().parse::<usize>() {
            Ok(i) if i < n_rows => {
                done.insert(i);
            }
            _ => {
                return Err(io(
                    path,
                    "corrupt journal",
                    format!(
                        "line `{}`; remove the store folder to start again",
                        line.trim()
                    ),
                ))
            }
        }
    }
    Ok((done, valid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_survive_reopening_and_uncommitted_rows_do_not_count() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("s");
        let mut s = Store::open(&d, 4, 3).unwrap();
        s.write_row(2, &[1.0, 2.0, 3.0]).unwrap();
        s.write_row(0, &[4.0, 5.0, 6.0]).unwrap();
        s.commit(&[2]).unwrap();
        drop(s);
        // a cut last line (a kill mid-append) is ignored
        let mut j = OpenOptions::new()
            .append(true)
            .open(d.join("done"))
            .unwrap();
        j.write_all(b"0").unwrap();
        let mut s = Store::open(&d, 4, 3).unwrap();
        assert!(s.has(2) && !s.has(0));
        s.commit(&[3]).unwrap();
        drop(s);
        let s = Store::open(&d, 4, 3).unwrap();
        assert!(
            s.has(2) && s.has(3) && !s.has(0),
            "the cut line was dropped"
        );
        let mut out = vec![0.0; 2];
        s.read_block(&[2], 1..3, &mut out).unwrap();
        assert_eq!(out, vec![2.0, 3.0]);
        assert!(Store::open(&d, 4, 5)
            .unwrap_err()
            .to_string()
            .contains("another shape"));
    }
}
