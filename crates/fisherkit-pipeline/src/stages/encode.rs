//! The encode pass: every image once through the CNN (or read from the
//! sample pass's kept output), projected and encoded for every target.

use super::image_log::ImageEntry;
use super::source::Source;
use crate::descriptors::ImageDescriptors;
use crate::kept::KeptCnn;
use crate::PipelineError;
use fisherkit::pca::Pca;
use fisherkit::Encoder;
use ndarray::{Array1, Array2};
use rayon::prelude::*;
use std::path::Path;

/// The encode pass's result for some images: per image, one raw encoding
/// per target of the run (in target order), and what each image gave.
#[derive(Debug, Clone, Default)]
pub struct EncodedPart {
    /// (image, rows per target) for every image that could be read, in order.
    pub rows: Vec<(usize, Vec<Array1<f32>>)>,
    /// What each image gave.
    pub entries: Vec<ImageEntry>,
}

/// Hooks of the encode pass for `--save-descriptors`: called with each
/// image's index and descriptors, in index order.
pub(crate) type OnDescriptors<'a> =
    dyn FnMut(usize, &ImageDescriptors) -> Result<(), PipelineError> + 'a;

/// One target of the encode pass: the raw encoder of a model of one scale,
/// or the CNN's global vector (`None`).
pub(crate) type EncodeTarget<'a> = (usize, Option<&'a dyn Encoder<f32>>);

/// Where the encode pass finds the sample pass's kept CNN output
/// ([`crate::kept`]): the folder, and what a usable file holds.
pub(crate) struct KeptFolder<'a> {
    pub dir: &'a Path,
    pub n_scales: usize,
    pub dim: usize,
    pub global: bool,
}

/// The descriptors of the images `idx`, in order: read from the kept
/// folder where it holds them, from `source` (the CNN) for the others; and
/// how many were read.
fn descriptors_of(
    source: &Source<'_>,
    idx: &[usize],
    kept: Option<&KeptFolder<'_>>,
) -> Result<(Vec<Result<ImageDescriptors, String>>, usize), PipelineError> {
    let Some(k) = kept else {
        return Ok((source.compute(idx)?, 0));
    };
    let mut found: Vec<Option<ImageDescriptors>> = idx
        .par_iter()
        .map(|&i| KeptCnn::read(k.dir, i, k.n_scales, k.dim, k.global))
        .collect();
    let rest: Vec<usize> = idx
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(&i, _)| i)
        .collect();
    let n_kept = idx.len() - rest.len();
    let computed = if rest.is_empty() {
        Vec::new()
    } else {
        source.compute(&rest)?
    };
    let mut computed = computed.into_iter();
    let descs = found
        .iter_mut()
        .map(|f| match f.take() {
            Some(d) => Ok(d),
            None => computed.next().expect("one result per image computed"),
        })
        .collect();
    Ok((descs, n_kept))
}

/// The encode pass over the images `idx` (ascending): through the CNN (or
/// read from the sample pass's kept output, `kept`), each scale projected
/// by its PCA, each target's raw encoding computed (images in parallel).
/// Computation only, like [`sample_chunk`](super::sample_chunk); the owner
/// of the run folder writes the part to the stores. Also returns how many
/// images were read from `kept` instead of the CNN.
pub(crate) fn encode_images(
    source: &Source<'_>,
    idx: &[usize],
    kept: Option<&KeptFolder<'_>>,
    pcas: &[Pca<f32>],
    targets: &[EncodeTarget<'_>],
    names: &[String],
    mut on_descriptors: Option<&mut OnDescriptors<'_>>,
) -> Result<(EncodedPart, usize), PipelineError> {
    let (descs, n_kept) = descriptors_of(source, idx, kept)?;
    let mut part = EncodedPart::default();
    for (&i, d) in idx.iter().zip(&descs) {
        match d {
            Ok(d) => {
                if let Some(f) = on_descriptors.as_mut() {
                    f(i, d)?;
                }
                part.entries
                    .push((i, Ok(d.scales.iter().map(|x| x.nrows()).collect())));
            }
            Err(e) => part.entries.push((i, Err(e.clone()))),
        }
    }
    part.rows = idx
        .par_iter()
        .zip(&descs)
        .filter_map(|(&i, d)| d.as_ref().ok().map(|d| (i, d)))
        .map(|(i, d)| encode_one(i, d, pcas, targets, names).map(|r| (i, r)))
        .collect::<Result<_, _>>()?;
    Ok((part, n_kept))
}

/// The raw encodings of one image's descriptors, one per target.
fn encode_one(
    i: usize,
    d: &ImageDescriptors,
    pcas: &[Pca<f32>],
    targets: &[EncodeTarget<'_>],
    names: &[String],
) -> Result<Vec<Array1<f32>>, PipelineError> {
    let projected: Vec<Array2<f32>> = d
        .scales
        .iter()
        .zip(pcas)
        .map(|(x, p)| p.transform(x.view()))
        .collect::<Result<_, _>>()
        .map_err(|e| PipelineError::at("PCA", format!("image {}: {e}", names[i])))?;
    targets
        .iter()
        .map(|(scale, enc)| match enc {
            Some(enc) => enc
                .encode(projected[*scale].view())
                .map_err(|e| PipelineError::at("encoding", format!("image {}: {e}", names[i]))),
            None => d.global.clone().ok_or_else(|| {
                PipelineError::at("encoding", "the CNN's global vector was not computed")
            }),
        })
        .collect()
}
