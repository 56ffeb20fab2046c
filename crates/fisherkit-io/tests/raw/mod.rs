//! Hand-built `.npy` and `.npz` bytes, shared by the array and descriptor-file
//! tests, so that each test can write exactly the (malformed) file it needs.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

/// An `.npy` (version 1.0) of header dictionary `dict`, padded as numpy pads
/// it, followed by `data`.
pub fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// An `.npy` of numpy type `descr`, order and shape text (`"(2, 3)"`).
pub fn npy_ordered(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let order = if fortran { "True" } else { "False" };
    npy_with_header(
        &format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}"),
        data,
    )
}

/// Writes a zip of raw entries (file name, bytes), stored or deflated.
pub fn zip_of<N: AsRef<str>>(path: &Path, entries: &[(N, Vec<u8>)], deflate: bool) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        z.start_file(name.as_ref(), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}
