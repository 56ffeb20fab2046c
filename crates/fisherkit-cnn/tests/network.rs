//! Weights validation, input validation, descriptors' geometry and numerics (no peers needed).

use fisherkit_cnn::{
    dense_input_size, extract, extract_batch, global_descriptor, log_softmax, CnnError,
    DescriptorParams, PatchMode, SqueezeNet,
};
use ndarray::{array, Array1, Array2, Array3, ArrayView1};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::sync::OnceLock;

const WEIGHTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../data/squeezenet/squeezenet1_1.safetensors"
);

fn net() -> &'static SqueezeNet {
    static NET: OnceLock<SqueezeNet> = OnceLock::new();
    NET.get_or_init(|| SqueezeNet::load(WEIGHTS).unwrap())
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
            (
                n.clone(),
                TensorView::new(safetensors::Dtype::F32, s.clone(), d).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn weights_validation_names_the_problem() {
    let keep = |_: &str, v: TensorView<'_>| Some((v.shape().to_vec(), v.data().to_vec()));
    assert!(SqueezeNet::from_safetensors_bytes(&edited(keep)).is_ok());

    let drop = |n: &str, v: TensorView<'_>| {
        (n != "fire5.expand3x3.weight").then(|| (v.shape().to_vec(), v.data().to_vec()))
    };
    let e = SqueezeNet::from_safetensors_bytes(&edited(drop)).unwrap_err();
    assert!(
        matches!(&e, CnnError::MissingTensor(n) if n == "fire5.expand3x3.weight"),
        "{e}"
    );

    let reshape = |n: &str, v: TensorView<'_>| {
        if n == "conv10.bias" {
            Some((vec![999], v.data()[..999 * 4].to_vec()))
        } else {
            Some((v.shape().to_vec(), v.data().to_vec()))
        }
    };
    let e = SqueezeNet::from_safetensors_bytes(&edited(reshape)).unwrap_err();
    assert!(
        e.to_string().contains("conv10.bias") && e.to_string().contains("999"),
        "{e}"
    );

    let nan = |n: &str, v: TensorView<'_>| {
        let mut d = v.data().to_vec();
        if n == "fire2.squeeze1x1.bias" {
            d[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        }
        Some((v.shape().to_vec(), d))
    };
    let e = SqueezeNet::from_safetensors_bytes(&edited(nan)).unwrap_err();
    assert!(
        matches!(&e, CnnError::NonFiniteWeight { name, index: 2 } if name == "fire2.squeeze1x1.bias"),
        "{e}"
    );

    assert!(matches!(
        SqueezeNet::from_safetensors_bytes(b"garbage"),
        Err(CnnError::Format(_))
    ));
    let e = SqueezeNet::load("/nonexistent/weights.safetensors").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/weights.safetensors"));
}

#[test]
fn builtin_weights_equal_the_file() {
    let b = SqueezeNet::builtin().unwrap();
    let x = Array3::from_shape_fn((3, 29, 31), |(c, i, j)| ((c + i * j) % 17) as f32 - 8.0);
    assert_eq!(
        b.forward(x.view()).unwrap(),
        net().forward(x.view()).unwrap()
    );
}

#[test]
fn input_validation() {
    for shape in [(1, 64, 64), (3, 28, 64), (3, 64, 28), (4, 64, 64)] {
        let x = Array3::<f32>::zeros(shape);
        assert!(matches!(
            net().forward(x.view()),
            Err(CnnError::InputShape(_))
        ));
    }
    let mut x = Array3::<f32>::zeros((3, 29, 29));
    assert_eq!(net().forward(x.view()).unwrap().dim(), (1000, 1, 1));
    x[[2, 5, 7]] = f32::INFINITY;
    assert!(matches!(
        net().forward(x.view()),
        Err(CnnError::NonFiniteInput(2, 5, 7))
    ));
    let bad = Array3::from_elem((40, 40, 3), f32::NAN);
    assert!(global_descriptor(net(), bad.view()).is_err());
    assert!(matches!(
        extract_batch(net(), &[bad.view()], &DescriptorParams::default()),
        Err(CnnError::BatchImage { index: 0, .. })
    ));
}

#[test]
fn score_map_size_formula() {
    // f(n) = p(p(p(ceil(n/2)))), p(m) = floor((m-3)/2)+1, computed here independently.
    let p = |m: i64| if m >= 3 { (m - 3) / 2 + 1 } else { 0 };
    for n in [29usize, 30, 31, 100, 226, 227, 228, 454, 681] {
        let want = p(p(p((n as i64 + 1) / 2))) as usize;
        assert_eq!(
            SqueezeNet::score_map_size(n, 227),
            Some((want, 13)),
            "n = {n}"
        );
    }
    assert_eq!(SqueezeNet::score_map_size(28, 227), None);
}

#[test]
fn log_softmax_is_stable_and_exact() {
    let s = array![0.0f32, 1e4, -1e4, 5e3];
    let l = log_softmax(s.view());
    assert!(l.iter().all(|v| v.is_finite()));
    assert_eq!(l[1], 0.0);
    assert_eq!(l[0], -1e4);
    assert_eq!(l[2], -2e4);
    let s = array![1.0f32, 2.0, 3.0];
    let lse = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
    for (v, si) in log_softmax(s.view()).iter().zip(s.iter()) {
        assert!((*v as f64 - (*si as f64 - lse)).abs() < 1e-6);
    }
}

fn synthetic_image(h: usize, w: usize) -> Array3<f32> {
    // Four quadrants of different structure: stripes, checkerboard, smooth colour, rings.
    Array3::from_shape_fn((h, w, 3), |(y, x, c)| {
        let (top, left) = (y < h / 2, x < w / 2);
        match (top, left) {
            (true, true) => 255.0 * (((x / 6) % 2) as f32),
            (true, false) => 255.0 * ((((x / 10) + (y / 10)) % 2) as f32),
            (false, true) => (x * 2 + y + c * 70) as f32 % 256.0,
            (false, false) => {
                let r = (((y as f32 - 0.75 * h as f32).powi(2)
                    + (x as f32 - 0.75 * w as f32).powi(2))
                .sqrt()
                    / 5.0) as usize;
                if r.is_multiple_of(2) {
                    40.0 + 60.0 * c as f32
                } else {
                    220.0 - 50.0 * c as f32
                }
            }
        }
    })
}

#[test]
fn dense_descriptor_counts() {
    let img = synthetic_image(200, 300);
    let params = DescriptorParams {
        scales: vec![100, 200],
        ..DescriptorParams::default()
    };
    let d = extract(net(), img.view(), &params).unwrap();
    // P=100: network input 454x681 → 27x41 cells; P=200: 227x341 (rounded) → 13x20.
    assert_eq!(dense_input_size(200, 300, 100), (454, 681));
    assert_eq!(d[0].dim(), (27 * 41, 1000));
    assert_eq!(dense_input_size(200, 300, 200), (227, 341));
    assert_eq!(d[1].dim(), (13 * 20, 1000));
    for di in &d {
        // rows are log-probabilities: finite, <= 0, exp sums to 1
        for row in di.rows() {
            let total: f64 = row.iter().map(|&v| (v as f64).exp()).sum();
            assert!((total - 1.0).abs() < 1e-4);
        }
    }
    // The cap on the larger side: 1000x1500 → 341 x 512 working image.
    let big = synthetic_image(1000, 1500);
    let d = extract(
        net(),
        big.view(),
        &DescriptorParams {
            scales: vec![256],
            ..DescriptorParams::default()
        },
    )
    .unwrap();
    // 341x512 * 227/256 = 302 x 454 → 18 x 27 cells
    assert_eq!(dense_input_size(341, 512, 256), (302, 454));
    assert_eq!(d[0].nrows(), 18 * 27);
    // Batch equals one-by-one.
    let b = extract_batch(net(), &[img.view()], &params).unwrap();
    let one = extract(net(), img.view(), &params).unwrap();
    for (x, y) in b[0].iter().zip(one.iter()) {
        let m = (x - y).mapv(f32::abs).fold(0.0f32, |a, &v| a.max(v));
        assert!(m < 1e-3, "batch vs single: {m}");
    }
}

fn centred_corr(a: ArrayView1<f32>, b: ArrayView1<f32>) -> f64 {
    let ma = a.mean().unwrap() as f64;
    let mb = b.mean().unwrap() as f64;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b.iter()) {
        let (x, y) = (x as f64 - ma, y as f64 - mb);
        sab += x * y;
        saa += x * x;
        sbb += y * y;
    }
    sab / (saa * sbb).sqrt()
}

#[test]
fn exact_and_dense_descriptors_agree_at_the_same_place() {
    let img = synthetic_image(256, 256);
    let p = 128usize;
    let exact = extract(
        net(),
        img.view(),
        &DescriptorParams {
            scales: vec![p as u32],
            mode: PatchMode::Exact,
            stride: 1.0,
            ..DescriptorParams::default()
        },
    )
    .unwrap()
    .remove(0);
    // stride 1.0 → patches at 0 and 128 on each axis: the four quadrants.
    assert_eq!(exact.dim(), (4, 1000));
    let dense = extract(
        net(),
        img.view(),
        &DescriptorParams {
            scales: vec![p as u32],
            ..DescriptorParams::default()
        },
    )
    .unwrap()
    .remove(0);
    // 256 * 227/128 = 454 (even side: c = 1) → 27 x 27 cells; cell i is centred on network
    // pixel 16 i + 15, i.e. working pixel (16 i + 15.5) * 128/227 - 0.5.
    assert_eq!(dense.dim(), (27 * 27, 1000));
    let cell_of = |centre: f64| -> usize {
        let i = ((centre + 0.5) * 227.0 / 128.0 - 15.5) / 16.0;
        i.round().clamp(0.0, 26.0) as usize
    };
    let quads = [(64.0, 64.0), (64.0, 192.0), (192.0, 64.0), (192.0, 192.0)];
    // Centre both sets of descriptors on their own mean, then correlate matched places.
    let centre = |m: Array2<f32>| {
        let mean: Array1<f32> = m.mean_axis(ndarray::Axis(0)).unwrap();
        m - &mean
    };
    let exact = centre(exact);
    let dense = centre(dense);
    let mut matched = 0.0;
    let mut other = 0.0;
    for (q, &(cy, cx)) in quads.iter().enumerate() {
        let corr: Vec<f64> = quads
            .iter()
            .map(|&(oy, ox)| {
                let cell = cell_of(oy) * 27 + cell_of(ox);
                centred_corr(exact.row(q), dense.row(cell))
            })
            .collect();
        eprintln!("exact patch at ({cy}, {cx}) vs dense cells of the 4 quadrants: {corr:.3?}");
        // One cell sees less than the whole patch, so correlations are moderate, but the cell
        // at the patch's place must be the most similar of the four.
        for (r, &c) in corr.iter().enumerate() {
            if r == q {
                matched += c / 4.0;
            } else {
                other += c / 12.0;
                assert!(corr[q] > c, "quadrant {q}: matched {} <= {c}", corr[q]);
            }
        }
    }
    eprintln!("exact vs dense: matched corr {matched:.3}, mismatched {other:.3}");
    assert!(matched > other + 0.3, "matched {matched} vs other {other}");
}

#[test]
fn invalid_params_are_rejected() {
    let img = synthetic_image(64, 64);
    for params in [
        DescriptorParams {
            scales: vec![],
            ..DescriptorParams::default()
        },
        DescriptorParams {
            scales: vec![0],
            ..DescriptorParams::default()
        },
        DescriptorParams {
            stride: 0.0,
            ..DescriptorParams::default()
        },
        DescriptorParams {
            stride: f32::NAN,
            ..DescriptorParams::default()
        },
        DescriptorParams {
            max_image_side: Some(0),
            ..DescriptorParams::default()
        },
    ] {
        assert!(matches!(
            extract(net(), img.view(), &params),
            Err(CnnError::Params(_))
        ));
    }
}
