//! [`DescriptorReader`]: a descriptor file opened and validated without its
//! descriptors, each image's bag read when asked. The pipeline's runs on
//! descriptor files read only the bags of the images of the current batch,
//! so their memory does not grow with the file (issue 29);
//! [`super::read_descriptor_file`] is this reader reading every bag.
//!
//! At [`DescriptorReader::open`] the archive's directory and every entry's
//! `.npy` header are read, the labels (and, in the stacked layout,
//! `image_index`) decoded, and everything the format requires except
//! finiteness is checked: names, labels, dtypes, shapes, one D, at least one
//! row per image, sizes against the zip directory and the file. What is
//! kept: the labels, the names, one entry position per image (one array per
//! image) or each image's row numbers (stacked; 4 bytes a row, 8 beyond
//! 2³² rows). A bag is then read by [`DescriptorReader::bag`]:
//!
//! * one array per image: that entry, through the zip reader — a seek and a
//!   read when it is stored (`np.savez`), a decompression of that entry
//!   alone when it is deflated (`np.savez_compressed`); its CRC is checked;
//! * stacked and stored: the image's rows, one seek and read per run of
//!   consecutive rows (one for the usual layout, images one after another);
//! * stacked and deflated, or `descriptors` in Fortran order: rows of one
//!   image are not at known offsets, so `descriptors` is decompressed into
//!   memory once, at open ([`DescriptorReader::streamed`] is `false`) — the
//!   memory of the whole file, as before streaming; save such a file with
//!   `np.savez` (C order) to stream it.
//!
//! Non-finite values are found when their bag is read: the error names the
//! file, the image, the row and the column.

use super::{
    check_entry, decode_checked, decode_npy, io_err, matrix, DescriptorSet, EntryKind, NpyData,
    DESCRIPTORS, IMAGE_INDEX, LABELS,
};
use crate::error::IoError;
use crate::npy::{read_header, Dtype, Element, Header};
use crate::npz::{open_archive, walk_entries};
use ndarray::{Array2, Axis};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// An entry of the archive that holds descriptors, as found at open.
#[derive(Debug)]
struct Entry {
    name: String,
    /// Number in the zip directory.
    index: usize,
    header: Header,
    kind: EntryKind,
    /// Data bytes according to the zip directory (checked against the header).
    data_len: u64,
    /// Offset of the first data byte in the file, when stored.
    stored_data_start: Option<u64>,
}

/// The row numbers of each image in the stacked layout, in file order:
/// image `i`'s are `rows[starts[i]..starts[i + 1]]`.
#[derive(Debug)]
struct RowLists {
    starts: Vec<usize>,
    rows: RowNumbers,
}

/// Row numbers, 4 bytes each while they fit.
#[derive(Debug)]
enum RowNumbers {
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl RowLists {
    /// Groups the rows by image (a stable counting sort of `image_of_row`,
    /// whose entries are checked to lie in `0..n_images`).
    fn new(image_of_row: &[usize], n_images: usize) -> Self {
        let mut starts = vec![0usize; n_images + 1];
        for &i in image_of_row {
            starts[i + 1] += 1;
        }
        for i in 0..n_images {
            starts[i + 1] += starts[i];
        }
        let mut next = starts[..n_images].to_vec();
        let mut place = |put: &mut dyn FnMut(usize, usize)| {
            for (r, &i) in image_of_row.iter().enumerate() {
                put(next[i], r);
                next[i] += 1;
            }
        };
        let rows = if u32::try_from(image_of_row.len()).is_ok() {
            let mut v = vec![0u32; image_of_row.len()];
            place(&mut |k, r| v[k] = r as u32);
            RowNumbers::U32(v)
        } else {
            let mut v = vec![0u64; image_of_row.len()];
            place(&mut |k, r| v[k] = r as u64);
            RowNumbers::U64(v)
        };
        RowLists { starts, rows }
    }

    /// Number of rows of image `i`.
    fn count(&self, i: usize) -> usize {
        self.starts[i + 1] - self.starts[i]
    }

    /// The rows of image `i`, ascending.
    fn of(&self, i: usize) -> Vec<usize> {
        let (a, b) = (self.starts[i], self.starts[i + 1]);
        match &self.rows {
            RowNumbers::U32(v) => v[a..b].iter().map(|&r| r as usize).collect(),
            RowNumbers::U64(v) => v[a..b].iter().map(|&r| r as usize).collect(),
        }
    }
}

/// Where the bags are read from.
#[derive(Debug)]
enum Bags {
    /// One array per image: the entries, read through the zip reader.
    PerImage {
        zip: Mutex<zip::ZipArchive<BufReader<File>>>,
        entries: Vec<Entry>,
    },
    /// Stacked and stored: rows gathered from the file.
    Stacked {
        file: Mutex<File>,
        /// Offset of row 0's first byte.
        data_start: u64,
        dtype: Dtype,
        rows: RowLists,
    },
    /// Stacked but compressed or in Fortran order: held in memory.
    InMemory { x: Array2<f32>, rows: RowLists },
}

/// A descriptor file (docs/formats.md §4) opened for reading bag by bag.
///
/// ```
/// use fisherkit_io::descriptor_file::{write_descriptor_file, DescriptorReader};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-descreader-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("train.npz");
/// let bags = [array![[0.0f32, 1.0], [2.0, 3.0]], array![[4.0f32, 5.0]]];
/// let names = ["img0".to_string(), "img1".to_string()];
/// let labels = ["dog".to_string(), "cat".to_string()];
/// write_descriptor_file(&path, &names, &[bags[0].view(), bags[1].view()], &labels)?;
/// let file = DescriptorReader::open(&path)?;
/// assert_eq!((file.len(), file.dim(), file.rows(0)), (2, 2, 2));
/// assert_eq!(file.labels(), &labels[..]);
/// assert_eq!(file.bag(1)?, bags[1]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct DescriptorReader {
    path: PathBuf,
    names: Vec<String>,
    labels: Vec<String>,
    dim: usize,
    bags: Bags,
}

/// A poisoned lock still guards a consistent file handle (every read seeks first).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DescriptorReader {
    /// Opens and validates the descriptor file `path` (see the module docs):
    /// every check of [`super::read_descriptor_file`] but finiteness, with
    /// the same errors, without reading the descriptors (except for a
    /// stacked file that cannot be streamed, see [`Self::streamed`]).
    ///
    /// # Errors
    /// The file cannot be read or breaks a rule of the format; the error
    /// names the file and the array, image or row at fault.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let bad = |m: String| io_err(path, m);
        let file = File::open(path).map_err(|e| bad(e.to_string()))?;
        let file_len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
        let mut zip = open_archive(BufReader::new(file), path)?;
        let mut labels = None;
        let mut stacked = None;
        let mut index = None;
        let mut per_image = Vec::new();
        walk_entries(&mut zip, path, |at, header, data, data_len| {
            let (kind, nbytes) = check_entry(header, data_len)?;
            if let Some(start) = at.stored_data_start {
                if start.saturating_add(nbytes as u64) > file_len {
                    return Err(format!(
                        "file is truncated: the entry's {nbytes} data bytes would end at byte {} of a {file_len}-byte file",
                        start.saturating_add(nbytes as u64)
                    ));
                }
            }
            let entry = || Entry {
                name: at.name.to_string(),
                index: at.index,
                header: header.clone(),
                kind,
                data_len,
                stored_data_start: at.stored_data_start,
            };
            match at.name {
                LABELS => match kind {
                    // Floats are refused below, once the archive is walked.
                    EntryKind::Float(_) => labels = Some(None),
                    _ => labels = Some(Some(decode_checked(header, kind, nbytes, data)?)),
                },
                IMAGE_INDEX => index = Some(decode_checked(header, kind, nbytes, data)?),
                DESCRIPTORS => stacked = Some(entry()),
                _ => per_image.push(entry()),
            }
            Ok(())
        })?;
        let labels = match labels {
            Some(Some(NpyData::Int(v))) => v.iter().map(i64::to_string).collect::<Vec<_>>(),
            Some(Some(NpyData::Str(v))) => v,
            Some(_) => {
                return Err(bad(format!(
                    "array `{LABELS}` must hold integers or strings (class names), not floats"
                )))
            }
            None => {
                return Err(bad(format!(
                "no `{LABELS}` array; a descriptor file needs one class name or integer per image, e.g. np.savez(f, *bags, labels=labels)"
            )))
            }
        };
        if let Some(i) = labels.iter().position(String::is_empty) {
            return Err(bad(format!("`{LABELS}`[{i}] is an empty class name")));
        }
        let n_labels = labels.len();
        let (names, dim, bags) = match stacked {
            Some(x) => {
                if let Some(extra) = per_image.first() {
                    return Err(bad(format!(
                    "array `{}` beside `{DESCRIPTORS}`: a file holds either `{DESCRIPTORS}` + `{IMAGE_INDEX}` or one array per image, not both",
                    extra.name
                )));
                }
                let (dim, rows) = stacked_rows(&x, index, n_labels).map_err(bad)?;
                let names = (0..n_labels).map(|i| format!("image {i}")).collect();
                let bags = match x.stored_data_start {
                    Some(data_start) if !x.header.fortran_order => Bags::Stacked {
                        file: Mutex::new(File::open(path).map_err(|e| bad(e.to_string()))?),
                        data_start,
                        dtype: match x.kind {
                            EntryKind::Float(t) => t,
                            _ => unreachable!("checked by stacked_rows"),
                        },
                        rows,
                    },
                    _ => Bags::InMemory {
                        x: read_entry(&mut zip, path, &x)?,
                        rows,
                    },
                };
                (names, dim, bags)
            }
            None => {
                if index.is_some() {
                    return Err(bad(format!(
                        "`{IMAGE_INDEX}` without `{DESCRIPTORS}` (the stacked layout needs both)"
                    )));
                }
                for e in &per_image {
                    bag_shape(e).map_err(bad)?;
                }
                let names = per_image.iter().map(|e| e.name.clone()).collect();
                let dim = per_image.first().map_or(0, |e| e.header.shape[1]);
                let bags = Bags::PerImage {
                    zip: Mutex::new(zip),
                    entries: per_image,
                };
                (names, dim, bags)
            }
        };
        let reader = DescriptorReader {
            path: path.to_path_buf(),
            names,
            labels,
            dim,
            bags,
        };
        reader.check_shapes()?;
        Ok(reader)
    }

    /// The rules on the bags' shapes: some images, one label each, at least
    /// one row each, one D > 0.
    fn check_shapes(&self) -> Result<(), IoError> {
        let bad = |m: String| io_err(&self.path, m);
        if self.names.is_empty() {
            return Err(bad("holds no image descriptors".into()));
        }
        if self.labels.len() != self.names.len() {
            return Err(bad(format!(
                "`{LABELS}` has {} entries but the file holds {} images; give one label per image",
                self.labels.len(),
                self.names.len()
            )));
        }
        for (i, name) in self.names.iter().enumerate() {
            if self.rows(i) == 0 {
                return Err(bad(format!(
                    "image `{name}` has no descriptor (0 rows); every image needs at least one"
                )));
            }
            let d = self.cols(i);
            if d != self.dim {
                return Err(bad(format!(
                    "image `{name}` has descriptors of dimension {d} but `{}` has {}; all must have the same D",
                    self.names[0], self.dim
                )));
            }
            if d == 0 {
                return Err(bad(format!(
                    "image `{name}` has descriptors of dimension 0"
                )));
            }
        }
        Ok(())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// `true` for a file without images (never, once opened).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The descriptor dimension $D$.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// One name per image (see [`DescriptorSet::names`]).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The class name of each image.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The distinct class names, sorted as text.
    pub fn classes(&self) -> Vec<String> {
        let mut c = self.labels.clone();
        c.sort();
        c.dedup();
        c
    }

    /// Number of descriptors of image `i` (known without reading them).
    pub fn rows(&self, i: usize) -> usize {
        match &self.bags {
            Bags::PerImage { entries, .. } => entries[i].header.shape[0],
            Bags::Stacked { rows, .. } | Bags::InMemory { rows, .. } => rows.count(i),
        }
    }

    /// Columns of image `i`'s array.
    fn cols(&self, i: usize) -> usize {
        match &self.bags {
            Bags::PerImage { entries, .. } => entries[i].header.shape[1],
            Bags::Stacked { .. } | Bags::InMemory { .. } => self.dim,
        }
    }

    /// `false` when the file's descriptors were read into memory at open: the
    /// stacked layout compressed (`np.savez_compressed`) or in Fortran order,
    /// whose rows cannot be read image by image.
    pub fn streamed(&self) -> bool {
        !matches!(self.bags, Bags::InMemory { .. })
    }

    /// The $(n_i, D)$ bag of image `i`, read from the file.
    ///
    /// # Errors
    /// A read error, a corrupt entry (wrong CRC, missing data), a NaN or
    /// infinite value; the error names the file and the image.
    ///
    /// # Panics
    /// `i` is not below [`Self::len`].
    pub fn bag(&self, i: usize) -> Result<Array2<f32>, IoError> {
        let name = &self.names[i];
        let bag = match &self.bags {
            Bags::PerImage { zip, entries } => read_entry(&mut lock(zip), &self.path, &entries[i])?,
            Bags::Stacked {
                file,
                data_start,
                dtype,
                rows,
            } => {
                let gathered = match dtype {
                    Dtype::F32 => {
                        gather::<f32>(&mut lock(file), *data_start, &rows.of(i), self.dim)
                    }
                    Dtype::F64 => {
                        gather::<f64>(&mut lock(file), *data_start, &rows.of(i), self.dim)
                    }
                };
                gathered.map_err(|e| IoError::NpzArray {
                    path: self.path.clone(),
                    name: DESCRIPTORS.into(),
                    reason: format!("rows of image `{name}`: {e}"),
                })?
            }
            Bags::InMemory { x, rows } => x.select(Axis(0), &rows.of(i)),
        };
        if let Some(((r, c), v)) = bag.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(io_err(
                &self.path,
                format!("image `{name}`: row {r}, column {c} is {v} (descriptors must be finite)"),
            ));
        }
        Ok(bag)
    }

    /// Reads every bag: the whole file as a [`DescriptorSet`].
    ///
    /// # Errors
    /// As [`Self::bag`].
    pub fn read_all(self) -> Result<DescriptorSet, IoError> {
        let bags = (0..self.len())
            .map(|i| self.bag(i))
            .collect::<Result<_, _>>()?;
        Ok(DescriptorSet {
            names: self.names,
            bags,
            labels: self.labels,
        })
    }
}

/// The (n_i, D) shape of a per-image array, or why it is not a bag.
fn bag_shape(e: &Entry) -> Result<(usize, usize), String> {
    match (e.kind, &e.header.shape[..]) {
        (EntryKind::Float(_), &[n, d]) => Ok((n, d)),
        (EntryKind::Float(_), shape) => Err(format!(
            "array `{}` has shape {shape:?}; each image's descriptors must be a 2-D (n_i, D) array",
            e.name
        )),
        _ => Err(format!(
            "array `{}` is not float32/float64; each image's descriptors must be a 2-D (n_i, D) float array (labels go in `{LABELS}`)",
            e.name
        )),
    }
}

/// Checks the stacked layout's `descriptors` entry `x` and `image_index`
/// against `n_images` labels; gives D and each image's rows.
fn stacked_rows(
    x: &Entry,
    index: Option<NpyData>,
    n_images: usize,
) -> Result<(usize, RowLists), String> {
    let (n_rows, dim) = bag_shape(x)?;
    let idx = match index {
        Some(NpyData::Int(v)) => v,
        Some(_) => return Err(format!("`{IMAGE_INDEX}` must be a 1-D integer array")),
        None => {
            return Err(format!(
                "`{DESCRIPTORS}` without `{IMAGE_INDEX}`: give the image (0..n-1) of each row"
            ))
        }
    };
    if idx.len() != n_rows {
        return Err(format!(
            "`{IMAGE_INDEX}` has {} entries but `{DESCRIPTORS}` has {n_rows} rows",
            idx.len()
        ));
    }
    let image_of_row = idx
        .iter()
        .enumerate()
        .map(|(r, &i)| {
            usize::try_from(i).ok().filter(|&i| i < n_images).ok_or_else(|| {
                format!(
                "`{IMAGE_INDEX}`[{r}] = {i} is not an image number in 0..{n_images} (the length of `{LABELS}`)"
            )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    drop(idx);
    Ok((dim, RowLists::new(&image_of_row, n_images)))
}

/// Reads the float entry `e` whole, through the zip reader (decompressing a
/// deflated entry), and checks its CRC.
fn read_entry(
    zip: &mut zip::ZipArchive<BufReader<File>>,
    path: &Path,
    e: &Entry,
) -> Result<Array2<f32>, IoError> {
    let mut entry = zip.by_index(e.index).map_err(|err| {
        io_err(
            path,
            format!("cannot read archive entry {}: {err}", e.index),
        )
    })?;
    let mut read = || -> Result<Array2<f32>, String> {
        let h = read_header(&mut entry)?;
        if h != e.header {
            return Err("the file changed since it was opened".into());
        }
        let data = decode_npy(&h, &mut entry, e.data_len)?;
        // Reading past the end makes the zip reader compare the CRC.
        match entry.read(&mut [0u8; 1]) {
            Ok(0) => {}
            Ok(_) => return Err("holds more data than its header says".into()),
            Err(err) => return Err(format!("cannot read: {err}")),
        }
        matrix(&e.name, data)
    };
    read().map_err(|reason| IoError::NpzArray {
        path: path.to_path_buf(),
        name: e.name.clone(),
        reason,
    })
}

/// Rows `rows` (ascending) of the stored C-order (N, `dim`) matrix of `F`
/// starting at byte `data_start` of `file`: one seek and read per run of
/// consecutive rows.
fn gather<F: Element>(
    file: &mut File,
    data_start: u64,
    rows: &[usize],
    dim: usize,
) -> Result<Array2<f32>, String> {
    let size = F::DTYPE.size();
    let row_bytes = dim * size;
    let mut out = Vec::with_capacity(rows.len() * dim);
    let mut buf = Vec::new();
    let mut k = 0;
    while k < rows.len() {
        let first = rows[k];
        let mut run = 1;
        while k + run < rows.len() && rows[k + run] == first + run {
            run += 1;
        }
        file.seek(SeekFrom::Start(data_start + (first * row_bytes) as u64))
            .and_then(|_| {
                buf.resize(run * row_bytes, 0);
                file.read_exact(&mut buf)
            })
            .map_err(|e| format!("cannot read rows {first}..{}: {e}", first + run))?;
        // f32 → f64 → f32 is exact; f64 → f32 rounds as `decode_npy` does.
        out.extend(
            buf.chunks_exact(size)
                .map(|c| F::from_le(c).as_f64() as f32),
        );
        k += run;
    }
    Ok(Array2::from_shape_vec((rows.len(), dim), out).expect("rows × dim values"))
}
