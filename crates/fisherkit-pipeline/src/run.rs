//! The whole pipeline: [`run`] on image folders, [`run_descriptors`] on
//! descriptor files; both share the stages from PCA onwards, driven by a
//! [`Job`] in this process.

use crate::config::RunConfig;
use crate::dataset::{train_label, ImageSet};
use crate::descriptor_file::{read_descriptor_file, DescriptorSet};
use crate::job::{Inputs, Job};
use crate::report::Report;
use crate::spec::Term;
use crate::stages::Source;
use crate::{PipelineError, Progress};
use fisherkit_cnn::Backbone;
use std::path::{Path, PathBuf};

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

/// Runs the whole pipeline (see the crate docs) on the image folders
/// `cfg.train` and `cfg.test` and returns the report. Streamed: memory is
/// bounded by the batch, the samples, the models and the N × N kernels, not
/// by the number of images × dimension (docs/pipeline.md).
/// `net` is the ImageNet CNN (normally [`Backbone::builtin`]).
///
/// ```no_run
/// use fisherkit_pipeline::{run, NoProgress, RunConfig};
/// let cfg = RunConfig::new("scenes/train".into(), "scenes/test".into());
/// let net = fisherkit_cnn::Backbone::builtin(fisherkit_cnn::BackboneKind::SqueezeNet)?;
/// let report = run(&cfg, &net, &NoProgress)?;
/// for row in &report.results {
///     println!("{} {:.1} %", row.spec, 100.0 * row.accuracy);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(
    cfg: &RunConfig,
    net: &Backbone,
    progress: &dyn Progress,
) -> Result<Report, PipelineError> {
    cfg.validate()?;
    streamed(cfg, image_inputs(cfg, net)?, progress)
}

/// The images of `cfg.train` and `cfg.test` (classes aligned), through `net`.
pub(crate) fn image_inputs<'a>(
    cfg: &RunConfig,
    net: &'a Backbone,
) -> Result<Inputs<'a>, PipelineError> {
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
            with_global: cfg
                .encoders
                .iter()
                .any(|s| s.terms.contains(&Term::CnnGlobal)),
        },
        scale_names: cfg.descriptors.scales.iter().map(u32::to_string).collect(),
        classes,
        images: true,
    };
    Ok(inputs)
}

/// Runs the pipeline from PCA onwards on precomputed descriptors: `cfg.train`
/// and `cfg.test` are descriptor files (see [`crate::descriptor_file`]); each
/// file's bags are one scale, and the CNN settings of `cfg.descriptors` are not
/// used. `cnn-global` is not available (the files hold no image-level scores).
/// The files are read whole (they are the user's own arrays); everything
/// after is streamed as for [`run`].
pub fn run_descriptors(cfg: &RunConfig, progress: &dyn Progress) -> Result<Report, PipelineError> {
    cfg.validate()?;
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
    progress.start("read descriptors", 2);
    let train = read_descriptor_file(&cfg.train)?;
    progress.inc(1);
    let test = read_descriptor_file(&cfg.test)?;
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
        .labels
        .iter()
        .chain(&test.labels)
        .map(|name| train_label(name, &classes))
        .collect::<Result<Vec<_>, _>>()?;
    progress.finish(&format!(
        "{} training and {} test images, {} classes, D = {}",
        train.bags.len(),
        test.bags.len(),
        classes.len(),
        train.dim()
    ));
    let n_train = train.bags.len();
    let DescriptorSet { names, bags, .. } = train;
    let (names, bags) = (
        names.into_iter().chain(test.names).collect(),
        bags.into_iter().chain(test.bags).collect(),
    );
    let inputs = Inputs {
        classes,
        names,
        labels,
        n_train,
        source: Source::Bags(bags),
        scale_names: vec!["file".into()],
        data_key: vec![file_stamp(&cfg.train), file_stamp(&cfg.test)],
        images: false,
    };
    streamed(cfg, inputs, progress)
}

/// The stages in this process: sample → PCA → models → encode → kernels → SVM → report.
fn streamed(
    cfg: &RunConfig,
    inputs: Inputs<'_>,
    progress: &dyn Progress,
) -> Result<Report, PipelineError> {
    let mut job = Job::open(cfg.clone(), inputs)?;
    job.sample_here(progress)?;
    job.fit(progress)?;
    job.encode_here(progress)?;
    job.finish(progress)
}
