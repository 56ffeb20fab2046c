//! Stages 2–3 of a [`Job`]: the PCA and the background models learned from
//! the sample (or read from the run folder), then the encoding stores
//! opened — the way from the sample pass to a [`FittedJob`] (the owner) or
//! a [`LearnedJob`] (a worker).

use super::files::write_fitted;
use super::{Core, FittedJob, Job, LearnedJob, Stores};
use crate::report::timed;
use crate::stages::{self, fit_pca, project_sample, Fitted, Learned, Sample};
use crate::store::{Store, StoreFormat};
use crate::{PipelineError, Progress};
use fisherkit::pca::Pca;
use std::collections::BTreeMap;

impl<'a> Job<'a> {
    /// Stages 2–3: the PCA of every scale and every planned model, learned
    /// from the sample (after every chunk was added) and written to the run
    /// folder, or read from it; then the stores are opened: the encode pass.
    ///
    /// # Errors
    /// Missing sample chunks, a failed fit, an unwritable run folder.
    pub fn fit(mut self, progress: &dyn Progress) -> Result<FittedJob<'a>, PipelineError> {
        let learned = if self.needs_sample() {
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
            let learned = self.learn_from(sample, progress)?;
            // Every PCA and model is in the run folder now: the sample
            // pass's checkpoint is no longer needed (it is GBs at paper size).
            if !self.core.folder.temporary {
                let _ = std::fs::remove_dir_all(self.sample_part_dir());
            }
            learned
        } else {
            self.take_learned()?
        };
        let core = self.core;
        core.write_models(&learned)?;
        let stores = core.open_stores(&learned)?;
        Ok(FittedJob {
            core,
            learned,
            stores,
        })
    }

    /// Loads the PCA and models a worker needs from the run folder (written
    /// there by the owner's [`Job::fit`]), for the encode pass's computation
    /// or, once the encode pass is over, the classifier stage
    /// ([`LearnedJob::encoded`]).
    ///
    /// # Errors
    /// A PCA or model the run folder does not hold (on a cluster: the run
    /// folder is not on a file system every node sees).
    pub fn load_learned(mut self) -> Result<LearnedJob<'a>, PipelineError> {
        let learned = self.take_learned()?;
        Ok(LearnedJob {
            core: self.core,
            learned,
        })
    }

    /// The PCA and models read from the run folder when the job opened, if
    /// it holds every one.
    fn take_learned(&mut self) -> Result<Learned, PipelineError> {
        let complete = !self.needs_sample();
        let pcas = std::mem::take(&mut self.pcas).into_iter().collect();
        match (complete, pcas) {
            (true, Some(pcas)) => Ok(Learned {
                pcas,
                models: std::mem::take(&mut self.models),
            }),
            _ => Err(PipelineError::Io {
                path: self.core.folder.dir.display().to_string(),
                message: "the run folder holds no fitted PCA and models: fit them first (on a cluster, put the cache folder on a file system every node sees)".into(),
            }),
        }
    }

    /// The PCA and the models the run folder lacks, learned from the sample
    /// and written there; with those it holds, what the encode pass needs.
    fn learn_from(
        &mut self,
        sample: Sample,
        progress: &dyn Progress,
    ) -> Result<Learned, PipelineError> {
        let cfg_dim = self.core.cfg.pca_dim;
        let fresh = timed(&mut self.core.timings, "pca".into(), || {
            fit_pca(&sample, cfg_dim)
        })?;
        let mut fresh = fresh.into_iter();
        let mut pcas: Vec<Pca<f32>> = Vec::with_capacity(self.pcas.len());
        for (s, read) in std::mem::take(&mut self.pcas).into_iter().enumerate() {
            let p = fresh.next();
            let p = match (read, p) {
                (Some(read), _) => read,
                (None, Some(p)) => {
                    let path = self.core.pca_path(s);
                    fisherkit_io::ModelFile::write(&p, &path, &BTreeMap::new()).map_err(|e| {
                        PipelineError::Io {
                            path: path.display().to_string(),
                            message: e.to_string(),
                        }
                    })?;
                    p
                }
                (None, None) => {
                    return Err(PipelineError::Dataset(format!(
                        "the sample holds no PCA sums of scale {}",
                        self.core.inputs.scale_names[s]
                    )))
                }
            };
            pcas.push(p);
        }
        let xs = project_sample(&sample, &pcas)?;
        drop(sample);
        let fit = self.core.fit_settings();
        let mut models = std::mem::take(&mut self.models);
        for m in self.core.plan.clone() {
            if models.contains_key(&m) {
                continue;
            }
            let name = &self.core.inputs.scale_names[m.scale];
            let (f, record, secs) = stages::fit_model(&m, &xs[m.scale], &fit, name, progress)?;
            self.core
                .timings
                .push((format!("em {}", m.stem(name, &fit)), secs));
            write_fitted(&self.core.model_path(&m), &f, &record)?;
            models.insert(m, f);
            self.core.fits.insert(m, record);
        }
        let records: Vec<_> = self.core.fits.values().collect();
        if let Some(note) = stages::cap_note(&records, crate::defaults::EM_TOL) {
            progress.warn(&note);
        }
        Ok(Learned { pcas, models })
    }
}

impl Core<'_> {
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

    /// The stores of the planned models (and of the global vectors), opened
    /// in the run folder. Opening writes (a store's shape, its size, its
    /// journal's end): only the owner opens them during the encode pass.
    pub(super) fn open_stores(&self, learned: &Learned) -> Result<Stores, PipelineError> {
        let fit = self.fit_settings();
        let n = self.inputs.names.len();
        let mut stores = Stores {
            models: BTreeMap::new(),
            global: None,
        };
        for (m, f) in &learned.models {
            let dim = f.raw_encoder()?.output_dim();
            let stem = m.stem(&self.inputs.scale_names[m.scale], &fit);
            stores.models.insert(*m, self.open_store(&stem, n, dim)?);
        }
        if self.with_global() {
            let dim = self.inputs.source.num_classes();
            stores.global = Some(self.open_store("global", n, dim)?);
        }
        Ok(stores)
    }

    /// Opens the store `stem` in the run's format (`stem.store` for `f32`,
    /// `stem.q8.store` for `q8`). A `q8` store first imports the rows of
    /// the same encodings kept in `f32` by an earlier run, if any (never the
    /// other way: an `f32` store holds exact values only).
    fn open_store(&self, stem: &str, n: usize, dim: usize) -> Result<Store, PipelineError> {
        let format = self.cfg.store_format;
        let mut store = Store::open(&self.folder.store(stem, format), n, dim, format)?;
        let exact = self.folder.store(stem, StoreFormat::F32);
        if format == StoreFormat::Q8 && exact.join("meta.json").exists() {
            let old = Store::open(&exact, n, dim, StoreFormat::F32)?;
            store.import(&old)?;
        }
        Ok(store)
    }
}
