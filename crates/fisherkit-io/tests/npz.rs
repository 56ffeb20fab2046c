//! `.npz` bags: archive order, names, and the errors that name the array; the
//! typed entries of descriptor files, read and written by the same archive code.

use fisherkit_io::descriptor_file::{
    read_descriptor_file, read_npz_arrays, write_descriptor_file, write_npz_arrays,
    DescriptorFileWriter, NpyData, NpyRef,
};
use fisherkit_io::{file_kind, read_bags, read_npz, write_npz, Bags, FileKind, IoError};
use ndarray::Array2;
use proptest::prelude::*;
use std::path::PathBuf;

mod raw;

fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    raw::npy_ordered(descr, false, shape, data)
}

fn bag(n: usize, d: usize, seed: f32) -> Array2<f32> {
    Array2::from_shape_fn((n, d), |(i, j)| seed + i as f32 * 0.5 - j as f32 * 0.25)
}

fn err_of(entries: &[(&str, Vec<u8>)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("B.npz");
    raw::zip_of(&p, entries, false);
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
    raw::zip_of(
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

// ---------------------------------------------------------------------------
// One archive walker and one writer for bags and descriptor files
// (`npz::for_each_entry`, `npz::NpzBuilder`): what one writes, both read alike.

/// FNV-1a, 64 bits: a stable fingerprint of a file's bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `write_npz` (stored or deflated, float32 or float64, bags of 0 rows
    /// included) is read back the same by the bag reader and by the
    /// descriptor files' typed reader, names and order kept.
    #[test]
    fn write_npz_then_both_readers_agree(
        rows in prop::collection::vec(0usize..5, 1..5),
        d in 1usize..5,
        seed in -100.0f32..100.0,
        compressed: bool,
        wide: bool,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.npz");
        let names: Vec<String> = (0..rows.len()).map(|i| format!("bag{i}/x")).collect();
        let f32_bags: Vec<Array2<f32>> =
            rows.iter().enumerate().map(|(i, &n)| bag(n, d, seed + i as f32)).collect();
        let (from_bags, from_arrays) = if wide {
            let bags: Vec<Array2<f64>> = f32_bags.iter().map(|b| b.mapv(f64::from)).collect();
            let views: Vec<_> = names.iter().zip(&bags).map(|(n, b)| (n.as_str(), b.view())).collect();
            write_npz(&p, &views, compressed).unwrap();
            let Bags::F64(read) = read_npz(&p).unwrap() else { panic!("float64 in, float64 out") };
            prop_assert_eq!(&read.bags, &bags);
            (read.names, read_npz_arrays(&p).unwrap())
        } else {
            let views: Vec<_> = names.iter().zip(&f32_bags).map(|(n, b)| (n.as_str(), b.view())).collect();
            write_npz(&p, &views, compressed).unwrap();
            let Bags::F32(read) = read_npz(&p).unwrap() else { panic!("float32 in, float32 out") };
            prop_assert_eq!(&read.bags, &f32_bags);
            (read.names, read_npz_arrays(&p).unwrap())
        };
        prop_assert_eq!(&from_bags, &names);
        let want: Vec<(String, NpyData)> = names
            .iter()
            .zip(&f32_bags)
            .map(|(n, b)| (n.clone(), NpyData::Float(vec![b.nrows(), d], b.iter().copied().collect())))
            .collect();
        prop_assert_eq!(from_arrays, want);
    }
}

#[test]
fn typed_entries_still_decode_fortran_order_ints_and_strings() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.npz");
    // (2, 3) float64 in Fortran order: the file holds the columns.
    let cols: Vec<u8> = [0.0f64, 3.0, 1.0, 4.0, 2.0, 5.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let i2: Vec<u8> = [-3i16, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    let u1 = vec![1u8, 250];
    let utf32: Vec<u8> = ["ab", "ü"]
        .iter()
        .flat_map(|s| {
            let mut c: Vec<u32> = s.chars().map(|c| c as u32).collect();
            c.resize(2, 0);
            c.into_iter().flat_map(u32::to_le_bytes)
        })
        .collect();
    for deflate in [false, true] {
        raw::zip_of(
            &p,
            &[
                ("f.npy", raw::npy_ordered("<f8", true, "(2, 3)", &cols)),
                (
                    "c.npy",
                    raw::npy_ordered("<f4", false, "(2, 1)", &f32_data(2)),
                ),
                ("i.npy", npy_bytes("<i2", "(2,)", &i2)),
                ("u.npy", npy_bytes("|u1", "(2,)", &u1)),
                ("s.npy", npy_bytes("<U2", "(2,)", &utf32)),
                ("b.npy", npy_bytes("|S3", "(2,)", b"dogc\0\0")),
                ("z.npy", npy_bytes("<f4", "()", &f32_data(1))),
            ],
            deflate,
        );
        let got = read_npz_arrays(&p).unwrap();
        let want = vec![
            (
                "f".to_string(),
                NpyData::Float(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
            ),
            ("c".to_string(), NpyData::Float(vec![2, 1], vec![0.0, 1.0])),
            ("i".to_string(), NpyData::Int(vec![-3, 7])),
            ("u".to_string(), NpyData::Int(vec![1, 250])),
            ("s".to_string(), NpyData::Str(vec!["ab".into(), "ü".into()])),
            (
                "b".to_string(),
                NpyData::Str(vec!["dog".into(), "c".into()]),
            ),
            ("z".to_string(), NpyData::Float(vec![], vec![0.0])),
        ];
        assert_eq!(got, want, "deflate: {deflate}");
    }
    // A descriptor file of a Fortran-order bag with integer labels.
    raw::zip_of(
        &p,
        &[
            ("img.npy", raw::npy_ordered("<f8", true, "(2, 3)", &cols)),
            ("labels.npy", npy_bytes("<i2", "(1,)", &i2[..2])),
        ],
        false,
    );
    let set = read_descriptor_file(&p).unwrap();
    assert_eq!(
        set.bags,
        [ndarray::array![[0.0f32, 1.0, 2.0], [3.0, 4.0, 5.0]]]
    );
    assert_eq!(
        (set.names, set.labels),
        (vec!["img".into()], vec!["-3".into()])
    );
}

#[test]
fn typed_entries_with_bad_sizes_or_headers_name_the_array() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.npz");
    for (entry, want) in [
        (
            npy_bytes("<i8", "(3,)", &[0u8; 16]),
            "array `x`: holds 16 data bytes but its shape [3] and dtype need 24",
        ),
        (
            npy_bytes("<U4", "(2,)", &[0u8; 40]),
            "array `x`: holds 40 data bytes but its shape [2] and dtype need 32",
        ),
        (
            npy_bytes("<f4", "(2, 2)", &f32_data(3)),
            "array `x`: holds 12 data bytes but its shape [2, 2] and dtype need 16",
        ),
        (
            b"\x93NUMPY\x01\x00".to_vec(),
            "array `x`: file is truncated inside the .npy header",
        ),
        (b"text".to_vec(), "array `x`: not an .npy file"),
    ] {
        raw::zip_of(
            &p,
            &[
                ("ok.npy", npy_bytes("<i8", "(1,)", &[0u8; 8])),
                ("x.npy", entry),
            ],
            false,
        );
        let e = read_npz_arrays(&p).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
        assert!(e.contains(want), "want `{want}` in: {e}");
        let e = read_descriptor_file(&p).unwrap_err().to_string();
        assert!(e.contains(want), "want `{want}` in: {e}");
    }
}

/// Descriptor files and empty `.npy` arrays, which fisherkit wrote itself
/// before the writers were unified, keep their exact bytes (fingerprints of
/// the files the old `descriptor_file::npy_bytes` / `empty_npy_header`
/// wrote; `NpyBlockWriter` too).
#[test]
fn self_written_files_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let x = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.5, -6.0]];
    let e = Array2::<f32>::zeros((0, 3));
    let labels = vec!["bag".to_string(), "ünïcode".to_string(), String::new()];
    let none: Vec<String> = vec![];
    write_npz_arrays(
        &out.join("arrays.npz"),
        &[
            ("x", NpyRef::Float(x.view())),
            ("e", NpyRef::Float(e.view())),
            ("t", NpyRef::Float(x.t())),
            ("i", NpyRef::Int(&[1, -2, 3])),
            ("i0", NpyRef::Int(&[])),
            ("s", NpyRef::Str(&labels)),
            ("s0", NpyRef::Str(&none)),
        ],
    )
    .unwrap();
    let names = vec!["a/1.png".to_string(), "b/2.png".to_string()];
    let first = x.slice(ndarray::s![..1, ..]);
    write_descriptor_file(
        &out.join("desc.npz"),
        &names,
        &[x.view(), first],
        &labels[..2],
    )
    .unwrap();
    let mut w = DescriptorFileWriter::create(&out.join("stream.npz")).unwrap();
    w.push("a/1.png", x.view(), "bag").unwrap();
    w.push("b/2.png", x.view(), "ünïcode").unwrap();
    w.finish().unwrap();
    fisherkit_io::write_npy(out.join("e0.npy"), Array2::<f32>::zeros((0, 3)).view()).unwrap();
    fisherkit_io::write_npy(
        out.join("e1.npy"),
        Array2::<f64>::zeros((1234567, 0)).view(),
    )
    .unwrap();
    let mut b = fisherkit_io::NpyBlockWriter::create(out.join("block.npy"), 2, 3).unwrap();
    b.write_columns(0, x.view()).unwrap();
    b.finish().unwrap();
    for (file, want) in [
        ("arrays.npz", 0xc4d6e4c95b736588u64),
        ("desc.npz", 0xa594e9ea565e9c1d),
        ("stream.npz", 0x14a97e796de13fc4),
        ("e0.npy", 0xc84380b2e1eeb474),
        ("e1.npy", 0xcf7d0dddcef98a9f),
        ("block.npy", 0x12932c976c69ac53),
    ] {
        let got = fnv1a(&std::fs::read(out.join(file)).unwrap());
        assert_eq!(got, want, "{file}: {got:#x}, bytes changed");
    }
}
