use super::*;
use fisherkit::mfa::MfaParams;
use fisherkit::pca::PcaParams;
use ndarray::{array, Array2};

type Header = serde_json::Map<String, serde_json::Value>;
type Edit = Box<dyn Fn(&mut Header)>;

/// A small consistent classifier: 2 scales of 5-dim descriptors, PCA to 3,
/// a GMM (K = 2) at scale 0 and an MFA (K = 2, R = 1) at scale 1, parts
/// `gmm-fv:var` (6 values) at scale 0 and whitened `mfa-fs:loading` (6) at scale 1.
fn sample() -> ClassifierFile {
    let x = Array2::from_shape_fn((60, 5), |(i, j)| {
        ((i * 7 + j * 13) % 11) as f32 / 3.0 + (i % 3) as f32 * (j as f32 - 2.0)
    });
    let pca = PcaParams::new(3).fit(x.view()).unwrap();
    let z = pca.transform(x.view()).unwrap();
    let gmm = DiagGmm::new(
        array![0.4f32, 0.6],
        array![[0.0f32, 1.0, 0.0], [1.0, 0.0, 1.0]],
        array![[1.0f32, 2.0, 1.0], [0.5, 1.0, 1.5]],
    )
    .unwrap();
    let mfa = MfaParams::new(2, 1).seed(3).fit(z.view()).unwrap().model;
    let svm = LinearSvc::from_parts(
        Array2::from_shape_fn((3, 12), |(i, j)| (i as f32 - 1.0) * (j as f32 / 7.0)),
        array![0.1f32, -0.2, 0.3],
    )
    .unwrap();
    let part = |term: &str, scale, whitened| PartInfo {
        term: term.into(),
        scale,
        width: 6,
        whitened,
    };
    ClassifierFile {
        info: ClassifierInfo {
            input: InputInfo {
                cnn: Some(CnnInfo {
                    name: "squeezenet1_1".into(),
                    weights_hash: Some("0123456789abcdef".into()),
                    onnx_path: None,
                }),
                scales: vec![96, 128],
                patch_mode: "dense".into(),
                stride: 0.5,
                max_image_side: Some(640),
                scale_names: vec!["96".into(), "128".into()],
                descriptor_dim: 5,
            },
            encoder: "gmm-fv:var&mfa-fs:loading".into(),
            whitened: true,
            parts: vec![
                part("gmm-fv:var", 0, false),
                part("mfa-fs:loading", 1, true),
            ],
            power: 0.5,
            l2: true,
            classes: vec!["bedroom".into(), "kitchen".into(), "office".into()],
            c: 0.1,
            cv_accuracy: 0.5,
            training: serde_json::json!({"seed": 0}),
        },
        pcas: vec![pca.clone(), pca],
        gmms: vec![Some(gmm), None],
        mfas: vec![None, Some(mfa)],
        whitening: vec![None, Some(array![1.0f32, 2.0, 0.5, 0.25, 3.0, 1.0])],
        svm,
    }
}

fn written(f: &ClassifierFile) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("scene.safetensors");
    write_classifier(&p, f).unwrap();
    (dir, p)
}

#[test]
fn round_trip_keeps_every_array_and_the_description() {
    let f = sample();
    let (_d, p) = written(&f);
    let g = read_classifier(&p).unwrap();
    assert_eq!(g.info, f.info);
    for (a, b) in f.pcas.iter().zip(&g.pcas) {
        assert_eq!(a.components(), b.components());
        assert_eq!(a.mean(), b.mean());
    }
    assert_eq!(g.gmms, f.gmms);
    assert_eq!(
        g.mfas[1].as_ref().unwrap().loadings(),
        f.mfas[1].as_ref().unwrap().loadings()
    );
    assert_eq!(g.whitening, f.whitening);
    assert_eq!(g.svm.coef(), f.svm.coef());
    assert_eq!(g.svm.intercept(), f.svm.intercept());
    assert_eq!(crate::read_model_kind(&p).unwrap(), CLASSIFIER_KIND);
    // Deterministic bytes.
    let (_e, q) = written(&f);
    assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
}

fn read_err(bytes: &[u8]) -> String {
    read_classifier_bytes(bytes, Path::new("m.safetensors"))
        .unwrap_err()
        .to_string()
}

#[test]
fn truncated_files_are_one_clear_error() {
    let (_d, p) = written(&sample());
    let bytes = std::fs::read(&p).unwrap();
    for cut in [0, 5, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        let m = read_err(&bytes[..cut]);
        assert!(m.starts_with("m.safetensors: "), "{cut}: {m}");
        assert!(
            m.contains("safetensors") || m.contains("bytes"),
            "{cut}: {m}"
        );
    }
}

/// Rewrites the metadata JSON of `bytes` with `edit` (tensors kept).
fn with_meta(
    bytes: &[u8],
    edit: impl Fn(&mut serde_json::Map<String, serde_json::Value>),
) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(header.as_object_mut().unwrap());
    let mut json = serde_json::to_vec(&header).unwrap();
    json.resize(json.len().div_ceil(8) * 8, b' ');
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

fn meta_mut(
    h: &mut serde_json::Map<String, serde_json::Value>,
) -> &mut serde_json::Map<String, serde_json::Value> {
    h.get_mut("__metadata__").unwrap().as_object_mut().unwrap()
}

#[test]
fn other_versions_kinds_and_tampered_descriptions_are_refused() {
    let (_d, p) = written(&sample());
    let bytes = std::fs::read(&p).unwrap();
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|h| {
                meta_mut(h).insert("classifier_version".into(), "2".into());
            }),
            "scene-classifier version \"2\"",
        ),
        (
            Box::new(|h| {
                meta_mut(h).insert("kind".into(), "gmm".into());
            }),
            "is a GMM model",
        ),
        (
            Box::new(|h| {
                meta_mut(h).remove("classifier");
            }),
            "missing metadata key `classifier`",
        ),
        (
            Box::new(|h| {
                let m = meta_mut(h);
                let s = m["classifier"]
                    .as_str()
                    .unwrap()
                    .replace("\"width\":6", "\"width\":7");
                m.insert("classifier".into(), s.into());
            }),
            "has 6 values for part",
        ),
        (
            Box::new(|h| {
                let m = meta_mut(h);
                let s = m["classifier"]
                    .as_str()
                    .unwrap()
                    .replace("\"office\"", "\"bedroom\"");
                m.insert("classifier".into(), s.into());
            }),
            "appears twice",
        ),
        (
            Box::new(|h| {
                let m = meta_mut(h);
                let s = m["classifier"]
                    .as_str()
                    .unwrap()
                    .replace("\"descriptor_dim\":5", "\"descriptor_dim\":6");
                m.insert("classifier".into(), s.into());
            }),
            "the PCA of scale 0 reads 5 values, the descriptors have 6",
        ),
    ];
    for (edit, want) in cases {
        let m = read_err(&with_meta(&bytes, edit));
        assert!(m.contains(want), "want {want}: {m}");
    }
}

#[test]
fn tampered_tensor_shapes_are_refused() {
    let (_d, p) = written(&sample());
    let bytes = std::fs::read(&p).unwrap();
    // svm.bias (3) declared as (1, 3): same bytes, another rank.
    let m = read_err(&with_meta(&bytes, |h| {
        h.get_mut("svm.bias").unwrap()["shape"] = serde_json::json!([1, 3]);
    }));
    assert!(m.contains("tensor `svm.bias` has shape (1, 3)"), "{m}");
    // The GMM's means declared as (3, 2) instead of (2, 3).
    let m = read_err(&with_meta(&bytes, |h| {
        h.get_mut("gmm.0.means").unwrap()["shape"] = serde_json::json!([3, 2]);
    }));
    assert!(m.contains("GMM of scale 0"), "{m}");
    // A tensor renamed: the one the parts need is missing, another is unexpected.
    let m = read_err(&with_meta(&bytes, |h| {
        let t = h.remove("whitening.1").unwrap();
        h.insert("whitening.9".into(), t);
    }));
    assert!(m.contains("unexpected tensor `whitening.9`"), "{m}");
    let m = read_err(&with_meta(&bytes, |h| {
        let t = h.remove("svm.bias").unwrap();
        h.insert("svm.biases".into(), t);
    }));
    assert!(m.contains("missing tensor `svm.bias`"), "{m}");
}

#[test]
fn inconsistent_classifiers_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.safetensors");
    let mut f = sample();
    f.info.classes.pop();
    let m = write_classifier(&p, &f).unwrap_err().to_string();
    assert!(m.contains("2 class labels for 3 classes"), "{m}");
    let mut f = sample();
    f.whitening[1] = None;
    let m = write_classifier(&p, &f).unwrap_err().to_string();
    assert!(m.contains("missing tensor `whitening.1`"), "{m}");
    assert!(!p.exists());
}
