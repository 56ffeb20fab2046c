//! The sample pass: a seeded subset of the training images, in fixed
//! chunks, gives per-scale PCA moments and model-sample rows ([`Sample`]).

use super::image_log::ImageEntry;
use super::source::Source;
use crate::descriptors::{fnv1a64, ImageDescriptors};
use crate::kept::KeptCnn;
use crate::PipelineError;
use fisherkit::pca::PcaMoments;
use ndarray::Axis;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What the sample pass gathers per scale.
#[derive(Debug, Clone)]
pub struct Sample {
    /// PCA sums of the chosen rows.
    pub moments: Vec<Option<PcaMoments>>,
    /// Raw (unprojected) model-sample rows, per scale.
    pub rows: Vec<Vec<f32>>,
    /// Descriptor width.
    pub dim: usize,
}

/// Settings of the sample pass.
pub(crate) struct SampleSettings {
    /// Training images the sample is drawn from (at most).
    pub images: usize,
    /// Descriptors per scale for the PCA.
    pub pca_rows: usize,
    /// Descriptors per scale for the background models.
    pub model_rows: usize,
    pub seed: u64,
}

/// The seeded subset of the training images `0..n_train` the PCA and the
/// models learn from, ascending.
pub(crate) fn sample_images(n_train: usize, s: &SampleSettings) -> Vec<usize> {
    let mut idx: Vec<usize> = if s.images >= n_train {
        (0..n_train).collect()
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0x5a3c_1e00);
        rand::seq::index::sample(&mut rng, n_train, s.images).into_vec()
    };
    idx.sort_unstable();
    idx
}

/// Seeded rows `quota` of `n` for the image whose name hashes to `image`
/// (so the rows do not depend on which other images could be read), scale
/// `scale`, purpose `what`.
fn pick_rows(n: usize, quota: usize, seed: u64, image: u64, scale: usize, what: u64) -> Vec<usize> {
    if quota >= n {
        return (0..n).collect();
    }
    let s = seed
        ^ fnv1a64(
            &[image.to_le_bytes(), scale.to_le_bytes(), what.to_le_bytes()].concat(),
            0,
        );
    let mut rng = ChaCha8Rng::seed_from_u64(s);
    let mut v = rand::seq::index::sample(&mut rng, n, quota).into_vec();
    v.sort_unstable();
    v
}

/// The sample pass over one chunk of the sample images (see
/// [`sample_chunks`]): each image contributes ⌈pca_rows / images⌉ seeded
/// rows per scale to the chunk's PCA moments and ⌈model_rows / images⌉ to
/// the model sample (uniform over the images, docs/pipeline.md §2).
/// Computation only: nothing is written, so chunks may run in other
/// processes or on other machines and be merged in chunk order. With
/// `keep`, each readable image's CNN output is also returned in its file
/// form, for the encode pass ([`crate::kept`]).
pub(crate) fn sample_chunk(
    source: &Source<'_>,
    chunk: &[usize],
    n_sample_images: usize,
    n_scales: usize,
    s: &SampleSettings,
    names: &[String],
    keep: bool,
) -> Result<(SamplePart, Vec<KeptCnn>), PipelineError> {
    let keep = keep && matches!(source, Source::Images { .. });
    let mut kept = Vec::new();
    let n_img = n_sample_images.max(1);
    let pca_quota = s.pca_rows.div_ceil(n_img);
    let model_quota = s.model_rows.div_ceil(n_img);
    let mut out = SamplePart {
        images: chunk.to_vec(),
        sample: Sample {
            moments: (0..n_scales).map(|_| None).collect(),
            rows: vec![Vec::new(); n_scales],
            dim: 0,
        },
        entries: Vec::new(),
    };
    for batch in chunk.chunks(source.batch_len()) {
        let descs = source.compute(batch)?;
        for (&i, d) in batch.iter().zip(descs) {
            match d {
                Ok(d) => {
                    add_to_sample(
                        &mut out.sample,
                        &d,
                        fnv1a64(names[i].as_bytes(), 0),
                        pca_quota,
                        model_quota,
                        s.seed,
                    )?;
                    out.entries
                        .push((i, Ok(d.scales.iter().map(|x| x.nrows()).collect())));
                    if keep {
                        kept.push(KeptCnn::new(i, &d));
                    }
                }
                Err(e) => out.entries.push((i, Err(e))),
            }
        }
    }
    Ok((out, kept))
}

/// Sample images per chunk of the sample pass: a fixed number, so that the
/// merged sums do not depend on threads, shards or machines.
pub const SAMPLE_CHUNK: usize = 32;

/// The sample images in chunks of [`SAMPLE_CHUNK`], in order.
pub(crate) fn sample_chunks(images: &[usize]) -> Vec<Vec<usize>> {
    images.chunks(SAMPLE_CHUNK).map(<[usize]>::to_vec).collect()
}

/// The sample pass's result for one chunk of sample images.
#[derive(Debug, Clone)]
pub struct SamplePart {
    /// The chunk's images (indices into the run's image list), in order.
    pub images: Vec<usize>,
    /// The chunk's PCA moments and model-sample rows.
    pub sample: Sample,
    /// What each image gave.
    pub entries: Vec<ImageEntry>,
}

impl Sample {
    /// The file form of a chunk's sample ([`fisherkit_io::sample_part`]).
    pub(crate) fn into_file(self, images: Vec<usize>) -> fisherkit_io::SamplePartFile {
        fisherkit_io::SamplePartFile {
            images,
            dim: self.dim,
            scales: self
                .moments
                .into_iter()
                .zip(self.rows)
                .map(|(moments, rows)| fisherkit_io::SampleScale { moments, rows })
                .collect(),
        }
    }

    /// A chunk's sample read back from its file.
    pub(crate) fn from_file(f: fisherkit_io::SamplePartFile) -> Self {
        let (moments, rows) = f.scales.into_iter().map(|s| (s.moments, s.rows)).unzip();
        Sample {
            moments,
            rows,
            dim: f.dim,
        }
    }

    /// Adds `other` (the next chunk): moments merged, rows appended.
    pub(crate) fn merge(&mut self, other: Sample) -> Result<(), PipelineError> {
        if self.moments.len() != other.moments.len() {
            return Err(PipelineError::at(
                "sample",
                format!(
                    "a sample part has {} scales, the run {}",
                    other.moments.len(),
                    self.moments.len()
                ),
            ));
        }
        if other.dim != 0 {
            self.dim = other.dim;
        }
        for (mine, theirs) in self.moments.iter_mut().zip(other.moments) {
            match (mine.as_mut(), theirs) {
                (Some(m), Some(t)) => m.merge(&t).map_err(PipelineError::stage("PCA"))?,
                (None, Some(t)) => *mine = Some(t),
                (_, None) => {}
            }
        }
        for (mine, theirs) in self.rows.iter_mut().zip(other.rows) {
            mine.extend(theirs);
        }
        Ok(())
    }
}

/// Adds one image's rows to the sample: its seeded PCA rows to the
/// moments of each scale (about the first image's mean), its model rows to the rows.
fn add_to_sample(
    out: &mut Sample,
    d: &ImageDescriptors,
    image: u64,
    pca_quota: usize,
    model_quota: usize,
    seed: u64,
) -> Result<(), PipelineError> {
    for (s, x) in d.scales.iter().enumerate() {
        out.dim = x.ncols();
        let m = out.moments[s].get_or_insert_with(|| {
            PcaMoments::new(x.mean_axis(Axis(0)).expect("rows").mapv(|v| v as f64))
        });
        let rows = pick_rows(x.nrows(), pca_quota, seed, image, s, 1);
        m.add(x.select(Axis(0), &rows).view())
            .map_err(PipelineError::stage("PCA"))?;
        for r in pick_rows(x.nrows(), model_quota, seed, image, s, 2) {
            out.rows[s].extend(x.row(r).iter());
        }
    }
    Ok(())
}
