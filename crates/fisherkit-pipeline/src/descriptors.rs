//! Per-image CNN descriptors with an on-disk cache.
//!
//! For each image: one (n_patches, 1000) array of natural parameters per patch
//! scale and, when asked, the image-level descriptor (1000). Cache entries are
//! keyed by a 64-bit FNV-1a hash of the image file's bytes and of the descriptor
//! parameters, so a second run with other encoders skips the CNN, and an edited
//! image is recomputed.

use crate::{PipelineError, Progress};
use fisherkit_cnn::descriptors::{
    check_geometry, dense_input_size, extract_batch, global_descriptor, working_size,
    DescriptorParams, PatchMode,
};
use fisherkit_cnn::image::decode_image;
use fisherkit_cnn::SqueezeNet;
use ndarray::{Array1, Array2, Array3};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

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

fn params_key(p: &DescriptorParams) -> String {
    format!(
        "squeezenet1_1-v1;{};stride{};max{:?}",
        match p.mode {
            PatchMode::Dense => "dense",
            PatchMode::Exact => "exact",
        },
        p.stride,
        p.max_image_side
    )
}

/// An image read for [`compute_all`]: found in the cache, or decoded (with its
/// cache entry, if caching) and waiting for the CNN.
enum Loaded {
    Hit(ImageDescriptors),
    Miss(Array3<f32>, Option<Entry>),
}

/// Where the cache files of one image live.
struct Entry {
    files: Vec<PathBuf>,
    global: PathBuf,
}

fn entry(dir: &Path, hash: u64, p: &DescriptorParams) -> Entry {
    let key = params_key(p);
    let k = fnv1a64(key.as_bytes(), hash);
    let mode = match p.mode {
        PatchMode::Dense => "d",
        PatchMode::Exact => "e",
    };
    Entry {
        files: p
            .scales
            .iter()
            .map(|s| dir.join(format!("{hash:016x}-{k:016x}-{mode}{s}.npy")))
            .collect(),
        global: dir.join(format!("{hash:016x}-global.npy")),
    }
}

fn write_atomic_npy<A: ndarray_npy::WritableElement, D: ndarray::Dimension>(
    path: &Path,
    a: &ndarray::Array<A, D>,
) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let res = ndarray_npy::write_npy(&tmp, a)
        .map_err(|e| e.to_string())
        .and_then(|_| std::fs::rename(&tmp, path).map_err(|e| e.to_string()));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Computes (or loads from `cache_dir`) the descriptors of every image of `paths`.
///
/// Returns one entry per path: `Ok` with the descriptors, or `Err` with the
/// reason the image was skipped (unreadable or corrupt file); skipped images are
/// also reported through `progress.warn`. Images are decoded and run through the
/// network in parallel batches.
pub fn compute_all(
    net: &SqueezeNet,
    paths: &[PathBuf],
    params: &DescriptorParams,
    with_global: bool,
    cache_dir: Option<&Path>,
    progress: &dyn Progress,
) -> Result<Vec<Result<ImageDescriptors, String>>, PipelineError> {
    params
        .validate()
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    if let Some(d) = cache_dir {
        std::fs::create_dir_all(d).map_err(|e| PipelineError::Io {
            path: d.display().to_string(),
            message: format!("cannot create the descriptor cache folder: {e}"),
        })?;
    }
    progress.start("descriptors", paths.len() as u64);
    let mut out: Vec<Result<ImageDescriptors, String>> = Vec::with_capacity(paths.len());
    let batch = 4 * rayon::current_num_threads().max(1);
    let mut n_cached = 0usize;
    for chunk in paths.chunks(batch) {
        // Read, hash, try the cache; decode the misses.
        let loaded: Vec<Result<Loaded, String>> = chunk
            .par_iter()
            .map(|path| {
                let name = path.display().to_string();
                let bytes =
                    std::fs::read(path).map_err(|e| format!("cannot read image {name}: {e}"))?;
                let ent = cache_dir.map(|d| entry(d, fnv1a64(&bytes, 0), params));
                if let Some(ent) = &ent {
                    if let Some(hit) = try_load(ent, with_global) {
                        return Ok(Loaded::Hit(hit));
                    }
                }
                let img = decode_image(&bytes, &name).map_err(|e| e.to_string())?;
                // A valid but extremely elongated image is skipped like a corrupt one.
                check_geometry(img.dim().0, img.dim().1, params)
                    .map_err(|e| format!("{name}: {e}"))?;
                Ok(Loaded::Miss(img, ent))
            })
            .collect();
        let misses: Vec<usize> = loaded
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Ok(Loaded::Miss(..))))
            .map(|(i, _)| i)
            .collect();
        let images: Vec<_> = misses
            .iter()
            .map(|&i| match &loaded[i] {
                Ok(Loaded::Miss(img, _)) => img.view(),
                _ => unreachable!("misses hold decoded images"),
            })
            .collect();
        let computed =
            extract_batch(net, &images, params).map_err(PipelineError::stage("descriptors"))?;
        let globals: Vec<Option<Array1<f32>>> = if with_global {
            images
                .par_iter()
                .zip(&computed)
                .map(|(img, desc)| match global_from_dense(img.dim(), params) {
                    Some(s) => Ok(Some(mean_log_softmax(&desc[s]))),
                    None => global_descriptor(net, img.view()).map(Some),
                })
                .collect::<Result<_, _>>()
                .map_err(PipelineError::stage("descriptors"))?
        } else {
            vec![None; images.len()]
        };
        let mut computed = computed.into_iter().zip(globals);
        for r in loaded {
            let r = match r {
                Err(e) => {
                    progress.warn(&format!("skipped: {e}"));
                    Err(e)
                }
                Ok(Loaded::Hit(hit)) => {
                    n_cached += 1;
                    Ok(hit)
                }
                Ok(Loaded::Miss(_, ent)) => {
                    let (scales, global) = computed.next().expect("one result per miss");
                    if let Some(ent) = ent {
                        for (f, a) in ent.files.iter().zip(&scales) {
                            write_atomic_npy(f, a).map_err(|m| PipelineError::Io {
                                path: f.display().to_string(),
                                message: m,
                            })?;
                        }
                        if let Some(g) = &global {
                            write_atomic_npy(&ent.global, g).map_err(|m| PipelineError::Io {
                                path: ent.global.display().to_string(),
                                message: m,
                            })?;
                        }
                    }
                    Ok(ImageDescriptors { scales, global })
                }
            };
            out.push(r);
        }
        progress.inc(chunk.len() as u64);
    }
    let skipped = out.iter().filter(|r| r.is_err()).count();
    progress.finish(&format!(
        "{} images ({} from cache, {} skipped)",
        paths.len(),
        n_cached,
        skipped
    ));
    Ok(out)
}

/// The scale whose dense pass saw exactly the global descriptor's input (the
/// whole image resized to 227×227), if any: then the global descriptor is
/// available without another CNN pass (see [`mean_log_softmax`]).
fn global_from_dense((h, w, _): (usize, usize, usize), p: &DescriptorParams) -> Option<usize> {
    if p.mode != PatchMode::Dense {
        return None;
    }
    let (h, w) = working_size(h, w, p.max_image_side);
    let side = fisherkit_cnn::net::INPUT_SIDE;
    p.scales.iter().position(|&s| {
        dense_input_size(h, w, s) == (side, side) && (h, w) == (s as usize, s as usize)
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

fn try_load(ent: &Entry, with_global: bool) -> Option<ImageDescriptors> {
    let mut scales = Vec::with_capacity(ent.files.len());
    for f in &ent.files {
        let a: Array2<f32> = ndarray_npy::read_npy(f).ok()?;
        if a.ncols() != fisherkit_cnn::net::NUM_CLASSES
            || a.nrows() == 0
            || a.iter().any(|v| !v.is_finite())
        {
            return None;
        }
        scales.push(a);
    }
    let global = if with_global {
        let g: Array1<f32> = ndarray_npy::read_npy(&ent.global).ok()?;
        if g.len() != fisherkit_cnn::net::NUM_CLASSES {
            return None;
        }
        Some(g)
    } else {
        None
    };
    Some(ImageDescriptors { scales, global })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_from_the_dense_pass_equals_the_separate_pass() {
        let net = SqueezeNet::builtin().unwrap();
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
        let p = DescriptorParams {
            scales: vec![20, 28],
            ..Default::default()
        };
        assert_eq!(global_from_dense(img.dim(), &p), Some(1));
        let d = fisherkit_cnn::descriptors::extract(&net, img.view(), &p).unwrap();
        let fast = mean_log_softmax(&d[1]);
        let slow = global_descriptor(&net, img.view()).unwrap();
        let err = (&fast - &slow)
            .mapv(f32::abs)
            .fold(0.0f32, |a, &b| a.max(b));
        assert!(err < 1e-3, "max difference {err}");
        let exact = DescriptorParams {
            mode: PatchMode::Exact,
            ..p
        };
        assert_eq!(global_from_dense(img.dim(), &exact), None);
    }

    #[test]
    fn fnv_is_the_reference_hash() {
        // FNV-1a 64 reference values.
        assert_eq!(fnv1a64(b"", 0), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a", 0), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar", 0), 0x85944171f73967e8);
    }
}
