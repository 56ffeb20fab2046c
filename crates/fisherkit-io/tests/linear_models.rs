//! Model files of kind `pca` and `linear-svm`: round trips (parameters bit
//! for bit, identical transforms and decision values), determinism, the
//! kind checks between readers, and that corrupt files never panic.
//! `tests/linear_model_validation.rs` has one test per refused file.

use fisherkit::pca::{Pca, PcaParams};
use fisherkit::svm::{LinearSvc, LinearSvcParams};
use fisherkit_io::{
    ClassLabels, Element, GmmModel, LabelledSvm, LinearSvmModel, Model, ModelFile, PcaModel,
};
use ndarray::{Array1, Array2};
use std::collections::BTreeMap;

/// Deterministic pseudo-random numbers in [-1, 1) (xorshift64*).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let v = s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
            v as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// (N, D) data with decreasing spread per column and an offset.
fn data<F: Element>(n: usize, d: usize, seed: u64) -> Array2<F> {
    let v = noise(n * d, seed);
    Array2::from_shape_fn((n, d), |(i, j)| {
        F::from_f64_lossy(3.0 + j as f64 + v[i * d + j] * (d - j) as f64)
    })
}

fn extra() -> BTreeMap<String, String> {
    BTreeMap::from([("note".to_string(), "round trip".to_string())])
}

fn pca_round_trip<F: Element>(whiten: bool) -> Pca<F> {
    let x = data::<F>(300, 7, 1);
    let pca = PcaParams::new(4).whiten(whiten).fit(x.view()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pca.safetensors");
    pca.write(&p, &extra()).unwrap();
    let (m, meta) = PcaModel::read_with_metadata(&p).unwrap();
    assert_eq!(m.dtype(), F::DTYPE);
    assert_eq!((m.dim(), m.n_components()), (7, 4));
    assert_eq!(meta["kind"], "pca");
    assert_eq!(meta["format_version"], "1");
    assert_eq!(meta["dtype"], F::DTYPE.numpy_name());
    assert_eq!(meta["whiten"], whiten.to_string());
    assert_eq!(meta["note"], "round trip");
    let back: Pca<F> = m.to_dtype().unwrap();
    // Every field, projection and total variance included, bit for bit.
    assert_eq!(back, pca);
    assert_eq!(
        back.total_variance().to_bits(),
        pca.total_variance().to_bits()
    );
    assert_eq!(
        back.explained_variance_ratio(),
        pca.explained_variance_ratio()
    );
    let y = data::<F>(50, 7, 2);
    assert_eq!(
        back.transform(y.view()).unwrap(),
        pca.transform(y.view()).unwrap()
    );
    pca
}

#[test]
fn pca_round_trips_bit_for_bit() {
    for whiten in [false, true] {
        pca_round_trip::<f64>(whiten);
        let p32 = pca_round_trip::<f32>(whiten);
        // the explained variances stay f64 in the file (not rounded to f32)
        assert!(p32
            .explained_variance()
            .iter()
            .any(|v| (*v as f32) as f64 != *v));
    }
}

#[test]
fn pca_from_parts_equals_the_fit() {
    // What a reader does: the fit rebuilt from its parts is the same PCA.
    let x = data::<f32>(200, 6, 3);
    let pca = PcaParams::new(6).whiten(true).fit(x.view()).unwrap();
    let re = Pca::from_parts(
        pca.mean().to_owned(),
        pca.components().to_owned(),
        pca.explained_variance().to_owned(),
        true,
    )
    .unwrap()
    .with_total_variance(pca.total_variance())
    .unwrap();
    assert_eq!(re, pca);
}

#[test]
fn pca_dtype_conversion() {
    let x = data::<f64>(100, 5, 4);
    let pca = PcaParams::new(3).fit(x.view()).unwrap();
    let m = PcaModel::F64(pca.clone());
    let p32: Pca<f32> = m.to_dtype().unwrap();
    let y = data::<f64>(20, 5, 5);
    let z64 = pca.transform(y.view()).unwrap();
    let z32 = p32.transform(y.mapv(|v| v as f32).view()).unwrap();
    for (a, b) in z64.iter().zip(z32.iter()) {
        assert!((a - *b as f64).abs() < 1e-4 * (1.0 + a.abs()), "{a} vs {b}");
    }
}

/// Three classes around separated centres in D = 5.
fn svm_data<F: Element>() -> (Array2<F>, Vec<usize>) {
    let n = 90;
    let v = noise(n * 5, 7);
    let y: Vec<usize> = (0..n).map(|i| i % 3).collect();
    let x = Array2::from_shape_fn((n, 5), |(i, j)| {
        let centre = if j == y[i] { 4.0 } else { 0.0 };
        F::from_f64_lossy(centre + v[i * 5 + j])
    });
    (x, y)
}

fn svm_round_trip<F: Element>(classes: ClassLabels, c: Option<f64>) {
    let (x, y) = svm_data::<F>();
    let svm = LinearSvcParams::with_c(0.5).fit(x.view(), &y).unwrap();
    let m = LabelledSvm {
        svm: svm.clone(),
        classes: classes.clone(),
        c,
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("svm.safetensors");
    m.write(&p, &extra()).unwrap();
    let (back, meta) = LinearSvmModel::read_with_metadata(&p).unwrap();
    assert_eq!(meta["kind"], "linear-svm");
    assert_eq!(meta["classes"], classes.to_json());
    assert_eq!(meta.get("c").cloned(), c.map(|v| format!("{v:?}")));
    assert_eq!(back.dtype(), F::DTYPE);
    assert_eq!(back.dim(), 5);
    assert_eq!(back.classes(), &classes);
    assert_eq!(back.c().map(f64::to_bits), c.map(f64::to_bits));
    let s: LinearSvc<F> = back.to_dtype().unwrap();
    // Parameters bit for bit (the solver's n_iter / converged are not stored).
    assert_eq!(s.coef(), svm.coef());
    assert_eq!(s.intercept(), svm.intercept());
    assert_eq!(
        s.decision_function(x.view()).unwrap(),
        svm.decision_function(x.view()).unwrap()
    );
    let lm = match back {
        LinearSvmModel::F32(m) => {
            assert_eq!(F::DTYPE, fisherkit_io::Dtype::F32);
            m.predict_labels(x.mapv(|v| v.as_f64() as f32).view())
                .unwrap()
        }
        LinearSvmModel::F64(m) => m.predict_labels(x.mapv(|v| v.as_f64()).view()).unwrap(),
    };
    let idx = svm.predict(x.view()).unwrap();
    let want = match &classes {
        ClassLabels::Int(v) => ClassLabels::Int(idx.iter().map(|&k| v[k]).collect()),
        ClassLabels::Str(v) => ClassLabels::Str(idx.iter().map(|&k| v[k].clone()).collect()),
    };
    assert_eq!(lm, want);
    // the training data are separable: predictions are the labels
    assert_eq!(idx, y);
}

#[test]
fn linear_svm_round_trips_bit_for_bit() {
    let names = ClassLabels::Str(vec![
        "bedroom".into(),
        "kitchen".into(),
        "ünïcode \"q\"".into(),
    ]);
    svm_round_trip::<f64>(names.clone(), Some(0.5));
    svm_round_trip::<f32>(names, Some(1e-3));
    svm_round_trip::<f64>(ClassLabels::Int(vec![-3, 7, i64::MAX]), None);
    svm_round_trip::<f32>(ClassLabels::range(3), Some(0.1 + 0.2));
}

#[test]
fn writers_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let x = data::<f32>(60, 4, 9);
    let pca = PcaParams::new(2).fit(x.view()).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    pca.write(&a, &extra()).unwrap();
    pca.write(&b, &extra()).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let (xs, y) = svm_data::<f64>();
    let m = LabelledSvm {
        svm: LinearSvcParams::default().fit(xs.view(), &y).unwrap(),
        classes: ClassLabels::range(3),
        c: Some(1.0),
    };
    m.write(&a, &extra()).unwrap();
    m.write(&b, &extra()).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn readers_refuse_other_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let pca_p = dir.path().join("pca.safetensors");
    let svm_p = dir.path().join("svm.safetensors");
    let gmm_p = dir.path().join("gmm.safetensors");
    let x = data::<f64>(60, 4, 9);
    PcaParams::new(2)
        .fit(x.view())
        .unwrap()
        .write(&pca_p, &BTreeMap::new())
        .unwrap();
    let (xs, y) = svm_data::<f64>();
    let m = LabelledSvm {
        svm: LinearSvcParams::default().fit(xs.view(), &y).unwrap(),
        classes: ClassLabels::range(3),
        c: None,
    };
    m.write(&svm_p, &BTreeMap::new()).unwrap();
    let g = fisherkit::gmm::DiagGmm::new(
        Array1::from(vec![0.5, 0.5]),
        Array2::zeros((2, 3)),
        Array2::ones((2, 3)),
    )
    .unwrap();
    g.write(&gmm_p, &BTreeMap::new()).unwrap();

    let err = |r: Result<(), fisherkit_io::IoError>| r.unwrap_err().to_string();
    let e = err(PcaModel::read(&gmm_p).map(drop));
    assert!(
        e.contains("is a GMM model (kind \"gmm\"); a PCA (kind \"pca\") was expected"),
        "{e}"
    );
    let e = err(PcaModel::read(&svm_p).map(drop));
    assert!(
        e.contains("is a linear SVM model (kind \"linear-svm\"); a PCA"),
        "{e}"
    );
    let e = err(LinearSvmModel::read(&pca_p).map(drop));
    assert!(
        e.contains(
            "is a PCA model (kind \"pca\"); a linear SVM (kind \"linear-svm\") was expected"
        ),
        "{e}"
    );
    let e = err(LinearSvmModel::read(&gmm_p).map(drop));
    assert!(
        e.contains("is a GMM model (kind \"gmm\"); a linear SVM"),
        "{e}"
    );
    // The mixture readers (the `encode` command's) name the file's kind.
    let e = err(Model::read(&pca_p).map(drop));
    assert!(
        e.contains(
            "is a PCA model (kind \"pca\"), not a GMM or MFA model (kind \"gmm\" or \"mfa\")"
        ),
        "{e}"
    );
    let e = err(GmmModel::read(&svm_p).map(drop));
    assert!(
        e.contains("is a linear SVM model (kind \"linear-svm\"), not a GMM or MFA model"),
        "{e}"
    );
    assert!(e.starts_with(&svm_p.display().to_string()), "{e}");
}

#[test]
fn corrupt_files_never_panic() {
    let x = data::<f32>(40, 5, 11);
    let pca = PcaParams::new(3).whiten(true).fit(x.view()).unwrap();
    let (xs, y) = svm_data::<f32>();
    let svm = LabelledSvm {
        svm: LinearSvcParams::default().fit(xs.view(), &y).unwrap(),
        classes: ClassLabels::Str(vec!["a".into(), "b".into(), "c".into()]),
        c: Some(2.0),
    };
    let dir = tempfile::tempdir().unwrap();
    let (pp, sp) = (dir.path().join("p"), dir.path().join("s"));
    pca.write(&pp, &BTreeMap::new()).unwrap();
    svm.write(&sp, &BTreeMap::new()).unwrap();
    let check = |bytes: &[u8]| {
        for e in [
            PcaModel::read_bytes(bytes, "F").err(),
            LinearSvmModel::read_bytes(bytes, "F").err(),
        ]
        .into_iter()
        .flatten()
        {
            assert!(e.to_string().starts_with("F: "), "{e}");
        }
    };
    for bytes in [std::fs::read(&pp).unwrap(), std::fs::read(&sp).unwrap()] {
        for len in 0..bytes.len() {
            check(&bytes[..len]);
        }
        let noise = noise(bytes.len() * 4, 13);
        for (i, v) in noise.iter().enumerate() {
            let mut b = bytes.clone();
            let pos = i % bytes.len();
            b[pos] = ((v + 1.0) * 128.0) as u8;
            check(&b);
        }
    }
}
