//! The streamed stages of a run, in order (docs/pipeline.md):
//! [`sample_chunk`] (a seeded subset of the training images, in fixed chunks
//! → per-scale PCA moments and model-sample rows) → [`fit_pca`] →
//! [`fit_model`] (an explicit list, each from its own settings, the sample and
//! the seed) → [`encode_images`] (every image once through the CNN, projected
//! and encoded with every model). The two passes over images only compute;
//! [`crate::job::Job`] owns the run folder and writes what they return (raw
//! encodings into on-disk stores), so the passes may run elsewhere (Ray).
//! Memory is bounded by the batch, the samples and the models, never by the
//! number of images.

use crate::descriptors::{compute_batch, fnv1a64, ImageDescriptors};
use crate::kept::KeptCnn;
use crate::{PipelineError, Progress};
use fisherkit::encode::{
    FisherVector, FisherVectorParams, FvPart, MfaFisherScore, MfaFisherScoreParams, MfaPart,
};
use fisherkit::gmm::{DiagGmm, GmmParams};
use fisherkit::mfa::{Mfa, MfaParams};
use fisherkit::pca::{Pca, PcaMoments, PcaParams};
use fisherkit::stream::EmTol;
use fisherkit::{Encoder, Normalization};
use fisherkit_cnn::descriptors::DescriptorParams;
use fisherkit_cnn::{Backbone, Cnn};
use fisherkit_io::descriptor_file::DescriptorReader;
use ndarray::{Array1, Array2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Where the descriptors come from.
pub(crate) enum Source<'a> {
    /// Image files through the CNN.
    Images {
        net: &'a Backbone,
        paths: Vec<PathBuf>,
        params: DescriptorParams,
        with_global: bool,
        /// Images handed to the CNN so far (the sample pass's kept output
        /// is read instead for the encode pass: [`crate::kept`]).
        cnn_images: AtomicUsize,
    },
    /// Bags of descriptor files (one scale), read batch by batch.
    Bags(Box<BagFiles>),
}

/// The descriptor files of a run, opened and validated: image `i` is the
/// training file's `i`-th below `train.len()`, the test file's after. Bags
/// are read from the files when a pass asks for them, so a run holds the
/// bags of one batch, not of the files.
pub(crate) struct BagFiles {
    pub train: DescriptorReader,
    pub test: DescriptorReader,
}

impl BagFiles {
    /// The bag of image `i` (train then test).
    fn bag(&self, i: usize) -> Result<Array2<f32>, PipelineError> {
        let n = self.train.len();
        Ok(if i < n {
            self.train.bag(i)?
        } else {
            self.test.bag(i - n)?
        })
    }
}

impl Source<'_> {
    /// The CNN's name (`squeezenet1_1`, `efficientnet_lite0`, `onnx:<file>#<hash>`), `None`
    /// for descriptor files.
    pub(crate) fn cnn_name(&self) -> Option<&str> {
        match self {
            Source::Images { net, .. } => Some(net.name()),
            Source::Bags(_) => None,
        }
    }

    /// Number of classes of the CNN (the descriptors' dimension); 1000 for descriptor files
    /// (whose runs have no image-level descriptor).
    pub(crate) fn num_classes(&self) -> usize {
        match self {
            Source::Images { net, .. } => net.num_classes(),
            Source::Bags(_) => fisherkit_cnn::net::NUM_CLASSES,
        }
    }

    /// Width of a descriptor (before the PCA): the CNN's classes, or the
    /// descriptor files' width.
    pub(crate) fn descriptor_dim(&self) -> usize {
        match self {
            Source::Images { net, .. } => net.num_classes(),
            Source::Bags(files) => files.train.dim(),
        }
    }

    /// Descriptors of the images `idx`, in order (`Err`: the image is skipped, with the reason).
    pub(crate) fn compute(
        &self,
        idx: &[usize],
    ) -> Result<Vec<Result<ImageDescriptors, String>>, PipelineError> {
        match self {
            Source::Images {
                net,
                paths,
                params,
                with_global,
                cnn_images,
            } => {
                cnn_images.fetch_add(idx.len(), Ordering::Relaxed);
                let p: Vec<&Path> = idx.iter().map(|&i| paths[i].as_path()).collect();
                compute_batch(net, &p, params, *with_global)
            }
            Source::Bags(files) => idx
                .iter()
                .map(|&i| {
                    Ok(Ok(ImageDescriptors {
                        scales: vec![files.bag(i)?],
                        global: None,
                    }))
                })
                .collect(),
        }
    }

    /// Images handed to the CNN so far by this process (0 for descriptor files).
    pub(crate) fn cnn_images(&self) -> usize {
        match self {
            Source::Images { cnn_images, .. } => cnn_images.load(Ordering::Relaxed),
            Source::Bags(_) => 0,
        }
    }

    /// Images per parallel batch: enough to keep every thread busy, few
    /// enough that a batch's descriptors stay small (≈ 12 MB per photo).
    pub(crate) fn batch_len(&self) -> usize {
        4 * rayon::current_num_threads().max(1)
    }
}

/// A background model of the run: its kind and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ModelKind {
    /// Diagonal GMM with K components.
    Gmm { k: usize },
    /// MFA with K components and R factors.
    Mfa { k: usize, r: usize },
}

/// One model to fit: kind and scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ModelSpec {
    pub scale: usize,
    pub kind: ModelKind,
}

/// The settings every model of a run shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FitSettings {
    pub gmm_max_iter: usize,
    pub mfa_max_iter: usize,
    pub model_sample: usize,
    pub seed: u64,
}

impl ModelSpec {
    /// The file stem of the model in the run folder: every setting it
    /// depends on (`gmm-K50-it100-ms100000-s1`). The EM rule
    /// ([`crate::defaults::EM_TOL`]) is named when it is not the one every
    /// earlier run folder was made with (relative 1e-6), so those stay
    /// valid and models of another rule are never mixed with them
    /// (`gmm-K50-it100-abstol0.001-ms100000-s1`).
    pub(crate) fn stem(&self, scale_name: &str, s: &FitSettings) -> String {
        let tol = crate::defaults::EM_TOL;
        let rule = if tol == fisherkit::stream::EmTol::Relative(1e-6) {
            String::new()
        } else {
            format!("{}tol{}-", &tol.mode()[..3], tol.value())
        };
        match self.kind {
            ModelKind::Gmm { k } => format!(
                "gmm-K{k}-it{}-{rule}ms{}-{scale_name}",
                s.gmm_max_iter, s.model_sample
            ),
            ModelKind::Mfa { k, r } => format!(
                "mfa-K{k}-R{r}-it{}-{rule}ms{}-{scale_name}",
                s.mfa_max_iter, s.model_sample
            ),
        }
    }
}

/// A fitted background model.
#[derive(Debug, Clone)]
pub(crate) enum Fitted {
    Gmm(Box<DiagGmm<f32>>),
    Mfa(Box<Mfa<f32>>),
}

impl Fitted {
    /// The raw (un-normalised) encoder of every part: GMM-FV `prior, mean,
    /// var` (K + 2KD), MFA-FS `mean, loading` (KD + KDR). Terms select their
    /// parts and normalise at kernel time ([`crate::kernel`]).
    pub(crate) fn raw_encoder(&self) -> Result<Box<dyn Encoder<f32>>, PipelineError> {
        match self {
            Fitted::Gmm(g) => raw_gmm_encoder(g),
            Fitted::Mfa(m) => raw_mfa_encoder((**m).clone()),
        }
        .map_err(PipelineError::stage("encoding"))
    }
}

/// No normalisation: the stores keep raw encodings.
const RAW: Normalization = Normalization {
    power: 1.0,
    l2: false,
};

/// The raw GMM Fisher vector of every part (prior, mean, var: K + 2KD values).
pub(crate) fn raw_gmm_encoder(
    g: &DiagGmm<f32>,
) -> Result<Box<dyn Encoder<f32>>, fisherkit::EncodeError> {
    let params = FisherVectorParams {
        parts: vec![FvPart::Prior, FvPart::Mean, FvPart::Var],
        normalization: RAW,
        ..Default::default()
    };
    Ok(Box::new(FisherVector::new(g, params)?))
}

/// The raw MFA Fisher score of every part (mean, loading: KD + KDR values).
pub(crate) fn raw_mfa_encoder(
    m: Mfa<f32>,
) -> Result<Box<dyn Encoder<f32>>, fisherkit::EncodeError> {
    let params = MfaFisherScoreParams {
        parts: vec![MfaPart::Mean, MfaPart::Loading],
        normalization: RAW,
        whitening: None,
    };
    Ok(Box::new(MfaFisherScore::new(m, params)?))
}

/// The run folder: models, samples, stores and the image journal of one data
/// set and one set of CNN/PCA/sample settings (docs/pipeline.md §3).
pub(crate) struct RunFolder {
    pub dir: PathBuf,
    /// Removed when the run ends (no cache folder was given).
    pub temporary: bool,
}

impl RunFolder {
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A 64-bit key of `parts`, in hex.
pub(crate) fn key(parts: &[String]) -> String {
    format!("{:016x}", fnv1a64(parts.join("\u{1f}").as_bytes(), 0))
}

fn io_err(path: &Path, what: &str, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// What happened to each image in earlier passes: descriptors per scale, or
/// the reason it was skipped. Persisted as `images.tsv` in the run folder.
#[derive(Debug, Default, Clone)]
pub(crate) struct ImageLog {
    pub counts: BTreeMap<usize, Vec<usize>>,
    pub skipped: BTreeMap<usize, String>,
}

impl ImageLog {
    pub(crate) fn load(path: &Path) -> Self {
        let mut log = ImageLog::default();
        let Ok(text) = std::fs::read_to_string(path) else {
            return log;
        };
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let mut f = line.trim_end_matches('\n').splitn(3, '\t');
            let (Some(i), Some(kind), Some(rest)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Ok(i) = i.parse::<usize>() else { continue };
            match kind {
                "ok" => {
                    let c: Result<Vec<usize>, _> = rest.split(',').map(str::parse).collect();
                    if let Ok(c) = c {
                        log.counts.insert(i, c);
                    }
                }
                "skip" => {
                    log.skipped.insert(i, rest.to_string());
                }
                _ => {}
            }
        }
        log
    }

    pub(crate) fn append(
        &mut self,
        path: &Path,
        entries: &[ImageEntry],
    ) -> Result<(), PipelineError> {
        let mut text = String::new();
        for (i, e) in entries {
            match e {
                Ok(c) => {
                    let c: Vec<String> = c.iter().map(usize::to_string).collect();
                    text.push_str(&format!("{i}\tok\t{}\n", c.join(",")));
                    self.counts
                        .insert(*i, c.iter().map(|v| v.parse().unwrap_or(0)).collect());
                }
                Err(r) => {
                    let r = r.replace(['\t', '\n'], " ");
                    text.push_str(&format!("{i}\tskip\t{r}\n"));
                    self.skipped.insert(*i, r);
                }
            }
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| io_err(path, "cannot open the image log", e))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| io_err(path, "cannot write the image log", e))
    }
}

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

/// What one image gave in a pass: its descriptor count per scale, or the
/// reason it was skipped (written to `images.tsv` by the process that owns
/// the run folder).
pub type ImageEntry = (usize, Result<Vec<usize>, String>);

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

/// The PCA of every scale from the sample's moments.
pub(crate) fn fit_pca(sample: &Sample, pca_dim: usize) -> Result<Vec<Pca<f32>>, PipelineError> {
    sample
        .moments
        .iter()
        .map(|m| {
            let m = m
                .as_ref()
                .ok_or_else(|| PipelineError::Dataset("no sample image could be read".into()))?;
            PcaParams::new(pca_dim)
                .clamp_components(true)
                .fit_moments(m)
                .map_err(PipelineError::stage("PCA"))
        })
        .collect()
}

/// Projects the raw model-sample rows of every scale.
pub(crate) fn project_sample(
    sample: &Sample,
    pcas: &[Pca<f32>],
) -> Result<Vec<Array2<f32>>, PipelineError> {
    sample
        .rows
        .iter()
        .zip(pcas)
        .map(|(rows, pca)| {
            let x = Array2::from_shape_vec((rows.len() / sample.dim, sample.dim), rows.clone())
                .expect("whole rows");
            pca.transform(x.view()).map_err(PipelineError::stage("PCA"))
        })
        .collect()
}

/// What one EM fit did: iterations run, whether the stopping rule was met
/// before the cap, and the last mean log-likelihood per row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EmRecord {
    pub iterations: usize,
    pub max_iter: usize,
    pub converged: bool,
    pub log_likelihood: f64,
}

impl EmRecord {
    fn new(iterations: usize, max_iter: usize, converged: bool, history: &[f64]) -> Self {
        Self {
            iterations,
            max_iter,
            converged,
            log_likelihood: history.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// The one-line summary shown when the model's stage ends, in words a
    /// newcomer reads: converged, or stopped at the iteration cap with the
    /// last change of the log-likelihood (what a fit at its cap means is
    /// said once for the run, by [`cap_note`]).
    pub(crate) fn summary(&self, history: &[f64], tol: EmTol) -> String {
        let head = format!(
            "{} iterations, log-likelihood {:.4}",
            self.iterations, self.log_likelihood
        );
        if self.converged {
            return format!("{head}, converged");
        }
        let last = match history {
            [.., a, b] => format!(", last {} change {:.1e}", tol.mode(), tol.change(*a, *b)),
            _ => String::new(),
        };
        format!("{head} (at the cap{last})")
    }
}

/// One line for the run when some of its background models stopped at their
/// iteration cap: how many, what it means and what to change. `None` when
/// every fit converged.
pub(crate) fn cap_note(records: &[&EmRecord], tol: EmTol) -> Option<String> {
    let capped = records.iter().filter(|r| !r.converged).count();
    (capped > 0).then(|| {
        format!(
            "{capped} of {} background models stopped at their iteration cap before the {} \
             change of their mean log-likelihood fell below {:.0e}: they are usable, and more \
             iterations (--gmm-max-iter, --mfa-max-iter) may fit them better; the report's \
             `models` lists each fit",
            records.len(),
            tol.mode(),
            tol.value()
        )
    })
}

/// How a background model's EM stops early: its own error, or the run was
/// cancelled ([`Progress::cancelled`]) between two iterations.
enum FitStop<E> {
    Model(E),
    Cancelled,
}

impl<E> From<E> for FitStop<E> {
    fn from(e: E) -> Self {
        FitStop::Model(e)
    }
}

impl<E: std::fmt::Display> FitStop<E> {
    fn into_error(self, stage: &'static str) -> PipelineError {
        match self {
            FitStop::Model(e) => PipelineError::at(stage, e),
            FitStop::Cancelled => PipelineError::Cancelled,
        }
    }
}

/// After each EM iteration: one step of progress, and a stop if the run was cancelled.
fn each_iteration<E>(progress: &dyn Progress) -> Result<(), FitStop<E>> {
    progress.inc(1);
    if progress.cancelled() {
        Err(FitStop::Cancelled)
    } else {
        Ok(())
    }
}

/// Fits one model on its scale's sample with the run's seed and
/// [`crate::defaults::EM_TOL`].
pub(crate) fn fit_model(
    spec: &ModelSpec,
    x: &Array2<f32>,
    s: &FitSettings,
    scale_name: &str,
    progress: &dyn Progress,
) -> Result<(Fitted, EmRecord, f64), PipelineError> {
    let t = Instant::now();
    let tol = crate::defaults::EM_TOL;
    let (fitted, record) = match spec.kind {
        ModelKind::Gmm { k } => {
            let k = k.min(x.nrows());
            progress.start(
                &format!("GMM K={k} (scale {scale_name})"),
                s.gmm_max_iter as u64,
            );
            let fit = GmmParams::<f32>::new(k)
                .max_iter(s.gmm_max_iter)
                .tol(tol)
                .seed(s.seed)
                .check()
                .map_err(PipelineError::stage("GMM training"))?
                .fit_with_callback(x.view(), &mut |_, _| each_iteration(progress))
                .map_err(|e| e.into_error("GMM training"))?;
            let r = EmRecord::new(
                fit.n_iter,
                s.gmm_max_iter,
                fit.converged,
                &fit.log_likelihood,
            );
            progress.finish(&r.summary(&fit.log_likelihood, tol));
            (Fitted::Gmm(Box::new(fit.model)), r)
        }
        ModelKind::Mfa { k, r } => {
            let d = x.ncols();
            if r >= d {
                return Err(PipelineError::Config(format!(
                    "MFA factors R = {r} must be below the descriptor dimension {d} after PCA"
                )));
            }
            let k = k.min(x.nrows());
            progress.start(
                &format!("MFA K={k} R={r} (scale {scale_name})"),
                s.mfa_max_iter as u64,
            );
            let fit = MfaParams::new(k, r)
                .max_iter(s.mfa_max_iter)
                .tol(tol)
                .seed(s.seed)
                .check()
                .map_err(PipelineError::stage("MFA training"))?
                .fit_with_callback(x.view(), &mut |_, _| each_iteration(progress))
                .map_err(|e| e.into_error("MFA training"))?;
            let rec = EmRecord::new(
                fit.n_iter,
                s.mfa_max_iter,
                fit.converged,
                &fit.log_likelihood,
            );
            progress.finish(&rec.summary(&fit.log_likelihood, tol));
            (Fitted::Mfa(Box::new(fit.model)), rec)
        }
    };
    Ok((fitted, record, t.elapsed().as_secs_f64()))
}

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
/// Computation only, like [`sample_chunk`]; the owner of the run folder
/// writes the part to the stores. Also returns how many images were read
/// from `kept` instead of the CNN.
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

/// The PCA of every scale and every planned model, learned or read from the run folder.
pub(crate) struct Learned {
    pub pcas: Vec<Pca<f32>>,
    pub models: BTreeMap<ModelSpec, Fitted>,
}
