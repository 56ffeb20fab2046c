//! What a run reads: class names, labels, image names and where the
//! descriptors come from ([`Inputs`]), gathered from image folders
//! ([`Inputs::images`]) or descriptor files ([`Inputs::descriptor_files`]).
//! The stages ([`crate::job::Job`], [`crate::evaluate`]) take an `Inputs`;
//! nothing here depends on them.

use crate::config::RunConfig;
use crate::dataset::{train_label, ImageSet};
use crate::descriptor_file::DescriptorReader;
use crate::spec::Term;
use crate::stages::{BagFiles, Source};
use crate::{PipelineError, Progress};
use fisherkit_cnn::Backbone;
use std::path::{Path, PathBuf};

/// The data of a run: names, labels and where the descriptors come from.
pub(crate) struct Inputs<'a> {
    /// Class names; labels index into them.
    pub(crate) classes: Vec<String>,
    /// `<class>/<file>` (images) or the descriptor file's names, train then test.
    pub(crate) names: Vec<String>,
    /// Label of every image, train then test.
    pub(crate) labels: Vec<usize>,
    /// Images `0..n_train` are the training images.
    pub(crate) n_train: usize,
    pub(crate) source: Source<'a>,
    /// One name per descriptor scale, for messages, timings and file names.
    pub(crate) scale_names: Vec<String>,
    /// What identifies the data (file names, sizes and times) in the run folder's key.
    pub(crate) data_key: Vec<String>,
    /// The data came from image folders.
    pub(crate) images: bool,
}

impl<'a> Inputs<'a> {
    /// The images of `cfg.train` and `cfg.test` (classes aligned), through `net`.
    ///
    /// # Errors
    /// Unreadable folders, fewer than two classes, test classes unknown to training.
    pub(crate) fn images(cfg: &RunConfig, net: &'a Backbone) -> Result<Self, PipelineError> {
        let train_set = ImageSet::scan(&cfg.train)?;
        let test_set = ImageSet::scan(&cfg.test)?.align_to(&train_set)?;
        check_class_count(&train_set.classes, &cfg.train)?;
        let classes = train_set.classes.clone();
        let items: Vec<&(PathBuf, usize)> = train_set.items.iter().chain(&test_set.items).collect();
        let names = items
            .iter()
            .map(|(p, y)| {
                let file = p.file_name().unwrap_or_default().to_string_lossy();
                format!("{}/{file}", classes[*y])
            })
            .collect();
        let inputs = Inputs {
            names,
            labels: items.iter().map(|(_, y)| *y).collect(),
            n_train: train_set.items.len(),
            data_key: items.iter().map(|(p, _)| file_stamp(p)).collect(),
            source: Source::Images {
                net,
                paths: items.iter().map(|(p, _)| p.clone()).collect(),
                params: cfg.descriptors.clone(),
                with_global: cfg.with_global(),
                cnn_images: Default::default(),
            },
            scale_names: cfg.descriptors.scales.iter().map(u32::to_string).collect(),
            classes,
            images: true,
        };
        Ok(inputs)
    }

    /// The descriptor files `cfg.train` and `cfg.test` (see [`crate::descriptor_file`]),
    /// opened and validated; their bags are read batch by batch by the passes
    /// ([`Source::Bags`]); each file's bags are one scale. `cnn-global` and saving
    /// descriptors need images and are refused.
    ///
    /// # Errors
    /// Those two settings, unreadable files, different dimensions, fewer than
    /// two classes, test labels unknown to training.
    pub(crate) fn descriptor_files(
        cfg: &RunConfig,
        progress: &dyn Progress,
    ) -> Result<Inputs<'static>, PipelineError> {
        if let Some(s) = cfg
            .encoders
            .iter()
            .find(|s| s.terms.contains(&Term::CnnGlobal))
        {
            return Err(PipelineError::Config(format!(
            "encoder `{}`: cnn-global needs the CNN's image-level scores, which descriptor files do not hold; use it with image folders",
            s.name()
        )));
        }
        if cfg.save_descriptors.is_some() {
            return Err(PipelineError::Config(
                "saving descriptors needs image folders as input, not descriptor files".into(),
            ));
        }
        progress.start("open descriptor files", 2);
        let train = DescriptorReader::open(&cfg.train)?;
        progress.inc(1);
        let test = DescriptorReader::open(&cfg.test)?;
        progress.inc(1);
        if test.dim() != train.dim() {
            return Err(PipelineError::Dataset(format!(
            "{} has descriptors of dimension {} but {} has {}; train and test must have the same D",
            cfg.test.display(),
            test.dim(),
            cfg.train.display(),
            train.dim()
        )));
        }
        let classes = train.classes();
        check_class_count(&classes, &cfg.train)?;
        let labels = train
            .labels()
            .iter()
            .chain(test.labels())
            .map(|name| train_label(name, &classes))
            .collect::<Result<Vec<_>, _>>()?;
        for f in [&train, &test] {
            if !f.streamed() {
                progress.warn(&format!(
                    "{}: the stacked layout compressed (np.savez_compressed) or in Fortran order cannot be read image by image, so its descriptors are held in memory; save it with np.savez, C order, to stream it",
                    f.path().display()
                ));
            }
        }
        progress.finish(&format!(
            "{} training and {} test images, {} classes, D = {}",
            train.len(),
            test.len(),
            classes.len(),
            train.dim()
        ));
        let n_train = train.len();
        let names = train.names().iter().chain(test.names()).cloned().collect();
        let inputs = Inputs {
            classes,
            names,
            labels,
            n_train,
            source: Source::Bags(Box::new(BagFiles { train, test })),
            scale_names: vec!["file".into()],
            data_key: vec![file_stamp(&cfg.train), file_stamp(&cfg.test)],
            images: false,
        };
        Ok(inputs)
    }
}

/// Classification needs at least two classes.
fn check_class_count(classes: &[String], source: &Path) -> Result<(), PipelineError> {
    if classes.len() < 2 {
        return Err(PipelineError::Dataset(format!(
            "{} has {} class; classification needs at least 2",
            source.display(),
            classes.len()
        )));
    }
    Ok(())
}

/// `path`'s size and modification time, for the run folder's key.
fn file_stamp(path: &Path) -> String {
    let m = std::fs::metadata(path).ok();
    let size = m.as_ref().map_or(0, |m| m.len());
    let mtime = m
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{}|{size}|{mtime}", path.display())
}
