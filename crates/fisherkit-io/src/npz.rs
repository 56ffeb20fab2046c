//! `.npz` archives of bags: one (N_i, D) array per bag, in archive order.
//!
//! An `.npz` file is a zip archive (stored or deflated) of `.npy` files, as
//! written by `numpy.savez` / `numpy.savez_compressed`. Entries are read in
//! the order of the archive's central directory, which is the order numpy
//! wrote them (the order of the keyword arguments).
//!
//! This module owns the archive layer of every `.npz` the crate touches:
//! [`for_each_entry`] / [`walk_entries`] is the one walker of an archive
//! (bags here, descriptor files in [`crate::descriptor_file`], which also
//! reads single entries again through the [`EntryAt`] it reports),
//! [`NpzBuilder`] the one writer of one (bags by [`write_npz`], typed arrays by
//! [`crate::descriptor_file::write_npz_arrays`] and `DescriptorFileWriter`).
//! The `.npy` headers inside are parsed by `npy::read_header` and written by
//! `npy::npy_header`.

use crate::atomic::write_atomically;
use crate::error::{IoError, Result};
use crate::npy::{
    npy_header, read_header, read_matrix_data, Dtype, Element, Header, Matrix, NPY_MAGIC, ZIP_MAGIC,
};

/// The end-of-central-directory signature that starts an empty zip archive.
const ZIP_EMPTY_MAGIC: &[u8; 4] = b"PK\x05\x06";
use ndarray::{Array2, ArrayView2};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, Write};
use std::path::Path;

/// Opens the zip directory of an `.npz` archive; an archive that zip cannot
/// open is a `Format` error naming `path` (`not a valid .npz (zip) archive`).
pub(crate) fn open_archive<R: Read + Seek>(reader: R, path: &Path) -> Result<zip::ZipArchive<R>> {
    zip::ZipArchive::new(reader)
        .map_err(|e| IoError::format(path, format!("not a valid .npz (zip) archive: {e}")))
}

/// Where an entry of an archive is, as [`walk_entries`] found it.
pub(crate) struct EntryAt<'a> {
    /// The entry name without `.npy`.
    pub name: &'a str,
    /// Its number in the zip directory (for `ZipArchive::by_index`).
    pub index: usize,
    /// Offset in the archive of its first data byte (after the `.npy` header)
    /// when the entry is stored (uncompressed); `None` when it is compressed.
    pub stored_data_start: Option<u64>,
}

/// Walks the `.npy` entries of the `.npz` archive `reader` in the order of its
/// central directory, skipping directories. For each it parses the header
/// and calls `f(name, header, data, data_len)`: `name` is the entry name
/// without `.npy`, `data` reads the bytes after the header and `data_len`
/// is their number according to the zip directory — which a corrupt archive
/// can fake, so `f` checks it against the header before allocating and
/// still grows buffers only as data arrive. A header or callback error
/// becomes [`IoError::NpzArray`] naming `path` and the array; an archive
/// that zip cannot open, a `Format` error (`not a valid .npz (zip) archive`).
pub(crate) fn for_each_entry<R: Read + Seek>(
    reader: R,
    path: &Path,
    mut f: impl FnMut(&str, &Header, &mut dyn Read, u64) -> Result<(), String>,
) -> Result<()> {
    let mut zip = open_archive(reader, path)?;
    walk_entries(&mut zip, path, |at, header, data, data_len| {
        f(at.name, header, data, data_len)
    })
}

/// [`for_each_entry`] on an opened archive, telling `f` where each entry
/// is ([`EntryAt`]) so that its data can be read again later.
pub(crate) fn walk_entries<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    path: &Path,
    mut f: impl FnMut(&EntryAt<'_>, &Header, &mut dyn Read, u64) -> Result<(), String>,
) -> Result<()> {
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| IoError::format(path, format!("cannot read archive entry {i}: {e}")))?;
        if entry.is_dir() {
            continue;
        }
        let raw_name = entry.name().to_string();
        let name = raw_name.strip_suffix(".npy").unwrap_or(&raw_name);
        let size = entry.size();
        let stored = entry.compression() == zip::CompressionMethod::Stored;
        let data_start = entry.data_start();
        read_header(&mut entry)
            .and_then(|header| {
                let data_len = size.saturating_sub(header.data_offset as u64);
                let at = EntryAt {
                    name,
                    index: i,
                    stored_data_start: stored.then(|| data_start + header.data_offset as u64),
                };
                f(&at, &header, &mut entry, data_len)
            })
            .map_err(|reason| IoError::NpzArray {
                path: path.to_path_buf(),
                name: name.to_string(),
                reason,
            })?;
    }
    Ok(())
}

/// Writes an `.npz` archive entry by entry: each array is `name.npy`, its
/// header from `npy::npy_header`, stored or deflated (like `numpy.savez` /
/// `numpy.savez_compressed`), with zip64 sizes so that no entry is too large.
pub(crate) struct NpzBuilder<W: Write + Seek> {
    zip: zip::ZipWriter<W>,
    options: zip::write::SimpleFileOptions,
}

impl<W: Write + Seek> NpzBuilder<W> {
    /// Starts an archive on `w`; `compressed` deflates the entries.
    pub(crate) fn new(w: W, compressed: bool) -> Self {
        let method = if compressed {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        Self {
            zip: zip::ZipWriter::new(w),
            options: zip::write::SimpleFileOptions::default()
                .compression_method(method)
                .large_file(true),
        }
    }

    /// Adds the array `name` of numpy type `descr` (`<f4`…) and `shape`, C
    /// order; `data` writes its little-endian bytes, exactly as many as the
    /// shape needs.
    pub(crate) fn add(
        &mut self,
        name: &str,
        descr: &str,
        shape: &[usize],
        data: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.zip
            .start_file(format!("{name}.npy"), self.options)
            .map_err(io::Error::other)?;
        self.zip.write_all(&npy_header(descr, shape))?;
        data(&mut self.zip)
    }

    /// Writes the central directory and gives the writer back.
    pub(crate) fn finish(self) -> io::Result<W> {
        self.zip.finish().map_err(io::Error::other)
    }
}

/// Writes `values` to `w` through a 64 KiB buffer, each value's bytes
/// appended by `push` (little-endian, as `.npy` data).
pub(crate) fn write_le<T>(
    w: &mut dyn Write,
    values: impl IntoIterator<Item = T>,
    mut push: impl FnMut(T, &mut Vec<u8>),
) -> io::Result<()> {
    const FLUSH_AT: usize = 1 << 16;
    let mut buf = Vec::with_capacity(FLUSH_AT + 64);
    for v in values {
        push(v, &mut buf);
        if buf.len() >= FLUSH_AT {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)
}

/// Bags of one element type with their names.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedBags<F> {
    /// Array names in archive order (the entry names without `.npy`).
    pub names: Vec<String>,
    /// The bags, (N_i, D) each, same D.
    pub bags: Vec<Array2<F>>,
}

impl<F> NamedBags<F> {
    /// Number of bags.
    pub fn len(&self) -> usize {
        self.bags.len()
    }

    /// `true` when there are no bags.
    pub fn is_empty(&self) -> bool {
        self.bags.is_empty()
    }

    /// The common number of columns D.
    pub fn dim(&self) -> usize {
        self.bags.first().map_or(0, |b| b.ncols())
    }

    /// Views of the bags, for `Encoder::encode_batch`.
    pub fn views(&self) -> Vec<ArrayView2<'_, F>> {
        self.bags.iter().map(|b| b.view()).collect()
    }
}

/// Bags read from an `.npz` archive (or a single `.npy` bag), in the file's dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum Bags {
    /// `float32` bags.
    F32(NamedBags<f32>),
    /// `float64` bags.
    F64(NamedBags<f64>),
}

impl Bags {
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Bags::F32(_) => Dtype::F32,
            Bags::F64(_) => Dtype::F64,
        }
    }

    /// Number of bags.
    pub fn len(&self) -> usize {
        match self {
            Bags::F32(b) => b.len(),
            Bags::F64(b) => b.len(),
        }
    }

    /// `true` when there are no bags.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bag names in order.
    pub fn names(&self) -> &[String] {
        match self {
            Bags::F32(b) => &b.names,
            Bags::F64(b) => &b.names,
        }
    }

    /// The common number of columns D.
    pub fn dim(&self) -> usize {
        match self {
            Bags::F32(b) => b.dim(),
            Bags::F64(b) => b.dim(),
        }
    }
}

/// Reads an `.npz` archive of bags: every entry must be an (N_i, D) array
/// with the same D and the same dtype (float32 or float64); the archive must
/// hold at least one. Bags keep the archive's order and names. Errors name
/// the archive and the array.
///
/// ```
/// use fisherkit_io::{read_npz, write_npz, Bags};
/// use ndarray::{array, Array2};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npz-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("bags.npz");
/// let (a, b) = (array![[1.0f32, 2.0]], Array2::<f32>::zeros((3, 2)));
/// write_npz(&path, &[("first", a.view()), ("second", b.view())], true)?;
/// let Bags::F32(bags) = read_npz(&path)? else { panic!("float32 in, float32 out") };
/// assert_eq!(bags.names, ["first", "second"]);
/// assert_eq!(bags.bags, [a, b]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npz(path: impl AsRef<Path>) -> Result<Bags> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    read_npz_from(BufReader::new(file), path)
}

/// Reads an `.npz` archive of bags from the bytes of a file (see
/// [`read_npz`]); `name` stands for the file in error messages.
///
/// ```
/// use fisherkit_io::{read_npz_bytes, write_npz};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npzbytes-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("bags.npz");
/// write_npz(&path, &[("only", array![[1.0, 2.0], [3.0, 4.0]].view())], false)?;
/// let bags = read_npz_bytes(&std::fs::read(&path)?, "sent.npz")?;
/// assert_eq!((bags.len(), bags.dim(), bags.names()), (1, 2, &["only".to_string()][..]));
/// let e = read_npz_bytes(b"PK but not a zip", "sent.npz").unwrap_err();
/// assert!(e.to_string().starts_with("sent.npz: "), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npz_bytes(bytes: &[u8], name: impl AsRef<Path>) -> Result<Bags> {
    read_npz_from(io::Cursor::new(bytes), name.as_ref())
}

fn read_npz_from<R: Read + Seek>(reader: R, path: &Path) -> Result<Bags> {
    let mut names: Vec<String> = Vec::new();
    let mut mats: Vec<Matrix> = Vec::new();
    for_each_entry(reader, path, |name, header, mut data, data_len| {
        let layout = header.matrix_layout()?;
        if let Some((first_name, first)) = names.first().zip(mats.first()) {
            if layout.dtype != first.dtype() {
                return Err(format!(
                    "dtype {} differs from the first array `{first_name}` ({}); \
                     all bags must have one dtype",
                    layout.dtype,
                    first.dtype()
                ));
            }
            if layout.d != first.dim().1 {
                return Err(format!(
                    "has {} columns but the first array `{first_name}` has {}; \
                     all bags must have the same dimension D",
                    layout.d,
                    first.dim().1
                ));
            }
        }
        layout.check_available(data_len)?;
        // The size comes from the zip directory, which a corrupt archive can
        // fake: grow the buffer as data actually arrive.
        mats.push(read_matrix_data(&mut data, &layout, false)?);
        names.push(name.to_string());
        Ok(())
    })?;
    if mats.is_empty() {
        return Err(IoError::format(path, "the .npz archive holds no arrays"));
    }
    Ok(match mats[0].dtype() {
        Dtype::F32 => Bags::F32(NamedBags {
            names,
            bags: mats
                .into_iter()
                .map(|m| match m {
                    Matrix::F32(a) => a,
                    Matrix::F64(_) => unreachable!("dtypes checked above"),
                })
                .collect(),
        }),
        Dtype::F64 => Bags::F64(NamedBags {
            names,
            bags: mats
                .into_iter()
                .map(|m| match m {
                    Matrix::F64(a) => a,
                    Matrix::F32(_) => unreachable!("dtypes checked above"),
                })
                .collect(),
        }),
    })
}

/// What a file looks like from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Starts with the `.npy` magic.
    Npy,
    /// Starts with a zip signature (`.npz`).
    Npz,
    /// Anything else.
    Unknown,
}

/// Sniffs whether `path` is an `.npy` array or an `.npz` archive (by content,
/// not by extension).
///
/// ```
/// use fisherkit_io::{file_kind, write_npy, write_npz, FileKind};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-filekind-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let x = array![[1.0f32]];
/// // by content: the names say nothing
/// write_npy(dir.join("a.dat"), x.view())?;
/// write_npz(dir.join("b.dat"), &[("x", x.view())], false)?;
/// std::fs::write(dir.join("c.npy"), "text")?;
/// assert_eq!(file_kind(dir.join("a.dat"))?, FileKind::Npy);
/// assert_eq!(file_kind(dir.join("b.dat"))?, FileKind::Npz);
/// assert_eq!(file_kind(dir.join("c.npy"))?, FileKind::Unknown);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn file_kind(path: impl AsRef<Path>) -> Result<FileKind> {
    let path = path.as_ref();
    let mut f = File::open(path).map_err(|e| IoError::os(path, e))?;
    let mut head = [0u8; 6];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(IoError::os(path, e)),
        }
    }
    Ok(if n == 6 && &head == NPY_MAGIC {
        FileKind::Npy
    } else if n >= 4 && (&head[..4] == ZIP_MAGIC || &head[..4] == ZIP_EMPTY_MAGIC) {
        FileKind::Npz
    } else {
        FileKind::Unknown
    })
}

/// Reads bags from `path`: an `.npz` archive gives its arrays (see
/// [`read_npz`]); an `.npy` file gives one bag named after the file stem.
/// The format is recognised by content.
///
/// ```
/// use fisherkit_io::{read_bags, write_npy, write_npz};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-bags-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let x = array![[1.0, 2.0], [3.0, 4.0]];
/// write_npy(dir.join("img7.npy"), x.view())?;
/// write_npz(dir.join("all.npz"), &[("a", x.view()), ("b", x.view())], false)?;
/// // an .npy file is one bag named after its stem, an .npz archive its arrays
/// assert_eq!(read_bags(dir.join("img7.npy"))?.names(), ["img7"]);
/// assert_eq!(read_bags(dir.join("all.npz"))?.names(), ["a", "b"]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_bags(path: impl AsRef<Path>) -> Result<Bags> {
    let path = path.as_ref();
    match file_kind(path)? {
        FileKind::Npz => read_npz(path),
        FileKind::Npy => {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "bag".into());
            Ok(match crate::npy::read_npy(path)? {
                Matrix::F32(a) => Bags::F32(NamedBags {
                    names: vec![name],
                    bags: vec![a],
                }),
                Matrix::F64(a) => Bags::F64(NamedBags {
                    names: vec![name],
                    bags: vec![a],
                }),
            })
        }
        FileKind::Unknown => Err(IoError::format(
            path,
            "neither an .npy array nor an .npz archive (unrecognised first bytes)",
        )),
    }
}

/// Writes bags to an `.npz` archive, atomically, in the given order, each
/// under its name (`name.npy` in the zip). `compressed` deflates the entries
/// like `numpy.savez_compressed`. Names must be distinct and non-empty.
pub fn write_npz<F: Element>(
    path: impl AsRef<Path>,
    bags: &[(&str, ArrayView2<'_, F>)],
    compressed: bool,
) -> Result<()> {
    let path = path.as_ref();
    for (i, (name, _)) in bags.iter().enumerate() {
        if name.is_empty() {
            return Err(IoError::format(path, format!("bag {i} has an empty name")));
        }
        if bags[..i].iter().any(|(n, _)| n == name) {
            return Err(IoError::format(
                path,
                format!("two bags are named `{name}`"),
            ));
        }
    }
    write_atomically(path, |w| {
        let mut npz = NpzBuilder::new(w, compressed);
        for (name, a) in bags {
            npz.add(name, F::DTYPE.npy_descr(), &[a.nrows(), a.ncols()], |w| {
                // `iter` walks in logical (C) order whatever the memory layout.
                write_le(w, a.iter().copied(), F::push_le)
            })?;
        }
        npz.finish()?;
        Ok(())
    })
}
