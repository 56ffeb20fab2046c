//! `fisherkit.pipeline.run` and `fisherkit.pipeline.config`: the pipeline's
//! one configuration ([`PipelineConfig`]) built from Python's keyword
//! arguments (as JSON: the same names as `fisherkit run`'s flags, with
//! underscores), checked by the library, then run.

use crate::interrupt::{interruptible, Cancel};
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::{CheckedConfig, InputKind, PipelineConfig, Progress};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

/// The built-in CNN `kind`, loaded once per process.
pub(crate) fn net(kind: BackboneKind) -> PyResult<&'static Backbone> {
    static SQUEEZENET: OnceLock<Result<Backbone, String>> = OnceLock::new();
    static EFFICIENTNET: OnceLock<Result<Backbone, String>> = OnceLock::new();
    let cell = match kind {
        BackboneKind::SqueezeNet => &SQUEEZENET,
        BackboneKind::EfficientNetLite0 => &EFFICIENTNET,
    };
    cell.get_or_init(|| Backbone::builtin(kind).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| PyValueError::new_err(format!("built-in CNN {kind}: {e}")))
}

/// The built-in network of a run (the Python module has no ONNX support).
pub(crate) fn builtin(cfg: &fisherkit_pipeline::CheckedConfig) -> PyResult<BackboneKind> {
    cfg.run_config().cnn.builtin().ok_or_else(|| {
        PyValueError::new_err(
            "cnn: the Python module is built without ONNX support; use the fisherkit command \
             line built with --features onnx for an ONNX model",
        )
    })
}

/// The checked configuration of `request`, JSON text
/// `{"config": null | "FILE.json" | {…}, "options": {name: value, …}}`:
/// the base configuration (the defaults, a file — a configuration or a
/// report — or a nested dict) with each option set over it.
pub(crate) fn checked(request: &str) -> PyResult<CheckedConfig> {
    let bad = |e: fisherkit_pipeline::PipelineError| PyValueError::new_err(e.to_string());
    let request: Map<String, Value> = serde_json::from_str(request)
        .map_err(|e| PyValueError::new_err(format!("options: {e}")))?;
    let base = match request.get("config") {
        None | Some(Value::Null) => PipelineConfig::default(),
        Some(Value::String(path)) => PipelineConfig::read(Path::new(path)).map_err(bad)?,
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| PyValueError::new_err(format!("config: {e}")))?,
    };
    let options = match request.get("options") {
        Some(Value::Object(o)) => o.clone(),
        _ => Map::new(),
    };
    base.with_options(&options)
        .and_then(|c| c.check())
        .map_err(bad)
}

/// The checked configuration of `request` (see [`checked`]) in canonical
/// form, as JSON text.
#[pyfunction]
fn pipeline_config(request: &str) -> PyResult<String> {
    checked(request)?
        .config()
        .to_json()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Runs the pipeline on the configuration of `request` (see [`checked`])
/// and returns the report as JSON text (which it also writes to the
/// configuration's `report`). Progress lines go to stderr when `verbose`.
/// The GIL is released while it computes; Ctrl-C raises KeyboardInterrupt
/// between batches.
#[pyfunction]
fn pipeline_run(py: Python<'_>, request: &str, verbose: bool) -> PyResult<String> {
    let cfg = checked(request)?;
    let net = match cfg.input() {
        InputKind::Images => Some(net(builtin(&cfg)?)?),
        InputKind::DescriptorFiles => None,
    };
    let report = interruptible(py, |cancel| {
        cfg.execute(net, &Stderr::new(verbose, Some(cancel)))
    })?
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    serde_json::to_string(&report).map_err(|e| PyValueError::new_err(format!("report: {e}")))
}

/// Progress of a run from Python: the stages' summaries and warnings on
/// stderr when verbose (as `fisherkit run` prints them), and the cancel flag
/// Ctrl-C sets, which the run checks between batches.
pub(crate) struct Stderr<'a> {
    verbose: bool,
    start: Instant,
    cancel: Option<&'a Cancel>,
}

impl<'a> Stderr<'a> {
    /// Lines on stderr if `verbose`; cancelled once `cancel` is set.
    pub(crate) fn new(verbose: bool, cancel: Option<&'a Cancel>) -> Self {
        Self {
            verbose,
            start: Instant::now(),
            cancel,
        }
    }

    fn line(&self, text: &str) {
        if self.verbose {
            eprintln!("[{:6.1} s] {text}", self.start.elapsed().as_secs_f64());
        }
    }
}

impl Progress for Stderr<'_> {
    fn start(&self, _stage: &str, _len: u64) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self, summary: &str) {
        self.line(summary);
    }
    fn warn(&self, message: &str) {
        self.line(message);
    }
    fn note(&self, message: &str) {
        self.line(message);
    }
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(Cancel::is_set)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pipeline_config, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline_run, m)?)?;
    Ok(())
}
