//! `.npy` reading and writing: round trips and every error path, on files
//! crafted byte by byte from the format description (numpy's NEP 1).

use fisherkit_io::{read_npy, read_npy_as, write_npy, IoError, Matrix};
use ndarray::{array, Array2};
use std::path::{Path, PathBuf};

mod raw;

fn dict(descr: &str, fortran: bool, shape: &str) -> String {
    let f = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {shape}, }}")
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Reads `bytes` as X.npy and returns the error message.
fn err_of(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "X.npy", bytes);
    let e = read_npy(&p).expect_err("the file must be refused");
    let msg = e.to_string();
    assert!(msg.contains("X.npy: "), "message must name the file: {msg}");
    assert!(matches!(e, IoError::Format { .. }), "{e:?}");
    msg
}

#[test]
fn reads_a_handmade_float32_file() {
    let vals: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "a.npy",
        &raw::npy_with_header(&dict("<f4", false, "(2, 3)"), &f32_bytes(&vals)),
    );
    let m = read_npy(&p).unwrap();
    assert_eq!(m, Matrix::F32(array![[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]]));
}

#[test]
fn reads_version_2_headers() {
    let mut header = dict("<f8", false, "(1, 2)");
    let unpadded = 12 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&2.5f64.to_le_bytes());
    bytes.extend_from_slice(&(-3.0f64).to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "v2.npy", &bytes);
    assert_eq!(read_npy(&p).unwrap(), Matrix::F64(array![[2.5, -3.0]]));
}

#[test]
fn round_trips_f32_and_f64_bit_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let a32 = Array2::from_shape_fn((7, 5), |(i, j)| ((i * 5 + j) as f32).sin() * 1e-3);
    let a64 = Array2::from_shape_fn((3, 9), |(i, j)| ((i * 9 + j) as f64).cos() * 1e300);
    let p32 = dir.path().join("a32.npy");
    let p64 = dir.path().join("a64.npy");
    write_npy(&p32, a32.view()).unwrap();
    write_npy(&p64, a64.view()).unwrap();
    assert_eq!(read_npy(&p32).unwrap(), Matrix::F32(a32.clone()));
    assert_eq!(read_npy(&p64).unwrap(), Matrix::F64(a64.clone()));
    // Converting reads.
    assert_eq!(read_npy_as::<f64>(&p32).unwrap(), a32.mapv(|v| v as f64));
    assert_eq!(read_npy_as::<f32>(&p64).unwrap(), a64.mapv(|v| v as f32));
}

#[test]
fn writes_transposed_views_in_c_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = Array2::from_shape_fn((4, 3), |(i, j)| (10 * i + j) as f64);
    let p = dir.path().join("t.npy");
    write_npy(&p, a.t()).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let text = String::from_utf8_lossy(&bytes[10..]);
    assert!(text.contains("'fortran_order': False"), "{text}");
    assert_eq!(read_npy(&p).unwrap(), Matrix::F64(a.t().to_owned()));
}

#[test]
fn empty_matrices_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.npy");
    write_npy(&p, Array2::<f32>::zeros((0, 4)).view()).unwrap();
    assert_eq!(read_npy(&p).unwrap().dim(), (0, 4));
}

#[test]
fn integer_dtypes_are_refused_by_name() {
    let m = err_of(&raw::npy_with_header(
        &dict("<i8", false, "(2, 2)"),
        &[0u8; 32],
    ));
    assert!(
        m.ends_with("dtype int64 not supported; expected float32 or float64"),
        "{m}"
    );
    let m = err_of(&raw::npy_with_header(
        &dict("|u1", false, "(2, 2)"),
        &[0u8; 4],
    ));
    assert!(m.contains("dtype uint8 not supported"), "{m}");
    let m = err_of(&raw::npy_with_header(
        &dict("<f2", false, "(2, 2)"),
        &[0u8; 8],
    ));
    assert!(m.contains("dtype float16 not supported"), "{m}");
    let m = err_of(&raw::npy_with_header(
        &dict("|b1", false, "(2, 2)"),
        &[0u8; 4],
    ));
    assert!(m.contains("dtype bool not supported"), "{m}");
    let m = err_of(&raw::npy_with_header(
        &dict("<c8", false, "(1, 1)"),
        &[0u8; 8],
    ));
    assert!(m.contains("dtype complex64 not supported"), "{m}");
    let m = err_of(&raw::npy_with_header(
        "{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        &[0u8; 16],
    ));
    assert!(m.contains("structured"), "{m}");
}

#[test]
fn wrong_ranks_are_refused_with_the_shape() {
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", false, "(5,)"),
        &[0u8; 20],
    ));
    assert!(
        m.ends_with("expected a 2-D (N, D) array, got shape (5,)"),
        "{m}"
    );
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", false, "(2, 3, 4)"),
        &[0u8; 96],
    ));
    assert!(m.contains("got shape (2, 3, 4)"), "{m}");
    let m = err_of(&raw::npy_with_header(&dict("<f8", false, "()"), &[0u8; 8]));
    assert!(m.contains("got shape ()"), "{m}");
}

#[test]
fn fortran_order_and_big_endian_are_refused() {
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", true, "(2, 3)"),
        &[0u8; 24],
    ));
    assert!(m.contains("Fortran-order"), "{m}");
    let m = err_of(&raw::npy_with_header(
        &dict(">f4", false, "(2, 3)"),
        &[0u8; 24],
    ));
    assert!(m.contains("big-endian float32 is not supported"), "{m}");
    // A single row is the same in both orders: accepted.
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "row.npy",
        &raw::npy_with_header(&dict("<f4", true, "(1, 2)"), &f32_bytes(&[1.0, 2.0])),
    );
    assert_eq!(read_npy(&p).unwrap(), Matrix::F32(array![[1.0, 2.0]]));
}

#[test]
fn truncated_data_is_refused_with_sizes() {
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", false, "(1000, 128)"),
        &[0u8; 1024],
    ));
    assert!(
        m.ends_with(
            "file is truncated: header says 1000×128 float32 (512000 bytes) but 1024 bytes follow"
        ),
        "{m}"
    );
}

#[test]
fn a_header_claiming_a_trillion_elements_does_not_allocate() {
    // 10^6 × 10^6 float32 = 4 TB: must be refused from the file length alone.
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", false, "(1000000, 1000000)"),
        &[0u8; 64],
    ));
    assert!(m.contains("file is truncated"), "{m}");
    assert!(m.contains("4000000000000 bytes"), "{m}");
    // A shape whose byte count overflows usize.
    let m = err_of(&raw::npy_with_header(
        &dict("<f8", false, "(4294967296, 4294967296)"),
        &[],
    ));
    assert!(m.contains("too large"), "{m}");
}

#[test]
fn trailing_bytes_are_refused() {
    let m = err_of(&raw::npy_with_header(
        &dict("<f4", false, "(1, 1)"),
        &[0u8; 8],
    ));
    assert!(m.contains("trailing data"), "{m}");
}

#[test]
fn foreign_files_are_refused() {
    let m = err_of(b"a,b,c\n1,2,3\n");
    assert!(m.contains("not an .npy file"), "{m}");
    let m = err_of(b"");
    assert!(m.contains("is empty"), "{m}");
    let m = err_of(b"PK\x03\x04 and then some zip");
    assert!(m.contains("zip (.npz) archive"), "{m}");
    let m = err_of(b"\x93NUMPY\x01");
    assert!(m.contains("truncated inside the .npy header"), "{m}");
    let mut cut = raw::npy_with_header(&dict("<f4", false, "(1, 1)"), &[0u8; 4]);
    cut.truncate(30);
    let m = err_of(&cut);
    assert!(m.contains("truncated inside the .npy header"), "{m}");
    let m = err_of(&raw::npy_with_header(
        "{'descr': '<f4', 'shape': (1, 1), }",
        &[0u8; 4],
    ));
    assert!(m.contains("malformed .npy header"), "{m}");
    let m = err_of(&raw::npy_with_header("not a dict at all", &[0u8; 4]));
    assert!(m.contains("malformed .npy header"), "{m}");
    let m = err_of(b"\x93NUMPY\x09\x00\x10\x00");
    assert!(m.contains("unsupported .npy format version 9.0"), "{m}");
}

#[test]
fn missing_files_and_directories_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let e = read_npy(dir.path().join("nope.npy")).unwrap_err();
    assert!(matches!(e, IoError::Os { .. }));
    assert!(e.to_string().contains("nope.npy"), "{e}");
    let e = read_npy(dir.path()).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}

#[test]
fn writing_into_a_missing_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("missing").join("out.npy");
    let e = write_npy(&p, Array2::<f32>::zeros((2, 2)).view()).unwrap_err();
    assert!(e.to_string().contains("out.npy"), "{e}");
    assert!(!p.exists());
    // Writing over a directory is refused and leaves it alone.
    let e = write_npy(dir.path(), Array2::<f32>::zeros((2, 2)).view()).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
