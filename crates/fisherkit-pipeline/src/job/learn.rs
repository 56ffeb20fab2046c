//! Stages 2–3 of a [`Job`]: the PCA and the background models learned from
//! the sample (or read from the run folder), then the encoding stores opened.

use super::files::write_fitted;
use super::Job;
use crate::report::timed;
use crate::stages::{self, fit_pca, project_sample, Fitted, Learned, Sample};
use crate::store::{Store, StoreFormat};
use crate::{PipelineError, Progress};
use fisherkit::pca::Pca;
use std::collections::BTreeMap;

impl Job<'_> {
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

    pub(super) fn learn_from(
        &mut self,
        sample: Sample,
        progress: &dyn Progress,
    ) -> Result<(), PipelineError> {
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
    pub(super) fn write_models(&self, learned: &Learned) -> Result<(), PipelineError> {
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

    /// The stores of the planned models (and of the global vectors), opened in the run folder.
    pub(super) fn open_stores(&mut self) -> Result<(), PipelineError> {
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
    pub(super) fn open_store(
        &self,
        stem: &str,
        n: usize,
        dim: usize,
    ) -> Result<Store, PipelineError> {
        let format = self.cfg.store_format;
        let mut store = Store::open(&self.folder.store(stem, format), n, dim, format)?;
        let exact = self.folder.store(stem, StoreFormat::F32);
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
}
