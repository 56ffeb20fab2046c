//! The sample pass of a [`Job`]: its chunks (computed anywhere, added here
//! in order), their parts kept in the run folder for a resumed run, and the
//! sample images' CNN output kept for the encode pass (docs/pipeline.md §2).

use super::Job;
use crate::kept::KeptCnn;
use crate::stages::{self, sample_images, Sample, SamplePart, SampleSettings, Source};
use crate::{PipelineError, Progress};
use std::time::Instant;

impl Job<'_> {
    pub(super) fn sample_settings(&self) -> SampleSettings {
        SampleSettings {
            images: self.core.cfg.sample_images,
            pca_rows: self.core.cfg.pca_sample,
            model_rows: self.core.cfg.model_sample,
            seed: self.core.cfg.seed,
        }
    }

    pub(super) fn sample_image_list(&self) -> Vec<usize> {
        sample_images(self.core.inputs.n_train, &self.sample_settings())
    }

    /// Whether the sample pass is needed: a PCA or a model is missing from the run folder.
    pub fn needs_sample(&self) -> bool {
        self.pcas.iter().any(Option::is_none) || self.models.len() < self.core.plan.len()
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

    pub(super) fn all_sample_chunks(&self) -> Vec<Vec<usize>> {
        if !self.needs_sample() {
            return Vec::new();
        }
        stages::sample_chunks(&self.sample_image_list())
    }

    /// Where the sample pass keeps its finished chunks ([`crate::stages::RunFolder::sample_parts`]).
    pub(super) fn sample_part_dir(&self) -> std::path::PathBuf {
        self.core.folder.sample_parts(self.core.cfg.model_sample)
    }

    pub(super) fn sample_part_path(&self, chunk: usize) -> std::path::PathBuf {
        self.core
            .folder
            .sample_part(self.core.cfg.model_sample, chunk)
    }

    /// How many chunks an earlier run of this job finished: the leading run
    /// of part files present (only their names are looked at, so a worker
    /// that opens the job reads nothing).
    pub(super) fn count_sample_parts(&self) -> usize {
        if self.core.folder.temporary {
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
    pub(super) fn load_resumed_sample(&mut self) -> Result<(), PipelineError> {
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
            if file.images != chunks[i] || file.scales.len() != self.core.inputs.scale_names.len() {
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

    pub(super) fn sample_chunk_with(
        &self,
        chunk: &[usize],
        keep: bool,
    ) -> Result<(SamplePart, Vec<KeptCnn>), PipelineError> {
        self.core.check_images(chunk)?;
        stages::sample_chunk(
            &self.core.inputs.source,
            chunk,
            self.sample_image_list().len(),
            self.core.inputs.scale_names.len(),
            &self.sample_settings(),
            &self.core.inputs.names,
            keep,
        )
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
            self.core.inputs.scale_names.len(),
            self.core.inputs.source.descriptor_dim(),
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
        self.core
            .log
            .append(&self.core.folder.image_log(), &part.entries)?;
        self.keep(kept, progress);
        if !self.core.folder.temporary {
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
    pub(super) fn keep(&mut self, kept: Vec<KeptCnn>, progress: &dyn Progress) {
        if kept.is_empty() || !self.keeping {
            return;
        }
        let dir = self.core.kept_dir();
        let bytes: u64 = kept.iter().map(|k| k.bytes.len() as u64).sum();
        let stop = |job: &mut Self, why: String| {
            job.keeping = false;
            progress.warn(&format!(
                "not keeping the sample images' CNN output for the encode pass ({why}): the encode pass runs them through the CNN again"
            ));
        };
        match crate::disk::room_to_keep(&self.core.folder.dir, bytes, self.disk_need) {
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
    pub(super) fn merge_sample(&mut self, part: Sample) -> Result<(), PipelineError> {
        match self.sample.as_mut() {
            Some(s) => s.merge(part)?,
            None => self.sample = Some(part),
        }
        self.sampled += 1;
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
        let cnn = matches!(self.core.inputs.source, Source::Images { .. });
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
        self.core
            .timings
            .push(("sample pass (CNN)".into(), t.elapsed().as_secs_f64()));
        Ok(())
    }
}
