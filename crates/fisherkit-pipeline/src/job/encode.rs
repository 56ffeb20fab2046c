//! Stage 4 of a [`Job`]: the encode pass (computed anywhere, its parts
//! written into the stores here), with `--save-descriptors` streamed.

use super::Job;
use crate::stages::{self, EncodeTarget, EncodedPart, KeptFolder, OnDescriptors, Source};
use crate::{PipelineError, Progress};
use ndarray::{concatenate, Axis};
use std::time::Instant;

impl Job<'_> {
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
    pub(super) fn encode_with(
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
        self.log.append(&self.folder.image_log(), &part.entries)?;
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
}

/// Streams `--save-descriptors` into two descriptor files as images pass.
struct DescriptorSink {
    train: crate::descriptor_file::DescriptorFileWriter,
    test: crate::descriptor_file::DescriptorFileWriter,
    n_train: usize,
}
