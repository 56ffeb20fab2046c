//! `.npy` arrays: (N, D) little-endian float32/float64 matrices in C order.
//!
//! The header is parsed here rather than by `ndarray-npy` so that every
//! unsupported file gets a message that says what it holds and what was
//! expected, and so that the data size is checked against the bytes actually
//! present before anything is allocated.
//!
//! Owners: [`read_header`] parses every `.npy` header the crate reads (files,
//! `.npz` entries, blocked reading), [`npy_header`] writes every header the
//! crate writes itself (empty arrays, [`NpyBlockWriter`], `.npz` entries);
//! the non-empty arrays of [`write_npy`] are written by `ndarray-npy`.
//!
//! Format (numpy's `NEP 1`): the magic `\x93NUMPY`, a major and minor
//! version byte, the header length (u16 little-endian in version 1, u32 in
//! versions 2 and 3), then an ASCII Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (N, D), }`, then the
//! raw data.

use crate::atomic::write_atomically;
use crate::error::{IoError, Result};
use fisherkit::Float;
use ndarray::{Array2, ArrayView2};
use ndarray_npy::WriteNpyExt;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// The magic string that starts every `.npy` file.
pub(crate) const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";
/// The local-file-header signature that starts a zip (`.npz`) archive.
pub(crate) const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";
/// Largest header numpy writes is small; refuse absurd lengths before reading.
const MAX_HEADER_LEN: usize = 1 << 20;

/// The element types fisherkit files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE 754 binary32 (`float32`, `<f4`, safetensors `F32`).
    F32,
    /// IEEE 754 binary64 (`float64`, `<f8`, safetensors `F64`).
    F64,
}

impl Dtype {
    /// numpy's name of the type (`"float32"`).
    pub fn numpy_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }

    /// numpy's type string of the little-endian type (`"<f4"`), as `.npy` headers write it.
    pub(crate) fn npy_descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.numpy_name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64`: a [`Float`] that fisherkit files can store.
pub trait Element: Float + ndarray_npy::WritableElement + sealed::Sealed {
    /// The file element type.
    const DTYPE: Dtype;
    /// Decodes one value from its little-endian bytes (`bytes.len()` is the element size).
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the little-endian bytes of `self` to `out`.
    fn push_le(self, out: &mut Vec<u8>);
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 4];
        b.copy_from_slice(bytes);
        f32::from_le_bytes(b)
    }
    fn push_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Element for f64 {
    const DTYPE: Dtype = Dtype::F64;
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        f64::from_le_bytes(b)
    }
    fn push_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// A 2-D array read from a file, in the file's element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Matrix {
    /// A `float32` array.
    F32(Array2<f32>),
    /// A `float64` array.
    F64(Array2<f64>),
}

impl Matrix {
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Matrix::F32(_) => Dtype::F32,
            Matrix::F64(_) => Dtype::F64,
        }
    }

    /// (rows, columns).
    pub fn dim(&self) -> (usize, usize) {
        match self {
            Matrix::F32(a) => a.dim(),
            Matrix::F64(a) => a.dim(),
        }
    }
}

impl From<Array2<f32>> for Matrix {
    fn from(a: Array2<f32>) -> Self {
        Matrix::F32(a)
    }
}

impl From<Array2<f64>> for Matrix {
    fn from(a: Array2<f64>) -> Self {
        Matrix::F64(a)
    }
}

// ---------------------------------------------------------------------------
// Header parsing

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    /// The `descr` entry as written (e.g. `<f4`), or a description of a structured dtype.
    pub descr: Descr,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Bytes from the start of the file to the first data byte.
    pub data_offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Descr {
    /// A simple type: byte order (`<`, `>`, `|`, `=`), kind char, item size.
    Simple {
        order: char,
        kind: char,
        size: usize,
    },
    /// A type string fisherkit does not parse (e.g. `<M8[ns]`).
    Other(String),
    /// A record (structured) dtype.
    Structured,
}

impl Descr {
    fn parse(s: &str) -> Descr {
        let mut chars = s.chars();
        let (order, rest) = match chars.next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (c, chars.as_str()),
            _ => ('|', s),
        };
        let mut rc = rest.chars();
        if let Some(kind) = rc.next() {
            let size = rc.as_str();
            if size.is_empty() {
                // `|O` (object) carries no size.
                return Descr::Simple {
                    order,
                    kind,
                    size: 0,
                };
            }
            if let Ok(size) = size.parse::<usize>() {
                return Descr::Simple { order, kind, size };
            }
        }
        Descr::Other(s.to_string())
    }

    /// numpy's name of the type (`int64`, `float16`, `bool`…).
    fn numpy_name(&self) -> String {
        match self {
            Descr::Simple { kind, size, .. } => {
                let bits = size * 8;
                match kind {
                    'f' => format!("float{bits}"),
                    'i' => format!("int{bits}"),
                    'u' => format!("uint{bits}"),
                    'c' => format!("complex{bits}"),
                    'b' if *size == 1 => "bool".to_string(),
                    'b' => format!("int{bits}"),
                    'U' => format!("str (<U{size})"),
                    'S' | 'a' => format!("bytes (S{size})"),
                    'O' => "object".to_string(),
                    'V' => format!("void{bits}"),
                    _ => format!("'{kind}{size}'"),
                }
            }
            Descr::Other(s) => format!("'{s}'"),
            Descr::Structured => "a structured (record) dtype".to_string(),
        }
    }
}

/// A value of the Python literal in an `.npy` header.
#[derive(Debug, Clone, PartialEq)]
enum PyValue {
    Str(String),
    Int(u128),
    Bool(bool),
    None,
    Seq(Vec<PyValue>),
    Dict(Vec<(PyValue, PyValue)>),
}

/// A tiny recursive-descent parser for the literals numpy writes in headers.
struct PyParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> PyParser<'a> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.pos))
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, String> {
        if depth > 32 {
            return Err("nesting too deep".into());
        }
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos] != q {
                    self.pos += 1;
                }
                if self.pos >= self.s.len() {
                    return Err("unterminated string".into());
                }
                let v = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                Ok(PyValue::Str(v))
            }
            Some(b'0'..=b'9') => {
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                // numpy on Windows once wrote `3L`.
                if self.s.get(self.pos) == Some(&b'L') {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos])
                    .unwrap_or("")
                    .trim_end_matches('L');
                digits
                    .parse::<u128>()
                    .map(PyValue::Int)
                    .map_err(|_| format!("integer {digits} is too large"))
            }
            Some(open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        return Ok(PyValue::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {}
                        _ => return Err(format!("expected ',' or '{}'", close as char)),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(PyValue::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    self.expect(b':')?;
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err("expected ',' or '}'".into()),
                    }
                }
            }
            Some(_) => {
                for (word, v) in [
                    (&b"True"[..], PyValue::Bool(true)),
                    (&b"False"[..], PyValue::Bool(false)),
                    (&b"None"[..], PyValue::None),
                ] {
                    if self.s[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        return Ok(v);
                    }
                }
                Err(format!("unexpected character at byte {}", self.pos))
            }
            None => Err("unexpected end of header".into()),
        }
    }
}

/// Parses the dict literal of an `.npy` header.
fn parse_header_dict(text: &[u8]) -> Result<(Descr, bool, Vec<usize>), String> {
    let mut p = PyParser { s: text, pos: 0 };
    let dict = p
        .value(0)
        .map_err(|e| format!("malformed .npy header ({e})"))?;
    let PyValue::Dict(items) = dict else {
        return Err("malformed .npy header (not a dict)".into());
    };
    let get = |key: &str| {
        items.iter().find_map(|(k, v)| match k {
            PyValue::Str(s) if s == key => Some(v),
            _ => None,
        })
    };
    let descr = match get("descr") {
        Some(PyValue::Str(s)) => Descr::parse(s),
        Some(PyValue::Seq(_)) => Descr::Structured,
        Some(_) => return Err("malformed .npy header ('descr' is not a string)".into()),
        None => return Err("malformed .npy header (no 'descr' key)".into()),
    };
    let fortran_order = match get("fortran_order") {
        Some(PyValue::Bool(b)) => *b,
        _ => return Err("malformed .npy header (no boolean 'fortran_order' key)".into()),
    };
    let shape = match get("shape") {
        Some(PyValue::Seq(dims)) => dims
            .iter()
            .map(|d| match d {
                PyValue::Int(n) => usize::try_from(*n)
                    .map_err(|_| format!("dimension {n} in the header is too large")),
                _ => Err("malformed .npy header ('shape' holds a non-integer)".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("malformed .npy header (no tuple 'shape' key)".into()),
    };
    Ok((descr, fortran_order, shape))
}

/// Reads the magic, version and header from `r`, leaving `r` at the first data byte.
pub(crate) fn read_header<R: Read>(r: &mut R) -> Result<Header, String> {
    let mut magic = [0u8; 6];
    let got = read_up_to(r, &mut magic).map_err(|e| format!("cannot read: {e}"))?;
    if got < 6 || &magic != NPY_MAGIC {
        if got >= 4 && &magic[..4] == ZIP_MAGIC {
            return Err(
                "is a zip (.npz) archive, not an .npy array; pass it where bags are expected"
                    .into(),
            );
        }
        if got == 0 {
            return Err("is empty, not an .npy file".into());
        }
        return Err("not an .npy file (it does not start with the \\x93NUMPY magic)".into());
    }
    let mut ver = [0u8; 2];
    r.read_exact(&mut ver)
        .map_err(|_| "file is truncated inside the .npy header".to_string())?;
    let (len_bytes, offset) = match ver[0] {
        1 => (2usize, 10usize),
        2 | 3 => (4, 12),
        v => {
            return Err(format!(
                "unsupported .npy format version {v}.{}; expected 1.0, 2.0 or 3.0",
                ver[1]
            ))
        }
    };
    let mut lb = [0u8; 4];
    r.read_exact(&mut lb[..len_bytes])
        .map_err(|_| "file is truncated inside the .npy header".to_string())?;
    let hlen = u32::from_le_bytes(lb) as usize;
    if hlen > MAX_HEADER_LEN {
        return Err(format!(
            "malformed .npy header (claims {hlen} bytes of header)"
        ));
    }
    let mut text = vec![0u8; hlen];
    r.read_exact(&mut text)
        .map_err(|_| "file is truncated inside the .npy header".to_string())?;
    let (descr, fortran_order, shape) = parse_header_dict(&text)?;
    Ok(Header {
        descr,
        fortran_order,
        shape,
        data_offset: offset + hlen,
    })
}

/// Like `read_exact` but returns how many bytes were read when the input ends early.
fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Formats a shape as Python does: `(5,)`, `(2, 3)`, `()`.
pub(crate) fn py_shape(shape: &[usize]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What a validated header describes: a 2-D float matrix of `n` rows, `d`
/// columns, whose data takes `nbytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MatrixLayout {
    pub dtype: Dtype,
    pub n: usize,
    pub d: usize,
    pub nbytes: usize,
}

impl Header {
    /// Checks the header describes an (N, D) little-endian float C-order array.
    pub(crate) fn matrix_layout(&self) -> Result<MatrixLayout, String> {
        let dtype = match self.descr {
            Descr::Simple {
                order,
                kind: 'f',
                size,
            } if size == 4 || size == 8 => {
                let dtype = if size == 4 { Dtype::F32 } else { Dtype::F64 };
                if order == '>' {
                    return Err(format!(
                        "big-endian {dtype} is not supported; expected little-endian \
                         (convert with a.astype('<f{size}'))"
                    ));
                }
                dtype
            }
            ref other => {
                return Err(format!(
                    "dtype {} not supported; expected float32 or float64",
                    other.numpy_name()
                ))
            }
        };
        let (n, d) = match self.shape[..] {
            [n, d] => (n, d),
            _ => {
                return Err(format!(
                    "expected a 2-D (N, D) array, got shape {}",
                    py_shape(&self.shape)
                ))
            }
        };
        if self.fortran_order && n > 1 && d > 1 {
            return Err("Fortran-order (column-major) arrays are not supported; \
                 save a C-order array (np.ascontiguousarray)"
                .into());
        }
        let nbytes = n
            .checked_mul(d)
            .and_then(|e| e.checked_mul(dtype.size()))
            .ok_or_else(|| format!("shape {} is too large to address", py_shape(&self.shape)))?;
        Ok(MatrixLayout {
            dtype,
            n,
            d,
            nbytes,
        })
    }
}

impl MatrixLayout {
    /// Checks that `available` bytes of data follow the header.
    pub(crate) fn check_available(&self, available: u64) -> Result<(), String> {
        let want = self.nbytes as u64;
        if available == want {
            return Ok(());
        }
        let what = format!(
            "header says {}×{} {} ({} bytes) but {} bytes follow",
            self.n, self.d, self.dtype, self.nbytes, available
        );
        if available < want {
            Err(format!("file is truncated: {what}"))
        } else {
            Err(format!("file has trailing data: {what}"))
        }
    }
}

/// Reads `n·d` values of type `F` from `r` into an (n, d) array.
/// `trusted_len`: the byte count was checked against the file length, so the
/// whole buffer can be allocated up front; otherwise it grows as data arrive.
pub(crate) fn read_values<F: Element, R: Read>(
    r: &mut R,
    layout: &MatrixLayout,
    trusted_len: bool,
) -> Result<Array2<F>, String> {
    let count = layout.n * layout.d;
    let size = F::DTYPE.size();
    let mut out: Vec<F> = Vec::with_capacity(if trusted_len {
        count
    } else {
        count.min(1 << 20)
    });
    let mut buf = vec![0u8; layout.nbytes.min((1 << 16) * size)];
    let mut remaining = layout.nbytes;
    while remaining > 0 {
        let chunk = remaining.min(buf.len());
        let got = read_up_to(r, &mut buf[..chunk]).map_err(|e| format!("cannot read: {e}"))?;
        if got < chunk {
            let have = layout.nbytes - remaining + got;
            return Err(format!(
                "file is truncated: header says {}×{} {} ({} bytes) but {} bytes follow",
                layout.n, layout.d, layout.dtype, layout.nbytes, have
            ));
        }
        out.extend(buf[..chunk].chunks_exact(size).map(F::from_le));
        remaining -= chunk;
    }
    Array2::from_shape_vec((layout.n, layout.d), out).map_err(|e| format!("internal error: {e}"))
}

/// Reads the data described by `layout` in its own dtype.
pub(crate) fn read_matrix_data<R: Read>(
    r: &mut R,
    layout: &MatrixLayout,
    trusted_len: bool,
) -> Result<Matrix, String> {
    Ok(match layout.dtype {
        Dtype::F32 => Matrix::F32(read_values(r, layout, trusted_len)?),
        Dtype::F64 => Matrix::F64(read_values(r, layout, trusted_len)?),
    })
}

/// Reads an (N, D) float32 or float64 `.npy` file.
///
/// Errors name the file and the problem: another dtype, another rank,
/// Fortran order, big-endian data, a truncated file or one that is not
/// `.npy` at all. The data size the header claims is checked against the
/// file length before anything is allocated.
///
/// ```
/// use fisherkit_io::{read_npy, write_npy, Matrix};
/// use ndarray::array;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("x.npy");
/// let x = array![[1.0f32, 2.0], [3.0, 4.0]];
/// write_npy(&path, x.view())?;
/// assert!(matches!(read_npy(&path)?, Matrix::F32(y) if y == x));
/// std::fs::write(&path, b"not an array")?;
/// let e = read_npy(&path).unwrap_err().to_string();
/// assert!(e.contains("x.npy"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy(path: impl AsRef<Path>) -> Result<Matrix> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| IoError::os(path, e))?;
    let file_len = file.metadata().map_err(|e| IoError::os(path, e))?.len();
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(IoError::format(path, "is a directory, not an .npy file"));
    }
    let mut r = BufReader::new(file);
    let header = read_header(&mut r).map_err(|e| IoError::format(path, e))?;
    let layout = header
        .matrix_layout()
        .map_err(|e| IoError::format(path, e))?;
    layout
        .check_available(file_len.saturating_sub(header.data_offset as u64))
        .map_err(|e| IoError::format(path, e))?;
    read_matrix_data(&mut r, &layout, true).map_err(|e| IoError::format(path, e))
}

/// Reads an (N, D) float32 or float64 `.npy` array from the bytes of a file
/// (for example one received over the network, or a fuzzer's input); `name`
/// stands for the file in error messages. Same checks as [`read_npy`]: the
/// data size the header claims is compared with `bytes.len()` before
/// anything is allocated.
///
/// ```
/// use fisherkit_io::{read_npy_bytes, write_npy, Matrix};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npybytes-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("x.npy");
/// let x = array![[1.0, 2.0, 3.0]];
/// write_npy(&path, x.view())?;
/// let bytes = std::fs::read(&path)?;
/// assert!(matches!(read_npy_bytes(&bytes, "sent.npy")?, Matrix::F64(y) if y == x));
/// // a header that claims more data than there is: refused, nothing allocated
/// let e = read_npy_bytes(&bytes[..bytes.len() - 8], "sent.npy").unwrap_err();
/// assert!(e.to_string().starts_with("sent.npy: "), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy_bytes(bytes: &[u8], name: impl AsRef<Path>) -> Result<Matrix> {
    let path = name.as_ref();
    let mut r = bytes;
    let header = read_header(&mut r).map_err(|e| IoError::format(path, e))?;
    let layout = header
        .matrix_layout()
        .map_err(|e| IoError::format(path, e))?;
    layout
        .check_available((bytes.len() as u64).saturating_sub(header.data_offset as u64))
        .map_err(|e| IoError::format(path, e))?;
    read_matrix_data(&mut r, &layout, true).map_err(|e| IoError::format(path, e))
}

/// Reads an (N, D) `.npy` file as `F`, converting float32 ↔ float64 if needed
/// (float64 → float32 rounds to nearest).
///
/// ```
/// use fisherkit_io::{read_npy_as, write_npy};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-npyas-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("x.npy");
/// write_npy(&path, array![[0.1f64, 1e300]].view())?;
/// // float64 → float32 rounds to nearest (1e300 overflows to infinity)
/// let y = read_npy_as::<f32>(&path)?;
/// assert_eq!(y[[0, 0]], 0.1f32);
/// assert!(y[[0, 1]].is_infinite());
/// assert_eq!(read_npy_as::<f64>(&path)?, array![[0.1, 1e300]]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_npy_as<F: Element>(path: impl AsRef<Path>) -> Result<Array2<F>> {
    Ok(match read_npy(path)? {
        Matrix::F32(a) => a.mapv(|v| F::from_f64_lossy(v as f64)),
        Matrix::F64(a) => a.mapv(F::from_f64_lossy),
    })
}

/// Writes `a` (N, D) as a C-order little-endian `.npy` file, atomically: the
/// data go to a temporary file in the same directory, which is synced and then
/// renamed over `path`. On error nothing is left behind.
pub fn write_npy<F: Element>(path: impl AsRef<Path>, a: ArrayView2<'_, F>) -> Result<()> {
    let path = path.as_ref();
    if a.is_empty() {
        // ndarray-npy 0.10 panics on arrays with a zero-length axis: the
        // header alone is the whole file (numpy format 1.0).
        let header = npy_header(F::DTYPE.npy_descr(), &[a.nrows(), a.ncols()]);
        return write_atomically(path, |w| io::Write::write_all(w, &header));
    }
    let a = a.as_standard_layout();
    write_atomically(path, |w| a.write_npy(w).map_err(io::Error::other))
}

/// The header of an `.npy` file as numpy writes it: format 1.0, C order,
/// the dict `{'descr': …, 'fortran_order': False, 'shape': …, }` (shape in
/// Python's syntax, see [`py_shape`]) padded with spaces so that magic,
/// version, length, dict and the closing `'\n'` fill a multiple of 64 bytes.
/// The one writer of `.npy` header bytes in the crate: empty arrays of
/// [`write_npy`], [`NpyBlockWriter`] and every entry of an `.npz` archive
/// (`npz::NpzBuilder`). `descr` is numpy's type string (`<f4`, `<i8`, `<U7`).
pub(crate) fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}",
        py_shape(shape)
    );
    // magic (6) + version (2) + length (2) + dict + '\n', padded to 64 bytes
    dict.push_str(&" ".repeat((64 - (10 + dict.len() + 1) % 64) % 64));
    dict.push('\n');
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Writes a C-order f32 `.npy` file of shape (rows, cols) one column block at
/// a time, for matrices too large to hold: the file is a temporary beside
/// `path`, sized up front, filled with positioned writes by
/// [`NpyBlockWriter::write_columns`], and renamed over `path` by
/// [`NpyBlockWriter::finish`] once synced. Dropped unfinished, it removes the
/// temporary file: a reader never sees a partial matrix.
pub struct NpyBlockWriter {
    path: std::path::PathBuf,
    tmp: Option<tempfile::NamedTempFile>,
    header_len: u64,
    rows: usize,
    cols: usize,
}

impl NpyBlockWriter {
    /// Starts `path` for a (rows, cols) f32 matrix.
    ///
    /// # Errors
    /// The folder cannot hold the temporary file, or the disk is full.
    pub fn create(path: impl AsRef<Path>, rows: usize, cols: usize) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".npy-block.")
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| IoError::os(&path, e))?;
        let header = npy_header(Dtype::F32.npy_descr(), &[rows, cols]);
        use std::os::unix::fs::FileExt;
        tmp.as_file()
            .write_all_at(&header, 0)
            .and_then(|_| {
                tmp.as_file()
                    .set_len(header.len() as u64 + (rows * cols * 4) as u64)
            })
            .map_err(|e| IoError::os(&path, e))?;
        Ok(Self {
            header_len: header.len() as u64,
            path,
            tmp: Some(tmp),
            rows,
            cols,
        })
    }

    /// Writes the block `x` (rows, w) at columns `first..first + w`.
    ///
    /// # Errors
    /// A block of the wrong height or beyond the last column, a failed write.
    pub fn write_columns(&mut self, first: usize, x: ArrayView2<'_, f32>) -> Result<()> {
        if x.nrows() != self.rows || first + x.ncols() > self.cols {
            return Err(IoError::format(
                &self.path,
                format!(
                    "block ({}, {}) at column {first} does not fit a ({}, {}) matrix",
                    x.nrows(),
                    x.ncols(),
                    self.rows,
                    self.cols
                ),
            ));
        }
        use std::os::unix::fs::FileExt;
        let f = self.tmp.as_ref().expect("open until finished").as_file();
        let mut buf = Vec::with_capacity(x.ncols() * 4);
        for (i, row) in x.rows().into_iter().enumerate() {
            buf.clear();
            buf.extend(row.iter().flat_map(|v| v.to_le_bytes()));
            let at = self.header_len + ((i * self.cols + first) * 4) as u64;
            f.write_all_at(&buf, at)
                .map_err(|e| IoError::os(&self.path, e))?;
        }
        Ok(())
    }

    /// Writes row `i` (all its columns).
    ///
    /// # Errors
    /// A row of the wrong length or beyond the last row, a failed write.
    pub fn write_row(&mut self, i: usize, row: &[f32]) -> Result<()> {
        if i >= self.rows || row.len() != self.cols {
            return Err(IoError::format(
                &self.path,
                format!(
                    "row {i} of {} values does not fit a ({}, {}) matrix",
                    row.len(),
                    self.rows,
                    self.cols
                ),
            ));
        }
        use std::os::unix::fs::FileExt;
        let f = self.tmp.as_ref().expect("open until finished").as_file();
        let buf: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        f.write_all_at(&buf, self.header_len + (i * self.cols * 4) as u64)
            .map_err(|e| IoError::os(&self.path, e))
    }

    /// Syncs the file and renames it over the target.
    ///
    /// # Errors
    /// A failed sync or rename (the temporary file is removed).
    pub fn finish(mut self) -> Result<()> {
        let tmp = self.tmp.take().expect("open until finished");
        tmp.as_file()
            .sync_all()
            .map_err(|e| IoError::os(&self.path, e))?;
        tmp.persist(&self.path)
            .map_err(|e| IoError::os(&self.path, e.error))?;
        Ok(())
    }
}

/// Writes a [`Matrix`] with [`write_npy`].
pub fn write_matrix(path: impl AsRef<Path>, m: &Matrix) -> Result<()> {
    match m {
        Matrix::F32(a) => write_npy(path, a.view()),
        Matrix::F64(a) => write_npy(path, a.view()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_empty_arrays() {
        let dir = tempfile::tempdir().unwrap();
        for (rows, cols) in [(0, 3), (2, 0), (0, 0)] {
            let p = dir.path().join(format!("e{rows}x{cols}.npy"));
            write_npy(&p, Array2::<f32>::zeros((rows, cols)).view()).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(bytes.len() % 64, 0, "header padded to 64 bytes");
            let (_, _, shape) = parse_header_dict(&bytes[10..]).unwrap();
            assert_eq!(shape, vec![rows, cols]);
        }
    }

    #[test]
    fn writes_numpy_headers_byte_for_byte() {
        // What numpy 1.x/2.x `np.save` writes (format 1.0, padded to 64 bytes).
        let dict = |d: &str| {
            let mut h = b"\x93NUMPY\x01\x00".to_vec();
            let text = format!("{d:<117}\n");
            h.extend_from_slice(&(text.len() as u16).to_le_bytes());
            h.extend_from_slice(text.as_bytes());
            h
        };
        assert_eq!(
            npy_header("<f4", &[2, 3]),
            dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }")
        );
        assert_eq!(
            npy_header("<i8", &[5]),
            dict("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }")
        );
        assert_eq!(
            npy_header("<f8", &[]),
            dict("{'descr': '<f8', 'fortran_order': False, 'shape': (), }")
        );
        for (descr, shape) in [("<U100", vec![123_456_789usize]), ("<f4", vec![0; 20])] {
            let h = npy_header(descr, &shape);
            assert_eq!(h.len() % 64, 0);
            let mut r = &h[..];
            let parsed = read_header(&mut r).unwrap();
            assert_eq!((parsed.shape, parsed.data_offset), (shape, h.len()));
            assert!(r.is_empty() && !parsed.fortran_order);
        }
    }

    #[test]
    fn parses_numpy_headers() {
        let (d, f, s) =
            parse_header_dict(b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }  \n")
                .unwrap();
        assert_eq!(
            d,
            Descr::Simple {
                order: '<',
                kind: 'f',
                size: 4
            }
        );
        assert!(!f);
        assert_eq!(s, vec![3, 4]);
        let (_, _, s) =
            parse_header_dict(b"{'descr': '<i8', 'fortran_order': True, 'shape': (5,), }").unwrap();
        assert_eq!(s, vec![5]);
        let (_, _, s) =
            parse_header_dict(b"{'descr': '<f8', 'fortran_order': False, 'shape': (), }").unwrap();
        assert!(s.is_empty());
        let (d, _, _) = parse_header_dict(
            b"{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }",
        )
        .unwrap();
        assert_eq!(d, Descr::Structured);
        assert!(parse_header_dict(b"{'descr': '<f4', 'shape': (3, 4)}").is_err());
        assert!(parse_header_dict(b"{'descr': '<f4'").is_err());
        assert!(parse_header_dict(b"").is_err());
        assert!(parse_header_dict(
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999999999999999999, 1), }"
        )
        .is_err());
    }

    #[test]
    fn names_dtypes_like_numpy() {
        assert_eq!(Descr::parse("<i8").numpy_name(), "int64");
        assert_eq!(Descr::parse("|u1").numpy_name(), "uint8");
        assert_eq!(Descr::parse("<f2").numpy_name(), "float16");
        assert_eq!(Descr::parse("|b1").numpy_name(), "bool");
        assert_eq!(Descr::parse("<c16").numpy_name(), "complex128");
        assert_eq!(Descr::parse("|O").numpy_name(), "object");
        assert_eq!(py_shape(&[5]), "(5,)");
        assert_eq!(py_shape(&[2, 3, 4]), "(2, 3, 4)");
    }
}
