//! The pipeline's image path on arbitrary bytes: decode (PNG/JPEG) to RGB
//! floats, the geometry check the pipeline applies right after decoding, the
//! network input size of every dense scale, then resize and preprocessing for
//! the smallest of them (running the CNN itself would be too slow to fuzz).
//! Never panics; decoded values are finite and on the 0–255 scale; the
//! network input stays within `MAX_INPUT_PIXELS` whatever the image's size or
//! aspect ratio.
#![no_main]
use fisherkit_cnn::descriptors::{
    check_geometry, dense_input_size, working_size, DescriptorParams, MAX_INPUT_PIXELS,
};
use fisherkit_cnn::image::{check_image, decode_image, preprocess, resize_bilinear};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(img) = decode_image(data, "fuzz") else {
        return;
    };
    check_image(&img.view()).expect("a decoded image is valid");
    assert!(img.iter().all(|&v| (0.0..=255.0).contains(&v)));
    let (h, w, _) = img.dim();
    let params = DescriptorParams::default();
    if check_geometry(h, w, &params).is_err() {
        return; // the pipeline skips the image with this message
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
    let &(nh, nw) = sizes
        .iter()
        .min_by_key(|&&(a, b)| a * b)
        .expect("three scales");
    let x = resize_bilinear(img.view(), nh, nw).expect("valid sizes");
    let x = preprocess(x.view()).expect("a resized image is valid");
    assert_eq!(x.dim(), (3, nh, nw));
    assert!(x.iter().all(|v| v.is_finite()));
});
