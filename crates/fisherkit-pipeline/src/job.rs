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
//!
//! One file per phase: `files.rs` (folders, plan, model files), `sample.rs`
//! (the sample pass), `learn.rs` (PCA, models, stores), `encode.rs` (the
//! encode pass), `tasks.rs` and `finish.rs` (the classifier stage and the
//! report); this file holds the job, its opening and its paths.

use crate::config::RunConfig;
use crate::inputs::Inputs;
use crate::output::OutputDir;
use crate::stages::{
    EmRecord, FitSettings, Fitted, ImageLog, Learned, ModelSpec, RunFolder, Sample,
};
use crate::store::Store;
use crate::PipelineError;
use fisherkit::pca::Pca;
use std::collections::BTreeMap;
use std::path::Path;

mod encode;
mod files;
mod finish;
mod learn;
mod sample;
mod tasks;

use files::{fit_settings, model_plan, output_dir, read_fitted, read_pca_file, run_folder};

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
        let log = ImageLog::load(&folder.image_log());
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
        if self.cfg.compact_dim.is_some() && self.cfg.primal_for(n) {
            return Err(PipelineError::Config(format!(
                "the compact variant (--compact-pca) is computed from the training kernels, and this run of {n} training images trains on the primal path (its kernels would take {:.1} GB, more than {:.1} GB, or --classifier primal): drop --compact-pca or pass --classifier kernel",
                crate::Classifier::kernel_bytes(n, self.cfg.with_global()) as f64 / 1e9,
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
        self.folder.pca(&self.inputs.scale_names[s])
    }

    fn model_path(&self, m: &ModelSpec) -> std::path::PathBuf {
        let stem = m.stem(&self.inputs.scale_names[m.scale], &self.fit_settings());
        self.folder.model(&stem)
    }

    /// Images this job has handed to the CNN so far (in this process: a
    /// worker's own passes, not the ones it was handed).
    pub fn images_through_cnn(&self) -> usize {
        self.inputs.source.cnn_images()
    }

    /// Where the sample pass keeps its CNN output for the encode pass.
    fn kept_dir(&self) -> std::path::PathBuf {
        self.folder.kept_cnn()
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

    fn with_global(&self) -> bool {
        self.cfg.with_global()
    }
}
