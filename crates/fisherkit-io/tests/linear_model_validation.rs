//! Validation on load of `pca` and `linear-svm` model files: one test per
//! failure kind, through the from-bytes readers (the same checks as the path
//! readers). Each failure is an `Err` whose message names the file, the
//! tensor or metadata key, and the shape or value.
//!
//! PCA: tensors `mean` (D), `components` (d, D), `explained_variance` (d);
//! mean and components of one dtype (the variances F32 or F64); 1 ≤ d ≤ D;
//! finite values; variances ≥ 0; orthonormal rows within 1e-3; metadata
//! `whiten` "true"/"false", `total_variance` a number ≥ the kept variances.
//! Linear SVM: tensors `weights` (C, D), `bias` (C) of one dtype; C ≥ 2,
//! D ≥ 1; finite; metadata `classes` a JSON list of C distinct integers or
//! strings, `c` a finite number > 0.

use fisherkit::pca::Pca;
use fisherkit::svm::LinearSvc;
use fisherkit_io::{ClassLabels, LabelledSvm, LinearSvmModel, ModelFile, PcaModel};
use ndarray::{array, Array1};
use std::collections::BTreeMap;

mod common;
use common::{st, st_with, Tensors};

const PCA: &[(&str, &str)] = &[("kind", "pca"), ("format_version", "1")];
const SVM: &[(&str, &str)] = &[("kind", "linear-svm"), ("format_version", "1")];

/// A valid d = 2, D = 3 PCA (rotated axes: 0.6, 0.8).
fn pca() -> Tensors {
    vec![
        ("mean", vec![3], vec![1.0, -2.0, 0.5]),
        (
            "components",
            vec![2, 3],
            vec![0.6, 0.8, 0.0, -0.8, 0.6, 0.0],
        ),
        ("explained_variance", vec![2], vec![4.0, 1.0]),
    ]
}

/// A valid C = 3, D = 2 linear SVM.
fn svm() -> Tensors {
    vec![
        ("weights", vec![3, 2], vec![1.0, 0.0, 0.0, 1.0, -1.0, -1.0]),
        ("bias", vec![3], vec![0.0, 0.5, -0.5]),
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

fn meta_with<'a>(
    base: &[(&'a str, &'a str)],
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut m = base.to_vec();
    m.extend_from_slice(extra);
    m
}

/// Loads with both readers' kinds and expects an error containing every one of `want`.
fn refused(bytes: &[u8], want: &[&str]) {
    let pca = PcaModel::read_bytes(bytes, "m.safetensors").err();
    let svm = LinearSvmModel::read_bytes(bytes, "m.safetensors").err();
    // the reader of the file's own kind is the one that must refuse it
    let e = if String::from_utf8_lossy(bytes).contains("\"linear-svm\"") {
        svm.expect("must be refused")
    } else {
        pca.expect("must be refused")
    };
    let m = e.to_string();
    assert!(m.starts_with("m.safetensors: "), "{m}");
    for w in want {
        assert!(m.contains(w), "expected `{w}` in: {m}");
    }
}

fn load_pca(bytes: &[u8]) -> PcaModel {
    PcaModel::read_bytes(bytes, "m.safetensors").unwrap().0
}

fn load_svm(bytes: &[u8]) -> LinearSvmModel {
    LinearSvmModel::read_bytes(bytes, "m.safetensors")
        .unwrap()
        .0
}

#[test]
fn valid_files_load() {
    let PcaModel::F64(p) = load_pca(&st(PCA, &pca())) else {
        panic!("an f64 PCA")
    };
    assert!(!p.whiten());
    assert_eq!(p.total_variance(), 5.0); // missing: the sum of the kept variances
    let z = p.transform(array![[1.6, -1.2, 7.0]].view()).unwrap();
    assert!(
        (z[[0, 0]] - 1.0).abs() < 1e-12 && z[[0, 1]].abs() < 1e-12,
        "{z}"
    );
    // F32 mean and components with F32 or F64 variances; metadata read.
    let m = meta_with(
        PCA,
        &[
            ("dtype", "float32"),
            ("whiten", "true"),
            ("total_variance", "10"),
        ],
    );
    for ev_dt in ["F32", "F64"] {
        let b = st_with(&m, &pca(), &|n| {
            if n == "explained_variance" {
                ev_dt
            } else {
                "F32"
            }
        });
        let PcaModel::F32(p) = load_pca(&b) else {
            panic!("an f32 PCA")
        };
        assert!(p.whiten());
        assert_eq!(p.explained_variance_ratio(), array![0.4, 0.1]);
    }
    // d = D is fine.
    let full = set(
        pca(),
        "components",
        vec![3, 3],
        vec![0.6, 0.8, 0.0, -0.8, 0.6, 0.0, 0.0, 0.0, 1.0],
    );
    let full = set(full, "explained_variance", vec![3], vec![4.0, 1.0, 0.0]);
    assert_eq!(load_pca(&st(PCA, &full)).n_components(), 3);

    let LinearSvmModel::F64(s) = load_svm(&st(SVM, &svm())) else {
        panic!("an f64 SVM")
    };
    assert_eq!(s.classes, ClassLabels::range(3)); // missing: 0..C-1
    assert_eq!(s.c, None);
    let m = meta_with(
        SVM,
        &[
            ("classes", r#"["a","b","c"]"#),
            ("c", "0.25"),
            ("dtype", "float32"),
        ],
    );
    let LinearSvmModel::F32(s) = load_svm(&st_with(&m, &svm(), &|_| "F32")) else {
        panic!("an f32 SVM")
    };
    assert_eq!(
        s.classes,
        ClassLabels::Str(vec!["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(s.c, Some(0.25));
    let lab = s
        .predict_labels(array![[2.0f32, 0.0], [0.0, 2.0], [-2.0, -2.0]].view())
        .unwrap();
    assert_eq!(
        lab,
        ClassLabels::Str(vec!["a".into(), "b".into(), "c".into()])
    );
    let m = meta_with(SVM, &[("classes", "[10, -2, 3]")]);
    assert_eq!(
        load_svm(&st(&m, &svm())).classes(),
        &ClassLabels::Int(vec![10, -2, 3])
    );
}

#[test]
fn kind_and_version_are_checked() {
    refused(
        &st(&[("kind", "pca"), ("format_version", "2")], &pca()),
        &["unsupported format_version \"2\""],
    );
    refused(
        &st(&[("kind", "linear-svm"), ("format_version", "")], &svm()),
        &["unsupported format_version \"\""],
    );
    let e = PcaModel::read_bytes(&st(SVM, &svm()), "m.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "is a linear SVM model (kind \"linear-svm\"); a PCA (kind \"pca\") was expected"
        ),
        "{e}"
    );
    let e = LinearSvmModel::read_bytes(&st(&[("kind", "mfa")], &svm()), "m.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is an MFA model (kind \"mfa\"); a linear SVM"),
        "{e}"
    );
    let e = PcaModel::read_bytes(&st(&[("format_version", "1")], &pca()), "m.safetensors")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing metadata key `kind`"), "{e}");
    // Missing format_version: accepted (only `kind` is mandatory).
    assert!(PcaModel::read_bytes(&st(&[("kind", "pca")], &pca()), "m").is_ok());
    assert!(LinearSvmModel::read_bytes(&st(&[("kind", "linear-svm")], &svm()), "m").is_ok());
}

#[test]
fn missing_tensors_are_named() {
    for name in ["mean", "components", "explained_variance"] {
        refused(
            &st(PCA, &without(pca(), name)),
            &[&format!(
                "missing tensor `{name}` (a pca model file needs mean, components, explained_variance)"
            )],
        );
    }
    for name in ["weights", "bias"] {
        refused(
            &st(SVM, &without(svm(), name)),
            &[&format!(
                "missing tensor `{name}` (a linear-svm model file needs weights, bias)"
            )],
        );
    }
}

#[test]
fn dtypes_are_checked() {
    let mixed = st_with(PCA, &pca(), &|n| {
        if n == "components" {
            "F32"
        } else {
            "F64"
        }
    });
    refused(
        &mixed,
        &["tensor `components` is F32 but `mean` is F64; all tensors must have one dtype"],
    );
    let mixed = st_with(SVM, &svm(), &|n| if n == "bias" { "F32" } else { "F64" });
    refused(&mixed, &["tensor `bias` is F32 but `weights` is F64"]);
    refused(
        &st(&meta_with(PCA, &[("dtype", "float32")]), &pca()),
        &["metadata `dtype` is \"float32\" but the tensors are F64 (float64)"],
    );
    refused(
        &st(&meta_with(SVM, &[("dtype", "int8")]), &svm()),
        &["metadata `dtype` is \"int8\""],
    );
}

#[test]
fn pca_shapes_are_checked() {
    refused(
        &st(PCA, &set(pca(), "mean", vec![1, 3], vec![0.0; 3])),
        &["tensor `mean` must have shape (D), got (1, 3)"],
    );
    refused(
        &st(PCA, &set(pca(), "components", vec![6], vec![0.0; 6])),
        &["tensor `components` must have shape (d, D), got (6,)"],
    );
    refused(
        &st(
            PCA,
            &set(pca(), "explained_variance", vec![2, 1], vec![1.0; 2]),
        ),
        &["tensor `explained_variance` must have shape (d), got (2, 1)"],
    );
    refused(
        &st(PCA, &set(pca(), "mean", vec![2], vec![0.0; 2])),
        &["tensor `components` has shape (2, 3) but `mean` has D = 2 entries"],
    );
    refused(
        &st(
            PCA,
            &set(pca(), "explained_variance", vec![3], vec![1.0; 3]),
        ),
        &["tensor `explained_variance` has shape (3,) but `components` has d = 2 rows"],
    );
    let empty = set(
        set(pca(), "components", vec![0, 3], vec![]),
        "explained_variance",
        vec![0],
        vec![],
    );
    refused(
        &st(PCA, &empty),
        &["tensor `components` has 0 rows (d = 0 components)"],
    );
    let no_dim = set(
        set(pca(), "components", vec![2, 0], vec![]),
        "mean",
        vec![0],
        vec![],
    );
    refused(&st(PCA, &no_dim), &["tensor `mean` is empty (D = 0)"]);
    // d > D
    let tall = set(
        set(pca(), "components", vec![4, 3], vec![0.0; 12]),
        "explained_variance",
        vec![4],
        vec![1.0; 4],
    );
    refused(
        &st(PCA, &tall),
        &["tensor `components` has shape (4, 3): more components (d = 4) than dimensions (D = 3)"],
    );
}

#[test]
fn svm_shapes_are_checked() {
    refused(
        &st(SVM, &set(svm(), "weights", vec![6], vec![0.0; 6])),
        &["tensor `weights` must have shape (C, D), got (6,)"],
    );
    refused(
        &st(SVM, &set(svm(), "bias", vec![3, 1], vec![0.0; 3])),
        &["tensor `bias` must have shape (C), got (3, 1)"],
    );
    let one = set(
        set(svm(), "weights", vec![1, 2], vec![1.0, 0.0]),
        "bias",
        vec![1],
        vec![0.0],
    );
    refused(
        &st(SVM, &one),
        &["tensor `weights` has shape (1, 2): a linear SVM needs at least 2 classes (rows)"],
    );
    refused(
        &st(SVM, &set(svm(), "weights", vec![3, 0], vec![])),
        &["tensor `weights` has 0 columns (D = 0)"],
    );
    refused(
        &st(SVM, &set(svm(), "bias", vec![2], vec![0.0; 2])),
        &["tensor `bias` has shape (2,) but `weights` has C = 3 rows"],
    );
}

#[test]
fn non_finite_values_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        refused(
            &st(PCA, &set(pca(), "mean", vec![3], vec![0.0, bad, 0.0])),
            &["tensor `mean` has a non-finite value", "at [1]"],
        );
        refused(
            &st(
                PCA,
                &set(
                    pca(),
                    "components",
                    vec![2, 3],
                    vec![0.6, 0.8, 0.0, -0.8, 0.6, bad],
                ),
            ),
            &["tensor `components` has a non-finite value", "at [1, 2]"],
        );
        refused(
            &st(
                PCA,
                &set(pca(), "explained_variance", vec![2], vec![bad, 1.0]),
            ),
            &[
                "tensor `explained_variance` has a non-finite value",
                "at [0]",
            ],
        );
        refused(
            &st(
                SVM,
                &set(
                    svm(),
                    "weights",
                    vec![3, 2],
                    vec![1.0, 0.0, 0.0, bad, 1.0, 1.0],
                ),
            ),
            &["tensor `weights` has a non-finite value", "at [1, 1]"],
        );
        refused(
            &st(SVM, &set(svm(), "bias", vec![3], vec![0.0, 0.0, bad])),
            &["tensor `bias` has a non-finite value", "at [2]"],
        );
    }
}

#[test]
fn pca_variances_must_be_non_negative() {
    for v in [-1.0, -1e-300] {
        refused(
            &st(
                PCA,
                &set(pca(), "explained_variance", vec![2], vec![4.0, v]),
            ),
            &[
                "explained_variance [1] is",
                "variances must be finite and >= 0",
            ],
        );
    }
    // 0 is a valid variance (a direction without spread).
    assert!(PcaModel::read_bytes(
        &st(
            PCA,
            &set(pca(), "explained_variance", vec![2], vec![4.0, 0.0])
        ),
        "m"
    )
    .is_ok());
}

#[test]
fn pca_components_must_be_orthonormal() {
    // a row of norm 2
    refused(
        &st(
            PCA,
            &set(
                pca(),
                "components",
                vec![2, 3],
                vec![1.2, 1.6, 0.0, -0.8, 0.6, 0.0],
            ),
        ),
        &[
            "tensor `components` is not orthonormal: row 0 has squared norm 4",
            "must be <= 0.001",
        ],
    );
    // two unit rows that are not orthogonal
    refused(
        &st(
            PCA,
            &set(
                pca(),
                "components",
                vec![2, 3],
                vec![1.0, 0.0, 0.0, 0.6, 0.8, 0.0],
            ),
        ),
        &["tensor `components` is not orthonormal: rows 0 and 1 have dot product 0.6"],
    );
    // within the tolerance: accepted (f32 rounding)
    assert!(PcaModel::read_bytes(
        &st(
            PCA,
            &set(
                pca(),
                "components",
                vec![2, 3],
                vec![0.6, 0.8, 1e-4, -0.8, 0.6, 0.0]
            ),
        ),
        "m"
    )
    .is_ok());
}

#[test]
fn pca_metadata_is_checked() {
    refused(
        &st(&meta_with(PCA, &[("whiten", "yes")]), &pca()),
        &["metadata `whiten` is \"yes\"; expected \"true\" or \"false\""],
    );
    refused(
        &st(&meta_with(PCA, &[("total_variance", "lots")]), &pca()),
        &["metadata `total_variance` is \"lots\"; expected a number"],
    );
    for t in ["4.5", "-1", "inf", "NaN"] {
        refused(
            &st(&meta_with(PCA, &[("total_variance", t)]), &pca()),
            &[
                "metadata `total_variance`: total variance",
                "must be finite and at least the sum of the kept variances (5)",
            ],
        );
    }
}

#[test]
fn svm_metadata_is_checked() {
    let bad = [
        ("[0, 1]", "metadata `classes`: 2 class labels for 3 classes"),
        (
            "[0, 1, 0]",
            "metadata `classes`: label 0 (entry 2) appears twice",
        ),
        (r#"["a", "b", "a"]"#, "label \"a\" (entry 2) appears twice"),
        (
            r#"[0, "b", 2]"#,
            "metadata `classes`: entry 1 is \"b\"; labels must be all integers",
        ),
        ("[0, 1.5, 2]", "entry 1 is 1.5"),
        ("[0, 1, 1e30]", "entry 2 is 1e+30"),
        ("{\"a\": 1}", "metadata `classes`: not a JSON list"),
        ("[0, 1", "metadata `classes`: not valid JSON"),
    ];
    for (classes, want) in bad {
        refused(
            &st(&meta_with(SVM, &[("classes", classes)]), &svm()),
            &[want],
        );
    }
    refused(
        &st(&meta_with(SVM, &[("c", "big")]), &svm()),
        &["metadata `c` is \"big\"; expected a number"],
    );
    for c in ["0", "-1", "inf"] {
        refused(
            &st(&meta_with(SVM, &[("c", c)]), &svm()),
            &["metadata `c` is", "the cost C must be finite and > 0"],
        );
    }
}

#[test]
fn writers_refuse_what_would_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.safetensors");
    // components not orthonormal: from_parts takes them, the writer does not
    let pca = Pca::from_parts(
        array![0.0, 0.0],
        array![[1.0, 1.0]],
        Array1::from(vec![1.0]),
        false,
    )
    .unwrap();
    let e = pca.write(&p, &BTreeMap::new()).unwrap_err().to_string();
    assert!(
        e.contains("refusing to write an invalid PCA: tensor `components` is not orthonormal"),
        "{e}"
    );
    assert!(!p.exists());
    let svm = LinearSvc::from_parts(array![[1.0, 0.0], [0.0, 1.0]], array![0.0, 0.0]).unwrap();
    for (classes, c, want) in [
        (ClassLabels::range(3), None, "3 class labels for 2 classes"),
        (
            ClassLabels::Str(vec!["x".into(), "x".into()]),
            None,
            "label \"x\" (entry 1) appears twice",
        ),
        (ClassLabels::range(2), Some(0.0), "metadata `c` is 0"),
    ] {
        let m = LabelledSvm {
            svm: svm.clone(),
            classes,
            c,
        };
        let e = m.write(&p, &BTreeMap::new()).unwrap_err().to_string();
        assert!(
            e.contains("refusing to write an invalid linear SVM") && e.contains(want),
            "{e}"
        );
        assert!(!p.exists());
    }
}
