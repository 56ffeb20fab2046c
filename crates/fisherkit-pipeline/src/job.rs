//! A run as an object that owns its run folder ([`Job`]): the stages of
//! [`crate::run`] one call at a time, so that the two passes over images
//! (the sample pass and the encode pass) can be computed elsewhere — other
//! threads, processes or Ray workers — and handed back (docs/pipeline.md §6).
//!
//! The owner calls, in order: [`Job::sample_chunks`] → for each chunk
//! [`Job::sample_chunk`] (anywhere) then [`Job::add_sample`] (here, in chunk
//! order) → [`Job::fit`] → for batches of [`Job::encode_todo`]
//! [`Job::encode_images`] (anywhere) then [`Job::put_encoded`] (here) →
//! [`Job::finish`]. A worker opens the same job (same settings, same
//! folders) and calls only the computing methods; it writes nothing, but
//! for the classifier stage's tasks (`tasks.rs`), each of which keeps its own
//! result file in the run folder.

use crate::config::RunConfig;
use crate::evaluate::evaluate;
use crate::inputs::Inputs;
use crate::kept::KeptCnn;
use crate::output::OutputDir;
use crate::report::{timed, DatasetInfo, ModelInfo, Report};
use crate::spec::Term;
use crate::stages::{
    self, fit_pca, key, project_sample, sample_images, EmRecord, EncodeTarget, EncodedPart,
    FitSettings, Fitted, ImageLog, KeptFolder, Learned, ModelKind, ModelSpec, OnDescriptors,
    RunFolder, Sample, SamplePart, SampleSettings, Source,
};
use crate::store::{Store, StoreFormat};
use crate::{PipelineError, Progress};
use fisherkit::pca::Pca;
use ndarray::{concatenate, Axis};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

mod tasks;

/// Creates the output folder of `cfg`, if any, and checks that the output
/// files can be written, before any work is done.
fn output_dir(cfg: &RunConfig) -> Result<Option<OutputDir>, PipelineError> {
    let out = cfg
        .output_dir
        .as_deref()
        .map(|d| OutputDir::create(d, cfg.save_encodings))
        .transpose()?;
    for path in [&cfg.report, &cfg.plot, &cfg.save_model]
        .into_iter()
        .flatten()
    {
        fisherkit_io::check_writable(path)?;
    }
    Ok(out)
}

/// The run folder of `cfg` and `inputs`: under the cache folder, keyed by the
/// data and every setting the PCA and the sample depend on; a temporary
/// folder (removed at the end) without a cache.
fn run_folder(cfg: &RunConfig, inputs: &Inputs<'_>) -> Result<RunFolder, PipelineError> {
    let d = &cfg.descriptors;
    let mut parts = inputs.data_key.clone();
    parts.extend([
        format!("fisherkit-run-v1 images={}", inputs.images),
        format!(
            "cnn={} scales={:?} mode={:?} stride={} max={:?}",
            // Descriptor-file runs use no CNN; they keep the historical key (valid caches).
            inputs.source.cnn_name().unwrap_or("squeezenet1_1"),
            d.scales,
            d.mode,
            d.stride,
            d.max_image_side
        ),
        format!(
            "pca={} sample_images={} pca_sample={} seed={}",
            cfg.pca_dim, cfg.sample_images, cfg.pca_sample, cfg.seed
        ),
    ]);
    let (dir, temporary) = match &cfg.cache_dir {
        Some(c) => (c.join("runs").join(key(&parts)), false),
        None => {
            let t = std::env::temp_dir().join(format!(
                "fisherkit-run-{}-{}",
                std::process::id(),
                key(&parts)
            ));
            (t, true)
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| PipelineError::Io {
        path: dir.display().to_string(),
        message: format!("cannot create the run folder: {e}"),
    })?;
    Ok(RunFolder { dir, temporary })
}

/// The explicit list of background models the encoders and the sweep need.
fn model_plan(cfg: &RunConfig, n_scales: usize) -> Vec<ModelSpec> {
    let mut kinds = std::collections::BTreeSet::new();
    for spec in &cfg.encoders {
        for t in &spec.terms {
            match t {
                Term::GmmFv(_) => kinds.insert(ModelKind::Gmm {
                    k: cfg.gmm_components,
                }),
                Term::MfaFs(_) => kinds.insert(ModelKind::Mfa {
                    k: cfg.mfa_components,
                    r: cfg.mfa_factors,
                }),
                Term::CnnGlobal => false,
            };
        }
    }
    for &k in &cfg.sweep_gmm_components {
        kinds.insert(ModelKind::Gmm { k });
    }
    for &r in &cfg.sweep_mfa_factors {
        kinds.insert(ModelKind::Mfa {
            k: cfg.mfa_components,
            r,
        });
    }
    (0..n_scales)
        .flat_map(|scale| kinds.iter().map(move |&kind| ModelSpec { scale, kind }))
        .collect()
}

/// The settings every model of the run shares.
fn fit_settings(cfg: &RunConfig) -> FitSettings {
    FitSettings {
        gmm_max_iter: cfg.gmm_max_iter,
        mfa_max_iter: cfg.mfa_max_iter,
        model_sample: cfg.model_sample,
        seed: cfg.seed,
    }
}

fn read_pca_file(p: &Path) -> Option<Pca<f32>> {
    <fisherkit_io::PcaModel as fisherkit_io::ModelFile>::read(p)
        .ok()?
        .to_dtype::<f32>()
        .ok()
}

/// A model of the run folder, and how it was fitted if its file says so
/// (the metadata keys of `fisherkit gmm fit`: `n_iter`, `max_iter`,
/// `converged`, `mean_log_likelihood`).
fn read_fitted(p: &Path, kind: ModelKind) -> Option<(Fitted, Option<EmRecord>)> {
    let (model, meta) =
        <fisherkit_io::Model as fisherkit_io::ModelFile>::read_with_metadata(p).ok()?;
    let fitted = match (kind, model) {
        (ModelKind::Gmm { .. }, fisherkit_io::Model::Gmm(g)) => {
            Fitted::Gmm(Box::new(g.to_dtype::<f32>().ok()?))
        }
        (ModelKind::Mfa { .. }, fisherkit_io::Model::Mfa(m)) => {
            Fitted::Mfa(Box::new(m.to_dtype::<f32>().ok()?))
        }
        _ => return None,
    };
    let record = (|| {
        Some(EmRecord {
            iterations: meta.get("n_iter")?.parse().ok()?,
            max_iter: meta.get("max_iter")?.parse().ok()?,
            converged: meta.get("converged")?.parse().ok()?,
            log_likelihood: meta.get("mean_log_likelihood")?.parse().ok()?,
        })
    })();
    Some((fitted, record))
}

fn write_fitted(p: &Path, f: &Fitted, r: &EmRecord) -> Result<(), PipelineError> {
    let tol = crate::defaults::EM_TOL;
    let meta = BTreeMap::from([
        ("n_iter".to_string(), r.iterations.to_string()),
        ("max_iter".to_string(), r.max_iter.to_string()),
        ("converged".to_string(), r.converged.to_string()),
        (
            "mean_log_likelihood".to_string(),
            r.log_likelihood.to_string(),
        ),
        ("tol".to_string(), tol.value().to_string()),
        ("tol_mode".to_string(), tol.mode().to_string()),
    ]);
    match f {
        Fitted::Gmm(g) => fisherkit_io::ModelFile::write(&**g, p, &meta),
        Fitted::Mfa(m) => fisherkit_io::ModelFile::write(&**m, p, &meta),
    }
    .map_err(|e| PipelineError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    })
}

/// A run in progress: its settings, data, run folder and what is learned.
pub struct Job<'a> {
    cfg: RunConfig,
    inputs: Inputs<'a>,
    folder: RunFolder,
    plan: Vec<ModelSpec>,
    log: ImageLog,
    out: Option<OutputDir>,
    timings: Vec<(String, f64)>,
    /// PCA per scale and models read from the run folder or learned.
    pcas: Vec<Option<Pca<f32>>>,
    models: BTreeMap<ModelSpec, Fitted>,
    /// How each model was fitted (if known: a model file of an older run
    /// folder may not say).
    fits: BTreeMap<ModelSpec, EmRecord>,
    /// The sample pass so far: chunks added, merged sums.
    sampled: usize,
    /// Chunks an earlier, killed run of this job finished (their parts are
    /// in the run folder; read when the owner adds the next chunk or fits).
    resumable: usize,
    sample: Option<Sample>,
    /// After [`Job::fit`]: the models and their stores.
    learned: Option<Learned>,
    stores: BTreeMap<ModelSpec, Store>,
    global: Option<Store>,
    /// Bytes the run's stores and kernels need ([`crate::disk`]): the sample
    /// pass keeps its CNN output only while the file system keeps that much
    /// free besides.
    disk_need: u64,
    /// Whether the sample pass still keeps its CNN output (false after the
    /// disk was too full or a write failed: the encode pass runs those
    /// images through the CNN instead).
    keeping: bool,
    /// Sample images whose CNN output this job kept, and their bytes.
    kept: (usize, u64),
}

impl<'a> Job<'a> {
    /// Opens the run of `cfg` on `inputs`: creates the output and run
    /// folders and reads what an earlier run left there.
    pub(crate) fn open(cfg: RunConfig, inputs: Inputs<'a>) -> Result<Self, PipelineError> {
        let out = output_dir(&cfg)?;
        if let Some(dir) = &cfg.save_descriptors {
            std::fs::create_dir_all(dir).map_err(|e| PipelineError::Io {
                path: dir.display().to_string(),
                message: format!("cannot create the descriptor output folder: {e}"),
            })?;
        }
        let folder = run_folder(&cfg, &inputs)?;
        let log = ImageLog::load(&folder.path("images.tsv"));
        let plan = model_plan(&cfg, inputs.scale_names.len());
        let mut job = Job {
            cfg,
            inputs,
            folder,
            plan,
            log,
            out,
            timings: Vec::new(),
            pcas: Vec::new(),
            models: BTreeMap::new(),
            fits: BTreeMap::new(),
            sampled: 0,
            resumable: 0,
            sample: None,
            learned: None,
            stores: BTreeMap::new(),
            global: None,
            disk_need: 0,
            keeping: true,
            kept: (0, 0),
        };
        job.pcas = (0..job.inputs.scale_names.len())
            .map(|s| read_pca_file(&job.pca_path(s)))
            .collect();
        for m in job.plan.clone() {
            if let Some((f, record)) = read_fitted(&job.model_path(&m), m.kind) {
                job.models.insert(m, f);
                if let Some(r) = record {
                    job.fits.insert(m, r);
                }
            }
        }
        job.resumable = job.count_sample_parts();
        job.check_classifier()?;
        job.disk_need = job.check_disk()?;
        Ok(job)
    }

    /// Refuses, before any pass, the compact variant on the primal path (it
    /// is computed from the training kernels).
    fn check_classifier(&self) -> Result<(), PipelineError> {
        let n = self.inputs.n_train;
        let scales = self.inputs.scale_names.len();
        if self.cfg.compact_dim.is_some() && self.cfg.classifier.primal_for(n, scales) {
            return Err(PipelineError::Config(format!(
                "the compact variant (--compact-pca) is computed from the training kernels, and this run of {n} training images trains on the primal path (its kernels would take {:.1} GB, more than {:.1} GB, or --classifier primal): drop --compact-pca or pass --classifier kernel",
                crate::Classifier::kernel_bytes(n, scales) as f64 / 1e9,
                crate::defaults::KERNEL_MAX_BYTES as f64 / 1e9
            )));
        }
        Ok(())
    }

    /// Refuses the run if its run folder's file system cannot hold what the
    /// run will write there (crate::disk), before any CNN work; returns
    /// that need in bytes.
    fn check_disk(&self) -> Result<u64, PipelineError> {
        let need = crate::disk::estimate(
            &self.cfg,
            &self.plan,
            self.inputs.names.len(),
            self.inputs.n_train,
            self.inputs.source.descriptor_dim(),
            self.inputs.scale_names.len(),
            self.with_global().then(|| self.inputs.source.num_classes()),
        );
        crate::disk::check(&self.folder.dir, need, &self.cfg)?;
        Ok(need.total())
    }

    /// Opens the run of `cfg` on the image folders `cfg.train` and `cfg.test`
    /// with the CNN `net` (see [`crate::run`]).
    ///
    /// # Errors
    /// Bad settings, unreadable folders, classes that do not agree.
    pub fn images(
        cfg: &RunConfig,
        net: &'a fisherkit_cnn::Backbone,
    ) -> Result<Self, PipelineError> {
        cfg.validate()?;
        let inputs = Inputs::images(cfg, net)?;
        Job::open(cfg.clone(), inputs)
    }

    /// The run folder (models, stores, image journal).
    pub fn folder(&self) -> &Path {
        &self.folder.dir
    }

    /// The settings.
    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }

    /// Adds a stage's wall-clock seconds to the report (stages run elsewhere).
    pub fn add_timing(&mut self, name: &str, seconds: f64) {
        self.timings.push((name.to_string(), seconds));
    }

    fn fit_settings(&self) -> FitSettings {
        fit_settings(&self.cfg)
    }

    fn pca_path(&self, s: usize) -> std::path::PathBuf {
        self.folder
            .path(&format!("pca-{}.safetensors", self.inputs.scale_names[s]))
    }

    fn model_path(&self, m: &ModelSpec) -> std::path::PathBuf {
        let stem = m.stem(&self.inputs.scale_names[m.scale], &self.fit_settings());
        self.folder.path(&format!("{stem}.safetensors"))
    }

    fn sample_settings(&self) -> SampleSettings {
        SampleSettings {
            images: self.cfg.sample_images,
            pca_rows: self.cfg.pca_sample,
            model_rows: self.cfg.model_sample,
            seed: self.cfg.seed,
        }
    }

    fn sample_image_list(&self) -> Vec<usize> {
        sample_images(self.inputs.n_train, &self.sample_settings())
    }

    /// Whether the sample pass is needed: a PCA or a model is missing from the run folder.
    pub fn needs_sample(&self) -> bool {
        self.pcas.iter().any(Option::is_none) || self.models.len() < self.plan.len()
    }

    /// The chunks of the sample pass still to do, in the order
    /// [`Job::add_sample`] takes them: empty when nothing is to be learned;
    /// without the chunks an earlier, killed run finished (their sample
    /// parts are read back from the run folder when the job opens).
    pub fn sample_chunks(&self) -> Vec<Vec<usize>> {
        let mut all = self.all_sample_chunks();
        all.drain(..self.sampled.max(self.resumable).min(all.len()));
        all
    }

    fn all_sample_chunks(&self) -> Vec<Vec<usize>> {
        if !self.needs_sample() {
            return Vec::new();
        }
        stages::sample_chunks(&self.sample_image_list())
    }

    /// Where the sample pass keeps its finished chunks: keyed by the model
    /// sample's size, the one sample setting not already in the run
    /// folder's key (docs/pipeline.md §2).
    fn sample_part_dir(&self) -> std::path::PathBuf {
        self.folder
            .path(&format!("sample-ms{}", self.cfg.model_sample))
    }

    fn sample_part_path(&self, chunk: usize) -> std::path::PathBuf {
        self.sample_part_dir()
            .join(format!("part-{chunk:05}.safetensors"))
    }

    /// How many chunks an earlier run of this job finished: the leading run
    /// of part files present (only their names are looked at, so a worker
    /// that opens the job reads nothing).
    fn count_sample_parts(&self) -> usize {
        if self.folder.temporary {
            return 0;
        }
        let n = self.all_sample_chunks().len();
        (0..n)
            .take_while(|&i| self.sample_part_path(i).is_file())
            .count()
    }

    /// Merges the parts an earlier run finished ([`Job::count_sample_parts`])
    /// into the sample, in chunk order, so the sums are the same as in an
    /// uninterrupted run. Their images are already in the image journal:
    /// [`Job::add_sample`] appends to it before it writes the part.
    fn load_resumed_sample(&mut self) -> Result<(), PipelineError> {
        let chunks = self.all_sample_chunks();
        while self.sampled < self.resumable {
            let i = self.sampled;
            let path = self.sample_part_path(i);
            let unusable = |why: String| {
                PipelineError::Io {
                path: path.display().to_string(),
                message: format!(
                    "{why}; delete the file and run again to compute that chunk of the sample pass anew"
                ),
            }
            };
            let file =
                fisherkit_io::read_sample_part(&path).map_err(|e| unusable(e.to_string()))?;
            if file.images != chunks[i] || file.scales.len() != self.inputs.scale_names.len() {
                return Err(unusable(format!(
                    "this sample part is not chunk {i} of this run's sample pass"
                )));
            }
            self.merge_sample(Sample::from_file(file))?;
        }
        Ok(())
    }

    /// The sample pass over one chunk (computation only; any process).
    /// Its CNN output is not kept: the encode pass will run these images
    /// through the CNN again (see [`Job::sample_chunk_keeping`]).
    ///
    /// # Errors
    /// A chunk index out of range, a failure of the network.
    pub fn sample_chunk(&self, chunk: &[usize]) -> Result<SamplePart, PipelineError> {
        Ok(self.sample_chunk_with(chunk, false)?.0)
    }

    /// [`Job::sample_chunk`], also returning each readable image's CNN
    /// output in its file form (nothing for descriptor files), for
    /// [`Job::add_sample_keeping`]: the encode pass then reads it back
    /// instead of running the CNN (docs/pipeline.md §2). 4 bytes × 1 000
    /// classes × the image's descriptors: 8.7 MB for a ~450-px photo at
    /// the default three scales (2 166 descriptors).
    ///
    /// # Errors
    /// A chunk index out of range, a failure of the network.
    pub fn sample_chunk_keeping(
        &self,
        chunk: &[usize],
    ) -> Result<(SamplePart, Vec<KeptCnn>), PipelineError> {
        self.sample_chunk_with(chunk, true)
    }

    fn sample_chunk_with(
        &self,
        chunk: &[usize],
        keep: bool,
    ) -> Result<(SamplePart, Vec<KeptCnn>), PipelineError> {
        self.check_images(chunk)?;
        stages::sample_chunk(
            &self.inputs.source,
            chunk,
            self.sample_image_list().len(),
            self.inputs.scale_names.len(),
            &self.sample_settings(),
            &self.inputs.names,
            keep,
        )
    }

    /// Images this job has handed to the CNN so far (in this process: a
    /// worker's own passes, not the ones it was handed).
    pub fn images_through_cnn(&self) -> usize {
        self.inputs.source.cnn_images()
    }

    /// Where the sample pass keeps its CNN output for the encode pass.
    fn kept_dir(&self) -> std::path::PathBuf {
        self.folder.path("cnn-sample")
    }

    fn check_images(&self, idx: &[usize]) -> Result<(), PipelineError> {
        let n = self.inputs.names.len();
        match idx.iter().find(|&&i| i >= n) {
            Some(i) => Err(PipelineError::Config(format!(
                "image index {i} is out of range: the run has {n} images"
            ))),
            None => Ok(()),
        }
    }

    /// Adds the next chunk's sample (chunks in the order of [`Job::sample_chunks`],
    /// so that the merged sums are the same wherever the chunks ran).
    ///
    /// # Errors
    /// A part out of order, of another run, or an unwritable image journal.
    pub fn add_sample(
        &mut self,
        part: SamplePart,
        progress: &dyn Progress,
    ) -> Result<(), PipelineError> {
        self.add_sample_keeping(part, Vec::new(), progress)
    }

    /// [`Job::add_sample`] with the chunk's CNN output from
    /// [`Job::sample_chunk_keeping`]: written to the run folder (before the
    /// part, so a resumed run finds the output of every finished chunk),
    /// where the encode pass reads it back — in this process or in a worker
    /// that sees the run folder. Keeping is skipped, with one warning, when
    /// the file system would then lack the room the stores and kernels need
    /// or a write fails; the encode pass then runs those images through the
    /// CNN.
    ///
    /// # Errors
    /// A part out of order, of another run, a kept output that is not of
    /// the part's images or of this run's shape, an unwritable image journal.
    pub fn add_sample_keeping(
        &mut self,
        part: SamplePart,
        kept: Vec<KeptCnn>,
        progress: &dyn Progress,
    ) -> Result<(), PipelineError> {
        self.load_resumed_sample()?;
        let chunks = self.all_sample_chunks();
        match chunks.get(self.sampled) {
            Some(c) if *c == part.images => {}
            _ => {
                return Err(PipelineError::Config(format!(
                    "sample part for images {:?}… is not chunk {} of this run's sample pass",
                    part.images.iter().take(3).collect::<Vec<_>>(),
                    self.sampled
                )))
            }
        }
        for (_, e) in &part.entries {
            if let Err(reason) = e {
                progress.warn(&format!("skipped: {reason}"));
            }
        }
        let (n_scales, dim) = (
            self.inputs.scale_names.len(),
            self.inputs.source.descriptor_dim(),
        );
        for k in &kept {
            let readable = part.entries.iter().any(|(i, e)| *i == k.image && e.is_ok());
            if !readable {
                return Err(PipelineError::Config(format!(
                    "a kept CNN output of image {}, not a readable image of this sample part",
                    k.image
                )));
            }
            k.check(n_scales, dim).map_err(PipelineError::Config)?;
        }
        self.log
            .append(&self.folder.path("images.tsv"), &part.entries)?;
        self.keep(kept, progress);
        if !self.folder.temporary {
            let dir = self.sample_part_dir();
            std::fs::create_dir_all(&dir).map_err(|e| PipelineError::Io {
                path: dir.display().to_string(),
                message: format!("cannot create the sample-pass folder: {e}"),
            })?;
            // The part's arrays move into the file form and back: no copy.
            let file = part.sample.into_file(part.images);
            fisherkit_io::write_sample_part(self.sample_part_path(self.sampled), &file)?;
            self.merge_sample(Sample::from_file(file))
        } else {
            self.merge_sample(part.sample)
        }
    }

    /// Writes a chunk's kept CNN output to the run folder, if there is room
    /// (see [`Job::add_sample_keeping`]).
    fn keep(&mut self, kept: Vec<KeptCnn>, progress: &dyn Progress) {
        if kept.is_empty() || !self.keeping {
            return;
        }
        let dir = self.kept_dir();
        let bytes: u64 = kept.iter().map(|k| k.bytes.len() as u64).sum();
        let stop = |job: &mut Self, why: String| {
            job.keeping = false;
            progress.warn(&format!(
                "not keeping the sample images' CNN output for the encode pass ({why}): the encode pass runs them through the CNN again"
            ));
        };
        match crate::disk::room_to_keep(&self.folder.dir, bytes, self.disk_need) {
            Ok(()) => {}
            Err(why) => return stop(self, why),
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return stop(self, format!("{}: {e}", dir.display()));
        }
        for k in kept {
            let path = crate::kept::path(&dir, k.image);
            if let Err(e) = fisherkit_io::write_file(&path, &k.bytes) {
                return stop(self, e.to_string());
            }
            self.kept.0 += 1;
            self.kept.1 += k.bytes.len() as u64;
        }
    }

    /// Adds the next chunk's sums and rows to the sample (chunks in order).
    fn merge_sample(&mut self, part: Sample) -> Result<(), PipelineError> {
        match self.sample.as_mut() {
            Some(s) => s.merge(part)?,
            None => self.sample = Some(part),
        }
        self.sampled += 1;
        Ok(())
    }

    /// Stages 2–3: the PCA of every scale and every planned model, learned
    /// from the sample (after every chunk was added) and written to the run
    /// folder, or read from it; then the stores are opened.
    ///
    /// # Errors
    /// Missing sample chunks, a failed fit, an unwritable run folder.
    pub fn fit(&mut self, progress: &dyn Progress) -> Result<(), PipelineError> {
        if self.needs_sample() {
            self.load_resumed_sample()?;
            let expected = self.all_sample_chunks().len();
            if self.sampled != expected {
                return Err(PipelineError::Config(format!(
                    "the sample pass has {} of its {expected} chunks",
                    self.sampled
                )));
            }
            let sample = self
                .sample
                .take()
                .ok_or_else(|| PipelineError::Dataset("no sample image could be read".into()))?;
            self.learn_from(sample, progress)?;
            // Every PCA and model is in the run folder now: the sample
            // pass's checkpoint is no longer needed (it is GBs at paper size).
            if !self.folder.temporary {
                let _ = std::fs::remove_dir_all(self.sample_part_dir());
            }
        }
        let learned = Learned {
            pcas: self
                .pcas
                .iter()
                .map(|p| p.clone().expect("learned"))
                .collect(),
            models: std::mem::take(&mut self.models),
        };
        self.write_models(&learned)?;
        self.learned = Some(learned);
        self.open_stores()
    }

    fn learn_from(&mut self, sample: Sample, progress: &dyn Progress) -> Result<(), PipelineError> {
        let cfg_dim = self.cfg.pca_dim;
        let fresh = timed(&mut self.timings, "pca".into(), || {
            fit_pca(&sample, cfg_dim)
        })?;
        for (s, p) in fresh.into_iter().enumerate() {
            if self.pcas[s].is_none() {
                let path = self.pca_path(s);
                fisherkit_io::ModelFile::write(&p, &path, &BTreeMap::new()).map_err(|e| {
                    PipelineError::Io {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    }
                })?;
                self.pcas[s] = Some(p);
            }
        }
        let pcas: Vec<Pca<f32>> = self.pcas.iter().map(|p| p.clone().expect("set")).collect();
        let xs = project_sample(&sample, &pcas)?;
        drop(sample);
        let fit = self.fit_settings();
        for m in self.plan.clone() {
            if self.models.contains_key(&m) {
                continue;
            }
            let name = &self.inputs.scale_names[m.scale];
            let (f, record, secs) = stages::fit_model(&m, &xs[m.scale], &fit, name, progress)?;
            self.timings
                .push((format!("em {}", m.stem(name, &fit)), secs));
            write_fitted(&self.model_path(&m), &f, &record)?;
            self.models.insert(m, f);
            self.fits.insert(m, record);
        }
        let records: Vec<_> = self.fits.values().collect();
        if let Some(note) = stages::cap_note(&records, crate::defaults::EM_TOL) {
            progress.warn(&note);
        }
        Ok(())
    }

    /// The PCA and models into the output folder, if any.
    fn write_models(&self, learned: &Learned) -> Result<(), PipelineError> {
        let Some(out) = &self.out else { return Ok(()) };
        let names = &self.inputs.scale_names;
        for (s, p) in learned.pcas.iter().enumerate() {
            out.pca(&names[s], p)?;
        }
        for (m, f) in &learned.models {
            match f {
                Fitted::Gmm(g) => out.gmm(&names[m.scale], g)?,
                Fitted::Mfa(x) => out.mfa(&names[m.scale], x)?,
            }
        }
        Ok(())
    }

    fn with_global(&self) -> bool {
        self.cfg
            .encoders
            .iter()
            .any(|s| s.terms.contains(&Term::CnnGlobal))
    }

    /// The stores of the planned models (and of the global vectors), opened in the run folder.
    fn open_stores(&mut self) -> Result<(), PipelineError> {
        let learned = self.learned.as_ref().expect("fitted");
        let fit = self.fit_settings();
        let n = self.inputs.names.len();
        let mut wanted = Vec::new();
        for (m, f) in &learned.models {
            let dim = f.raw_encoder()?.output_dim();
            wanted.push((
                Some(*m),
                m.stem(&self.inputs.scale_names[m.scale], &fit),
                dim,
            ));
        }
        if self.with_global() {
            wanted.push((None, "global".to_string(), self.inputs.source.num_classes()));
        }
        for (m, stem, dim) in wanted {
            let store = self.open_store(&stem, n, dim)?;
            match m {
                Some(m) => {
                    self.stores.insert(m, store);
                }
                None => self.global = Some(store),
            }
        }
        Ok(())
    }

    /// Opens the store `stem` in the run's format (`stem.store` for `f32`,
    /// `stem.q8.store` for `q8`). A `q8` store first imports the rows of
    /// the same encodings kept in `f32` by an earlier run, if any (never the
    /// other way: an `f32` store holds exact values only).
    fn open_store(&self, stem: &str, n: usize, dim: usize) -> Result<Store, PipelineError> {
        let name = |f: StoreFormat| match f {
            StoreFormat::F32 => format!("{stem}.store"),
            StoreFormat::Q8 => format!("{stem}.q8.store"),
        };
        let format = self.cfg.store_format;
        let mut store = Store::open(&self.folder.path(&name(format)), n, dim, format)?;
        let exact = self.folder.path(&name(StoreFormat::F32));
        if format == StoreFormat::Q8 && exact.join("meta.json").exists() {
            let old = Store::open(&exact, n, dim, StoreFormat::F32)?;
            store.import(&old)?;
        }
        Ok(store)
    }

    /// Loads the PCA and models a worker needs from the run folder (written
    /// there by the owner's [`Job::fit`]).
    ///
    /// # Errors
    /// A PCA or model the run folder does not hold (on a cluster: the run
    /// folder is not on a file system every node sees).
    pub fn load_learned(&mut self) -> Result<(), PipelineError> {
        if self.learned.is_some() {
            return Ok(());
        }
        if self.needs_sample() {
            return Err(PipelineError::Io {
                path: self.folder.dir.display().to_string(),
                message: "the run folder holds no fitted PCA and models: fit them first (on a cluster, put the cache folder on a file system every node sees)".into(),
            });
        }
        self.learned = Some(Learned {
            pcas: self.pcas.iter().map(|p| p.clone().expect("read")).collect(),
            models: self.models.clone(),
        });
        Ok(())
    }

    /// The images the encode pass still has to do (missing from a store,
    /// or all of them with `--save-descriptors`), ascending.
    pub fn encode_todo(&self) -> Vec<usize> {
        let n = self.inputs.names.len();
        let all = self.cfg.save_descriptors.is_some();
        (0..n)
            .filter(|i| !self.log.skipped.contains_key(i))
            .filter(|&i| {
                all || self.stores.values().any(|s| !s.has(i))
                    || self.global.as_ref().is_some_and(|g| !g.has(i))
            })
            .collect()
    }

    /// The encode pass over the images `idx` (computation only; any process
    /// that called [`Job::fit`] or [`Job::load_learned`]).
    ///
    /// # Errors
    /// Nothing learned yet, an index out of range, a failure of the network.
    /// Images whose CNN output the sample pass kept in the run folder are
    /// read from there instead of going through the CNN.
    pub fn encode_images(&self, idx: &[usize]) -> Result<EncodedPart, PipelineError> {
        Ok(self.encode_with(idx, None)?.0)
    }

    /// The encode pass over `idx`, and how many of them were read from the
    /// sample pass's kept output.
    fn encode_with(
        &self,
        idx: &[usize],
        hook: Option<&mut OnDescriptors<'_>>,
    ) -> Result<(EncodedPart, usize), PipelineError> {
        self.check_images(idx)?;
        let learned = self.learned.as_ref().ok_or_else(|| {
            PipelineError::Config(
                "encode_images needs the fitted models: call fit or load_learned first".into(),
            )
        })?;
        let encoders: Vec<(usize, Box<dyn fisherkit::Encoder<f32>>)> = learned
            .models
            .iter()
            .map(|(m, f)| Ok((m.scale, f.raw_encoder()?)))
            .collect::<Result<_, PipelineError>>()?;
        let mut targets: Vec<EncodeTarget<'_>> = encoders
            .iter()
            .map(|(s, e)| (*s, Some(e.as_ref())))
            .collect();
        if self.with_global() {
            targets.push((0, None));
        }
        let dir = self.kept_dir();
        let kept = KeptFolder {
            dir: &dir,
            n_scales: self.inputs.scale_names.len(),
            dim: self.inputs.source.descriptor_dim(),
            global: self.with_global(),
        };
        let images = matches!(self.inputs.source, Source::Images { .. });
        stages::encode_images(
            &self.inputs.source,
            idx,
            (images && dir.is_dir()).then_some(&kept),
            &learned.pcas,
            &targets,
            &self.inputs.names,
            hook,
        )
    }

    /// Writes an encoded part into the stores (rows they lack) and journals it.
    ///
    /// # Errors
    /// A part of another run (row count or widths), a full disk.
    pub fn put_encoded(&mut self, part: EncodedPart) -> Result<(), PipelineError> {
        let n_targets = self.stores.len() + usize::from(self.global.is_some());
        let mut ok = Vec::with_capacity(part.rows.len());
        for (i, rows) in &part.rows {
            self.check_images(&[*i])?;
            if rows.len() != n_targets {
                return Err(PipelineError::Config(format!(
                    "encoded part for image {i} has {} encodings, the run {n_targets}",
                    rows.len()
                )));
            }
            let stores = self.stores.values().chain(self.global.as_ref());
            for (store, row) in stores.zip(rows) {
                if row.len() != store.dim() {
                    return Err(PipelineError::Config(format!(
                        "encoded part for image {i}: an encoding of width {}, the store {}",
                        row.len(),
                        store.dim()
                    )));
                }
                if !store.has(*i) {
                    store.write_row(*i, row.as_slice().expect("contiguous"))?;
                }
            }
            ok.push(*i);
        }
        for s in self.stores.values_mut().chain(self.global.as_mut()) {
            s.commit(&ok)?;
        }
        self.log
            .append(&self.folder.path("images.tsv"), &part.entries)?;
        // Every store holds these images now: their kept CNN output has
        // served (removing it as the stores grow keeps the disk's peak at
        // the larger of the two, not their sum).
        let dir = self.kept_dir();
        if dir.is_dir() {
            for i in ok {
                let _ = std::fs::remove_file(crate::kept::path(&dir, i));
            }
        }
        Ok(())
    }

    /// The sample pass in this process, chunk by chunk.
    pub(crate) fn sample_here(&mut self, progress: &dyn Progress) -> Result<(), PipelineError> {
        let chunks = self.sample_chunks();
        if chunks.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let n: usize = chunks.iter().map(Vec::len).sum();
        let cnn = matches!(self.inputs.source, Source::Images { .. });
        progress.start(
            if cnn {
                "sample (CNN on the sample images)"
            } else {
                "sample (descriptors of the sample images)"
            },
            n as u64,
        );
        for chunk in chunks {
            crate::progress::stop_if_cancelled(progress)?;
            let (part, kept) = self.sample_chunk_keeping(&chunk)?;
            self.add_sample_keeping(part, kept, progress)?;
            progress.inc(chunk.len() as u64);
        }
        let rows = self.sample.as_ref().map_or(0, |s| {
            s.rows.iter().map(Vec::len).sum::<usize>() / s.dim.max(1)
        });
        let kept = match self.kept {
            (0, _) => String::new(),
            (k, b) => format!(
                ", the CNN output of {k} images kept for the encode pass ({:.1} MB)",
                b as f64 / 1e6
            ),
        };
        progress.finish(&format!("{n} images, {rows} model-sample rows{kept}"));
        self.timings
            .push(("sample pass (CNN)".into(), t.elapsed().as_secs_f64()));
        Ok(())
    }

    /// Stage 4 in this process: every image of [`Job::encode_todo`] once
    /// through the CNN and the encoders, batch by batch, with
    /// `--save-descriptors` streamed as images pass.
    pub(crate) fn encode_here(&mut self, progress: &dyn Progress) -> Result<(), PipelineError> {
        let todo = self.encode_todo();
        let mut sink = match &self.cfg.save_descriptors {
            Some(dir) => Some(DescriptorSink {
                train: crate::descriptor_file::DescriptorFileWriter::create(
                    &dir.join("train.npz"),
                )?,
                test: crate::descriptor_file::DescriptorFileWriter::create(&dir.join("test.npz"))?,
                n_train: self.inputs.n_train,
            }),
            None => None,
        };
        let cnn = matches!(self.inputs.source, Source::Images { .. });
        progress.start(
            if cnn { "CNN + encoding" } else { "encoding" },
            todo.len() as u64,
        );
        let t = Instant::now();
        let batch_len = self.inputs.source.batch_len();
        let mut from_sample = 0;
        for batch in todo.chunks(batch_len) {
            crate::progress::stop_if_cancelled(progress)?;
            let (part, kept) = match sink.as_mut() {
                Some(s) => {
                    let (names, labels, classes) = (
                        &self.inputs.names,
                        &self.inputs.labels,
                        &self.inputs.classes,
                    );
                    let mut hook = |i: usize, d: &crate::descriptors::ImageDescriptors| {
                        let views: Vec<_> = d.scales.iter().map(|a| a.view()).collect();
                        let stacked = concatenate(Axis(0), &views).expect("same width");
                        let w = if i < s.n_train {
                            &mut s.train
                        } else {
                            &mut s.test
                        };
                        w.push(&names[i], stacked.view(), &classes[labels[i]])
                            .map_err(PipelineError::from)
                    };
                    self.encode_with(batch, Some(&mut hook))?
                }
                None => self.encode_with(batch, None)?,
            };
            from_sample += kept;
            for (_, e) in &part.entries {
                if let Err(reason) = e {
                    progress.warn(&format!("skipped: {reason}"));
                }
            }
            self.put_encoded(part)?;
            progress.inc(batch.len() as u64);
        }
        let reused = self.inputs.names.len() - todo.len();
        let done = todo.len() - from_sample;
        progress.finish(&if cnn {
            format!("{done} images through the CNN, {reused} reused from the run folder, {from_sample} encoded from the sample pass's CNN output")
        } else {
            format!("{done} images encoded, {reused} reused from the run folder")
        });
        self.timings.push((
            format!("cnn + encoding ({} images)", todo.len()),
            t.elapsed().as_secs_f64(),
        ));
        if let Some(s) = sink {
            s.train.finish()?;
            s.test.finish()?;
        }
        Ok(())
    }

    /// Stages 5–7: kernels, SVMs, the report (after every image was encoded).
    ///
    /// # Errors
    /// A class without a readable image, a failed SVM, an unwritable output folder.
    pub fn finish(mut self, progress: &dyn Progress) -> Result<Report, PipelineError> {
        let learned = self.learned.take().ok_or_else(|| {
            PipelineError::Config("finish needs the fitted models: call fit first".into())
        })?;
        // The encode pass is over: what is left of the sample pass's kept
        // CNN output (an image whose rows a killed run had just committed)
        // would serve nothing.
        let _ = std::fs::remove_dir_all(self.kept_dir());
        let (rows, n_train) = usable_rows(
            &self.inputs,
            &self.log,
            &self.stores,
            &self.global,
            &self.cfg.test,
        )?;
        self.write_image_lists(&rows, n_train)?;
        let mut timings = std::mem::take(&mut self.timings);
        let c = self.classes(&learned, &rows, n_train, progress)?;
        let (results, sweep, model) = evaluate(&c, &mut timings, progress)?;
        let dataset = self.dataset_info(&learned, &rows, n_train);
        let report = Report {
            results,
            sweep,
            dataset,
            timings,
            config: self.cfg.to_config(self.inputs.images),
            peak_rss_mb: peak_rss_mb(),
            fisherkit_version: env!("CARGO_PKG_VERSION").to_string(),
            cnn: self.inputs.source.cnn_name().map(str::to_string),
            model,
            models: self.model_infos(),
        };
        crate::output::write_report_files(
            &report,
            self.cfg.report.as_deref(),
            self.cfg.plot.as_deref(),
        )?;
        Ok(report)
    }

    /// The report's account of every planned model's fit.
    fn model_infos(&self) -> Vec<ModelInfo> {
        let fit = self.fit_settings();
        self.plan
            .iter()
            .map(|m| {
                let scale = &self.inputs.scale_names[m.scale];
                let record = self.fits.get(m);
                let (kind, components, factors, max_iter) = match m.kind {
                    ModelKind::Gmm { k } => ("gmm", k, None, fit.gmm_max_iter),
                    ModelKind::Mfa { k, r } => ("mfa", k, Some(r), fit.mfa_max_iter),
                };
                ModelInfo {
                    name: m.stem(scale, &fit),
                    kind: kind.to_string(),
                    components,
                    factors,
                    scale: scale.clone(),
                    iterations: record.map(|r| r.iterations),
                    max_iter,
                    converged: record.map(|r| r.converged),
                    log_likelihood: record.map(|r| r.log_likelihood),
                }
            })
            .collect()
    }

    /// `images.train.txt` / `images.test.txt` in the output folder, if any.
    fn write_image_lists(&self, rows: &[usize], n_train: usize) -> Result<(), PipelineError> {
        let Some(out) = &self.out else { return Ok(()) };
        let inputs = &self.inputs;
        let (tr, te) = rows.split_at(n_train);
        let names = |r: &[usize]| {
            r.iter()
                .map(|&i| inputs.names[i].clone())
                .collect::<Vec<_>>()
        };
        let labels = |r: &[usize]| r.iter().map(|&i| inputs.labels[i]).collect::<Vec<_>>();
        out.image_list("train", &names(tr), &labels(tr), &inputs.classes)?;
        out.image_list("test", &names(te), &labels(te), &inputs.classes)
    }

    fn dataset_info(&self, learned: &Learned, rows: &[usize], n_train: usize) -> DatasetInfo {
        let inputs = &self.inputs;
        let per_image: Vec<f64> = (0..inputs.scale_names.len())
            .map(|s| {
                let v: Vec<usize> = rows[..n_train]
                    .iter()
                    .filter_map(|i| self.log.counts.get(i).map(|c| c[s]))
                    .collect();
                v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
            })
            .collect();
        let skipped = self
            .log
            .skipped
            .iter()
            .map(|(&i, reason)| match &inputs.source {
                Source::Images { paths, .. } => (paths[i].display().to_string(), reason.clone()),
                Source::Bags(_) => (inputs.names[i].clone(), reason.clone()),
            })
            .collect();
        DatasetInfo {
            train: self.cfg.train.display().to_string(),
            test: self.cfg.test.display().to_string(),
            classes: inputs.classes.clone(),
            n_train,
            n_test: rows.len() - n_train,
            skipped,
            descriptors_per_image: per_image,
            pca_dims: learned.pcas.iter().map(|p| p.n_components()).collect(),
        }
    }
}

/// Streams `--save-descriptors` into two descriptor files as images pass.
struct DescriptorSink {
    train: crate::descriptor_file::DescriptorFileWriter,
    test: crate::descriptor_file::DescriptorFileWriter,
    n_train: usize,
}

/// The images every needed store holds, train rows first: (rows, train count).
fn usable_rows(
    inputs: &Inputs<'_>,
    log: &ImageLog,
    stores: &BTreeMap<ModelSpec, Store>,
    global: &Option<Store>,
    test_source: &Path,
) -> Result<(Vec<usize>, usize), PipelineError> {
    let ok = |i: &usize| {
        !log.skipped.contains_key(i)
            && stores.values().all(|s| s.has(*i))
            && global.as_ref().is_none_or(|g| g.has(*i))
    };
    let train: Vec<usize> = (0..inputs.n_train).filter(ok).collect();
    let test: Vec<usize> = (inputs.n_train..inputs.names.len()).filter(ok).collect();
    for (c, name) in inputs.classes.iter().enumerate() {
        if !train.iter().any(|&i| inputs.labels[i] == c) {
            return Err(PipelineError::Dataset(format!(
                "training class `{name}` has no readable image"
            )));
        }
    }
    if test.is_empty() {
        return Err(PipelineError::Dataset(format!(
            "{} has no readable image",
            test_source.display()
        )));
    }
    let n_train = train.len();
    Ok((train.into_iter().chain(test).collect(), n_train))
}

/// The process's peak resident memory so far (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
