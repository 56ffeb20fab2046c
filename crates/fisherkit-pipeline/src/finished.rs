//! Finished report rows kept in the run folder (docs/pipeline.md §4, §4b):
//! a killed run started again, or the driver after a cluster's classifier
//! tasks, reads them instead of training their SVMs again.

use crate::report::ResultRow;
use crate::PipelineError;
use fisherkit::svm::LinearSvc;
use fisherkit_io::{ClassLabels, LabelledSvm, LinearSvmModel, ModelFile};
use std::path::{Path, PathBuf};

/// The finished result rows of a run's classifier path in the run folder
/// (`<dir>/<name>.json`, with `<name>.safetensors`, the trained SVM, when the
/// run needs it: an output folder, a saved classifier), so that a killed run
/// started again loses no finished SVM. The model is written first and the row last, atomically: a
/// row present means its work is complete.
pub(crate) struct Finished {
    dir: PathBuf,
}

impl Finished {
    /// The folder `dir` (created by the first [`Finished::save`]).
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{name}.json")),
            self.dir.join(format!("{name}.safetensors")),
        )
    }

    /// Whether the row `name` (and, if `with_model`, its SVM) is kept here,
    /// without reading them.
    pub(crate) fn has(&self, name: &str, with_model: bool) -> bool {
        let (row, model) = self.paths(name);
        row.is_file() && (!with_model || model.is_file())
    }

    /// The row `name` and, if `with_model`, its SVM, when a run finished them
    /// (anything unreadable counts as not finished).
    pub(crate) fn load(
        &self,
        name: &str,
        with_model: bool,
    ) -> Option<(ResultRow, Option<LinearSvc<f32>>)> {
        let (row_path, model_path) = self.paths(name);
        let row: ResultRow = serde_json::from_slice(&std::fs::read(row_path).ok()?).ok()?;
        if !with_model {
            return Some((row, None));
        }
        match fisherkit_io::LinearSvmModel::read(&model_path).ok()? {
            LinearSvmModel::F32(m) => Some((row, Some(m.svm))),
            LinearSvmModel::F64(_) => None,
        }
    }

    /// Keeps the row `name` and, given the class names, its SVM `svm` if
    /// any (handed back: at SUN397's size its weights are gigabytes, not
    /// copied). A row whose SVM is not kept is reloaded without one.
    ///
    /// # Errors
    /// A failed write.
    pub(crate) fn save(
        &self,
        name: &str,
        row: &ResultRow,
        svm: Option<LinearSvc<f32>>,
        classes: Option<&[String]>,
    ) -> Result<Option<LinearSvc<f32>>, PipelineError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| PipelineError::Io {
            path: self.dir.display().to_string(),
            message: format!("cannot create the folder of finished SVMs: {e}"),
        })?;
        let (row_path, model_path) = self.paths(name);
        let err = |p: &Path, e: fisherkit_io::IoError| PipelineError::Io {
            path: p.display().to_string(),
            message: e.to_string(),
        };
        let svm = match (svm, classes) {
            (Some(svm), Some(classes)) => {
                let m = LabelledSvm {
                    svm,
                    classes: ClassLabels::Str(classes.to_vec()),
                    c: Some(row.c),
                };
                m.write(&model_path, &Default::default())
                    .map_err(|e| err(&model_path, e))?;
                Some(m.svm)
            }
            (svm, _) => svm,
        };
        let json = serde_json::to_vec(row).map_err(|e| PipelineError::Io {
            path: row_path.display().to_string(),
            message: e.to_string(),
        })?;
        fisherkit_io::write_file(&row_path, &json).map_err(|e| err(&row_path, e))?;
        Ok(svm)
    }
}
