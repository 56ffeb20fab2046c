//! Stage 4 of a job: the encode pass (computed anywhere, by a
//! [`FittedJob`] or a worker's [`LearnedJob`]; its parts written into the
//! stores by the [`FittedJob`]), with `--save-descriptors` streamed; and its
//! end, [`FittedJob::encoded`].

use super::{Core, EncodedJob, FittedJob, LearnedJob, Stores};
use crate::stages::{self, EncodeTarget, EncodedPart, KeptFolder, Learned, OnDescriptors, Source};
use crate::{PipelineError, Progress};
use ndarray::{concatenate, Axis};
use std::time::Instant;

impl Core<'_> {
    /// The images the encode pass still has to do (missing from a store,
    /// or all of them with `--save-descriptors`), ascending.
    fn encode_todo(&self, stores: &Stores) -> Vec<usize> {
        let n = self.inputs.names.len();
        let all = self.cfg.save_descriptors.is_some();
        (0..n)
            .filter(|i| !self.log.skipped.contains_key(i))
            .filter(|&i| all || stores.lack(i))
            .collect()
    }

    /// The images not skipped that a store lacks, ascending.
    pub(super) fn unstored(&self, stores: &Stores) -> Vec<usize> {
        (0..self.inputs.names.len())
            .filter(|i| !self.log.skipped.contains_key(i))
            .filter(|&i| stores.lack(i))
            .collect()
    }

    /// The encode pass over `idx` with the PCA and models `learned`, and
    /// how many of them were read from the sample pass's kept output.
    fn encode_with(
        &self,
        learned: &Learned,
        idx: &[usize],
        hook: Option<&mut OnDescriptors<'_>>,
    ) -> Result<(EncodedPart, usize), PipelineError> {
        self.check_images(idx)?;
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
}

impl<'a> LearnedJob<'a> {
    /// The encode pass over the images `idx` (computation only; any
    /// process): [`FittedJob::encode_images`].
    ///
    /// # Errors
    /// An index out of range, a failure of the network.
    pub fn encode_images(&self, idx: &[usize]) -> Result<EncodedPart, PipelineError> {
        Ok(self.core.encode_with(&self.learned, idx, None)?.0)
    }

    /// Opens the stores, after the encode pass, for the classifier stage
    /// (a worker's classifier task): as [`FittedJob::encoded`].
    ///
    /// # Errors
    /// A store that cannot be opened; an image the stores lack.
    pub fn encoded(self) -> Result<EncodedJob<'a>, PipelineError> {
        let stores = self.core.open_stores(&self.learned)?;
        EncodedJob::new(self.core, self.learned, stores)
    }
}

impl<'a> FittedJob<'a> {
    /// The images the encode pass still has to do (missing from a store,
    /// or all of them with `--save-descriptors`), ascending.
    pub fn encode_todo(&self) -> Vec<usize> {
        self.core.encode_todo(&self.stores)
    }

    /// The images not skipped that a store still lacks, ascending:
    /// [`FittedJob::encoded`] refuses the job while there is one.
    pub fn unstored(&self) -> Vec<usize> {
        self.core.unstored(&self.stores)
    }

    /// The encode pass over the images `idx` (computation only; any
    /// process: a worker's [`LearnedJob::encode_images`] is the same).
    /// Images whose CNN output the sample pass kept in the run folder are
    /// read from there instead of going through the CNN.
    ///
    /// # Errors
    /// An index out of range, a failure of the network.
    pub fn encode_images(&self, idx: &[usize]) -> Result<EncodedPart, PipelineError> {
        Ok(self.core.encode_with(&self.learned, idx, None)?.0)
    }

    /// Ends the encode pass: the classifier stage.
    ///
    /// # Errors
    /// An image, not skipped, that a store lacks (the error says how many):
    /// [`FittedJob::put_encoded`] every part of [`FittedJob::encode_todo`] first.
    pub fn encoded(self) -> Result<EncodedJob<'a>, PipelineError> {
        EncodedJob::new(self.core, self.learned, self.stores)
    }

    /// Writes an encoded part into the stores (rows they lack) and journals it.
    ///
    /// # Errors
    /// A part of another run (row count or widths), a full disk.
    pub fn put_encoded(&mut self, part: EncodedPart) -> Result<(), PipelineError> {
        let n_targets = self.stores.all().count();
        let mut ok = Vec::with_capacity(part.rows.len());
        for (i, rows) in &part.rows {
            self.core.check_images(&[*i])?;
            if rows.len() != n_targets {
                return Err(PipelineError::Config(format!(
                    "encoded part for image {i} has {} encodings, the run {n_targets}",
                    rows.len()
                )));
            }
            for (store, row) in self.stores.all().zip(rows) {
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
        let stores = &mut self.stores;
        for s in stores.models.values_mut().chain(stores.global.as_mut()) {
            s.commit(&ok)?;
        }
        self.core
            .log
            .append(&self.core.folder.image_log(), &part.entries)?;
        // Every store holds these images now: their kept CNN output has
        // served (removing it as the stores grow keeps the disk's peak at
        // the larger of the two, not their sum).
        let dir = self.core.kept_dir();
        if dir.is_dir() {
            for i in ok {
                let _ = std::fs::remove_file(crate::kept::path(&dir, i));
            }
        }
        Ok(())
    }

    /// Stage 4 in this process: every image of [`FittedJob::encode_todo`] once
    /// through the CNN and the encoders, batch by batch, with
    /// `--save-descriptors` streamed as images pass; then [`FittedJob::encoded`].
    pub(crate) fn encode_here(
        mut self,
        progress: &dyn Progress,
    ) -> Result<EncodedJob<'a>, PipelineError> {
        let todo = self.encode_todo();
        let mut sink = match &self.core.cfg.save_descriptors {
            Some(dir) => Some(DescriptorSink {
                train: crate::descriptor_file::DescriptorFileWriter::create(
                    &dir.join("train.npz"),
                )?,
                test: crate::descriptor_file::DescriptorFileWriter::create(&dir.join("test.npz"))?,
                n_train: self.core.inputs.n_train,
            }),
            None => None,
        };
        let cnn = matches!(self.core.inputs.source, Source::Images { .. });
        progress.start(
            if cnn { "CNN + encoding" } else { "encoding" },
            todo.len() as u64,
        );
        let t = Instant::now();
        let batch_len = self.core.inputs.source.batch_len();
        let mut from_sample = 0;
        for batch in todo.chunks(batch_len) {
            crate::progress::stop_if_cancelled(progress)?;
            let (part, kept) = match sink.as_mut() {
                Some(s) => {
                    let (names, labels, classes) = (
                        &self.core.inputs.names,
                        &self.core.inputs.labels,
                        &self.core.inputs.classes,
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
                    self.core
                        .encode_with(&self.learned, batch, Some(&mut hook))?
                }
                None => self.core.encode_with(&self.learned, batch, None)?,
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
        let reused = self.core.inputs.names.len() - todo.len();
        let done = todo.len() - from_sample;
        progress.finish(&if cnn {
            format!("{done} images through the CNN, {reused} reused from the run folder, {from_sample} encoded from the sample pass's CNN output")
        } else {
            format!("{done} images encoded, {reused} reused from the run folder")
        });
        self.core.timings.push((
            format!("cnn + encoding ({} images)", todo.len()),
            t.elapsed().as_secs_f64(),
        ));
        if let Some(s) = sink {
            s.train.finish()?;
            s.test.finish()?;
        }
        self.encoded()
    }
}

/// Streams `--save-descriptors` into two descriptor files as images pass.
struct DescriptorSink {
    train: crate::descriptor_file::DescriptorFileWriter,
    test: crate::descriptor_file::DescriptorFileWriter,
    n_train: usize,
}
