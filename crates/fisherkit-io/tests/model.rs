//! Safetensors model files: round trips and every validation error, on files
//! written by the safetensors crate directly (not by our writer).

use fisherkit::gmm::DiagGmm;
use fisherkit_io::{read_model_kind, GmmModel, IoError, MfaArrays, MfaModel, Model, ModelFile};
use ndarray::{array, Array1, Array2, Array3};
use safetensors::tensor::TensorView;
use safetensors::Dtype as St;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A raw tensor for hand-made files: dtype, shape, little-endian bytes.
struct T {
    dtype: St,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn f32s(shape: &[usize], v: &[f32]) -> T {
    assert_eq!(shape.iter().product::<usize>(), v.len());
    T {
        dtype: St::F32,
        shape: shape.to_vec(),
        bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn f64s(shape: &[usize], v: &[f64]) -> T {
    assert_eq!(shape.iter().product::<usize>(), v.len());
    T {
        dtype: St::F64,
        shape: shape.to_vec(),
        bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn raw_file(dir: &Path, name: &str, meta: &[(&str, &str)], tensors: Vec<(&str, T)>) -> PathBuf {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                TensorView::new(t.dtype, t.shape.clone(), &t.bytes).unwrap(),
            )
        })
        .collect();
    let meta: HashMap<String, String> = meta
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let meta = if meta.is_empty() { None } else { Some(meta) };
    let bytes = safetensors::serialize(views, meta).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A valid K=2, D=3 GMM as raw tensors, with `edit` applied.
fn gmm_tensors() -> Vec<(&'static str, T)> {
    vec![
        ("weights", f32s(&[2], &[0.25, 0.75])),
        ("means", f32s(&[2, 3], &[0.0, 1.0, 2.0, -1.0, -2.0, 3.5])),
        ("variances", f32s(&[2, 3], &[1.0, 0.5, 2.0, 0.25, 1.5, 1.0])),
    ]
}

fn gmm_err(meta: &[(&str, &str)], tensors: Vec<(&str, T)>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = raw_file(dir.path(), "M.safetensors", meta, tensors);
    let e = Model::read(&p).expect_err("must be refused");
    let m = e.to_string();
    assert!(m.starts_with(&format!("{}: ", p.display())), "{m}");
    m
}

/// [`gmm_err`], and the message contains every needle.
fn refused(meta: &[(&str, &str)], tensors: Vec<(&str, T)>, needles: &[&str]) {
    let m = gmm_err(meta, tensors);
    for n in needles {
        assert!(m.contains(n), "{m}");
    }
}

/// [`refused`] for the valid GMM with tensor `name` replaced by `t`.
fn edit_refused(name: &str, t: T, needles: &[&str]) {
    refused(GMM, replace(gmm_tensors(), name, t), needles);
}

fn replace(mut ts: Vec<(&'static str, T)>, name: &str, t: T) -> Vec<(&'static str, T)> {
    let i = ts.iter().position(|(n, _)| *n == name).unwrap();
    ts[i].1 = t;
    ts
}

fn without(mut ts: Vec<(&'static str, T)>, name: &str) -> Vec<(&'static str, T)> {
    ts.retain(|(n, _)| *n != name);
    ts
}

const GMM: &[(&str, &str)] = &[("kind", "gmm"), ("format_version", "1")];
const MFA: &[(&str, &str)] = &[("kind", "mfa")];

#[test]
fn reads_a_gmm_written_by_the_safetensors_crate() {
    let dir = tempfile::tempdir().unwrap();
    let p = raw_file(dir.path(), "g.safetensors", GMM, gmm_tensors());
    let Model::Gmm(GmmModel::F32(g)) = Model::read(&p).unwrap() else {
        panic!("expected an f32 GMM")
    };
    assert_eq!(g.weights(), array![0.25f32, 0.75]);
    assert_eq!(g.means(), array![[0.0f32, 1.0, 2.0], [-1.0, -2.0, 3.5]]);
    assert_eq!(g.variances(), array![[1.0f32, 0.5, 2.0], [0.25, 1.5, 1.0]]);
    // Without format_version (other tools) it is accepted too.
    let p = raw_file(
        dir.path(),
        "h.safetensors",
        &[("kind", "gmm")],
        gmm_tensors(),
    );
    assert!(GmmModel::read(&p).is_ok());
}

#[test]
fn gmm_round_trips_in_both_dtypes_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let w = array![0.5, 0.125, 0.375];
    let m = Array2::from_shape_fn((3, 4), |(i, j)| (i as f64 - j as f64) * 0.3);
    let v = Array2::from_shape_fn((3, 4), |(i, j)| 0.1 + (i * 4 + j) as f64 * 0.05);
    let g64 = DiagGmm::new(w.clone(), m.clone(), v.clone()).unwrap();
    let g32: DiagGmm<f32> = g64.cast();
    let mut extra = BTreeMap::new();
    extra.insert("seed".to_string(), "42".to_string());
    extra.insert("kind".to_string(), "not-this".to_string());
    let p64 = dir.path().join("g64.safetensors");
    let p32 = dir.path().join("g32.safetensors");
    g64.write(&p64, &extra).unwrap();
    g32.write(&p32, &extra).unwrap();
    let (m64, meta) = Model::read_with_metadata(&p64).unwrap();
    assert_eq!(m64, Model::Gmm(GmmModel::F64(g64.clone())));
    assert_eq!(meta["kind"], "gmm");
    assert_eq!(meta["format_version"], "1");
    assert_eq!(meta["seed"], "42");
    assert_eq!(meta["dtype"], "float64");
    assert!(meta.contains_key("fisherkit_version"));
    let m32 = GmmModel::read(&p32).unwrap();
    assert_eq!(m32, GmmModel::F32(g32.clone()));
    // Cross-dtype conversion goes through DiagGmm::new.
    let back: DiagGmm<f64> = m32.to_dtype().unwrap();
    assert_eq!(back.means(), g32.means().mapv(|x| x as f64));
    assert!(MfaModel::read(&p32)
        .unwrap_err()
        .to_string()
        .contains("is a GMM model"));
}

fn mfa(k: usize, d: usize, r: usize, shared: bool) -> MfaArrays<f64> {
    let weights = Array1::from_elem(k, 1.0 / k as f64);
    let means = Array2::from_shape_fn((k, d), |(i, j)| i as f64 - 0.5 * j as f64);
    let loadings =
        Array3::from_shape_fn((k, d, r), |(i, j, l)| ((i * 100 + j * 10 + l) as f64).sin());
    let psi = Array2::from_shape_fn((if shared { 1 } else { k }, d), |(i, j)| {
        0.1 + 0.01 * (i * d + j) as f64
    });
    MfaArrays {
        weights,
        means,
        loadings,
        psi,
    }
}

#[test]
fn mfa_round_trips_shared_and_per_component_psi() {
    let dir = tempfile::tempdir().unwrap();
    for shared in [true, false] {
        let a = mfa(3, 5, 2, shared);
        let p = dir.path().join(format!("m{shared}.safetensors"));
        a.write(&p, &BTreeMap::new()).unwrap();
        assert_eq!(MfaModel::read(&p).unwrap(), MfaModel::F64(a.clone()));
        let a32: MfaArrays<f32> = a.cast();
        a32.write(&p, &BTreeMap::new()).unwrap();
        assert_eq!(MfaModel::read(&p).unwrap(), MfaModel::F32(a32));
        // The file layout is the contract: psi (D) when shared, (K, D) otherwise.
        let bytes = std::fs::read(&p).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let want: &[usize] = if shared { &[5] } else { &[3, 5] };
        assert_eq!(st.tensor("psi").unwrap().shape(), want);
        assert_eq!(st.tensor("loadings").unwrap().shape(), &[3, 5, 2]);
        assert!(GmmModel::read(&p)
            .unwrap_err()
            .to_string()
            .contains("is an MFA model"));
    }
}

#[test]
fn loadings_are_stored_component_major_then_dimension_then_factor() {
    let dir = tempfile::tempdir().unwrap();
    let a = mfa(2, 3, 2, true);
    let p = dir.path().join("m.safetensors");
    a.write(&p, &BTreeMap::new()).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let data = st.tensor("loadings").unwrap().data().to_vec();
    let vals: Vec<f64> = data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (0..2).map(move |l| (i, j, l))))
        .map(|(i, j, l)| ((i * 100 + j * 10 + l) as f64).sin())
        .collect();
    assert_eq!(vals, want);
}

#[test]
fn invalid_mfa_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.safetensors");
    let mut a = mfa(2, 3, 1, true);
    a.psi[[0, 1]] = 0.0;
    let e = a.write(&p, &BTreeMap::new()).unwrap_err();
    assert!(e.to_string().contains("psi [1] is 0"), "{e}");
    assert!(!p.exists());
    // What only the library checks is checked on write too (the file could
    // not be read back): R = D.
    let e = mfa(2, 3, 3, true).write(&p, &BTreeMap::new()).unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with(&format!("{}: refusing to write: ", p.display())),
        "{m}"
    );
    assert!(m.contains("R = 3 must satisfy 0 < R < D = 3"), "{m}");
    assert!(!p.exists());
}

#[test]
fn model_kind_is_read_without_the_tensors_and_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["gmm", "mfa", "pca", "linear-svm", "scene-classifier"] {
        // Only the header matters: a pca file with GMM tensors still says "pca".
        let p = raw_file(
            dir.path(),
            "k.safetensors",
            &[("kind", kind)],
            gmm_tensors(),
        );
        assert_eq!(read_model_kind(&p).unwrap(), kind);
    }
    let check = |meta: &[(&str, &str)], want: &str| {
        let p = raw_file(dir.path(), "bad.safetensors", meta, gmm_tensors());
        let e = read_model_kind(&p).unwrap_err();
        assert!(matches!(e, IoError::Model { .. }), "{e:?}");
        let m = e.to_string();
        assert!(m.starts_with(&format!("{}: ", p.display())), "{m}");
        assert!(m.contains(want), "{m}");
    };
    check(&[], "missing metadata key `kind`");
    check(
        &[("kind", "sample-part")],
        "unknown model kind \"sample-part\"; expected \"gmm\", \"mfa\", \"pca\", \"linear-svm\" or \"scene-classifier\"",
    );
    check(
        &[("kind", "gmm"), ("format_version", "2")],
        "unsupported format_version \"2\"",
    );
    let npy = dir.path().join("x.safetensors");
    std::fs::write(&npy, b"\x93NUMPY\x01\x00rest").unwrap();
    assert!(read_model_kind(&npy)
        .unwrap_err()
        .to_string()
        .contains("is an .npy array, not a safetensors model file"));
    let e = read_model_kind(dir.path().join("missing.safetensors")).unwrap_err();
    assert!(
        matches!(&e, IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(e.to_string().contains("missing.safetensors"), "{e}");
}

#[test]
fn metadata_errors() {
    refused(&[], gmm_tensors(), &["missing metadata key `kind`"]);
    refused(
        &[("kind", "hmm")],
        gmm_tensors(),
        &["unknown model kind \"hmm\"; expected \"gmm\", \"mfa\", \"pca\", \"linear-svm\" or \"scene-classifier\""],
    );
    refused(
        &[("kind", "gmm"), ("format_version", "2")],
        gmm_tensors(),
        &["unsupported format_version \"2\""],
    );
}

#[test]
fn missing_tensors_are_named() {
    refused(
        GMM,
        without(gmm_tensors(), "variances"),
        &["missing tensor `variances` (a gmm model file needs weights, means, variances)"],
    );
    refused(
        GMM,
        without(gmm_tensors(), "weights"),
        &["missing tensor `weights`"],
    );
    refused(MFA, gmm_tensors(), &["missing tensor `loadings`"]);
}

#[test]
fn wrong_ranks_and_shapes_are_named() {
    edit_refused(
        "weights",
        f32s(&[2, 1], &[0.25, 0.75]),
        &["tensor `weights` must have shape (K), got (2, 1)"],
    );
    edit_refused(
        "means",
        f32s(&[6], &[0.0; 6]),
        &["tensor `means` must have shape (K, D), got (6,)"],
    );
    edit_refused(
        "means",
        f32s(&[3, 2], &[0.0; 6]),
        &["tensor `means` has shape (3, 2) but `weights` has K = 2 entries"],
    );
    edit_refused(
        "variances",
        f32s(&[2, 2], &[1.0; 4]),
        &["tensor `variances` has shape (2, 2) but `means` has shape (2, 3)"],
    );
}

#[test]
fn dtype_errors_are_named() {
    edit_refused(
        "means",
        f64s(&[2, 3], &[0.0; 6]),
        &["tensor `means` is F64 but `weights` is F32; all tensors must have one dtype"],
    );
    let ints = T {
        dtype: St::I64,
        shape: vec![2],
        bytes: vec![0u8; 16],
    };
    edit_refused(
        "weights",
        ints,
        &["tensor `weights` has dtype I64; expected F32 or F64"],
    );
}

#[test]
fn value_errors_are_named() {
    edit_refused(
        "means",
        f32s(&[2, 3], &[0.0, 1.0, 2.0, -1.0, f32::NAN, 3.5]),
        &["tensor `means` has a non-finite value (NaN) at [1, 1]"],
    );
    edit_refused(
        "variances",
        f32s(&[2, 3], &[1.0, 0.5, 2.0, 0.25, 0.0, 1.0]),
        &["variance [1, 1] is 0; variances must be finite and > 0"],
    );
    edit_refused(
        "variances",
        f32s(&[2, 3], &[1.0, -0.5, 2.0, 0.25, 1.0, 1.0]),
        &["variance [0, 1] is -0.5"],
    );
    edit_refused(
        "weights",
        f32s(&[2], &[0.5, 0.6]),
        &["weights sum to 1.1", "not 1"],
    );
    edit_refused(
        "weights",
        f32s(&[2], &[-0.25, 1.25]),
        &["weight 0 is -0.25"],
    );
    edit_refused(
        "weights",
        f32s(&[2], &[f32::INFINITY, 0.5]),
        &["tensor `weights` has a non-finite value (inf) at [0]"],
    );
}

fn mfa_tensors(psi: T) -> Vec<(&'static str, T)> {
    vec![
        ("weights", f64s(&[2], &[0.5, 0.5])),
        ("means", f64s(&[2, 3], &[0.0; 6])),
        (
            "loadings",
            f64s(&[2, 3, 1], &[1.0, 0.0, 0.5, 0.0, 1.0, 0.25]),
        ),
        ("psi", psi),
    ]
}

#[test]
fn mfa_errors_are_named() {
    let ok = mfa_tensors(f64s(&[3], &[0.1, 0.2, 0.3]));
    let dir = tempfile::tempdir().unwrap();
    let p = raw_file(dir.path(), "ok.safetensors", MFA, ok);
    let MfaModel::F64(a) = MfaModel::read(&p).unwrap() else {
        panic!("f64 expected")
    };
    assert!(a.shared_psi());
    assert_eq!(a.psi, array![[0.1, 0.2, 0.3]]);

    refused(
        MFA,
        mfa_tensors(f64s(&[4], &[0.1; 4])),
        &["tensor `psi` has shape (4,) but (D) = (3,) or (K, D) = (2, 3) was expected"],
    );
    refused(
        MFA,
        mfa_tensors(f64s(&[1, 1, 3], &[0.1; 3])),
        &["tensor `psi` must have shape (D) or (K, D), got (1, 1, 3)"],
    );
    refused(
        MFA,
        mfa_tensors(f64s(&[2, 3], &[0.1, 0.1, 0.1, 0.1, -1.0, 0.1])),
        &["psi [1, 1] is -1; psi must be finite and > 0"],
    );
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "loadings",
            f64s(&[2, 3], &[0.0; 6]),
        ),
        &["tensor `loadings` must have shape (K, D, R), got (2, 3)"],
    );
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "loadings",
            f64s(&[2, 4, 1], &[0.0; 8]),
        ),
        &["tensor `loadings` has shape (2, 4, 1) but (K, D, R) = (2, 3, R) was expected"],
    );
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "loadings",
            f64s(&[2, 3, 0], &[]),
        ),
        &["the number of factors R = 0 must satisfy 0 < R < D = 3"],
    );
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "weights",
            f64s(&[2], &[0.2, 0.2]),
        ),
        &["weights sum to 0.4, not 1"],
    );
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "psi",
            f32s(&[3], &[0.1; 3]),
        ),
        &["tensor `psi` is F32 but `weights` is F64"],
    );
}

#[test]
fn foreign_and_truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8], want: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = Model::read(&p).unwrap_err();
        assert!(matches!(e, IoError::Model { .. }), "{e:?}");
        let m = e.to_string();
        assert!(m.starts_with(&format!("{}: ", p.display())), "{m}");
        assert!(m.contains(want), "{m}");
    };
    check(
        "text.safetensors",
        b"this is not a model, just some text",
        "not a safetensors model file",
    );
    check(
        "tiny.safetensors",
        b"abc",
        "not a safetensors model file (only 3 bytes)",
    );
    check(
        "arr.safetensors",
        b"\x93NUMPY\x01\x00rest",
        "is an .npy array",
    );
    check(
        "zip.safetensors",
        b"PK\x03\x04rest",
        "is a zip/.npz archive",
    );
    // A valid file cut short.
    let p = raw_file(dir.path(), "full.safetensors", GMM, gmm_tensors());
    let bytes = std::fs::read(&p).unwrap();
    check(
        "cut.safetensors",
        &bytes[..bytes.len() - 4],
        "not a valid safetensors file",
    );
    // A header that is not JSON.
    let mut bad = 10u64.to_le_bytes().to_vec();
    bad.extend_from_slice(b"{not json}");
    check("json.safetensors", &bad, "not a valid safetensors file");
    let e = Model::read(dir.path().join("missing.safetensors")).unwrap_err();
    assert!(matches!(e, IoError::Os { .. }), "{e:?}");
    assert!(e.to_string().contains("missing.safetensors"), "{e}");
}

#[test]
fn model_files_are_byte_for_byte_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let g = DiagGmm::new(
        array![0.5f32, 0.5],
        array![[0.0f32, 1.0], [2.0, 3.0]],
        array![[1.0f32, 2.0], [3.0, 4.0]],
    )
    .unwrap();
    let mut extra = BTreeMap::new();
    for i in 0..20 {
        extra.insert(format!("key{i}"), format!("value{i}"));
    }
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    g.write(&a, &extra).unwrap();
    g.write(&b, &extra).unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    // The header is 8-byte aligned JSON that the safetensors crate accepts.
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0);
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["__metadata__"]["kind"], "gmm");
    assert_eq!(header["means"]["dtype"], "F32");
    assert_eq!(header["means"]["shape"], serde_json::json!([2, 2]));
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.len(), 3);
}

#[test]
fn mfa_files_convert_to_and_from_the_library_model() {
    let dir = tempfile::tempdir().unwrap();
    let a = mfa(2, 4, 2, false);
    let m: fisherkit::mfa::Mfa<f64> = a.to_mfa().unwrap();
    let p = dir.path().join("lib.safetensors");
    m.write(&p, &BTreeMap::new()).unwrap();
    let back = MfaModel::read(&p).unwrap();
    assert_eq!(back, MfaModel::F64(MfaArrays::from_mfa(&m)));
    let m32: fisherkit::mfa::Mfa<f32> = back.to_dtype().unwrap();
    assert_eq!(m32.n_factors(), 2);
    assert_eq!(m32.loadings(), a.loadings.mapv(|v| v as f32));
}

#[test]
fn mfa_library_checks_apply_on_read() {
    // R = D = 3: the arrays are consistent but the library requires R < D.
    refused(
        MFA,
        replace(
            mfa_tensors(f64s(&[3], &[0.1; 3])),
            "loadings",
            f64s(&[2, 3, 3], &[0.1; 18]),
        ),
        &["invalid MFA parameters", "0 < R < D = 3"],
    );
}
