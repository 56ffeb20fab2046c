//! A run as an object that owns its run folder, one type per phase: the
//! stages of [`crate::run()`] one call at a time, so that the two passes over
//! images (the sample pass and the encode pass) and the classifier stage's
//! tasks can be computed elsewhere — other threads, processes or Ray
//! workers — and handed back (docs/pipeline.md §6).
//!
//! The owner calls, in order:
//!
//! 1. [`Job::images`] or [`Job::descriptor_files`] opens the run: a [`Job`],
//!    the sample pass. [`Job::sample_chunks`] → for each chunk
//!    [`Job::sample_chunk`] (anywhere) then [`Job::add_sample`] (here, in
//!    chunk order).
//! 2. [`Job::fit`] (consuming) learns the PCA and models, or reads them from
//!    the run folder, and opens the stores: a [`FittedJob`], the encode pass.
//!    For batches of [`FittedJob::encode_todo`]: [`FittedJob::encode_images`]
//!    (anywhere) then [`FittedJob::put_encoded`] (here).
//! 3. [`FittedJob::encoded`] (consuming) checks that the stores hold every
//!    image (an error names how many they lack): an [`EncodedJob`], the
//!    classifier stage. Either [`EncodedJob::finish`] in this process, or
//!    [`EncodedJob::classifier_tasks`] → [`EncodedJob::run_classifier_task`]
//!    (any process) → [`EncodedJob::finish_classifier_tasks`]; both return
//!    the [`Report`](crate::report::Report).
//!
//! A worker opens the same job (same settings, same folders) and calls only
//! the computing methods: [`Job::sample_chunk`] on the opened job;
//! [`Job::load_learned`] (consuming) reads the PCA and models the owner's
//! `fit` wrote to the run folder, giving a [`LearnedJob`], whose
//! [`LearnedJob::encode_images`] is the encode pass's computation (it opens
//! no store: the owner writes them during that pass), and whose
//! [`LearnedJob::encoded`] opens the stores, once the encode pass is over,
//! for the classifier tasks. A worker writes nothing, but for the classifier
//! stage's tasks (`tasks.rs`), each of which keeps its own result file in
//! the run folder.
//!
//! What every phase shares (settings, data, run folder, image journal,
//! timings) is one inner `Core`; what one phase has is in its type. One file
//! per phase: `files.rs` (folders, plan, model files), `sample.rs` (the
//! sample pass), `learn.rs` (PCA, models, stores), `encode.rs` (the encode
//! pass), `tasks.rs` and `finish.rs` (the classifier stage and the report);
//! this file holds the types, the opening and the paths.

use crate::config::RunConfig;
use crate::inputs::Inputs;
use crate::output::OutputDir;
use crate::stages::{
    EmRecord, FitSettings, Fitted, ImageLog, Learned, ModelSpec, RunFolder, Sample,
};
use crate::store::Store;
use crate::{PipelineError, Progress};
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

/// What every phase of a job holds: the settings, the data, the run folder
/// and what the run has recorded so far.
struct Core<'a> {
    cfg: RunConfig,
    inputs: Inputs<'a>,
    folder: RunFolder,
    plan: Vec<ModelSpec>,
    log: ImageLog,
    out: Option<OutputDir>,
    timings: Vec<(String, f64)>,
    /// How each model was fitted (if known: a model file of an older run
    /// folder may not say).
    fits: BTreeMap<ModelSpec, EmRecord>,
}

/// A run opened, in its first phase: the sample pass. [`Job::fit`] ends it
/// (the owner), [`Job::load_learned`] skips it (a worker).
pub struct Job<'a> {
    core: Core<'a>,
    /// PCA per scale and models the run folder holds (the rest is learned
    /// by [`Job::fit`]).
    pcas: Vec<Option<Pca<f32>>>,
    models: BTreeMap<ModelSpec, Fitted>,
    /// The sample pass so far: chunks added, merged sums (none before the
    /// first chunk).
    sampled: usize,
    sample: Option<Sample>,
    /// Chunks an earlier, killed run of this job finished (their parts are
    /// in the run folder; read when the owner adds the next chunk or fits).
    resumable: usize,
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

/// A worker's job after [`Job::load_learned`]: the PCA and models read from
/// the run folder, for the encode pass's computation
/// ([`LearnedJob::encode_images`]); [`LearnedJob::encoded`] leads to the
/// classifier stage after the encode pass.
pub struct LearnedJob<'a> {
    core: Core<'a>,
    learned: Learned,
}

/// The owner's job after [`Job::fit`]: the PCA and models learned, the
/// stores open — the encode pass. [`FittedJob::encoded`] ends it.
pub struct FittedJob<'a> {
    core: Core<'a>,
    learned: Learned,
    stores: Stores,
}

/// A job whose stores hold every image (the encode pass over): the
/// classifier stage and the report ([`EncodedJob::finish`], or its tasks).
pub struct EncodedJob<'a> {
    core: Core<'a>,
    learned: Learned,
    stores: Stores,
}

/// The stores of a run's encodings: one per planned model, and the global
/// vectors' when an encoder has `cnn-global`.
struct Stores {
    models: BTreeMap<ModelSpec, Store>,
    global: Option<Store>,
}

impl Stores {
    /// Every store, the models' (in plan order) then the global vectors'.
    fn all(&self) -> impl Iterator<Item = &Store> {
        self.models.values().chain(self.global.as_ref())
    }

    /// Whether a store lacks image `i`.
    fn lack(&self, i: usize) -> bool {
        self.all().any(|s| !s.has(i))
    }
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
        let core = Core {
            cfg,
            inputs,
            folder,
            plan,
            log,
            out,
            timings: Vec::new(),
            fits: BTreeMap::new(),
        };
        let pcas = (0..core.inputs.scale_names.len())
            .map(|s| read_pca_file(&core.pca_path(s)))
            .collect();
        let mut job = Job {
            core,
            pcas,
            models: BTreeMap::new(),
            sampled: 0,
            sample: None,
            resumable: 0,
            disk_need: 0,
            keeping: true,
            kept: (0, 0),
        };
        for m in job.core.plan.clone() {
            if let Some((f, record)) = read_fitted(&job.core.model_path(&m), m.kind) {
                job.models.insert(m, f);
                if let Some(r) = record {
                    job.core.fits.insert(m, r);
                }
            }
        }
        job.resumable = job.count_sample_parts();
        job.core.check_classifier()?;
        job.disk_need = job.core.check_disk()?;
        Ok(job)
    }

    /// Opens the run of `cfg` on the image folders `cfg.train` and `cfg.test`
    /// with the CNN `net` (see [`crate::run()`]).
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

    /// Opens the run of `cfg` on the descriptor files `cfg.train` and
    /// `cfg.test` (see [`crate::run_descriptors`]).
    ///
    /// # Errors
    /// Bad settings, unreadable files.
    pub fn descriptor_files(
        cfg: &RunConfig,
        progress: &dyn Progress,
    ) -> Result<Job<'static>, PipelineError> {
        cfg.validate()?;
        Job::open(cfg.clone(), Inputs::descriptor_files(cfg, progress)?)
    }
}

/// The methods every phase has: the run folder, the settings, the report's
/// timings, the CNN's count.
macro_rules! shared_methods {
    ($($phase:ident),*) => {$(
        impl $phase<'_> {
            /// The run folder (models, stores, image journal).
            pub fn folder(&self) -> &Path {
                &self.core.folder.dir
            }

            /// The settings.
            pub fn config(&self) -> &RunConfig {
                &self.core.cfg
            }

            /// Adds a stage's wall-clock seconds to the report (stages run elsewhere).
            pub fn add_timing(&mut self, name: &str, seconds: f64) {
                self.core.timings.push((name.to_string(), seconds));
            }

            /// Images this job has handed to the CNN so far (in this process: a
            /// worker's own passes, not the ones it was handed).
            pub fn images_through_cnn(&self) -> usize {
                self.core.inputs.source.cnn_images()
            }
        }
    )*};
}

shared_methods!(Job, LearnedJob, FittedJob, EncodedJob);

impl Core<'_> {
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
