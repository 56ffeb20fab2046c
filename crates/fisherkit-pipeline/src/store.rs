//! The on-disk encoding store of a streamed run (docs/pipeline.md §3).
//!
//! One store per background model (or for the CNN's global vectors): a file
//! of `n_rows` fixed-size rows, row `i` the raw (un-normalised) encoding of
//! image `i` of the run, and a journal `done` listing, one decimal index per
//! line, the rows that are complete. A batch's rows are written and synced
//! before their indices are appended to the journal (and synced), so a run
//! killed at any point finds in the journal only rows that were fully
//! written; the others are computed again. `meta.json` fixes the shape and
//! the format; a store whose shape or format differs is refused.
//!
//! Two row formats ([`StoreFormat`]):
//!
//! * `f32` (`rows.f32`): `dim` little-endian `f32` values, 4 bytes a value.
//! * `q8` (`rows.q8`): the row cut in blocks of
//!   [`Q8_BLOCK`] values; first the blocks' scales $m_b = \max_{j \in b}|v_j|$
//!   (little-endian `f32`), then one signed byte per value,
//!   $q_j = \mathrm{round}(127\,\mathrm{sign}(v_j)\sqrt{|v_j|/m_b})$,
//!   read back as $\hat v_j = \mathrm{sign}(q_j)\,(|q_j|/127)^2\, m_b$:
//!   1.016 bytes a value. The code is uniform in $\sqrt{|v|}$, the domain the
//!   signed square root of the normalisation works in: there the error is at
//!   most $\sqrt{m_b}/254$, and after the L2 normalisation of an encoding
//!   of many blocks it changes kernels by about $10^{-4}$ relative
//!   (test `q8_rows_round_trip_within_the_stated_error`; accuracy in
//!   docs/evidence/compact-stores-2026-12-06.md).
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

/// Values per scale block of the `q8` format.
pub const Q8_BLOCK: usize = 256;

/// How a store keeps its rows (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreFormat {
    /// 4 bytes a value, exact.
    F32,
    /// About 1 byte a value: square-root-companded 8-bit codes with a scale per
    /// [`Q8_BLOCK`] values. The default: on the full MIT-shaped set its 16
    /// accuracy rows are within 0.37 points of `F32`'s, mean change −0.005
    /// (docs/evidence/object-scenes-full-defaults-2026-12-06.md), for a
    /// quarter of the disk.
    #[default]
    Q8,
}

impl StoreFormat {
    /// The format's name in `meta.json`, file names and messages.
    pub fn name(self) -> &'static str {
        match self {
            StoreFormat::F32 => "f32",
            StoreFormat::Q8 => "q8",
        }
    }

    /// Bytes of one row of `dim` values.
    pub fn row_bytes(self, dim: usize) -> usize {
        match self {
            StoreFormat::F32 => 4 * dim,
            StoreFormat::Q8 => 4 * dim.div_ceil(Q8_BLOCK) + dim,
        }
    }

    fn data_file(self) -> &'static str {
        match self {
            StoreFormat::F32 => "rows.f32",
            StoreFormat::Q8 => "rows.q8",
        }
    }
}

/// Encodes `row` in the `q8` format into `out` (`StoreFormat::Q8.row_bytes(row.len())`).
fn q8_encode(row: &[f32], out: &mut [u8]) {
    let nb = row.len().div_ceil(Q8_BLOCK);
    let (scales, codes) = out.split_at_mut(4 * nb);
    for (b, chunk) in row.chunks(Q8_BLOCK).enumerate() {
        let m = chunk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        scales[4 * b..4 * b + 4].copy_from_slice(&m.to_le_bytes());
        let c = &mut codes[b * Q8_BLOCK..b * Q8_BLOCK + chunk.len()];
        if m > 0.0 {
            let inv = 1.0 / m;
            for (q, &v) in c.iter_mut().zip(chunk) {
                let a = (127.0 * (v.abs() * inv).sqrt()).round().min(127.0);
                *q = ((if v < 0.0 { -a } else { a }) as i8) as u8;
            }
        } else {
            c.fill(0);
        }
    }
}

/// Decodes values `cols` of a `q8` row from its block scales `scales`
/// (`f32` of the covered blocks, from block `cols.start / Q8_BLOCK`) and
/// codes `codes` (of `cols`) into `out`.
fn q8_decode(scales: &[u8], codes: &[u8], cols: std::ops::Range<usize>, out: &mut [f32]) {
    let first = cols.start / Q8_BLOCK;
    for ((o, &q), j) in out.iter_mut().zip(codes).zip(cols) {
        let b = j / Q8_BLOCK - first;
        let m = f32::from_le_bytes([
            scales[4 * b],
            scales[4 * b + 1],
            scales[4 * b + 2],
            scales[4 * b + 3],
        ]);
        let q = q as i8 as f32 * (1.0 / 127.0);
        *o = q * q.abs() * m;
    }
}

/// An open encoding store.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    n_rows: usize,
    dim: usize,
    format: StoreFormat,
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
    pub fn open(
        dir: &Path,
        n_rows: usize,
        dim: usize,
        format: StoreFormat,
    ) -> Result<Self, PipelineError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "cannot create the store folder", e))?;
        let meta_path = dir.join("meta.json");
        let dtype = match format {
            StoreFormat::F32 => "<f4",
            StoreFormat::Q8 => "q8",
        };
        let meta = format!("{{\"n_rows\": {n_rows}, \"dim\": {dim}, \"dtype\": \"{dtype}\"}}\n");
        match std::fs::read_to_string(&meta_path) {
            Ok(m) if m == meta => {}
            Ok(m) => {
                return Err(io(
                    &meta_path,
                    "the store holds another shape or format",
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
        let data_path = dir.join(format.data_file());
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&data_path)
            .map_err(|e| io(&data_path, "cannot open", e))?;
        let size = n_rows as u64 * format.row_bytes(dim) as u64;
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
            format,
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
        let path = || self.dir.join(self.format.data_file());
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(io(
                &path(),
                "cannot store encodings",
                format!("row {i} has the non-finite value {} at {j}", row[j]),
            ));
        }
        let rb = self.format.row_bytes(self.dim);
        let bytes: Vec<u8> = match self.format {
            StoreFormat::F32 => row.iter().flat_map(|v| v.to_le_bytes()).collect(),
            StoreFormat::Q8 => {
                let mut b = vec![0u8; rb];
                q8_encode(row, &mut b);
                b
            }
        };
        self.data
            .write_all_at(&bytes, i as u64 * rb as u64)
            .map_err(|e| io(&path(), "cannot write encodings", e))
    }

    /// The store's row format.
    pub fn format(&self) -> StoreFormat {
        self.format
    }

    /// Copies every complete row of `other` (same shape, any format) that
    /// this store lacks, and journals them: a run folder's stores of one
    /// format carried over to another without computing the encodings again.
    ///
    /// # Errors
    /// Another shape; a failed read, write or journal.
    pub fn import(&mut self, other: &Store) -> Result<usize, PipelineError> {
        if (other.n_rows, other.dim) != (self.n_rows, self.dim) {
            return Err(io(
                &other.dir,
                "cannot import encodings",
                format!(
                    "{} x {} rows, this store {} x {}",
                    other.n_rows, other.dim, self.n_rows, self.dim
                ),
            ));
        }
        let todo: Vec<usize> = other.done.difference(&self.done).copied().collect();
        let mut row = vec![0.0f32; self.dim];
        for chunk in todo.chunks(256) {
            for &i in chunk {
                other.read_block(&[i], 0..self.dim, &mut row)?;
                self.write_row(i, &row)?;
            }
            self.commit(chunk)?;
        }
        Ok(todo.len())
    }

    /// Syncs the rows written so far, then journals `rows` as complete.
    ///
    /// # Errors
    /// A failed sync or journal write.
    pub fn commit(&mut self, rows: &[usize]) -> Result<(), PipelineError> {
        if rows.is_empty() {
            return Ok(());
        }
        let data_path = self.dir.join(self.format.data_file());
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
        debug_assert!(cols.end <= self.dim);
        let path = || self.dir.join(self.format.data_file());
        let rb = self.format.row_bytes(self.dim) as u64;
        match self.format {
            StoreFormat::F32 => {
                let mut buf = vec![0u8; w * 4];
                for (o, &r) in out.chunks_exact_mut(w).zip(rows) {
                    self.data
                        .read_exact_at(&mut buf, r as u64 * rb + cols.start as u64 * 4)
                        .map_err(|e| io(&path(), "cannot read encodings", e))?;
                    for (v, b) in o.iter_mut().zip(buf.chunks_exact(4)) {
                        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                }
            }
            StoreFormat::Q8 => {
                let nb = self.dim.div_ceil(Q8_BLOCK) as u64;
                let (b0, b1) = (cols.start / Q8_BLOCK, cols.end.div_ceil(Q8_BLOCK));
                let mut scales = vec![0u8; 4 * (b1 - b0)];
                let mut codes = vec![0u8; w];
                for (o, &r) in out.chunks_exact_mut(w).zip(rows) {
                    let base = r as u64 * rb;
                    self.data
                        .read_exact_at(&mut scales, base + 4 * b0 as u64)
                        .and_then(|_| {
                            self.data
                                .read_exact_at(&mut codes, base + 4 * nb + cols.start as u64)
                        })
                        .map_err(|e| io(&path(), "cannot read encodings", e))?;
                    q8_decode(&scales, &codes, cols.clone(), o);
                }
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
        let mut s = Store::open(&d, 4, 3, StoreFormat::F32).unwrap();
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
        let mut s = Store::open(&d, 4, 3, StoreFormat::F32).unwrap();
        assert!(s.has(2) && !s.has(0));
        s.commit(&[3]).unwrap();
        drop(s);
        let s = Store::open(&d, 4, 3, StoreFormat::F32).unwrap();
        assert!(
            s.has(2) && s.has(3) && !s.has(0),
            "the cut line was dropped"
        );
        let mut out = vec![0.0; 2];
        s.read_block(&[2], 1..3, &mut out).unwrap();
        assert_eq!(out, vec![2.0, 3.0]);
        assert!(Store::open(&d, 4, 5, StoreFormat::F32)
            .unwrap_err()
            .to_string()
            .contains("another shape"));
    }

    #[test]
    fn q8_rows_round_trip_within_the_stated_error() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let dim = 3 * Q8_BLOCK + 17;
        // Fisher-vector-like rows: heavy-tailed, blocks of very different sizes, a zero block
        let rows: Vec<Vec<f32>> = (0..5)
            .map(|_| {
                (0..dim)
                    .map(|j| {
                        let s = [1e-3f32, 1.0, 40.0, 0.0][(j / Q8_BLOCK) % 4];
                        s * (rng.random::<f32>() - 0.5).powi(3) * 8.0
                    })
                    .collect()
            })
            .collect();
        let t = tempfile::tempdir().unwrap();
        let mut q = Store::open(&t.path().join("q"), 5, dim, StoreFormat::Q8).unwrap();
        for (i, r) in rows.iter().enumerate() {
            q.write_row(i, r).unwrap();
        }
        q.commit(&[0, 1, 2, 3, 4]).unwrap();
        let meta = std::fs::metadata(t.path().join("q/rows.q8")).unwrap().len();
        assert_eq!(
            meta,
            5 * (4 * 4 + dim) as u64,
            "1 byte a value + 4 per block"
        );
        for (i, r) in rows.iter().enumerate() {
            // a column range across block borders, and the whole row
            for cols in [Q8_BLOCK - 5..2 * Q8_BLOCK + 9, 0..dim] {
                let mut out = vec![0.0f32; cols.len()];
                q.read_block(&[i], cols.clone(), &mut out).unwrap();
                for (j, &v) in cols.clone().zip(&out) {
                    let b = j / Q8_BLOCK;
                    let m = r[b * Q8_BLOCK..((b + 1) * Q8_BLOCK).min(dim)]
                        .iter()
                        .fold(0.0f32, |m, v| m.max(v.abs()));
                    let x = r[j];
                    // the square-root domain error is at most sqrt(m)/254
                    let e = (v.signum() * v.abs().sqrt() - x.signum() * x.abs().sqrt()).abs();
                    assert!(
                        e <= m.sqrt() / 254.0 * 1.001 + 1e-7,
                        "row {i} col {j}: {x} -> {v}"
                    );
                    assert!(x == 0.0 || v == 0.0 || v.signum() == x.signum());
                }
            }
        }
        // import into f32 and back: the same decoded values
        let mut f = Store::open(&t.path().join("f"), 5, dim, StoreFormat::F32).unwrap();
        assert_eq!(f.import(&q).unwrap(), 5);
        assert_eq!(f.import(&q).unwrap(), 0, "nothing left to import");
        let (mut a, mut b) = (vec![0.0f32; dim], vec![0.0f32; dim]);
        q.read_block(&[3], 0..dim, &mut a).unwrap();
        f.read_block(&[3], 0..dim, &mut b).unwrap();
        assert_eq!(a, b);
        let e = q.write_row(0, &vec![f32::NAN; dim]).unwrap_err();
        assert!(e.to_string().contains("non-finite"), "{e}");
        assert!(Store::open(&t.path().join("q"), 5, dim, StoreFormat::F32)
            .unwrap_err()
            .to_string()
            .contains("another shape"));
    }
}
