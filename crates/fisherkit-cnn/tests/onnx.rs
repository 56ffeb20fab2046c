//! `OnnxCnn` (feature `onnx`) on ONNX exports of the two built-in networks, written at test
//! time from the repository's weights by `scripts/export_onnx.py` (python3 with numpy and
//! onnx): the same score maps and descriptors as the built-in forward passes to 1e-4, dense
//! and exact patches, and one clear error for each kind of bad model. The tests that need the
//! exports skip with a message when python3 or onnx is missing, unless
//! `FISHERKIT_REQUIRE_PEERS=1` (then they fail). Install: `pip install onnx`.
#![cfg(feature = "onnx")]

use fisherkit_cnn::onnx::{OnnxCnn, OnnxError, OnnxOptions};
use fisherkit_cnn::{
    extract, global_descriptor, Backbone, Cnn, DescriptorParams, EfficientNetLite0, PatchMode,
    SqueezeNet,
};
use ndarray::{Array2, Array3};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;

/// The exports, written once per test binary; `None` (after a message) if python3 or onnx is
/// missing.
fn models() -> Option<&'static Path> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/export_onnx.py");
        common::run_peer_script(&script, "ONNX exports")
    })
    .as_ref()
    .map(|d| d.path())
}

fn model(name: &str) -> Option<PathBuf> {
    models().map(|d| d.join(format!("{name}.onnx")))
}

fn squeezenet() -> &'static SqueezeNet {
    static NET: OnceLock<SqueezeNet> = OnceLock::new();
    NET.get_or_init(|| SqueezeNet::builtin().unwrap())
}

fn effnet() -> &'static EfficientNetLite0 {
    static NET: OnceLock<EfficientNetLite0> = OnceLock::new();
    NET.get_or_init(|| EfficientNetLite0::builtin().unwrap())
}

/// A smooth synthetic photo (H, W, 3), RGB 0–255.
fn image(h: usize, w: usize, seed: u64) -> Array3<f32> {
    let s = seed as f32;
    Array3::from_shape_fn((h, w, 3), |(i, j, c)| {
        let (i, j, c) = (i as f32, j as f32, c as f32);
        let v = 127.5
            + 60.0 * (0.031 * i * (1.0 + 0.3 * c) + 0.017 * j + s).sin()
            + 50.0 * (0.023 * j * (1.0 + 0.2 * c) - 0.011 * i + 2.0 * s).cos();
        v.clamp(0.0, 255.0)
    })
}

/// max |a − b| / max(1, max |b|): the relative difference the tests bound by 1e-4.
fn rel_diff<D: ndarray::Dimension>(a: &ndarray::Array<f32, D>, b: &ndarray::Array<f32, D>) -> f32 {
    assert_eq!(a.shape(), b.shape());
    let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let d = a
        .iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    d / scale
}

fn assert_same_descriptors(got: &[Array2<f32>], want: &[Array2<f32>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: scales");
    for (s, (g, w)) in got.iter().zip(want).enumerate() {
        let d = rel_diff(g, w);
        eprintln!(
            "{what} scale {s}: {:?} descriptors, relative diff {d:.2e}",
            g.dim()
        );
        assert!(d <= 1e-4, "{what} scale {s}: descriptors differ by {d}");
    }
}

/// The export of a built-in network compared with it: geometry, preprocessing, score maps at
/// several sizes (odd, even, non-square) and dense descriptors.
fn check_dense_export<N: Cnn>(onnx: &OnnxCnn, builtin: &N, sizes: &[(usize, usize)]) {
    assert!(onnx.dense(), "{}", onnx.summary());
    assert_eq!(onnx.num_classes(), 1000);
    assert_eq!(onnx.input_side(), builtin.input_side());
    assert_eq!(
        onnx.cell_stride(),
        builtin.cell_stride(),
        "{}",
        onnx.summary()
    );
    // The probed smallest side can be below the built-in one (EfficientNet-Lite0's "same"
    // padding runs at any side; the built-in network asks for 32 px).
    assert!(
        onnx.min_input_side() <= builtin.min_input_side(),
        "{}",
        onnx.summary()
    );
    for n in [builtin.min_input_side(), 100, 227, 455] {
        assert_eq!(
            onnx.map_size(n, n + 7),
            builtin.map_size(n, n + 7),
            "map size at {n}"
        );
    }
    for (seed, &(h, w)) in sizes.iter().enumerate() {
        let img = image(h, w, seed as u64);
        let xo = onnx.preprocess(img.view()).unwrap();
        let xb = builtin.preprocess(img.view()).unwrap();
        let dp = rel_diff(&xo, &xb);
        assert!(dp <= 1e-6, "{h}x{w}: preprocessing differs by {dp}");
        let mo = onnx.score_map(xb.view()).unwrap();
        let mb = builtin.score_map(xb.view()).unwrap();
        let d = rel_diff(&mo, &mb);
        eprintln!(
            "{}: score map {:?} at {h}x{w}, relative diff {d:.2e}",
            builtin.name(),
            mo.dim()
        );
        assert!(d <= 1e-4, "{h}x{w}: score maps differ by {d}");
    }
    let img = image(150, 190, 7);
    let p = DescriptorParams {
        scales: vec![64, 96],
        ..DescriptorParams::default()
    };
    let got = extract(onnx, img.view(), &p).unwrap();
    let want = extract(builtin, img.view(), &p).unwrap();
    assert_same_descriptors(&got, &want, &format!("{} dense", builtin.name()));
    let g = global_descriptor(onnx, img.view()).unwrap();
    let w = global_descriptor(builtin, img.view()).unwrap();
    assert!(rel_diff(&g, &w) <= 1e-4, "global descriptor");
}

#[test]
fn squeezenet_export_gives_the_builtin_score_maps_and_dense_descriptors() {
    let Some(path) = model("squeezenet") else {
        return;
    };
    let net = OnnxCnn::load(&path, &OnnxOptions::squeezenet()).unwrap();
    assert_eq!(net.score_tensor(), "conv10.out");
    assert_eq!(net.min_input_side(), 29, "{}", net.summary());
    assert_eq!(net.map_size(28, 227), None);
    check_dense_export(&net, squeezenet(), &[(227, 227), (61, 97), (230, 245)]);
}

#[test]
fn efficientnet_export_gives_the_builtin_score_maps_and_dense_descriptors() {
    let Some(path) = model("efficientnet_lite0") else {
        return;
    };
    let net = OnnxCnn::load(&path, &OnnxOptions::efficientnet_lite0()).unwrap();
    assert_eq!(net.score_tensor(), "fc.out");
    assert_eq!(net.map_size(31, 33), Some((1, 2)));
    check_dense_export(&net, effnet(), &[(224, 224), (97, 130)]);
}

#[test]
fn exact_patches_match_the_builtin_networks() {
    let img = image(140, 170, 3);
    let p = DescriptorParams {
        scales: vec![96, 128],
        mode: PatchMode::Exact,
        stride: 0.5,
        ..DescriptorParams::default()
    };
    let Some(sq) = model("squeezenet") else {
        return;
    };
    let want = extract(squeezenet(), img.view(), &p).unwrap();
    let dense_model = OnnxCnn::load(&sq, &OnnxOptions::squeezenet()).unwrap();
    let got = extract(&dense_model, img.view(), &p).unwrap();
    assert_same_descriptors(&got, &want, "squeezenet exact");

    // A fixed 227x227 input: exact-only, and dense mode falls back to exact patches.
    let fixed = OnnxCnn::load(
        model("squeezenet_227").unwrap(),
        &OnnxOptions {
            input_side: None,
            ..OnnxOptions::squeezenet()
        },
    )
    .unwrap();
    assert!(!fixed.dense(), "{}", fixed.summary());
    assert_eq!(fixed.input_side(), 227);
    assert_eq!(fixed.score_tensor(), "scores");
    assert_eq!(fixed.map_size(227, 227), Some((1, 1)));
    assert_eq!(fixed.map_size(228, 227), None);
    let got = extract(&fixed, img.view(), &p).unwrap();
    assert_same_descriptors(&got, &want, "squeezenet_227 exact");
    let dense = DescriptorParams {
        mode: PatchMode::Dense,
        ..p.clone()
    };
    let got = extract(&fixed, img.view(), &dense).unwrap();
    assert_same_descriptors(&got, &want, "squeezenet_227 dense -> exact");

    let ef = model("efficientnet_lite0").unwrap();
    let net = OnnxCnn::load(&ef, &OnnxOptions::efficientnet_lite0()).unwrap();
    let p = DescriptorParams {
        scales: vec![128],
        ..p
    };
    let got = extract(&net, img.view(), &p).unwrap();
    let want = extract(effnet(), img.view(), &p).unwrap();
    assert_same_descriptors(&got, &want, "efficientnet exact");
}

#[test]
fn softmax_outputs_and_named_score_maps_give_the_same_descriptors() {
    let Some(sm) = model("squeezenet_softmax") else {
        return;
    };
    let img = image(120, 150, 5);
    let p = DescriptorParams {
        scales: vec![96],
        ..DescriptorParams::default()
    };
    let want = extract(squeezenet(), img.view(), &p).unwrap();
    // The probabilities `probs`: fisherkit reads the logits before the softmax.
    let net = OnnxCnn::load(&sm, &OnnxOptions::squeezenet()).unwrap();
    assert!(net.dense());
    assert_eq!(net.score_tensor(), "conv10.out");
    assert_same_descriptors(&extract(&net, img.view(), &p).unwrap(), &want, "softmax");
    // The score map named directly: a (1, 1000, h, w) output.
    let net = OnnxCnn::load(
        model("squeezenet").unwrap(),
        &OnnxOptions {
            output: Some("conv10.out".into()),
            ..OnnxOptions::squeezenet()
        },
    )
    .unwrap();
    assert!(net.dense());
    assert_same_descriptors(&extract(&net, img.view(), &p).unwrap(), &want, "conv10.out");
    // As a Backbone, with a name for run keys that changes with the preprocessing.
    let b = Backbone::from(net);
    assert!(b.kind().is_none());
    assert!(
        b.name().starts_with("onnx:squeezenet.onnx#"),
        "{}",
        b.name()
    );
    let other = OnnxCnn::load(model("squeezenet").unwrap(), &OnnxOptions::default()).unwrap();
    assert_ne!(b.name(), other.name());
}

/// Regression: at opset 18 ReduceMean takes its axes as an input, which PyTorch's TorchScript
/// exporter (`dynamo=False`) feeds from a `Constant` node; only attributes and initializers
/// were read, so the guide's fully convolutional VGG-16 exported that way was taken for an
/// exact-only model (one patch per 224-px crop instead of a score map).
#[test]
fn a_spatial_reduce_mean_with_constant_axes_is_dense() {
    let (Some(p), Some(plain)) = (model("axes_constant"), model("external_data")) else {
        return;
    };
    let net = OnnxCnn::load(&p, &OnnxOptions::default()).unwrap();
    assert!(net.dense(), "{}", net.summary());
    assert_eq!(net.score_tensor(), "map");
    let want = OnnxCnn::load(&plain, &OnnxOptions::default()).unwrap();
    let img = image(37, 52, 6);
    let p = DescriptorParams {
        scales: vec![24],
        ..DescriptorParams::default()
    };
    let got = extract(&net, img.view(), &p).unwrap();
    assert!(got[0].nrows() > 1);
    assert_same_descriptors(
        &got,
        &extract(&want, img.view(), &p).unwrap(),
        "axes_constant",
    );
}

/// Regression: the probe of the smallest input side ran the model on inputs too small for
/// it, and tract's matrix kernels crashed the whole process (SIGSEGV) on a 7×7 convolution
/// of a smaller input, as with VGG-16's fc6 as a convolution (the guide's `VggConv`). Sizes
/// whose inferred shapes are empty or negative are no longer run.
#[test]
fn a_convolution_larger_than_a_small_input_is_not_run() {
    let Some(p) = model("valid_conv") else { return };
    let net = OnnxCnn::load(&p, &OnnxOptions::default()).unwrap();
    assert!(net.dense(), "{}", net.summary());
    assert_eq!(net.min_input_side(), 7);
    assert_eq!(net.map_size(6, 40), None);
    assert_eq!(net.map_size(20, 30), Some((14, 24)));
    assert_eq!(net.cell_stride(), 1);
    let x = net.preprocess(image(20, 30, 4).view()).unwrap();
    assert_eq!(net.score_map(x.view()).unwrap().dim(), (10, 14, 24));
    let small = net.preprocess(image(6, 40, 4).view()).unwrap();
    assert!(net.score_map(small.view()).is_err());
}

/// Regression: PyTorch's dynamo exporter (its default since 2.9) writes the shapes of
/// intermediate tensors into the graph's `value_info` in the input's own symbols ((1, 64, H, W),
/// ...). tract took them as facts, which contradicted fisherkit's symbolic input (dense) and a
/// fixed 224x224 one (exact), so the guide's fully convolutional VGG-16 did not load
/// ("Impossible to unify Sym(H) with Val(224)"). fisherkit now ignores `value_info`.
#[test]
fn intermediate_shapes_in_value_info_do_not_stop_a_dense_model() {
    let (Some(vi), Some(plain)) = (model("value_info"), model("external_data")) else {
        return;
    };
    let net = OnnxCnn::load(&vi, &OnnxOptions::default()).unwrap();
    let want = OnnxCnn::load(&plain, &OnnxOptions::default()).unwrap();
    assert!(net.dense(), "{}", net.summary());
    assert_eq!(net.num_classes(), 4);
    assert_eq!(net.min_input_side(), 1);
    assert_eq!(net.map_size(30, 50), Some((30, 50)));
    let img = image(37, 52, 2);
    let p = DescriptorParams {
        scales: vec![24],
        ..DescriptorParams::default()
    };
    assert_same_descriptors(
        &extract(&net, img.view(), &p).unwrap(),
        &extract(&want, img.view(), &p).unwrap(),
        "value_info",
    );
    // Exact patches at a fixed side: the same value_info does not contradict it either.
    let exact = OnnxCnn::load(
        &vi,
        &OnnxOptions {
            exact_only: true,
            input_side: Some(32),
            ..OnnxOptions::default()
        },
    )
    .unwrap();
    assert!(!exact.dense());
    let x = exact.preprocess(image(32, 32, 3).view()).unwrap();
    let m = exact.score_map(x.view()).unwrap();
    assert_eq!(m.dim(), (4, 1, 1));
}

/// Regression: a model whose tensors live in an external-data file (PyTorch's exporter writes
/// `model.onnx` + `model.onnx.data`) got its name, the run key of the descriptor cache, from
/// the `.onnx` bytes alone, so new weights in the `.data` file kept the old name and a run
/// reused the old descriptors. The name now covers the external data too; a missing data file
/// is a one-line error naming both files.
#[test]
fn external_data_is_part_of_the_model_name() {
    let Some(src) = model("external_data") else {
        return;
    };
    let data = src.with_file_name("external_data.onnx.data");
    let copy = |bytes: &[u8]| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(&src, dir.path().join("external_data.onnx")).unwrap();
        std::fs::write(dir.path().join("external_data.onnx.data"), bytes).unwrap();
        dir
    };
    let same = copy(&std::fs::read(&data).unwrap());
    let mut other_weights = std::fs::read(&data).unwrap();
    other_weights[..4].copy_from_slice(&2.0f32.to_le_bytes()); // w[0, 0] 1 -> 2
    let other = copy(&other_weights);
    let load = |dir: &Path| {
        OnnxCnn::load(dir.join("external_data.onnx"), &OnnxOptions::default()).unwrap()
    };
    let (a, b, c) = (
        load(src.parent().unwrap()),
        load(same.path()),
        load(other.path()),
    );
    assert!(a.dense() && a.num_classes() == 4, "{}", a.summary());
    let x = a.preprocess(image(40, 40, 1).view()).unwrap();
    let (sa, sb, sc) = (
        a.score_map(x.view()).unwrap(),
        b.score_map(x.view()).unwrap(),
        c.score_map(x.view()).unwrap(),
    );
    assert_eq!(sa, sb);
    assert_ne!(sa, sc, "the weights are read from the .data file");
    assert_eq!(
        a.name(),
        b.name(),
        "same files in another folder: same name"
    );
    assert_ne!(
        a.name(),
        c.name(),
        "other weights in the .data file: another name"
    );
    // Without its data file.
    std::fs::remove_file(other.path().join("external_data.onnx.data")).unwrap();
    let (e, msg) = load_err(
        &other.path().join("external_data.onnx"),
        &OnnxOptions::default(),
    );
    assert!(matches!(e, OnnxError::ExternalData { .. }), "{e:?}");
    assert!(msg.contains("external_data.onnx.data"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
}

fn load_err(path: &Path, options: &OnnxOptions) -> (OnnxError, String) {
    let e = OnnxCnn::load(path, options).expect_err("must not load");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "the message names the file: {msg}"
    );
    (e, msg)
}

#[test]
fn a_missing_file_is_an_io_error() {
    let p = Path::new("/nonexistent/model.onnx");
    let (e, _) = load_err(p, &OnnxOptions::default());
    assert!(matches!(e, OnnxError::Io { .. }), "{e:?}");
}

#[test]
fn a_file_that_is_not_onnx_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.onnx");
    std::fs::write(&p, "this is a text file, not a protobuf\n").unwrap();
    let (e, msg) = load_err(&p, &OnnxOptions::default());
    assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e:?}");
    assert!(msg.contains("not a readable ONNX model"), "{msg}");
    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let (e, _) = load_err(&empty, &OnnxOptions::default());
    assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e:?}");
}

#[test]
fn a_truncated_model_is_rejected() {
    let Some(src) = model("squeezenet") else {
        return;
    };
    let bytes = std::fs::read(&src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for frac in [0.5, 0.999] {
        let p = dir.path().join(format!("truncated-{frac}.onnx"));
        std::fs::write(&p, &bytes[..(bytes.len() as f64 * frac) as usize]).unwrap();
        let (e, msg) = load_err(&p, &OnnxOptions::squeezenet());
        assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e:?}");
        assert!(msg.contains("truncated"), "{msg}");
    }
}

#[test]
fn a_model_without_a_4d_image_input_is_rejected() {
    let Some(p) = model("no_image_input") else {
        return;
    };
    let (e, msg) = load_err(&p, &OnnxOptions::default());
    assert!(matches!(e, OnnxError::NoImageInput { .. }), "{e:?}");
    assert!(msg.contains("(1, 1000)"), "names the input's shape: {msg}");
}

#[test]
fn a_missing_output_name_is_rejected() {
    let Some(p) = model("squeezenet") else { return };
    let o = OnnxOptions {
        output: Some("logits".into()),
        ..OnnxOptions::squeezenet()
    };
    let (e, msg) = load_err(&p, &o);
    assert!(matches!(e, OnnxError::MissingOutput { .. }), "{e:?}");
    assert!(
        msg.contains("`logits`") && msg.contains("`scores`"),
        "{msg}"
    );
}

#[test]
fn outputs_that_are_not_class_scores_are_rejected() {
    for name in ["one_class", "rank1"] {
        let Some(p) = model(name) else { return };
        let (e, msg) = load_err(&p, &OnnxOptions::default());
        assert!(
            matches!(e, OnnxError::NotClassifier { .. }),
            "{name}: {e:?}"
        );
        assert!(msg.contains("not a classifier"), "{msg}");
    }
}

#[test]
fn bad_options_are_rejected() {
    let Some(p) = model("squeezenet_227") else {
        return;
    };
    for o in [
        OnnxOptions {
            std: [0.2, 0.0, 0.2],
            ..OnnxOptions::default()
        },
        OnnxOptions {
            input_side: Some(224),
            ..OnnxOptions::default()
        },
    ] {
        let (e, _) = load_err(&p, &o);
        assert!(matches!(e, OnnxError::Options { .. }), "{e:?}");
    }
}
