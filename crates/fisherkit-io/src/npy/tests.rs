use super::header::parse_header_dict;
use super::*;
use ndarray::Array2;

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

/// An array the header sizes beyond memory (a deflated entry is read whole)
/// is one error naming its shape and bytes, not an allocation abort.
#[test]
fn an_array_too_large_for_memory_is_an_error_not_an_abort() {
    let layout = super::layout::MatrixLayout {
        dtype: Dtype::F32,
        n: 1 << 31,
        d: 1 << 31,
        nbytes: usize::MAX,
    };
    let e = super::read::read_values::<f32, _>(&mut std::io::repeat(0), &layout, true).unwrap_err();
    assert!(e.contains("cannot be held in memory"), "{e}");
    assert!(e.contains("2147483648×2147483648"), "{e}");
}
