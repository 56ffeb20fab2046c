//! Descriptor files: precomputed local descriptors with their labels, the input
//! of the pipeline's `run_descriptors` (`fisherkit run --train-descriptors`)
//! and the output of its `--save-descriptors`. This module is the format's one
//! reader and writer (docs/formats.md §4), with the `.npz` entries of any
//! dtype the format needs (float, integer and string arrays): `decode_npy`
//! decodes an entry's data, `NpyRef::add_to` encodes one. The archive itself
//! is walked by [`crate::npz::for_each_entry`] and written by
//! [`crate::npz::NpzBuilder`], the same code as for `.npz` bags; entry headers
//! are parsed by `npy::read_header` and written by `npy::npy_header`.
//! [`DescriptorReader`] opens and validates a descriptor file without its
//! descriptors and reads one image's bag when asked (the pipeline's runs
//! stream their bags through it); [`read_descriptor_file`] is that reader
//! reading every bag.
//!
//! A descriptor file is one `.npz` archive per split (`numpy.savez` or
//! `numpy.savez_compressed`) that holds
//!
//! * `labels`: a 1-D array with one entry per image — class names (numpy
//!   `str`/`bytes` arrays, dtype `<U…`/`S…`) or integers (any integer dtype;
//!   the class name is the decimal number);
//! * the images' descriptors, in one of two layouts:
//!   * **one array per image** (the `bags.npz` of `fisherkit encode`): every
//!     other array of the archive is one image's $(n_i, D)$ float32/float64
//!     descriptors, images in archive order, e.g.
//!     `np.savez("train.npz", *bags, labels=labels)`;
//!   * **stacked**: `descriptors`, the $(N, D)$ rows of all images, and
//!     `image_index`, $(N)$ integers in $[0, n)$ giving each row's image,
//!     where $n$ is the length of `labels`, e.g.
//!     `np.savez("train.npz", descriptors=X, image_index=idx, labels=labels)`.
//!
//! Every image needs at least one descriptor; every row must be finite. float64
//! data are converted to float32, the precision of the pipeline. Classes are
//! ordered by name (as text), like image folders.

mod reader;

pub use reader::DescriptorReader;

use crate::atomic::write_atomically;
use crate::error::IoError;
use crate::npy::{read_values, Descr, Dtype, Element, Header, MatrixLayout};
use crate::npz::{for_each_entry, write_le, NpzBuilder};
use ndarray::{Array2, ArrayView2};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Name of the labels array.
pub const LABELS: &str = "labels";
/// Name of the stacked descriptors array (stacked layout).
pub const DESCRIPTORS: &str = "descriptors";
/// Name of the row-to-image array (stacked layout).
pub const IMAGE_INDEX: &str = "image_index";

/// Labelled bags of descriptors, as read from or written to a descriptor file.
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptorSet {
    /// One name per image: its array name (one-array-per-image layout) or
    /// `image <i>` (stacked layout). Used in messages.
    pub names: Vec<String>,
    /// One $(n_i, D)$ bag per image, $n_i \ge 1$, all with the same $D$, finite.
    pub bags: Vec<Array2<f32>>,
    /// The class name of each image.
    pub labels: Vec<String>,
}

impl DescriptorSet {
    /// The descriptor dimension $D$ (0 for an empty set).
    pub fn dim(&self) -> usize {
        self.bags.first().map_or(0, |b| b.ncols())
    }

    /// The distinct class names, sorted as text.
    pub fn classes(&self) -> Vec<String> {
        let mut c = self.labels.clone();
        c.sort();
        c.dedup();
        c
    }
}

/// One array of an `.npz` archive, as the reader decoded it.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    /// float32 or float64 values (converted to float32), with their shape.
    Float(Vec<usize>, Vec<f32>),
    /// Integers of any width, 1-D.
    Int(Vec<i64>),
    /// Strings (numpy `<U…` or `S…`), 1-D.
    Str(Vec<String>),
}

/// An array to write with [`write_npz_arrays`].
#[derive(Debug, Clone, Copy)]
pub enum NpyRef<'a> {
    /// An (n, D) float32 array.
    Float(ArrayView2<'a, f32>),
    /// A 1-D int64 array.
    Int(&'a [i64]),
    /// A 1-D unicode array (`<U…`).
    Str(&'a [String]),
}

fn io_err(path: &Path, message: impl Into<String>) -> IoError {
    IoError::format(path, message)
}

/// A simple numpy dtype (see [`Descr`]) as (kind, size): the item size in
/// bytes, or in characters for `U` (4 bytes each). Object, big-endian,
/// structured and unparsed dtypes are errors naming the dtype as numpy writes
/// it (`'>f8'`).
fn simple_descr(descr: &Descr) -> Result<(char, usize), String> {
    let (order, kind, size) = match *descr {
        Descr::Simple { order, kind, size } => (order, kind, size),
        Descr::Other(ref s) => return Err(format!("unsupported dtype '{s}'")),
        Descr::Structured => {
            return Err("structured (record) dtypes are not supported".into());
        }
    };
    if kind == 'O' {
        return Err(
            "object arrays (pickled Python objects) are not supported; save strings as np.array(list_of_str) or integers"
                .into(),
        );
    }
    if order == '>' && size > 1 {
        return Err(format!(
            "big-endian dtype '{order}{kind}{size}' is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))"
        ));
    }
    Ok((kind, size))
}

/// What an entry of an archive holds, as [`check_entry`] found from its
/// header alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    /// float32/float64 values (any shape).
    Float(Dtype),
    /// 1-D integers of `size` bytes, signed or not.
    Int { signed: bool, size: usize },
    /// 1-D strings: `U` (UTF-32) or `S` (bytes), `size` bytes an item.
    Str { utf32: bool, size: usize },
}

/// Checks the header `h` of one `.npy` entry of an archive before any of its
/// data are read: a dtype the format knows, 1-D integer and string arrays,
/// and the size the header claims against `data_len`, the number of data
/// bytes according to the zip directory. Gives the kind and the data size.
fn check_entry(h: &Header, data_len: u64) -> Result<(EntryKind, usize), String> {
    let (kind, count) = simple_descr(&h.descr)?;
    let size = if kind == 'U' { 4 * count } else { count };
    let len = h
        .shape
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or("shape overflows")?;
    let nbytes = len.checked_mul(size).ok_or("shape overflows")?;
    if data_len != nbytes as u64 {
        return Err(format!(
            "holds {data_len} data bytes but its shape {:?} and dtype need {nbytes}",
            h.shape
        ));
    }
    let one_d = |what: &str| {
        if h.shape.len() == 1 {
            Ok(())
        } else {
            Err(format!(
                "{what} arrays must be 1-D, got shape {:?}",
                h.shape
            ))
        }
    };
    let k = match (kind, size) {
        ('f', 4) => EntryKind::Float(Dtype::F32),
        ('f', 8) => EntryKind::Float(Dtype::F64),
        ('i' | 'u', 1 | 2 | 4 | 8) => {
            one_d("integer")?;
            EntryKind::Int {
                signed: kind == 'i',
                size,
            }
        }
        ('U' | 'S', _) => {
            one_d("string")?;
            EntryKind::Str {
                utf32: kind == 'U',
                size,
            }
        }
        _ => {
            return Err(format!(
            "unsupported dtype '{}'; expected float32/float64 descriptors, integer or string labels",
            match h.descr {
                Descr::Simple { order, kind, size } => format!("{order}{kind}{size}"),
                _ => unreachable!("simple_descr accepts simple dtypes only"),
            }
        ))
        }
    };
    Ok((k, nbytes))
}

/// Decodes the data of one `.npy` entry of an archive whose header `h` is
/// already parsed: `data` reads the bytes after the header, `data_len` is
/// their number according to the zip directory. The size the header claims
/// is checked against `data_len` ([`check_entry`]) before anything is
/// allocated, and since a corrupt directory can fake `data_len` too, buffers
/// grow as data arrive.
fn decode_npy(h: &Header, data: &mut dyn Read, data_len: u64) -> Result<NpyData, String> {
    let (kind, nbytes) = check_entry(h, data_len)?;
    decode_checked(h, kind, nbytes, data)
}

/// [`decode_npy`] after [`check_entry`] gave `kind` and `nbytes`.
fn decode_checked(
    h: &Header,
    kind: EntryKind,
    nbytes: usize,
    mut data: &mut dyn Read,
) -> Result<NpyData, String> {
    let len: usize = h.shape.iter().product();
    // The raw bytes of an integer or string array, read as they arrive.
    let mut raw = || -> Result<Vec<u8>, String> {
        let mut bytes = Vec::new();
        data.take(nbytes as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read: {e}"))?;
        if bytes.len() != nbytes {
            return Err(format!(
                "file is truncated: holds {} data bytes but its shape {:?} and dtype need {nbytes}",
                bytes.len(),
                h.shape
            ));
        }
        Ok(bytes)
    };
    match kind {
        EntryKind::Float(dtype) => {
            // A 2-D array as (rows, cols) — (cols, rows) in Fortran order,
            // transposed below — anything else as one column of `len` values.
            let (n, d) = match h.shape[..] {
                [r, c] if h.fortran_order => (c, r),
                [r, c] => (r, c),
                _ => (len, 1),
            };
            let layout = MatrixLayout {
                dtype,
                n,
                d,
                nbytes,
            };
            let a: Array2<f32> = match dtype {
                Dtype::F32 => read_values(&mut data, &layout, false)?,
                Dtype::F64 => read_values::<f64, _>(&mut data, &layout, false)?.mapv(|v| v as f32),
            };
            let v = if h.fortran_order && h.shape.len() == 2 {
                a.t().iter().copied().collect()
            } else {
                a.into_raw_vec_and_offset().0
            };
            Ok(NpyData::Float(h.shape.clone(), v))
        }
        EntryKind::Int { signed, size } => {
            let v = raw()?
                .chunks_exact(size)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(c);
                    if signed && c[size - 1] & 0x80 != 0 {
                        b[size..].fill(0xff);
                    }
                    let x = i64::from_le_bytes(b);
                    if !signed && x < 0 {
                        Err("an unsigned integer above 2^63".to_string())
                    } else {
                        Ok(x)
                    }
                })
                .collect::<Result<_, _>>()?;
            Ok(NpyData::Int(v))
        }
        EntryKind::Str { utf32, size } => {
            // `U`: UTF-32 code points, `S`: UTF-8 bytes; both padded with NULs.
            let item = |c: &[u8]| -> Result<String, String> {
                if !utf32 {
                    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                    return String::from_utf8(c[..end].to_vec())
                        .map_err(|_| "a string that is not UTF-8".into());
                }
                c.chunks_exact(4)
                    .map(|u| u32::from_le_bytes(u.try_into().expect("4 bytes")))
                    .take_while(|&u| u != 0)
                    .map(|u| char::from_u32(u).ok_or_else(|| format!("invalid character {u:#x}")))
                    .collect()
            };
            Ok(NpyData::Str(if size == 0 {
                vec![String::new(); len]
            } else {
                raw()?
                    .chunks_exact(size)
                    .map(item)
                    .collect::<Result<_, _>>()?
            }))
        }
    }
}

/// Reads every array of an `.npz` archive, in archive order, with its name
/// (the entry name without `.npy`).
///
/// ```
/// use fisherkit_io::descriptor_file::{read_npz_arrays, write_npz_arrays, NpyData, NpyRef};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npzarrays-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("a.npz");
/// let x = array![[1.0f32, 2.0], [3.0, 4.0]];
/// let names = ["cat".to_string()];
/// write_npz_arrays(&path, &[("x", NpyRef::Float(x.view())), ("n", NpyRef::Int(&[7, 8])), ("s", NpyRef::Str(&names))])?;
/// let arrays = read_npz_arrays(&path)?;
/// assert_eq!(arrays, vec![
///     ("x".to_string(), NpyData::Float(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0])),
///     ("n".to_string(), NpyData::Int(vec![7, 8])),
///     ("s".to_string(), NpyData::Str(vec!["cat".to_string()])),
/// ]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npz_arrays(path: &Path) -> Result<Vec<(String, NpyData)>, IoError> {
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e.to_string()))?;
    let mut out = Vec::new();
    for_each_entry(
        std::io::BufReader::new(file),
        path,
        |name, header, data, data_len| {
            out.push((name.to_string(), decode_npy(header, data, data_len)?));
            Ok(())
        },
    )?;
    Ok(out)
}

/// Reads and validates a descriptor file (see the module docs), every bag in
/// memory: [`DescriptorReader`] reading them all. Errors name the
/// file and the array, row and column at fault: no `labels`, a labels count
/// that differs from the number of images, an image without descriptors,
/// arrays of different widths $D$, a NaN or infinite value, an unsupported dtype.
///
/// ```
/// use fisherkit_io::descriptor_file::{read_descriptor_file, write_descriptor_file};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-descfile-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("train.npz");
/// let bags = [array![[0.0f32, 1.0], [2.0, 3.0]], array![[4.0f32, 5.0]]];
/// let names = ["img0".to_string(), "img1".to_string()];
/// let labels = ["dog".to_string(), "cat".to_string()];
/// write_descriptor_file(&path, &names, &[bags[0].view(), bags[1].view()], &labels)?;
/// let set = read_descriptor_file(&path)?;
/// assert_eq!((set.names.as_slice(), set.labels.as_slice()), (&names[..], &labels[..]));
/// assert_eq!(set.bags, bags);
/// assert_eq!((set.dim(), set.classes()), (2, vec!["cat".to_string(), "dog".to_string()]));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_descriptor_file(path: &Path) -> Result<DescriptorSet, IoError> {
    DescriptorReader::open(path)?.read_all()
}

/// A 2-D float array of the one-array-per-image layout.
fn matrix(name: &str, data: NpyData) -> Result<Array2<f32>, String> {
    match data {
        NpyData::Float(shape, v) if shape.len() == 2 => {
            Array2::from_shape_vec((shape[0], shape[1]), v).map_err(|e| e.to_string())
        }
        NpyData::Float(shape, _) => Err(format!(
            "array `{name}` has shape {shape:?}; each image's descriptors must be a 2-D (n_i, D) array"
        )),
        _ => Err(format!(
            "array `{name}` is not float32/float64; each image's descriptors must be a 2-D (n_i, D) float array (labels go in `{LABELS}`)"
        )),
    }
}

impl NpyRef<'_> {
    /// Adds the array to `npz` as the entry `name.npy` (C order,
    /// little-endian): `<f4` (n, D), `<i8` (n,), or `<U{w}` (n,) with `w` the
    /// longest string's length in characters (at least 1), NUL-padded.
    fn add_to<W: Write + Seek>(&self, npz: &mut NpzBuilder<W>, name: &str) -> std::io::Result<()> {
        match *self {
            NpyRef::Float(x) => {
                npz.add(name, Dtype::F32.npy_descr(), &[x.nrows(), x.ncols()], |w| {
                    write_le(w, x.iter().copied(), f32::push_le)
                })
            }
            NpyRef::Int(v) => npz.add(name, "<i8", &[v.len()], |w| {
                write_le(w, v, |x, out| out.extend_from_slice(&x.to_le_bytes()))
            }),
            NpyRef::Str(v) => {
                let width = v
                    .iter()
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(1);
                npz.add(name, &format!("<U{width}"), &[v.len()], |w| {
                    write_le(w, v, |s, out| {
                        let n = s.chars().count();
                        out.extend(s.chars().flat_map(|c| (c as u32).to_le_bytes()));
                        out.extend(std::iter::repeat_n(0u8, 4 * (width - n)));
                    })
                })
            }
        }
    }
}

/// Writes named arrays to an uncompressed `.npz` archive (readable by
/// `numpy.load`), atomically (a temporary file beside `path`, synced, then
/// renamed; nothing is left on failure).
pub fn write_npz_arrays(path: &Path, arrays: &[(&str, NpyRef<'_>)]) -> Result<(), IoError> {
    write_atomically(path, |w| {
        let mut npz = NpzBuilder::new(w, false);
        for (name, a) in arrays {
            a.add_to(&mut npz, name)?;
        }
        npz.finish()?;
        Ok(())
    })
}

/// Writes a descriptor file in the one-array-per-image layout one image at a
/// time (for `--save-descriptors` on a streamed run): entries go to a
/// temporary archive beside the target, [`DescriptorFileWriter::finish`] adds
/// the labels and renames it into place; dropped unfinished, nothing is left.
pub struct DescriptorFileWriter {
    path: PathBuf,
    tmp: PathBuf,
    zip: Option<NpzBuilder<std::io::BufWriter<std::fs::File>>>,
    labels: Vec<String>,
}

impl DescriptorFileWriter {
    /// Starts the file `path`.
    ///
    /// # Errors
    /// The temporary file cannot be created.
    pub fn create(path: &Path) -> Result<Self, IoError> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| io_err(path, e.to_string()))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            zip: Some(NpzBuilder::new(std::io::BufWriter::new(file), false)),
            labels: Vec::new(),
        })
    }

    /// Adds image `name`'s bag (n, D) with its class `label`.
    ///
    /// # Errors
    /// A reserved name, a failed write.
    pub fn push(
        &mut self,
        name: &str,
        bag: ArrayView2<'_, f32>,
        label: &str,
    ) -> Result<(), IoError> {
        if [LABELS, DESCRIPTORS, IMAGE_INDEX].contains(&name) {
            return Err(io_err(
                &self.path,
                format!("image name `{name}` is reserved"),
            ));
        }
        let zip = self.zip.as_mut().expect("open until finished");
        NpyRef::Float(bag)
            .add_to(zip, name)
            .map_err(|e| io_err(&self.path, e.to_string()))?;
        self.labels.push(label.to_string());
        Ok(())
    }

    /// Adds the labels and moves the file into place.
    ///
    /// # Errors
    /// A failed write or rename.
    pub fn finish(mut self) -> Result<(), IoError> {
        let mut zip = self.zip.take().expect("open until finished");
        let res = (|| -> Result<(), String> {
            NpyRef::Str(&self.labels)
                .add_to(&mut zip, LABELS)
                .map_err(|e| e.to_string())?;
            let mut w = zip.finish().map_err(|e| e.to_string())?;
            w.flush().map_err(|e| e.to_string())?;
            w.get_ref().sync_all().map_err(|e| e.to_string())?;
            drop(w);
            std::fs::rename(&self.tmp, &self.path).map_err(|e| e.to_string())
        })();
        res.map_err(|m| io_err(&self.path, m))
    }
}

impl Drop for DescriptorFileWriter {
    fn drop(&mut self) {
        if self.zip.is_some() || !self.path.exists() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes a descriptor file in the one-array-per-image layout: each bag under
/// its name, then `labels` (strings). `names`, `bags` and `labels` have one
/// entry per image; names must be distinct and not `labels`, `descriptors` or
/// `image_index`.
pub fn write_descriptor_file(
    path: &Path,
    names: &[String],
    bags: &[ArrayView2<'_, f32>],
    labels: &[String],
) -> Result<(), IoError> {
    if names.len() != bags.len() || labels.len() != bags.len() {
        return Err(io_err(
            path,
            format!(
                "{} names, {} bags and {} labels; need one of each per image",
                names.len(),
                bags.len(),
                labels.len()
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if [LABELS, DESCRIPTORS, IMAGE_INDEX].contains(&n.as_str()) || !seen.insert(n) {
            return Err(io_err(
                path,
                format!("image name `{n}` is reserved or repeated"),
            ));
        }
    }
    let mut arrays = bag_arrays(names, bags);
    arrays.push((LABELS, NpyRef::Str(labels)));
    write_npz_arrays(path, &arrays)
}

/// The arrays of the one-array-per-image layout, for [`write_npz_arrays`]:
/// bag `i` under `names[i]` (the labels array is to be added).
pub fn bag_arrays<'a>(
    names: &'a [String],
    bags: &[ArrayView2<'a, f32>],
) -> Vec<(&'a str, NpyRef<'a>)> {
    names
        .iter()
        .zip(bags)
        .map(|(n, b)| (n.as_str(), NpyRef::Float(*b)))
        .collect()
}
