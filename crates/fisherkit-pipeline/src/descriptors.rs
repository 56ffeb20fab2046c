//! Per-image CNN descriptors, computed in parallel batches.
//!
//! For each image: one (n_patches, 1000) array of natural parameters per patch
//! scale and, when asked, the image-level descriptor (1000). Nothing is kept:
//! the streamed run projects and encodes each batch as it comes
//! (docs/pipeline.md §1).

use crate::PipelineError;
use fisherkit_cnn::descriptors::{
    check_geometry, dense_input_size_for, extract_batch, global_descriptor, working_size,
    DescriptorParams, PatchMode,
};
use fisherkit_cnn::image::decode_image;
use fisherkit_cnn::{Backbone, Cnn};
use ndarray::{Array1, Array2, Array3};
use rayon::prelude::*;
use std::path::Path;

/// Descriptors of one image.
#[derive(Debug, Clone)]
pub struct ImageDescriptors {
    /// One (n_patches, 1000) array per scale, in the order of the parameters' scales.
    pub scales: Vec<Array2<f32>>,
    /// The image-level log-probabilities (1000), if requested.
    pub global: Option<Array1<f32>>,
}

/// FNV-1a, 64 bit: a stable content hash for cache keys (not cryptographic).
pub fn fnv1a64(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Computes the descriptors of the images `paths` (one parallel batch: files
/// read and decoded in parallel, then run through the network by
/// [`extract_batch`]).
///
/// Returns one entry per path: `Ok` with the descriptors, or `Err` with the
/// reason the image is skipped (unreadable, corrupt, or too elongated for the
/// patch geometry). `with_global` adds the image-level log-probabilities.
///
/// # Errors
/// Invalid parameters, a failure of the network itself.
pub fn compute_batch(
    net: &Backbone,
    paths: &[&Path],
    params: &DescriptorParams,
    with_global: bool,
) -> Result<Vec<Result<ImageDescriptors, String>>, PipelineError> {
    params
        .validate()
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let decoded = paths
        .par_iter()
        .map(|path| {
            let name = path.display().to_string();
            let bytes =
                std::fs::read(path).map_err(|e| format!("cannot read image {name}: {e}"))?;
            decode_image(&bytes, &name).map_err(|e| e.to_string())
        })
        .collect();
    describe_batch(net, decoded, &names(paths), params, with_global)
}

fn names(paths: &[&Path]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// [`compute_batch`] on decoded images: (H, W, 3) RGB arrays with values in
/// 0–255 (or the reason an image could not be read), each named for
/// messages by `names`. The rows are the same as [`compute_batch`]'s for the
/// files the images were decoded from.
///
/// # Errors
/// Invalid parameters, a failure of the network itself.
pub fn describe_batch(
    net: &Backbone,
    decoded: Vec<Result<Array3<f32>, String>>,
    names: &[String],
    params: &DescriptorParams,
    with_global: bool,
) -> Result<Vec<Result<ImageDescriptors, String>>, PipelineError> {
    params
        .validate()
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    // A valid but extremely elongated image is skipped like a corrupt one.
    let decoded: Vec<Result<Array3<f32>, String>> = decoded
        .into_iter()
        .zip(names)
        .map(|(d, name)| {
            let img = d?;
            check_geometry(img.dim().0, img.dim().1, params).map_err(|e| format!("{name}: {e}"))?;
            Ok(img)
        })
        .collect();
    let images: Vec<_> = decoded.iter().flatten().map(|img| img.view()).collect();
    let computed =
        extract_batch(net, &images, params).map_err(PipelineError::stage("descriptors"))?;
    let globals: Vec<Option<Array1<f32>>> = if with_global {
        images
            .par_iter()
            .zip(&computed)
            .map(
                |(img, desc)| match global_from_dense(net, img.dim(), params) {
                    Some(s) => Ok(Some(mean_log_softmax(&desc[s]))),
                    None => global_descriptor(net, img.view()).map(Some),
                },
            )
            .collect::<Result<_, _>>()
            .map_err(PipelineError::stage("descriptors"))?
    } else {
        vec![None; images.len()]
    };
    let mut computed = computed.into_iter().zip(globals);
    Ok(decoded
        .into_iter()
        .map(|d| {
            d.map(|_| {
                let (scales, global) = computed.next().expect("one result per decoded image");
                ImageDescriptors { scales, global }
            })
        })
        .collect())
}

/// The scale whose dense pass saw exactly the global descriptor's input (the
/// whole image resized to the network's input side, 227×227 for SqueezeNet), if any: then
/// the global descriptor is available without another CNN pass (see [`mean_log_softmax`]).
fn global_from_dense(
    net: &Backbone,
    (h, w, _): (usize, usize, usize),
    p: &DescriptorParams,
) -> Option<usize> {
    if p.mode != PatchMode::Dense {
        return None;
    }
    let (h, w) = working_size(h, w, p.max_image_side);
    let side = net.input_side();
    p.scales.iter().position(|&s| {
        dense_input_size_for(side, h, w, s) == (side, side) && (h, w) == (s as usize, s as usize)
    })
}

/// The global descriptor from the per-cell log-softmax rows `d` (cells, C) of a
/// 227×227 pass: the pooled scores are $\bar s = \frac1n\sum_c s_c$ and
/// $\ell_c = s_c - \operatorname{lse}(s_c)$, so $\frac1n\sum_c \ell_c = \bar s - \text{const}$
/// and $\operatorname{logsoftmax}(\bar s) = \operatorname{logsoftmax}(\frac1n\sum_c \ell_c)$.
fn mean_log_softmax(d: &Array2<f32>) -> Array1<f32> {
    let mean = d.mean_axis(ndarray::Axis(0)).expect("at least one cell");
    fisherkit_cnn::net::log_softmax(mean.view())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_from_the_dense_pass_equals_the_separate_pass() {
        let img = fisherkit_cnn::image::load_image(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../data/fashion-mnist-demo/test/bag")
                .read_dir()
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path(),
        )
        .unwrap();
        for kind in [
            fisherkit_cnn::BackboneKind::SqueezeNet,
            fisherkit_cnn::BackboneKind::EfficientNetLite0,
        ] {
            let net = Backbone::builtin(kind).unwrap();
            let p = DescriptorParams {
                scales: vec![20, 28],
                ..Default::default()
            };
            assert_eq!(global_from_dense(&net, img.dim(), &p), Some(1));
            let d = fisherkit_cnn::descriptors::extract(&net, img.view(), &p).unwrap();
            let fast = mean_log_softmax(&d[1]);
            let slow = global_descriptor(&net, img.view()).unwrap();
            let err = (&fast - &slow)
                .mapv(f32::abs)
                .fold(0.0f32, |a, &b| a.max(b));
            assert!(err < 1e-3, "{kind}: max difference {err}");
            let exact = DescriptorParams {
                mode: PatchMode::Exact,
                ..p
            };
            assert_eq!(global_from_dense(&net, img.dim(), &exact), None);
        }
    }

    #[test]
    fn fnv_is_the_reference_hash() {
        // FNV-1a 64 reference values.
        assert_eq!(fnv1a64(b"", 0), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a", 0), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar", 0), 0x85944171f73967e8);
    }
}
