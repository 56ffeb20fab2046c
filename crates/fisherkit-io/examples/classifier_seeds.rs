//! Writes the seed corpus of the `classifier` fuzz target: a few small valid
//! scene-classifier files of different shapes (GMM and/or MFA background
//! models, whitened parts or not, one or two scales, images or descriptor
//! files; tiny dimensions, so each is a few kB) plus truncated, bit-flipped
//! and tampered variants. Called by `fuzz/seed_corpora.py`; by hand:
//!
//!     cargo run -p fisherkit-io --example classifier_seeds -- fuzz/corpus-raw/classifier
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::pca::Pca;
use fisherkit::svm::LinearSvc;
use fisherkit_io::classifier::{CnnInfo, InputInfo, PartInfo};
use fisherkit_io::{write_classifier, ClassifierFile, ClassifierInfo, MfaArrays};
use ndarray::{array, Array1, Array2, Array3};
use std::path::{Path, PathBuf};

/// Descriptor width D₀ and PCA width d of every seed.
const D0: usize = 4;
const D: usize = 2;

/// A PCA from D₀ = 4 to d = 2 with orthonormal rows (a rotation of two axes).
fn pca(turn: f32) -> Pca<f32> {
    let (c, s) = (turn.cos(), turn.sin());
    Pca::from_parts(
        array![0.5f32, -1.0, 0.25, 2.0],
        array![[c, s, 0.0, 0.0], [0.0, 0.0, -s, c]],
        array![3.0f64, 1.5],
        false,
    )
    .unwrap()
}

fn gmm() -> DiagGmm<f32> {
    DiagGmm::new(
        array![0.25f32, 0.75],
        array![[0.0f32, 1.0], [-1.0, 0.5]],
        array![[1.0f32, 2.0], [0.5, 1.5]],
    )
    .unwrap()
}

/// An MFA with K = 2, d = 2, R = 1; `shared` picks a (1, d) ψ over a (K, d) one.
fn mfa(shared: bool) -> Mfa<f32> {
    let psi = if shared {
        array![[0.5f32, 0.25]]
    } else {
        array![[0.5f32, 0.25], [1.0, 0.75]]
    };
    MfaArrays {
        weights: array![0.5f32, 0.5],
        means: array![[0.0f32, 0.0], [1.0, -1.0]],
        loadings: Array3::from_shape_fn((2, D, 1), |(k, j, _)| 0.5 + k as f32 - j as f32 * 0.25),
        psi,
    }
    .to_mfa()
    .unwrap()
}

fn svm(classes: usize, width: usize) -> LinearSvc<f32> {
    LinearSvc::from_parts(
        Array2::from_shape_fn((classes, width), |(i, j)| {
            (i as f32 - 0.5) * ((j % 5) as f32 - 2.0) / 4.0
        }),
        Array1::from_shape_fn(classes, |i| 0.1 * i as f32 - 0.05),
    )
    .unwrap()
}

fn part(term: &str, scale: usize, width: usize, whitened: bool) -> PartInfo {
    PartInfo {
        term: term.into(),
        scale,
        width,
        whitened,
    }
}

fn squeezenet() -> Option<CnnInfo> {
    Some(CnnInfo {
        name: "squeezenet1_1".into(),
        weights_hash: Some("0123456789abcdef".into()),
        onnx_path: None,
    })
}

fn image_input(cnn: Option<CnnInfo>, scales: &[u32]) -> InputInfo {
    InputInfo {
        cnn,
        scales: scales.to_vec(),
        patch_mode: "dense".into(),
        stride: 0.5,
        max_image_side: Some(640),
        scale_names: scales.iter().map(u32::to_string).collect(),
        descriptor_dim: D0,
    }
}

fn classifier(
    input: InputInfo,
    encoder: &str,
    parts: Vec<PartInfo>,
    gmms: Vec<Option<DiagGmm<f32>>>,
    mfas: Vec<Option<Mfa<f32>>>,
    classes: &[&str],
) -> ClassifierFile {
    let n_scales = input.scale_names.len();
    let width = parts.iter().map(|p| p.width).sum();
    let whitening = parts
        .iter()
        .map(|p| {
            p.whitened
                .then(|| Array1::from_shape_fn(p.width, |j| 0.25 + j as f32))
        })
        .collect();
    ClassifierFile {
        info: ClassifierInfo {
            input,
            encoder: encoder.into(),
            whitened: parts.iter().any(|p| p.whitened),
            parts,
            power: 0.5,
            l2: true,
            classes: classes.iter().map(|c| c.to_string()).collect(),
            c: 0.1,
            cv_accuracy: 0.75,
            training: serde_json::json!({"seed": 0, "train_per_class": 2}),
        },
        pcas: (0..n_scales).map(|s| pca(0.3 + s as f32)).collect(),
        gmms,
        mfas,
        whitening,
        svm: svm(classes.len(), width),
    }
}

/// The valid seeds, by file name. Widths: `gmm-fv:var` 2·K·d = 8,
/// `mfa-fs:loading` K·d·R = 4, `cnn-global` D₀ = 4.
fn seeds() -> Vec<(&'static str, ClassifierFile)> {
    let two = ["bedroom", "kitchen"];
    let three = ["bedroom", "kitchen", "office"];
    vec![
        (
            "gmm_1scale",
            classifier(
                image_input(squeezenet(), &[96]),
                "gmm-fv:var",
                vec![part("gmm-fv:var", 0, 8, false)],
                vec![Some(gmm())],
                vec![None],
                &two,
            ),
        ),
        (
            "gmm_mfa_whitened_2scales",
            classifier(
                image_input(squeezenet(), &[96, 128]),
                "gmm-fv:var&mfa-fs:loading",
                vec![
                    part("gmm-fv:var", 0, 8, false),
                    part("mfa-fs:loading", 1, 4, true),
                ],
                vec![Some(gmm()), None],
                vec![None, Some(mfa(true))],
                &three,
            ),
        ),
        (
            "mfa_whitened_2scales",
            classifier(
                image_input(squeezenet(), &[64, 96]),
                "mfa-fs:loading",
                vec![
                    part("mfa-fs:loading", 0, 4, true),
                    part("mfa-fs:loading", 1, 4, true),
                ],
                vec![None, None],
                vec![Some(mfa(true)), Some(mfa(false))],
                &two,
            ),
        ),
        (
            "mfa_descriptor_file",
            classifier(
                InputInfo {
                    cnn: None,
                    scales: vec![],
                    patch_mode: "dense".into(),
                    stride: 0.5,
                    max_image_side: None,
                    scale_names: vec!["file".into()],
                    descriptor_dim: D0,
                },
                "mfa-fs:loading",
                vec![part("mfa-fs:loading", 0, 4, false)],
                vec![None],
                vec![Some(mfa(false))],
                &three,
            ),
        ),
        (
            "gmm_mfa_cnn_global_onnx",
            classifier(
                image_input(
                    Some(CnnInfo {
                        name: "onnx:net.onnx#00ff00ff00ff00ff".into(),
                        weights_hash: None,
                        onnx_path: Some("models/net.onnx".into()),
                    }),
                    &[96],
                ),
                "gmm-fv:var&mfa-fs:loading&cnn-global",
                vec![
                    part("gmm-fv:var", 0, 8, false),
                    part("mfa-fs:loading", 0, 4, false),
                    part("cnn-global", 0, 4, false),
                ],
                vec![Some(gmm())],
                vec![Some(mfa(true))],
                &two,
            ),
        ),
        (
            "cnn_global_only",
            classifier(
                image_input(squeezenet(), &[227]),
                "cnn-global",
                vec![part("cnn-global", 0, 4, false)],
                vec![None],
                vec![None],
                &two,
            ),
        ),
    ]
}

/// Rewrites the safetensors header of `bytes` with `edit` (data kept).
fn with_header(bytes: &[u8], edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let mut json = serde_json::to_vec(&header).unwrap();
    json.resize(json.len().div_ceil(8) * 8, b' ');
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

/// Overwrites the f32 at index `i` of tensor `name` in `bytes`.
fn with_value(bytes: &[u8], name: &str, i: usize, v: f32) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let start = header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    let at = 8 + n + start + 4 * i;
    let mut out = bytes.to_vec();
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
    out
}

fn main() {
    let out: PathBuf = std::env::args_os().nth(1).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus-raw/classifier"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&out).unwrap();
    let put = |name: &str, bytes: &[u8]| std::fs::write(out.join(name), bytes).unwrap();
    let mut written = 0;
    for (name, f) in seeds() {
        let p = out.join(name);
        write_classifier(&p, &f).unwrap();
        written += 1;
        assert!(
            std::fs::metadata(&p).unwrap().len() < 8192,
            "{name} is over 8 kB"
        );
    }
    // Near misses, all derived from the two-scale GMM + MFA seed.
    let good = std::fs::read(out.join("gmm_mfa_whitened_2scales")).unwrap();
    let header_end = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    for cut in [
        7,
        8,
        header_end / 2,
        header_end,
        good.len() - 4,
        good.len() - 1,
    ] {
        put(&format!("truncated_{cut}"), &good[..cut]);
    }
    for at in [3, 40, header_end - 30, header_end + 5, good.len() - 2] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        put(&format!("bitflip_{at}"), &b);
    }
    let meta = |key: &'static str, value: &'static str| {
        move |h: &mut serde_json::Value| h["__metadata__"][key] = value.into()
    };
    put(
        "version_2",
        &with_header(&good, meta("classifier_version", "2")),
    );
    put("kind_gmm", &with_header(&good, meta("kind", "gmm")));
    put(
        "no_description",
        &with_header(&good, |h| {
            h["__metadata__"]
                .as_object_mut()
                .unwrap()
                .remove("classifier");
        }),
    );
    put(
        "svm_claims_1e12_columns",
        &with_header(&good, |h| {
            h["svm.weights"]["shape"] = serde_json::json!([3, 1_000_000_000_000u64])
        }),
    );
    put(
        "whitening_renamed",
        &with_header(&good, |h| {
            let o = h.as_object_mut().unwrap();
            let t = o.remove("whitening.1").unwrap();
            o.insert("whitening.7".into(), t);
        }),
    );
    put("svm_bias_nan", &with_value(&good, "svm.bias", 1, f32::NAN));
    put(
        "svm_weight_inf",
        &with_value(&good, "svm.weights", 0, f32::INFINITY),
    );
    put(
        "pca_mean_nan",
        &with_value(&good, "pca.0.mean", 2, f32::NAN),
    );
    put(
        "whitening_negative",
        &with_value(&good, "whitening.1", 0, -1.0),
    );
    put(
        "gmm_weight_zero",
        &with_value(&good, "gmm.0.weights", 0, 0.0),
    );
    println!(
        "{written} valid classifier seeds and their variants in {}",
        out.display()
    );
}
