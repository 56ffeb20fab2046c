//! Model validation on load (issue #6, item 2): one test per failure kind,
//! for GMM and MFA files, through `read_model_bytes` (the same checks as the
//! path readers). Each failure is an `Err` whose message names the file and
//! the problem; `tests/model.rs` covers the messages of the path readers.
//!
//! The checks, in order: safetensors framing; `kind` present and `gmm` or
//! `mfa`; `format_version` = "1" if present (a file without it — written by
//! another tool — is accepted, as docs/formats.md §2.1 makes only `kind`
//! mandatory); required tensors present, F32/F64, one dtype; ranks and shapes
//! consistent (K, D, R ≥ 1; psi (D) or (K, D); 0 < R < D); finite values;
//! weights > 0 summing to 1 within 1e-4; variances and Ψ > 0; metadata
//! `dtype`, if present, matching the tensors.

use fisherkit_io::{GmmModel, MfaModel, Model, ModelFile};

mod common;
use common::{st, st_typed, st_with, Tensors};

const GMM: &[(&str, &str)] = &[("kind", "gmm"), ("format_version", "1")];
const MFA: &[(&str, &str)] = &[("kind", "mfa"), ("format_version", "1")];

/// A valid K = 2, D = 3 GMM.
fn gmm() -> Tensors {
    vec![
        ("weights", vec![2], vec![0.25, 0.75]),
        ("means", vec![2, 3], vec![0.0, 1.0, 2.0, -1.0, -2.0, 3.5]),
        ("variances", vec![2, 3], vec![1.0, 0.5, 2.0, 0.25, 1.5, 1.0]),
    ]
}

/// A valid K = 2, D = 3, R = 1 MFA with shared psi.
fn mfa() -> Tensors {
    vec![
        ("weights", vec![2], vec![0.5, 0.5]),
        ("means", vec![2, 3], vec![0.0; 6]),
        (
            "loadings",
            vec![2, 3, 1],
            vec![1.0, 0.0, 0.5, 0.0, 1.0, 0.25],
        ),
        ("psi", vec![3], vec![0.1, 0.2, 0.3]),
    ]
}

fn set(mut t: Tensors, name: &str, shape: Vec<usize>, values: Vec<f64>) -> Tensors {
    let i = t.iter().position(|(n, _, _)| *n == name).unwrap();
    t[i] = (t[i].0, shape, values);
    t
}

fn without(mut t: Tensors, name: &str) -> Tensors {
    t.retain(|(n, _, _)| *n != name);
    t
}

/// Loads and expects an error containing every one of `want`.
fn refused(bytes: &[u8], want: &[&str]) {
    let e = Model::read_bytes(bytes, "m.safetensors").expect_err("must be refused");
    let m = e.to_string();
    assert!(m.starts_with("m.safetensors: "), "{m}");
    for w in want {
        assert!(m.contains(w), "expected `{w}` in: {m}");
    }
}

fn loads(bytes: &[u8]) -> Model {
    Model::read_bytes(bytes, "m.safetensors").unwrap().0
}

#[test]
fn valid_files_load() {
    assert!(matches!(
        loads(&st(GMM, &gmm())),
        Model::Gmm(GmmModel::F64(_))
    ));
    assert!(matches!(
        loads(&st(MFA, &mfa())),
        Model::Mfa(MfaModel::F64(_))
    ));
    let f32_meta = &[
        ("kind", "gmm"),
        ("format_version", "1"),
        ("dtype", "float32"),
    ];
    assert!(matches!(
        loads(&st_typed(f32_meta, &gmm(), "F32")),
        Model::Gmm(GmmModel::F32(_))
    ));
}

#[test]
fn kind_is_checked() {
    refused(
        &st(&[("format_version", "1")], &gmm()),
        &["missing metadata key `kind`"],
    );
    refused(
        &st(&[("kind", "GMM")], &gmm()),
        &["unknown model kind \"GMM\""],
    );
    refused(&st(&[("kind", "")], &gmm()), &["unknown model kind \"\""]);
    // A GMM's tensors under kind = mfa, and the reverse.
    refused(&st(MFA, &gmm()), &["missing tensor `loadings`"]);
    refused(
        &st(GMM, &without(mfa(), "psi")),
        &["missing tensor `variances`"],
    );
    // The typed readers refuse the other kind.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.safetensors");
    std::fs::write(&p, st(MFA, &mfa())).unwrap();
    let e = fisherkit_io::GmmModel::read(&p).unwrap_err().to_string();
    assert!(e.contains("is an MFA model (kind \"mfa\"); a GMM"), "{e}");
    std::fs::write(&p, st(GMM, &gmm())).unwrap();
    let e = fisherkit_io::MfaModel::read(&p).unwrap_err().to_string();
    assert!(e.contains("is a GMM model (kind \"gmm\"); an MFA"), "{e}");
}

#[test]
fn format_version_is_checked() {
    for v in ["2", "0", "1.0", "", "one"] {
        for (kind, t) in [("gmm", gmm()), ("mfa", mfa())] {
            refused(
                &st(&[("kind", kind), ("format_version", v)], &t),
                &[
                    &format!("unsupported format_version \"{v}\""),
                    "reads format_version \"1\"",
                ],
            );
        }
    }
    // Missing: accepted (files of other tools; only `kind` is mandatory).
    assert!(matches!(
        loads(&st(&[("kind", "gmm")], &gmm())),
        Model::Gmm(_)
    ));
    assert!(matches!(
        loads(&st(&[("kind", "mfa")], &mfa())),
        Model::Mfa(_)
    ));
}

#[test]
fn dtype_metadata_must_match_the_tensors() {
    let meta = &[
        ("kind", "gmm"),
        ("format_version", "1"),
        ("dtype", "float32"),
    ];
    refused(
        &st(meta, &gmm()),
        &["metadata `dtype` is \"float32\" but the tensors are F64 (float64)"],
    );
    let meta = &[("kind", "mfa"), ("dtype", "int8")];
    refused(&st(meta, &mfa()), &["metadata `dtype` is \"int8\""]);
    // Tensors of two dtypes.
    let mixed = st_with(GMM, &gmm(), &|n| if n == "means" { "F32" } else { "F64" });
    refused(
        &mixed,
        &["tensor `means` is F32 but `weights` is F64; all tensors must have one dtype"],
    );
    let mixed = st_with(MFA, &mfa(), &|n| if n == "psi" { "F32" } else { "F64" });
    refused(&mixed, &["tensor `psi` is F32 but `weights` is F64"]);
}

#[test]
fn gmm_shapes_are_checked() {
    refused(
        &st(GMM, &set(gmm(), "weights", vec![0], vec![])),
        &["`weights` has K = 0 entries"],
    );
    let empty = set(
        set(
            set(gmm(), "weights", vec![0], vec![]),
            "means",
            vec![0, 3],
            vec![],
        ),
        "variances",
        vec![0, 3],
        vec![],
    );
    refused(&st(GMM, &empty), &["0 components"]);
    refused(
        &st(
            GMM,
            &set(
                set(gmm(), "means", vec![2, 0], vec![]),
                "variances",
                vec![2, 0],
                vec![],
            ),
        ),
        &["0 columns"],
    );
    refused(
        &st(GMM, &set(gmm(), "means", vec![3, 2], vec![0.0; 6])),
        &["`means` has shape (3, 2) but `weights` has K = 2"],
    );
    refused(
        &st(GMM, &set(gmm(), "variances", vec![2, 2], vec![1.0; 4])),
        &["`variances` has shape (2, 2) but `means` has shape (2, 3)"],
    );
    refused(
        &st(GMM, &set(gmm(), "variances", vec![6], vec![1.0; 6])),
        &["`variances` must have shape (K, D), got (6,)"],
    );
    refused(
        &st(GMM, &set(gmm(), "weights", vec![1, 2], vec![0.25, 0.75])),
        &["`weights` must have shape (K), got (1, 2)"],
    );
    refused(
        &st(GMM, &without(gmm(), "means")),
        &["missing tensor `means`"],
    );
}

#[test]
fn mfa_shapes_are_checked() {
    refused(
        &st(MFA, &set(mfa(), "loadings", vec![2, 3], vec![0.0; 6])),
        &["`loadings` must have shape (K, D, R), got (2, 3)"],
    );
    refused(
        &st(MFA, &set(mfa(), "loadings", vec![2, 2, 1], vec![0.0; 4])),
        &["`loadings` has shape (2, 2, 1) but (K, D, R) = (2, 3, R)"],
    );
    refused(
        &st(MFA, &set(mfa(), "loadings", vec![2, 3, 0], vec![])),
        &["the number of factors R = 0 must satisfy 0 < R < D = 3"],
    );
    refused(
        &st(MFA, &set(mfa(), "loadings", vec![2, 3, 3], vec![0.1; 18])),
        &["0 < R < D = 3"],
    );
    refused(
        &st(MFA, &set(mfa(), "psi", vec![2], vec![0.1; 2])),
        &["tensor `psi` has shape (2,) but (D) = (3,) or (K, D) = (2, 3)"],
    );
    refused(
        &st(MFA, &set(mfa(), "psi", vec![3, 3], vec![0.1; 9])),
        &["`psi` has shape (3, 3)"],
    );
    refused(
        &st(MFA, &set(mfa(), "psi", vec![1, 1, 3], vec![0.1; 3])),
        &["`psi` must have shape (D) or (K, D)"],
    );
    refused(
        &st(MFA, &set(mfa(), "weights", vec![0], vec![])),
        &["tensor `means` has shape (2, 3) but `weights` has K = 0 entries"],
    );
    let empty = set(
        set(
            set(mfa(), "weights", vec![0], vec![]),
            "means",
            vec![0, 3],
            vec![],
        ),
        "loadings",
        vec![0, 3, 1],
        vec![],
    );
    refused(&st(MFA, &empty), &["the mixture has 0 components"]);
    // A (1, D) psi is a shared one, as in memory.
    assert!(matches!(
        loads(&st(MFA, &set(mfa(), "psi", vec![1, 3], vec![0.1; 3]))),
        Model::Mfa(_)
    ));
    refused(
        &st(MFA, &set(mfa(), "means", vec![3, 3], vec![0.0; 9])),
        &["`means` has shape (3, 3) but `weights` has K = 2"],
    );
    // Per-component psi (K, D) is accepted.
    assert!(matches!(
        loads(&st(MFA, &set(mfa(), "psi", vec![2, 3], vec![0.1; 6]))),
        Model::Mfa(_)
    ));
}

#[test]
fn non_finite_values_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut means = vec![0.0, 1.0, 2.0, -1.0, -2.0, 3.5];
        means[4] = bad;
        refused(
            &st(GMM, &set(gmm(), "means", vec![2, 3], means)),
            &["tensor `means` has a non-finite value", "at [1, 1]"],
        );
        refused(
            &st(
                GMM,
                &set(
                    gmm(),
                    "variances",
                    vec![2, 3],
                    vec![1.0, bad, 1.0, 1.0, 1.0, 1.0],
                ),
            ),
            &["tensor `variances` has a non-finite value", "at [0, 1]"],
        );
        refused(
            &st(GMM, &set(gmm(), "weights", vec![2], vec![bad, 0.5])),
            &["tensor `weights` has a non-finite value", "at [0]"],
        );
        refused(
            &st(
                MFA,
                &set(
                    mfa(),
                    "loadings",
                    vec![2, 3, 1],
                    vec![1.0, 0.0, 0.5, 0.0, bad, 0.25],
                ),
            ),
            &["tensor `loadings` has a non-finite value", "at [1, 1, 0]"],
        );
        refused(
            &st(MFA, &set(mfa(), "psi", vec![3], vec![0.1, 0.2, bad])),
            &["tensor `psi` has a non-finite value", "at [2]"],
        );
        refused(
            &st(
                MFA,
                &set(
                    mfa(),
                    "means",
                    vec![2, 3],
                    vec![0.0, 0.0, 0.0, 0.0, 0.0, bad],
                ),
            ),
            &["tensor `means` has a non-finite value", "at [1, 2]"],
        );
        refused(
            &st(MFA, &set(mfa(), "weights", vec![2], vec![0.5, bad])),
            &["tensor `weights` has a non-finite value", "at [1]"],
        );
    }
    // f32 overflow: a finite f32 is finite; NaN bits in F32 tensors are found too.
    refused(
        &st_typed(
            GMM,
            &set(
                gmm(),
                "means",
                vec![2, 3],
                vec![0.0, 0.0, f64::NAN, 0.0, 0.0, 0.0],
            ),
            "F32",
        ),
        &["non-finite value (NaN) at [0, 2]"],
    );
}

#[test]
fn weights_must_be_positive_and_sum_to_one() {
    refused(
        &st(GMM, &set(gmm(), "weights", vec![2], vec![0.5, 0.6])),
        &["weights sum to 1.1", "not 1"],
    );
    refused(
        &st(GMM, &set(gmm(), "weights", vec![2], vec![0.0, 1.0])),
        &["weight 0 is 0"],
    );
    refused(
        &st(GMM, &set(gmm(), "weights", vec![2], vec![-0.5, 1.5])),
        &["weight 0 is -0.5"],
    );
    refused(
        &st(MFA, &set(mfa(), "weights", vec![2], vec![0.5, 0.4])),
        &["weights sum to 0.9", "not 1"],
    );
    refused(
        &st(MFA, &set(mfa(), "weights", vec![2], vec![1.0, 0.0])),
        &["weight 1 is 0; weights must be finite and > 0"],
    );
    refused(
        &st(MFA, &set(mfa(), "weights", vec![2], vec![1.25, -0.25])),
        &["weight 1 is -0.25"],
    );
    // Within the 1e-4 tolerance: accepted (the GMM renormalises exactly).
    let Model::Gmm(GmmModel::F64(g)) = loads(&st(
        GMM,
        &set(gmm(), "weights", vec![2], vec![0.25, 0.75 + 5e-5]),
    )) else {
        panic!("an f64 GMM")
    };
    assert!((g.weights().sum() - 1.0).abs() < 1e-15);
    assert!(matches!(
        loads(&st(
            MFA,
            &set(mfa(), "weights", vec![2], vec![0.5, 0.5 - 5e-5])
        )),
        Model::Mfa(_)
    ));
}

#[test]
fn variances_and_psi_must_be_positive() {
    for v in [0.0, -0.0, -1.0, -1e-300] {
        refused(
            &st(
                GMM,
                &set(
                    gmm(),
                    "variances",
                    vec![2, 3],
                    vec![1.0, 1.0, 1.0, 1.0, 1.0, v],
                ),
            ),
            &["variance [1, 2] is", "must be finite and > 0"],
        );
        refused(
            &st(MFA, &set(mfa(), "psi", vec![3], vec![0.1, v, 0.3])),
            &["psi [1] is", "psi must be finite and > 0"],
        );
        refused(
            &st(
                MFA,
                &set(mfa(), "psi", vec![2, 3], vec![0.1, 0.1, 0.1, 0.1, 0.1, v]),
            ),
            &["psi [1, 2] is", "psi must be finite and > 0"],
        );
    }
    // An f64 variance that underflows to 0 in f32 is refused by the conversion.
    let Model::Gmm(g) = loads(&st(
        GMM,
        &set(
            gmm(),
            "variances",
            vec![2, 3],
            vec![1.0, 1.0, 1.0, 1.0, 1.0, 1e-60],
        ),
    )) else {
        panic!("a GMM")
    };
    let e = g.to_dtype::<f32>().unwrap_err().to_string();
    assert!(e.contains("variance [1, 2] is 0"), "{e}");
}

#[test]
fn broken_framing_is_refused() {
    let good = st(GMM, &gmm());
    refused(&good[..good.len() - 1], &["not a valid safetensors file"]);
    refused(&good[..7], &["not a safetensors model file (only 7 bytes)"]);
    refused(b"\x93NUMPY\x01\x00....", &["is an .npy array"]);
    refused(b"PK\x03\x04........", &["is a zip/.npz archive"]);
    refused(&[], &["only 0 bytes"]);
}
