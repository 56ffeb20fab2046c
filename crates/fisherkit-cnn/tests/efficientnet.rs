//! EfficientNet-Lite0 without peers: the forward pass against a committed fixture of the
//! independent numpy network (tests/effnet_oracle.py --fixture, computed from the original
//! unfolded PyTorch weights), weights and input validation, the common `Cnn`/`Backbone`
//! interface, and the descriptors built on it.

use fisherkit_cnn::{
    extract, extract_batch, global_descriptor, log_softmax, Backbone, BackboneKind, Cnn, CnnError,
    DescriptorParams, EfficientNetLite0, PatchMode, SqueezeNet,
};
use ndarray::{Array3, Axis};
use ndarray_npy::read_npy;
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::sync::OnceLock;

const WEIGHTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../data/efficientnet-lite0/efficientnet_lite0.safetensors"
);

fn net() -> &'static EfficientNetLite0 {
    static NET: OnceLock<EfficientNetLite0> = OnceLock::new();
    NET.get_or_init(|| EfficientNetLite0::load(WEIGHTS).unwrap())
}

/// The input of `synthetic_input()` in tests/effnet_oracle.py.
fn synthetic_input(h: usize, w: usize) -> Array3<f32> {
    Array3::from_shape_fn((3, h, w), |(c, i, j)| {
        ((c * 7 + i * i * 3 + j * 5 + i * j) % 32) as f32 / 16.0 - 1.0
    })
}

#[test]
fn score_map_matches_the_numpy_fixture() {
    let want: Array3<f32> = read_npy(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/effnet_synthetic.npy"
    ))
    .unwrap();
    let got = net().forward(synthetic_input(40, 70).view()).unwrap();
    assert_eq!(got.dim(), (1000, 2, 3));
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let err = (&got - &want).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
    eprintln!("fixture 40x70: max |Δ| {err:.2e} (max |score| {scale:.1})");
    assert!(err <= 1e-4 * scale, "score map differs by {err}");
}

/// Re-serialises the shipped weights after `edit` (drop or replace tensors).
fn edited(edit: impl Fn(&str, TensorView<'_>) -> Option<(Vec<usize>, Vec<u8>)>) -> Vec<u8> {
    let bytes = std::fs::read(WEIGHTS).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .filter_map(|(n, v)| edit(&n, v).map(|(s, d)| (n, s, d)))
        .collect();
    let views: Vec<(String, TensorView<'_>)> = kept
        .iter()
        .map(|(n, s, d)| {
            let v = TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap();
            (n.clone(), v)
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn bad_weights_give_clear_errors() {
    let keep = |_: &str, v: TensorView<'_>| Some((v.shape().to_vec(), v.data().to_vec()));
    assert!(EfficientNetLite0::from_safetensors_bytes(&edited(keep)).is_ok());

    let drop = |n: &str, v: TensorView<'_>| {
        (n != "blocks.7.depthwise.weight").then(|| (v.shape().to_vec(), v.data().to_vec()))
    };
    let e = EfficientNetLite0::from_safetensors_bytes(&edited(drop)).unwrap_err();
    assert!(
        matches!(&e, CnnError::MissingTensor(n) if n == "blocks.7.depthwise.weight"),
        "{e}"
    );

    // fc as (1000, 1280) reshaped to (1280, 1000): same bytes, wrong shape.
    let transpose = |n: &str, v: TensorView<'_>| {
        let shape = if n == "fc.weight" {
            vec![1280, 1000]
        } else {
            v.shape().to_vec()
        };
        Some((shape, v.data().to_vec()))
    };
    let e = EfficientNetLite0::from_safetensors_bytes(&edited(transpose)).unwrap_err();
    assert!(
        matches!(&e, CnnError::TensorShape { name, got, expected }
            if name == "fc.weight" && got == &[1280, 1000] && expected == &[1000, 1280]),
        "{e}"
    );

    // A 3×3 kernel where the architecture has a 5×5 one.
    let small = |n: &str, v: TensorView<'_>| {
        if n == "blocks.3.depthwise.weight" {
            let c = v.shape()[0];
            Some((vec![c, 1, 3, 3], v.data()[..c * 9 * 4].to_vec()))
        } else {
            Some((v.shape().to_vec(), v.data().to_vec()))
        }
    };
    let e = EfficientNetLite0::from_safetensors_bytes(&edited(small)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("blocks.3.depthwise.weight") && msg.contains("[144, 1, 5, 5]"),
        "{msg}"
    );

    let nan = |n: &str, v: TensorView<'_>| {
        let mut d = v.data().to_vec();
        if n == "head.bias" {
            d[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
        }
        Some((v.shape().to_vec(), d))
    };
    let e = EfficientNetLite0::from_safetensors_bytes(&edited(nan)).unwrap_err();
    assert!(
        matches!(&e, CnnError::NonFiniteWeight { name, index: 1 } if name == "head.bias"),
        "{e}"
    );

    // SqueezeNet's file is not EfficientNet's.
    let sq = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/squeezenet/squeezenet1_1.safetensors"
    ))
    .unwrap();
    assert!(matches!(
        EfficientNetLite0::from_safetensors_bytes(&sq),
        Err(CnnError::MissingTensor(n)) if n == "stem.weight"
    ));
    assert!(matches!(
        EfficientNetLite0::from_safetensors_bytes(b"garbage"),
        Err(CnnError::Format(_))
    ));
    let e = EfficientNetLite0::load("/nonexistent/effnet.safetensors").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/effnet.safetensors"));
}

#[test]
fn builtin_weights_equal_the_file_and_input_validation() {
    let b = EfficientNetLite0::builtin().unwrap();
    let x = synthetic_input(32, 33);
    let got = b.forward(x.view()).unwrap();
    assert_eq!(got.dim(), (1000, 1, 2));
    assert_eq!(got, net().forward(x.view()).unwrap());
    for shape in [(1, 64, 64), (3, 31, 64), (3, 64, 31), (4, 64, 64)] {
        let e = net()
            .forward(Array3::<f32>::zeros(shape).view())
            .unwrap_err();
        assert!(matches!(e, CnnError::NetInputShape { min: 32, .. }), "{e}");
    }
    let mut x = Array3::<f32>::zeros((3, 40, 40));
    x[[1, 3, 9]] = f32::NAN;
    assert!(matches!(
        net().forward(x.view()),
        Err(CnnError::NonFiniteInput(1, 3, 9))
    ));
}

#[test]
fn backbone_kinds_names_and_geometry() {
    for (s, k) in [
        ("squeezenet", BackboneKind::SqueezeNet),
        ("squeezenet1_1", BackboneKind::SqueezeNet),
        ("efficientnet-lite0", BackboneKind::EfficientNetLite0),
        ("efficientnet_lite0", BackboneKind::EfficientNetLite0),
    ] {
        assert_eq!(s.parse::<BackboneKind>().unwrap(), k);
    }
    assert!("resnet"
        .parse::<BackboneKind>()
        .unwrap_err()
        .contains("resnet"));
    assert_eq!(BackboneKind::default(), BackboneKind::EfficientNetLite0);
    let e = Backbone::builtin(BackboneKind::EfficientNetLite0).unwrap();
    let s = Backbone::builtin(BackboneKind::SqueezeNet).unwrap();
    assert_eq!(
        (e.name(), s.name()),
        ("efficientnet_lite0", "squeezenet1_1")
    );
    assert_eq!(
        (
            e.input_side(),
            e.cell_stride(),
            e.receptive_field(),
            e.min_input_side()
        ),
        (224, 32, 851, 32)
    );
    assert_eq!(
        (
            s.input_side(),
            s.cell_stride(),
            s.receptive_field(),
            s.min_input_side()
        ),
        (227, 16, 207, 29)
    );
    assert_eq!(e.map_size(224, 224), Some((7, 7)));
    assert_eq!(s.map_size(227, 227), Some((13, 13)));
    assert_eq!(SqueezeNet::builtin().unwrap().name(), "squeezenet1_1");
}

#[test]
fn descriptors_through_the_backbone() {
    let bb = Backbone::from(net().clone());
    let img = Array3::from_shape_fn((150, 200, 3), |(i, j, c)| {
        ((i * 3 + j * 5 + c * 40) % 256) as f32
    });
    // Dense: the patch side 150 maps the working image to 224 × 299 → 7 × 10 cells, each row
    // the log-softmax of that cell of the score map of the same input.
    let params = DescriptorParams {
        scales: vec![150, 75],
        ..DescriptorParams::default()
    };
    let d = extract(&bb, img.view(), &params).unwrap();
    assert_eq!(d[0].dim(), (7 * 10, 1000));
    assert_eq!(d[1].dim(), (14 * 19, 1000)); // 448 × 597
    let x = bb
        .preprocess(
            fisherkit_cnn::resize_bilinear(img.view(), 224, 299)
                .unwrap()
                .view(),
        )
        .unwrap();
    let map = bb.score_map(x.view()).unwrap();
    assert_eq!(map.dim(), (1000, 7, 10));
    for (cell, row) in d[0].axis_iter(Axis(0)).enumerate() {
        let want = log_softmax(map.slice(ndarray::s![.., cell / 10, cell % 10]));
        let err = (&row - &want).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
        assert!(err < 1e-4, "cell {cell}: {err}");
    }
    // The same through the concrete type and in a batch.
    assert_eq!(extract(net(), img.view(), &params).unwrap(), d);
    let batch = extract_batch(&bb, &[img.view(), img.view()], &params).unwrap();
    for b in &batch {
        for (a, c) in b.iter().zip(&d) {
            let err = (a - c).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
            assert!(err < 1e-5);
        }
    }
    // Exact: 100-px crops with step 50 of a 150 × 200 image: a 2 × 3 grid from (0, 0).
    let exact = DescriptorParams {
        scales: vec![100],
        mode: PatchMode::Exact,
        ..DescriptorParams::default()
    };
    let e = extract(&bb, img.view(), &exact).unwrap();
    assert_eq!(e[0].dim(), (6, 1000));
    let crop = img.slice(ndarray::s![0..100, 0..100, ..]);
    let g = global_descriptor(&bb, crop).unwrap();
    let err = (&e[0].row(0) - &g)
        .mapv(f32::abs)
        .fold(0.0f32, |m, &v| m.max(v));
    assert!(
        err < 1e-5,
        "exact patch vs global descriptor of the crop: {err}"
    );
    assert!((g.mapv(f32::exp).sum() - 1.0).abs() < 1e-4);
}
