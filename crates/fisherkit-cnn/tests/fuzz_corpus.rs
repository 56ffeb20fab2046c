//! Replays the image fuzzing corpus (`fuzz/corpus/image`) and reproducers
//! (`fuzz/regressions/image`) through the pipeline's image path, as the
//! `image` fuzz target does: decode, geometry check, dense input sizes,
//! resize and preprocessing. No input may panic; decoded images are valid.
//! Also the regression the fuzzer found: an extremely elongated image.

use fisherkit_cnn::descriptors::{check_geometry, dense_input_size, working_size};
use fisherkit_cnn::image::check_image;
use fisherkit_cnn::{
    decode_image, extract, extract_batch, preprocess, resize_bilinear, CnnError, DescriptorParams,
    ImageError, PatchMode, SqueezeNet, MAX_INPUT_PIXELS,
};
use std::path::{Path, PathBuf};

fn inputs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for dir in [root.join("corpus/image"), root.join("regressions/image")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            files.extend(rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    files
}

/// The fuzz target's body: `Ok(true)` when the image decodes and passes the
/// geometry check, `Ok(false)` when it is refused with an error.
fn image_path(bytes: &[u8]) -> bool {
    let Ok(img) = decode_image(bytes, "fuzz") else {
        return false;
    };
    check_image(&img.view()).expect("a decoded image is valid");
    assert!(img.iter().all(|&v| (0.0..=255.0).contains(&v)));
    let (h, w, _) = img.dim();
    let params = DescriptorParams::default();
    if check_geometry(h, w, &params).is_err() {
        return false;
    }
    let (hw, ww) = working_size(h, w, params.max_image_side);
    let sizes: Vec<(usize, usize)> = params
        .scales
        .iter()
        .map(|&p| dense_input_size(hw, ww, p))
        .collect();
    assert!(sizes
        .iter()
        .all(|&(a, b)| a >= 1 && b >= 1 && a * b <= MAX_INPUT_PIXELS));
    let &(nh, nw) = sizes.iter().min_by_key(|&&(a, b)| a * b).unwrap();
    let x = preprocess(resize_bilinear(img.view(), nh, nw).unwrap().view()).unwrap();
    assert_eq!(x.dim(), (3, nh, nw));
    assert!(x.iter().all(|v| v.is_finite()));
    true
}

#[test]
fn image_corpus_replays_without_panic() {
    let files = inputs();
    assert!(
        files.len() >= 5,
        "fuzz/corpus/image is missing ({} files)",
        files.len()
    );
    let mut decoded = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        match std::panic::catch_unwind(|| image_path(&bytes)) {
            Ok(ok) => decoded += ok as usize,
            Err(_) => panic!("{} panics", f.display()),
        }
    }
    assert!(decoded >= 3, "only {decoded} corpus images decode");
}

/// An h×w grey PNG, encoded in memory.
fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::GrayImage::from_pixel(w, h, image::Luma([128]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

#[test]
fn extremely_elongated_images_are_refused_not_allocated() {
    // 1×20000 px: a few hundred bytes of PNG. Without the check, the dense
    // pass at P = 96 would enlarge it to 96×49152 and feed a 227×116224
    // input to the network (gigabytes of activations).
    let bytes = png(20_000, 1);
    assert!(bytes.len() < 2_000, "{} bytes", bytes.len());
    let img = decode_image(&bytes, "wide.png").unwrap();
    assert_eq!(img.dim(), (1, 20_000, 3));
    let p = DescriptorParams::default();
    let e = check_geometry(1, 20_000, &p).unwrap_err();
    assert!(
        matches!(e, ImageError::TooElongated { scale: 96, .. }),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(m.contains("image of 1x20000 pixels"), "{m}");
    assert!(m.contains("aspect ratio is too extreme"), "{m}");
    assert!(!image_path(&bytes));
    // extract / extract_batch refuse before running the network.
    let net = SqueezeNet::builtin().unwrap();
    let e = extract(&net, img.view(), &p).unwrap_err();
    assert!(
        matches!(e, CnnError::Image(ImageError::TooElongated { .. })),
        "{e:?}"
    );
    let ok = ndarray::Array3::<f32>::zeros((4, 4, 3));
    let e = extract_batch(&net, &[ok.view(), img.view()], &p).unwrap_err();
    assert!(matches!(e, CnnError::BatchImage { index: 1, .. }), "{e:?}");
    // Exact mode: the enlarged working image is bounded the same way.
    let exact = DescriptorParams {
        mode: PatchMode::Exact,
        ..DescriptorParams::default()
    };
    assert!(check_geometry(1, 20_000, &exact).is_err());
    // Tall images too.
    assert!(check_geometry(20_000, 1, &p).is_err());
}

#[test]
fn ordinary_images_pass_the_geometry_check() {
    let p = DescriptorParams::default();
    for (h, w) in [
        (1, 1),
        (28, 28),
        (480, 640),
        (4000, 3000),
        (100, 1500),
        (1, 60),
        (60, 1),
    ] {
        check_geometry(h, w, &p).unwrap_or_else(|e| panic!("{h}x{w}: {e}"));
    }
    // No max side: a 4000×3000 photo would need a 9458×7094 input at P = 96.
    let uncapped = DescriptorParams {
        max_image_side: None,
        ..DescriptorParams::default()
    };
    assert!(check_geometry(4000, 3000, &uncapped).is_err());
    assert!(check_geometry(500, 400, &uncapped).is_ok());
}
