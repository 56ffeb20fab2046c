//! Images: decoding (PNG, JPEG) to RGB floats, a deterministic antialiased bilinear resize,
//! and the network's preprocessing.
//!
//! An image here is an `Array3<f32>` of shape (H, W, 3): RGB, values on the 0–255 scale
//! (16-bit files keep their extra precision as fractions).

use ndarray::{Array2, Array3, ArrayView3, Axis};
use std::path::Path;

/// Per-channel mean subtracted from the BGR input (Caffe's ImageNet mean, 0–255 scale).
pub const MEAN_BGR: [f32; 3] = [104.006, 116.669, 122.679];

/// Errors of image decoding and resizing.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read image {name}: {source}")]
    Io {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot decode image {name}: {message}")]
    Decode { name: String, message: String },
    #[error("image {name} is empty ({width}x{height})")]
    Empty {
        name: String,
        width: usize,
        height: usize,
    },
    #[error("image array must be (H, W, 3) with H, W >= 1, got {0:?}")]
    Shape(Vec<usize>),
    #[error("image array holds a non-finite value at (row {0}, column {1}, channel {2})")]
    NonFinite(usize, usize, usize),
    #[error("cannot resize to {0}x{1}: sides must be >= 1")]
    ResizeTarget(usize, usize),
    /// The patch geometry of a valid but extremely elongated (or, with no
    /// `max_image_side`, huge) image would need an enormous network input.
    #[error(
        "image of {height}x{width} pixels would need a {input_h}x{input_w} network input at \
         patch scale {scale} (more than {max} pixels): its aspect ratio is too extreme \
         (or max_image_side is unset for a large image)"
    )]
    TooElongated {
        height: usize,
        width: usize,
        scale: u32,
        input_h: usize,
        input_w: usize,
        max: usize,
    },
}

/// Reads and decodes a PNG or JPEG file (format guessed from the content) into (H, W, 3)
/// RGB floats on the 0–255 scale. Grey is replicated to three channels, alpha is dropped,
/// 16-bit samples are scaled by 255/65535. Errors name the file.
pub fn load_image(path: impl AsRef<Path>) -> Result<Array3<f32>, ImageError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ImageError::Io {
        name: path.display().to_string(),
        source,
    })?;
    decode_image(&bytes, &path.display().to_string())
}

/// A JPEG (starts with FF D8) must hold its end-of-image marker FF D9 after
/// its last start-of-scan FF DA: inside entropy-coded data FF is always
/// followed by 00 or a restart marker, so FF D9 there is the real end, and a
/// file cut anywhere in its scan data lacks it. Other formats pass.
fn check_jpeg_complete(bytes: &[u8]) -> Result<(), String> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Ok(());
    }
    let last = |m: u8| bytes.windows(2).rposition(|w| w == [0xFF, m]);
    match (last(0xDA), last(0xD9)) {
        (Some(sos), Some(eoi)) if eoi > sos => Ok(()),
        (None, _) => Err("truncated JPEG: no image data (no start-of-scan marker)".into()),
        _ => Err(format!(
            "truncated JPEG: no end-of-image marker after its image data ({} bytes)",
            bytes.len()
        )),
    }
}

/// Decodes PNG or JPEG bytes (see [`load_image`]); `name` is used in error messages.
/// A JPEG whose data stop before its end-of-image marker (a truncated
/// download or copy) is refused: the decoder would fill the missing rows silently.
pub fn decode_image(bytes: &[u8], name: &str) -> Result<Array3<f32>, ImageError> {
    check_jpeg_complete(bytes).map_err(|message| ImageError::Decode {
        name: name.to_string(),
        message,
    })?;
    let dynimg = image::load_from_memory(bytes).map_err(|e| ImageError::Decode {
        name: name.to_string(),
        message: e.to_string(),
    })?;
    let (w, h) = (dynimg.width() as usize, dynimg.height() as usize);
    if w == 0 || h == 0 {
        return Err(ImageError::Empty {
            name: name.to_string(),
            width: w,
            height: h,
        });
    }
    let sixteen_or_float = dynimg.color().bytes_per_pixel() / dynimg.color().channel_count() > 1;
    let data: Vec<f32> = if sixteen_or_float {
        dynimg
            .to_rgb32f()
            .into_raw()
            .into_iter()
            .map(|v| (v * 255.0).clamp(0.0, 255.0))
            .collect()
    } else {
        dynimg
            .to_rgb8()
            .into_raw()
            .into_iter()
            .map(f32::from)
            .collect()
    };
    Ok(Array3::from_shape_vec((h, w, 3), data).expect("image buffer is h*w*3"))
}

/// Checks an (H, W, 3) image array: non-empty, three channels, finite values.
pub fn check_image(img: &ArrayView3<'_, f32>) -> Result<(), ImageError> {
    let (h, w, c) = img.dim();
    if h == 0 || w == 0 || c != 3 {
        return Err(ImageError::Shape(img.shape().to_vec()));
    }
    if let Some((i, _)) = img.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(ImageError::NonFinite(i.0, i.1, i.2));
    }
    Ok(())
}

/// Resampling weights of PIL's `precompute_coeffs` with the bilinear (triangle) filter:
/// output sample $x$ has centre $c = (x + \tfrac12)\,n_{in}/n_{out}$, support
/// $r = \max(n_{in}/n_{out}, 1)$, taps $t \in [\lfloor c - r + \tfrac12 \rfloor,
/// \lfloor c + r + \tfrac12 \rfloor)$ clipped to the image, weights
/// $\max(0, 1 - |t - c + \tfrac12| / r)$ normalised to sum 1. Returns (first tap, weights)
/// per output sample.
fn coefficients(n_in: usize, n_out: usize) -> Vec<(usize, Vec<f64>)> {
    let scale = n_in as f64 / n_out as f64;
    let fscale = scale.max(1.0);
    let support = fscale; // triangle filter support 1 × filter scale
    (0..n_out)
        .map(|x| {
            let center = (x as f64 + 0.5) * scale;
            // C's (int) cast truncates towards zero; negatives are clipped to 0 anyway.
            let lo = ((center - support + 0.5).max(0.0)) as usize;
            let hi = ((center + support + 0.5) as usize).min(n_in);
            let mut k: Vec<f64> = (lo..hi)
                .map(|t| {
                    let d = ((t as f64 - center + 0.5) / fscale).abs();
                    if d < 1.0 {
                        1.0 - d
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f64 = k.iter().sum();
            if total != 0.0 {
                k.iter_mut().for_each(|v| *v /= total);
            }
            (lo, k)
        })
        .collect()
}

/// Resizes an (H, W, C) image to (`new_h`, `new_w`, C) with an antialiased bilinear filter:
/// the same arithmetic as PIL's `Image.resize(size, Image.BILINEAR)` on float ("F") images —
/// a separable triangle filter widened by the scale factor when shrinking, horizontal pass
/// first (f64 sums, f32 intermediate), then vertical. Deterministic; identity when the size
/// is unchanged.
pub fn resize_bilinear(
    img: ArrayView3<'_, f32>,
    new_h: usize,
    new_w: usize,
) -> Result<Array3<f32>, ImageError> {
    let (h, w, c) = img.dim();
    if h == 0 || w == 0 || c == 0 {
        return Err(ImageError::Shape(img.shape().to_vec()));
    }
    if new_h == 0 || new_w == 0 {
        return Err(ImageError::ResizeTarget(new_w, new_h));
    }
    // Horizontal pass: (h, w, c) → (h, new_w, c).
    let horiz = if new_w == w {
        img.to_owned()
    } else {
        let cx = coefficients(w, new_w);
        let mut out = Array3::<f32>::zeros((h, new_w, c));
        for y in 0..h {
            let row = img.index_axis(Axis(0), y);
            for (x, (lo, k)) in cx.iter().enumerate() {
                for ch in 0..c {
                    let mut acc = 0.0f64;
                    for (t, &wt) in k.iter().enumerate() {
                        acc += row[[lo + t, ch]] as f64 * wt;
                    }
                    out[[y, x, ch]] = acc as f32;
                }
            }
        }
        out
    };
    if new_h == h {
        return Ok(horiz);
    }
    let cy = coefficients(h, new_h);
    let mut out = Array3::<f32>::zeros((new_h, new_w, c));
    let mut acc = Array2::<f64>::zeros((new_w, c));
    for (y, (lo, k)) in cy.iter().enumerate() {
        acc.fill(0.0);
        for (t, &wt) in k.iter().enumerate() {
            let src = horiz.index_axis(Axis(0), lo + t);
            acc.zip_mut_with(&src, |a, &v| *a += v as f64 * wt);
        }
        out.index_axis_mut(Axis(0), y)
            .zip_mut_with(&acc, |o, &a| *o = a as f32);
    }
    Ok(out)
}

/// The network input for an (H, W, 3) RGB image on the 0–255 scale: (3, H, W) CHW,
/// channels in BGR order, each minus [`MEAN_BGR`]:
/// $x_{c,i,j} = \mathrm{img}_{i,j,2-c} - \mu_c$.
pub fn preprocess(img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
    check_image(&img)?;
    let (h, w, _) = img.dim();
    Ok(Array3::from_shape_fn((3, h, w), |(c, i, j)| {
        img[[i, j, 2 - c]] - MEAN_BGR[c]
    }))
}
