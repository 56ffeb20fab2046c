//! `.npz` bags: archive order, names, and the errors that name the array.

use fisherkit_io::{file_kind, read_bags, read_npz, write_npz, Bags, FileKind, IoError};
use ndarray::Array2;
use std::io::Write;
use std::path::{Path, PathBuf};

fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Writes a zip of raw entries (name, bytes), stored or deflated.
fn zip_of(path: &Path, entries: &[(&str, Vec<u8>)], deflate: bool) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        z.start_file(*name, opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

fn bag(n: usize, d: usize, seed: f32) -> Array2<f32> {
    Array2::from_shape_fn((n, d), |(i, j)| seed + i as f32 * 0.5 - j as f32 * 0.25)
}

fn err_of(entries: &[(&str, Vec<u8>)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("B.npz");
    zip_of(&p, entries, false);
    let e = read_npz(&p).expect_err("must be refused");
    let m = e.to_string();
    assert!(m.starts_with(&format!("{}: ", p.display())), "{m}");
    m
}

fn f32_data(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect()
}

#[test]
fn round_trip_keeps_archive_order_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let bags = [
        ("zeta", bag(3, 4, 1.0)),
        ("alpha", bag(1, 4, -2.0)),
        ("mid", bag(7, 4, 0.0)),
    ];
    for compressed in [false, true] {
        let p: PathBuf = dir.path().join(format!("b{compressed}.npz"));
        let views: Vec<_> = bags.iter().map(|(n, b)| (*n, b.view())).collect();
        write_npz(&p, &views, compressed).unwrap();
        assert_eq!(file_kind(&p).unwrap(), FileKind::Npz);
        let Bags::F32(read) = read_npz(&p).unwrap() else {
            panic!("expected float32 bags")
        };
        assert_eq!(read.names, vec!["zeta", "alpha", "mid"]);
        assert_eq!(read.dim(), 4);
        for ((_, want), got) in bags.iter().zip(&read.bags) {
            assert_eq!(want, got);
        }
    }
}

#[test]
fn handmade_deflated_archives_of_float64_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.npz");
    let data: Vec<u8> = [1.0f64, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    zip_of(
        &p,
        &[
            ("b.npy", npy_bytes("<f8", "(2, 2)", &data)),
            ("a.npy", npy_bytes("<f8", "(1, 2)", &data[..16])),
        ],
        true,
    );
    let Bags::F64(b) = read_npz(&p).unwrap() else {
        panic!("expected float64 bags")
    };
    assert_eq!(b.names, vec!["b", "a"]);
    assert_eq!(b.bags[0], ndarray::array![[1.0, 2.0], [3.0, 4.0]]);
    assert_eq!(b.bags[1], ndarray::array![[1.0, 2.0]]);
}

#[test]
fn read_bags_accepts_a_single_npy_bag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img07.npy");
    fisherkit_io::write_npy(&p, bag(5, 3, 0.0).view()).unwrap();
    assert_eq!(file_kind(&p).unwrap(), FileKind::Npy);
    let b = read_bags(&p).unwrap();
    assert_eq!(b.names(), ["img07".to_string()]);
    assert_eq!(b.len(), 1);
    let q = dir.path().join("notes.txt");
    std::fs::write(&q, "hello").unwrap();
    let e = read_bags(&q).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither an .npy array nor an .npz archive"),
        "{e}"
    );
}

#[test]
fn mismatched_dimensions_name_both_arrays() {
    let m = err_of(&[
        ("a.npy", npy_bytes("<f4", "(1, 2)", &f32_data(2))),
        ("b.npy", npy_bytes("<f4", "(1, 3)", &f32_data(3))),
    ]);
    assert!(
        m.contains("array `b`: has 3 columns but the first array `a` has 2"),
        "{m}"
    );
}

#[test]
fn mixed_dtypes_are_refused() {
    let m = err_of(&[
        ("a.npy", npy_bytes("<f4", "(1, 2)", &f32_data(2))),
        ("b.npy", npy_bytes("<f8", "(1, 2)", &[0u8; 16])),
    ]);
    assert!(
        m.contains("array `b`: dtype float64 differs from the first array `a` (float32)"),
        "{m}"
    );
}

#[test]
fn bad_arrays_inside_are_named() {
    let m = err_of(&[
        ("ok.npy", npy_bytes("<f4", "(1, 2)", &f32_data(2))),
        ("ints.npy", npy_bytes("<i8", "(1, 2)", &[0u8; 16])),
    ]);
    assert!(
        m.contains("array `ints`: dtype int64 not supported; expected float32 or float64"),
        "{m}"
    );
    let m = err_of(&[("flat.npy", npy_bytes("<f4", "(4,)", &f32_data(4)))]);
    assert!(
        m.contains("array `flat`: expected a 2-D (N, D) array, got shape (4,)"),
        "{m}"
    );
    let m = err_of(&[("short.npy", npy_bytes("<f4", "(100, 2)", &f32_data(2)))]);
    assert!(
        m.contains("array `short`: file is truncated: header says 100×2 float32 (800 bytes) but 8 bytes follow"),
        "{m}"
    );
    let m = err_of(&[("text.npy", b"just text".to_vec())]);
    assert!(m.contains("array `text`: not an .npy file"), "{m}");
    let m = err_of(&[(
        "huge.npy",
        npy_bytes("<f4", "(1000000, 1000000)", &f32_data(2)),
    )]);
    assert!(m.contains("array `huge`: file is truncated"), "{m}");
}

#[test]
fn empty_and_broken_archives_are_refused() {
    let m = err_of(&[]);
    assert!(m.contains("holds no arrays"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.npz");
    write_npz::<f32>(&empty, &[], false).unwrap();
    assert_eq!(file_kind(&empty).unwrap(), FileKind::Npz);
    let e = read_bags(&empty).unwrap_err().to_string();
    assert!(
        e.contains("empty.npz: the .npz archive holds no arrays"),
        "{e}"
    );
    let p = dir.path().join("cut.npz");
    let views = [("a", bag(50, 8, 0.0)), ("b", bag(50, 8, 1.0))];
    let v: Vec<_> = views.iter().map(|(n, b)| (*n, b.view())).collect();
    write_npz(&p, &v, false).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let e = read_npz(&p).unwrap_err();
    assert!(matches!(e, IoError::Format { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("cut.npz: not a valid .npz (zip) archive"),
        "{e}"
    );
}

#[test]
fn duplicate_or_empty_names_are_refused_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.npz");
    let b = bag(1, 1, 0.0);
    let e = write_npz(&p, &[("x", b.view()), ("x", b.view())], false).unwrap_err();
    assert!(e.to_string().contains("two bags are named `x`"), "{e}");
    let e = write_npz(&p, &[("", b.view())], false).unwrap_err();
    assert!(e.to_string().contains("empty name"), "{e}");
    assert!(!p.exists());
}
