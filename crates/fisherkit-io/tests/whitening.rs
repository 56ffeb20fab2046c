//! The optional whitening block of MFA files: tensor `fisher_information`
//! (P) in the model dtype plus metadata `whitening_parts`. Round trips bit
//! for bit, the layout checked with the safetensors crate, and one test per
//! validation failure on load (hand-crafted files, as in
//! `model_validation.rs`) and on write.

use fisherkit::encode::MfaPart;
use fisherkit_io::{MfaArrays, MfaModel, MfaWhitening, Model, ModelFile, Whitened};
use ndarray::{Array1, Array2, Array3};
use std::collections::BTreeMap;

mod common;
use common::{st, st_with, Tensors};

/// A valid K = 2, D = 3, R = 2 MFA with shared psi: mean P = 6, loading P = 12.
fn mfa_tensors() -> Tensors {
    vec![
        ("weights", vec![2], vec![0.5, 0.5]),
        ("means", vec![2, 3], vec![0.0; 6]),
        (
            "loadings",
            vec![2, 3, 2],
            vec![1.0, 0.0, 0.5, 0.3, 0.0, 1.0, 0.2, 0.1, 0.25, 0.0, 1.0, 0.5],
        ),
        ("psi", vec![3], vec![0.1, 0.2, 0.3]),
    ]
}

fn with_fim(values: Vec<f64>) -> Tensors {
    let mut t = mfa_tensors();
    t.push(("fisher_information", vec![values.len()], values));
    t
}

fn meta(parts: Option<&str>) -> Vec<(&'static str, String)> {
    let mut m = vec![("kind", "mfa".to_string()), ("format_version", "1".into())];
    if let Some(p) = parts {
        m.push(("whitening_parts", p.to_string()));
    }
    m
}

fn bytes(parts: Option<&str>, t: &Tensors) -> Vec<u8> {
    let m = meta(parts);
    let m: Vec<(&str, &str)> = m.iter().map(|(k, v)| (*k, v.as_str())).collect();
    st(&m, t)
}

/// Loads and expects an error containing every one of `want`.
fn refused(bytes: &[u8], want: &[&str]) {
    let e = Model::read_bytes(bytes, "m.safetensors").expect_err("must be refused");
    let m = e.to_string();
    assert!(m.starts_with("m.safetensors: "), "{m}");
    assert!(!m.contains('\n'), "{m}");
    for w in want {
        assert!(m.contains(w), "expected `{w}` in: {m}");
    }
}

fn arrays(k: usize, d: usize, r: usize) -> MfaArrays<f64> {
    MfaArrays {
        weights: Array1::from_elem(k, 1.0 / k as f64),
        means: Array2::from_shape_fn((k, d), |(i, j)| i as f64 - 0.5 * j as f64),
        loadings: Array3::from_shape_fn((k, d, r), |(i, j, l)| {
            ((i * 100 + j * 10 + l) as f64).sin()
        }),
        psi: Array2::from_shape_fn((1, d), |(_, j)| 0.1 + 0.01 * j as f64),
    }
}

/// Awkward values: subnormal-free but with full mantissas, a zero, a huge one.
fn fim(n: usize) -> Array1<f64> {
    Array1::from_shape_fn(n, |i| match i {
        0 => 0.0,
        1 => 1e30,
        _ => ((i as f64) * 0.731).sin().abs() * 10f64.powi((i % 7) as i32 - 3) + 1e-9,
    })
}

#[test]
fn round_trip_keeps_the_vector_bit_for_bit_in_both_dtypes() {
    let dir = tempfile::tempdir().unwrap();
    let (k, d, r) = (3, 5, 2);
    let a = arrays(k, d, r);
    let cases: [(&[MfaPart], usize, &str); 3] = [
        (&[MfaPart::Mean], k * d, "mean"),
        (&[MfaPart::Loading], k * d * r, "loading"),
        // any order in, canonical order out
        (
            &[MfaPart::Loading, MfaPart::Mean],
            k * d * (1 + r),
            "mean,loading",
        ),
    ];
    for (parts, p, name) in cases {
        // f64 model
        let f = fim(p);
        let w = MfaWhitening::new(parts, &f);
        let path = dir.path().join(format!("{name}.safetensors"));
        let mut extra = BTreeMap::new();
        extra.insert("seed".to_string(), "7".to_string());
        Whitened {
            model: a.clone(),
            whitening: Some(w.clone()),
        }
        .write(&path, &extra)
        .unwrap();
        let (
            Whitened {
                model: m,
                whitening: back,
            },
            meta,
        ) = Whitened::<Model>::read_with_metadata(&path).unwrap();
        assert_eq!(m, Model::Mfa(MfaModel::F64(a.clone())));
        let back = back.expect("the block is read back");
        assert_eq!(back.parts_string(), name);
        let bits = |v: &Array1<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.fisher_information), bits(&f));
        assert_eq!(meta["whitening_parts"], name);
        assert_eq!(meta["seed"], "7");
        // the layout, read by the safetensors crate itself
        let raw = std::fs::read(&path).unwrap();
        let stf = safetensors::SafeTensors::deserialize(&raw).unwrap();
        let t = stf.tensor("fisher_information").unwrap();
        assert_eq!(t.shape(), &[p]);
        assert_eq!(t.dtype(), safetensors::Dtype::F64);
        let got: Vec<u64> = t
            .data()
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()).to_bits())
            .collect();
        assert_eq!(got, bits(&f));

        // f32 model: the tensor is F32 and comes back with the same f32 bits
        let a32: MfaArrays<f32> = a.cast();
        let f32v: Array1<f32> = f.mapv(|v| v as f32);
        Whitened {
            model: a32.clone(),
            whitening: Some(MfaWhitening::new(parts, &f32v)),
        }
        .write(&path, &extra)
        .unwrap();
        let Whitened {
            model: m,
            whitening: back,
        } = Whitened::<MfaModel>::read(&path).unwrap();
        assert_eq!(m, MfaModel::F32(a32));
        let back = back.unwrap().fisher_information_as::<f32>();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            f32v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let raw = std::fs::read(&path).unwrap();
        let stf = safetensors::SafeTensors::deserialize(&raw).unwrap();
        assert_eq!(
            stf.tensor("fisher_information").unwrap().dtype(),
            safetensors::Dtype::F32
        );
    }
}

#[test]
fn files_without_the_block_load_as_before() {
    let m = Model::read_bytes(&bytes(None, &mfa_tensors()), "m.safetensors").unwrap();
    assert!(matches!(m.0, Model::Mfa(MfaModel::F64(_))));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.safetensors");
    // a stale key in `extra` (metadata copied from a whitened file) is dropped
    let mut extra = BTreeMap::new();
    extra.insert("whitening_parts".to_string(), "mean".to_string());
    arrays(2, 4, 1).write(&path, &extra).unwrap();
    let (
        Whitened {
            model: _,
            whitening: w,
        },
        meta,
    ) = Whitened::<Model>::read_with_metadata(&path).unwrap();
    assert!(w.is_none());
    assert!(!meta.contains_key("whitening_parts"));
    assert!(MfaModel::read(&path).is_ok());
}

#[test]
fn a_valid_block_loads_through_every_reader() {
    let b = bytes(Some("loading"), &with_fim(vec![1.0; 12]));
    assert!(Model::read_bytes(&b, "m.safetensors").is_ok());
    let b = bytes(Some("mean,loading"), &with_fim(vec![0.0; 18]));
    assert!(Model::read_bytes(&b, "m.safetensors").is_ok());
}

#[test]
fn tensor_and_metadata_come_together() {
    refused(
        &bytes(None, &with_fim(vec![1.0; 12])),
        &["tensor `fisher_information` without metadata key `whitening_parts`"],
    );
    refused(
        &bytes(Some("mean"), &mfa_tensors()),
        &["metadata key `whitening_parts` (\"mean\") without tensor `fisher_information`"],
    );
}

#[test]
fn parts_string_must_be_canonical() {
    for bad in [
        "",
        "loading,mean",
        "mu",
        "mean+loading",
        "mean,mean",
        "Mean",
    ] {
        refused(
            &bytes(Some(bad), &with_fim(vec![1.0; 6])),
            &[
                &format!("metadata `whitening_parts` is \"{bad}\""),
                "expected \"mean\", \"loading\" or \"mean,loading\"",
            ],
        );
    }
}

#[test]
fn length_must_match_the_parts() {
    // K = 2, D = 3, R = 2: mean 6, loading 12, both 18
    for (parts, n, want) in [
        ("mean", 12, 6),
        ("loading", 6, 12),
        ("mean,loading", 12, 18),
        ("loading", 0, 12),
    ] {
        refused(
            &bytes(Some(parts), &with_fim(vec![1.0; n])),
            &[
                &format!("tensor `fisher_information` has shape ({n},)"),
                &format!("the parts \"{parts}\""),
                "(K, D, R) = (2, 3, 2)",
                &format!("have {want} values"),
            ],
        );
    }
    let mut t = mfa_tensors();
    t.push(("fisher_information", vec![2, 3], vec![1.0; 6]));
    refused(
        &bytes(Some("mean"), &t),
        &["tensor `fisher_information` must have shape (P), got (2, 3)"],
    );
}

#[test]
fn values_must_be_finite_and_non_negative() {
    let mut v = vec![1.0; 6];
    v[4] = f64::NAN;
    refused(
        &bytes(Some("mean"), &with_fim(v)),
        &["tensor `fisher_information` has a non-finite value (NaN) at [4]"],
    );
    let mut v = vec![1.0; 6];
    v[0] = f64::INFINITY;
    refused(
        &bytes(Some("mean"), &with_fim(v)),
        &["`fisher_information` has a non-finite value (inf) at [0]"],
    );
    let mut v = vec![1.0; 12];
    v[11] = -0.5;
    refused(
        &bytes(Some("loading"), &with_fim(v)),
        &["tensor `fisher_information` [11] is -0.5", "must be >= 0"],
    );
}

#[test]
fn dtype_must_be_the_models() {
    let t = with_fim(vec![1.0; 6]);
    let m = meta(Some("mean"));
    let m: Vec<(&str, &str)> = m.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let b = st_with(&m, &t, &|n| {
        if n == "fisher_information" {
            "F32"
        } else {
            "F64"
        }
    });
    refused(
        &b,
        &["tensor `fisher_information` is F32 but `weights` is F64"],
    );
}

#[test]
fn invalid_blocks_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.safetensors");
    let a = arrays(2, 3, 1); // mean 6, loading 6
    let none = BTreeMap::new();
    let cases: Vec<(MfaWhitening, &str)> = vec![
        (
            MfaWhitening::new(&[MfaPart::Mean], &Array1::from_elem(5, 1.0)),
            "has shape (5,)",
        ),
        (
            MfaWhitening::new(&[MfaPart::Mean], &Array1::from_elem(6, f64::NAN)),
            "non-finite value (NaN) at [0]",
        ),
        (
            MfaWhitening::new(&[MfaPart::Loading], &Array1::from_elem(6, -1.0)),
            "[0] is -1",
        ),
        (
            MfaWhitening::new(&[], &Array1::from_elem(6, 1.0)),
            "must name the parts",
        ),
    ];
    for (w, want) in cases {
        let e = Whitened {
            model: a.clone(),
            whitening: Some(w.clone()),
        }
        .write(&path, &none)
        .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("refusing to write an invalid whitening"), "{m}");
        assert!(m.contains(want), "expected `{want}` in: {m}");
        assert!(!path.exists());
    }
    // finite in f64, infinite once stored as f32
    let a32: MfaArrays<f32> = a.cast();
    let w = MfaWhitening::new(&[MfaPart::Mean], &Array1::from_elem(6, 1e300));
    let m = Whitened {
        model: a32.clone(),
        whitening: Some(w.clone()),
    }
    .write(&path, &none)
    .unwrap_err()
    .to_string();
    assert!(m.contains("non-finite value (inf)"), "{m}");
    assert!(!path.exists());
}
