//! The end of a job: the encode pass's end checked ([`EncodedJob`]), the
//! usable rows, the classifier stage and the report.

use super::{Core, EncodedJob, Stores};
use crate::evaluate::evaluate;
use crate::inputs::Inputs;
use crate::report::{DatasetInfo, ModelInfo, Report};
use crate::stages::{ImageLog, Learned, ModelKind, Source};
use crate::{PipelineError, Progress};
use std::path::Path;

impl<'a> EncodedJob<'a> {
    /// The classifier stage's job, once `stores` hold every image of the
    /// run that is not skipped.
    pub(super) fn new(
        core: Core<'a>,
        learned: Learned,
        stores: Stores,
    ) -> Result<Self, PipelineError> {
        let missing = core.unstored(&stores);
        if let Some(&first) = missing.first() {
            return Err(PipelineError::Config(format!(
                "the encode pass is not over: the stores lack {} of the run's {} images ({} first); encode them (encode_todo, encode_images, put_encoded) before the classifier stage",
                missing.len(),
                core.inputs.names.len(),
                core.inputs.names[first]
            )));
        }
        Ok(EncodedJob {
            core,
            learned,
            stores,
        })
    }

    /// Stages 5–7: kernels, SVMs, the report.
    ///
    /// # Errors
    /// A class without a readable image, a failed SVM, an unwritable output folder.
    pub fn finish(mut self, progress: &dyn Progress) -> Result<Report, PipelineError> {
        // The encode pass is over: what is left of the sample pass's kept
        // CNN output (an image whose rows a killed run had just committed)
        // would serve nothing.
        let _ = std::fs::remove_dir_all(self.core.kept_dir());
        let (rows, n_train) = self.usable_rows()?;
        self.core.write_image_lists(&rows, n_train)?;
        let mut timings = std::mem::take(&mut self.core.timings);
        let c = self.classes(&rows, n_train, progress)?;
        let (results, sweep, model) = evaluate(&c, &mut timings, progress)?;
        let core = &self.core;
        let dataset = core.dataset_info(&self.learned, &rows, n_train);
        let report = Report {
            results,
            sweep,
            dataset,
            timings,
            config: core.cfg.to_config(core.inputs.images),
            peak_rss_mb: peak_rss_mb(),
            fisherkit_version: env!("CARGO_PKG_VERSION").to_string(),
            cnn: core.inputs.source.cnn_name().map(str::to_string),
            model,
            models: core.model_infos(),
        };
        crate::output::write_report_files(
            &report,
            core.cfg.report.as_deref(),
            core.cfg.plot.as_deref(),
        )?;
        Ok(report)
    }
}

impl Core<'_> {
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
                    log_likelihood_history: record.map(|r| r.history.clone()).unwrap_or_default(),
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

/// The images every needed store holds, train rows first: (rows, train count).
pub(super) fn usable_rows(
    inputs: &Inputs<'_>,
    log: &ImageLog,
    stores: &Stores,
    test_source: &Path,
) -> Result<(Vec<usize>, usize), PipelineError> {
    let ok = |i: &usize| !log.skipped.contains_key(i) && !stores.lack(*i);
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
pub(super) fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
