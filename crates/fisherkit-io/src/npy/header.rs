//! The `.npy` header: [`read_header`] parses every header the crate reads,
//! [`npy_header`] writes every header the crate writes.

use super::literal::{PyParser, PyValue};
use std::io::{self, Read};

/// The magic string that starts every `.npy` file.
pub(crate) const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";
/// The local-file-header signature that starts a zip (`.npz`) archive.
pub(crate) const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";
/// Largest header numpy writes is small; refuse absurd lengths before reading.
const MAX_HEADER_LEN: usize = 1 << 20;

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
    pub(super) fn parse(s: &str) -> Descr {
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
    pub(super) fn numpy_name(&self) -> String {
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

/// Parses the dict literal of an `.npy` header.
pub(super) fn parse_header_dict(text: &[u8]) -> Result<(Descr, bool, Vec<usize>), String> {
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

/// Like `read_exact` but returns how many bytes were read when the input ends early.
pub(super) fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
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

/// The header of an `.npy` file as numpy writes it: format 1.0, C order,
/// the dict `{'descr': …, 'fortran_order': False, 'shape': …, }` (shape in
/// Python's syntax, see [`py_shape`]) padded with spaces so that magic,
/// version, length, dict and the closing `'\n'` fill a multiple of 64 bytes.
/// The one writer of `.npy` header bytes in the crate: empty arrays of
/// [`write_npy`](super::write_npy), [`NpyBlockWriter`](super::NpyBlockWriter)
/// and every entry of an `.npz` archive (`npz::NpzBuilder`). `descr` is numpy's type string (`<f4`, `<i8`, `<U7`).
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
