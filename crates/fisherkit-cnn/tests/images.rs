//! Image decoding edge cases: grey, RGBA, 16-bit, JPEG, tiny images, corrupt files.

use fisherkit_cnn::{
    decode_image, extract, load_image, preprocess, resize_bilinear, DescriptorParams, ImageError,
    PatchMode, SqueezeNet, MEAN_BGR,
};
use image::{ImageBuffer, Luma, Rgb, Rgba};
use ndarray::{Array3, Axis};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn grey_png_is_replicated_to_rgb() {
    let d = dir();
    let p = d.path().join("grey.png");
    ImageBuffer::from_fn(5, 3, |x, y| Luma([(10 * x + 50 * y) as u8]))
        .save(&p)
        .unwrap();
    let img = load_image(&p).unwrap();
    assert_eq!(img.dim(), (3, 5, 3));
    for ((y, x, _), &v) in img.indexed_iter() {
        assert_eq!(v, (10 * x + 50 * y) as f32);
    }
}

#[test]
fn rgba_png_drops_alpha() {
    let d = dir();
    let p = d.path().join("rgba.png");
    ImageBuffer::from_fn(4, 2, |x, y| Rgba([x as u8, y as u8, 200, (x * 60) as u8]))
        .save(&p)
        .unwrap();
    let img = load_image(&p).unwrap();
    assert_eq!(img.dim(), (2, 4, 3));
    assert_eq!(img[[1, 3, 0]], 3.0);
    assert_eq!(img[[1, 3, 1]], 1.0);
    assert_eq!(img[[1, 3, 2]], 200.0);
}

#[test]
fn sixteen_bit_png_keeps_precision_on_0_255_scale() {
    let d = dir();
    let p = d.path().join("rgb16.png");
    let vals = [0u16, 257, 32768, 65535];
    ImageBuffer::from_fn(4, 1, |x, _| Rgb([vals[x as usize]; 3]))
        .save(&p)
        .unwrap();
    let img = load_image(&p).unwrap();
    for (x, &v) in vals.iter().enumerate() {
        let want = v as f32 * 255.0 / 65535.0;
        assert!(
            (img[[0, x, 0]] - want).abs() < 1e-3,
            "{} vs {want}",
            img[[0, x, 0]]
        );
    }
    // grey 16-bit too
    let p = d.path().join("grey16.png");
    ImageBuffer::from_fn(2, 2, |_, _| Luma([32768u16]))
        .save(&p)
        .unwrap();
    let img = load_image(&p).unwrap();
    assert!(img.iter().all(|&v| (v - 127.5019).abs() < 1e-3));
}

#[test]
fn jpeg_decodes() {
    let d = dir();
    let p = d.path().join("flat.jpg");
    ImageBuffer::from_fn(16, 8, |_, _| Rgb([100u8, 150, 200]))
        .save(&p)
        .unwrap();
    let img = load_image(&p).unwrap();
    assert_eq!(img.dim(), (8, 16, 3));
    let m = img.mean_axis(Axis(0)).unwrap().mean_axis(Axis(0)).unwrap();
    for (got, want) in m.iter().zip([100.0, 150.0, 200.0]) {
        assert!((got - want).abs() < 3.0, "{got} vs {want}");
    }
}

#[test]
fn truncated_jpegs_are_refused_whole_ones_with_trailing_bytes_are_not() {
    let d = dir();
    let p = d.path().join("photo.jpg");
    // A textured image, so the scan data are long.
    ImageBuffer::from_fn(64, 48, |x, y| {
        Rgb([(x * 4) as u8, (y * 5) as u8, ((x * y) % 251) as u8])
    })
    .save(&p)
    .unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert!(decode_image(&bytes, "whole.jpg").is_ok());
    // Bytes appended after the end marker (some cameras do) are not a truncation.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0u8; 32]);
    assert!(decode_image(&padded, "padded.jpg").is_ok());
    for cut in [bytes.len() - 2, bytes.len() * 3 / 4, bytes.len() / 2] {
        let e = decode_image(&bytes[..cut], "cut.jpg").unwrap_err();
        assert!(matches!(e, ImageError::Decode { .. }), "{cut}: {e:?}");
        assert!(
            e.to_string().contains("cut.jpg") && e.to_string().contains("truncated JPEG"),
            "{e}"
        );
    }
}

#[test]
fn corrupt_and_missing_files_name_the_file() {
    let d = dir();
    let p = d.path().join("broken_photo.jpg");
    std::fs::write(&p, b"\xff\xd8\xff\xe0 definitely not a jpeg").unwrap();
    let e = load_image(&p).unwrap_err();
    assert!(matches!(e, ImageError::Decode { .. }));
    assert!(e.to_string().contains("broken_photo.jpg"), "{e}");
    let e = load_image(d.path().join("nope.png")).unwrap_err();
    assert!(matches!(e, ImageError::Io { .. }));
    assert!(e.to_string().contains("nope.png"), "{e}");
    let e = decode_image(b"", "empty-bytes").unwrap_err();
    assert!(e.to_string().contains("empty-bytes"), "{e}");
}

#[test]
fn tiny_image_is_upscaled_to_the_patch() {
    let net = SqueezeNet::builtin().unwrap();
    let img = Array3::from_shape_fn((6, 9, 3), |(y, x, c)| {
        ((y * 40 + x * 25 + c * 60) % 256) as f32
    });
    let params = DescriptorParams {
        scales: vec![96],
        ..DescriptorParams::default()
    };
    // 6x9 → 96x144 working image → 227x341 network input → 13x20 cells.
    let d = extract(&net, img.view(), &params).unwrap();
    assert_eq!(d[0].dim(), (13 * 20, 1000));
    assert!(d[0].iter().all(|v| v.is_finite() && *v <= 0.0));
    let exact = DescriptorParams {
        mode: PatchMode::Exact,
        ..params
    };
    // 96x144 with step 48: 1 x 2 patches.
    let e = extract(&net, img.view(), &exact).unwrap();
    assert_eq!(e[0].dim(), (2, 1000));
}

#[test]
fn preprocess_is_bgr_minus_mean_chw() {
    let img = Array3::from_shape_fn((2, 3, 3), |(y, x, c)| (y * 100 + x * 10 + c) as f32);
    let x = preprocess(img.view()).unwrap();
    assert_eq!(x.dim(), (3, 2, 3));
    for c in 0..3 {
        for y in 0..2 {
            for xx in 0..3 {
                assert_eq!(x[[c, y, xx]], img[[y, xx, 2 - c]] - MEAN_BGR[c]);
            }
        }
    }
    let mut bad = img.clone();
    bad[[1, 2, 0]] = f32::NAN;
    assert!(matches!(
        preprocess(bad.view()),
        Err(ImageError::NonFinite(1, 2, 0))
    ));
}

#[test]
fn resize_identity_constant_and_errors() {
    let img = Array3::from_shape_fn((7, 5, 3), |(y, x, c)| (y * 7 + x * 3 + c) as f32);
    assert_eq!(resize_bilinear(img.view(), 7, 5).unwrap(), img);
    // A constant image stays constant at any size (weights sum to 1).
    let flat = Array3::from_elem((9, 11, 3), 42.0f32);
    for (h, w) in [(3, 4), (20, 31), (9, 2)] {
        let r = resize_bilinear(flat.view(), h, w).unwrap();
        assert!(r.iter().all(|&v| (v - 42.0).abs() < 1e-4));
    }
    assert!(matches!(
        resize_bilinear(img.view(), 0, 5),
        Err(ImageError::ResizeTarget(5, 0))
    ));
}
