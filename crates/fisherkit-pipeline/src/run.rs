//! The whole pipeline: [`run`] on image folders, [`run_descriptors`] on
//! descriptor files; both share the stages from PCA onwards, driven by a
//! [`Job`] through its phases in this process.

use crate::config::RunConfig;
use crate::inputs::Inputs;
use crate::job::Job;
use crate::report::Report;
use crate::{PipelineError, Progress};
use fisherkit_cnn::Backbone;

/// Runs the whole pipeline (see the crate docs) on the image folders
/// `cfg.train` and `cfg.test` and returns the report. Streamed: memory is
/// bounded by the batch, the samples, the models and the n × n training kernels, not
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
    let cfg = &with_network(cfg, net)?;
    streamed(cfg, Inputs::images(cfg, net)?, progress)
}

/// `cfg` recording the network given (which the report and a saved
/// classifier name): a built-in network replaces the configuration's
/// `cnn`; an ONNX model must be the configuration's (its path and
/// preprocessing are not in the network).
fn with_network(cfg: &RunConfig, net: &Backbone) -> Result<RunConfig, PipelineError> {
    let mut cfg = cfg.clone();
    match (net.kind(), &cfg.cnn) {
        (Some(kind), _) => cfg.cnn = crate::CnnChoice::Builtin(kind),
        (None, crate::CnnChoice::Onnx { .. }) => {}
        (None, crate::CnnChoice::Builtin(k)) => {
            return Err(PipelineError::Config(format!(
            "the network given is an ONNX model but the configuration's cnn is the built-in {k}: \
                 set RunConfig::cnn to the model (CnnChoice::Onnx)"
        )))
        }
    }
    Ok(cfg)
}

/// Runs the pipeline from PCA onwards on precomputed descriptors: `cfg.train`
/// and `cfg.test` are descriptor files (see [`crate::descriptor_file`]); each
/// file's bags are one scale, and the CNN settings of `cfg.descriptors` are not
/// used. `cnn-global` is not available (the files hold no image-level scores).
/// The files are opened and checked without their descriptors, and each
/// pass reads only the bags of its batch: streamed as [`run`] is.
pub fn run_descriptors(cfg: &RunConfig, progress: &dyn Progress) -> Result<Report, PipelineError> {
    cfg.validate()?;
    let inputs = Inputs::descriptor_files(cfg, progress)?;
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
    job.fit(progress)?.encode_here(progress)?.finish(progress)
}
