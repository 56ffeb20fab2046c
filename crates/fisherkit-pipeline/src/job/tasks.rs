//! The classifier stage of a [`Job`] one task at a time (docs/pipeline.md
//! §6): after the encode pass the owner lists [`Job::classifier_tasks`],
//! any process that opened the same job runs [`Job::run_classifier_task`]
//! (it reads the stores and keeps the task's result in the run folder, as
//! the single-process stage does for a resumed run), and the owner ends
//! with [`Job::finish_classifier_tasks`], which checks the results are there
//! and runs [`Job::finish`]: the same report as without tasks.

use super::finish::usable_rows;
use super::Job;
use crate::classifier_tasks::ClassifierTask;
use crate::config::RunConfig;
use crate::evaluate::Classes;
use crate::inputs::Inputs;
use crate::report::Report;
use crate::stages::{key, Learned};
use crate::{PipelineError, Progress};
use std::time::Instant;

impl<'a> Job<'a> {
    /// Opens the run of `cfg` on the descriptor files `cfg.train` and
    /// `cfg.test` (see [`crate::run_descriptors`]).
    ///
    /// # Errors
    /// Bad settings, unreadable files.
    pub fn descriptor_files(
        cfg: &RunConfig,
        progress: &dyn Progress,
    ) -> Result<Job<'static>, PipelineError> {
        cfg.validate()?;
        Job::open(cfg.clone(), Inputs::descriptor_files(cfg, progress)?)
    }

    /// What the classifier stage reads: the run's rows (train first) and
    /// where its kernels and finished rows are kept.
    pub(super) fn classes<'b>(
        &'b self,
        learned: &'b Learned,
        rows: &'b [usize],
        n_train: usize,
        progress: &'b dyn Progress,
    ) -> Result<Classes<'b>, PipelineError> {
        let c = Classes {
            cfg: &self.cfg,
            progress,
            inputs: &self.inputs,
            learned,
            stores: &self.stores,
            global: &self.global,
            rows,
            n_train,
            out: self.out.as_ref(),
            kernel_dir: self.folder.kernels(),
            rows_key: key(&rows.iter().map(usize::to_string).collect::<Vec<_>>()),
            norms: Default::default(),
            finished: crate::finished::Finished::new(
                self.folder
                    .finished_rows(self.cfg.primal_for(self.inputs.n_train)),
            ),
        };
        std::fs::create_dir_all(&c.kernel_dir).map_err(|e| PipelineError::Io {
            path: c.kernel_dir.display().to_string(),
            message: format!("cannot create the kernel folder: {e}"),
        })?;
        Ok(c)
    }

    /// Readies this job (the owner after the encode pass, or a worker's
    /// fresh job) for the classifier stage: models loaded, stores opened.
    /// Returns the usable rows (train first) and the number of training rows.
    fn classifier_rows(&mut self) -> Result<(Vec<usize>, usize), PipelineError> {
        self.load_learned()?;
        if self.stores.is_empty() && self.global.is_none() {
            self.open_stores()?;
        }
        usable_rows(
            &self.inputs,
            &self.log,
            &self.stores,
            &self.global,
            &self.cfg.test,
        )
    }

    /// Calls `f` with every task of the classifier stage and whether the run
    /// folder holds its result.
    fn with_tasks<T>(
        &mut self,
        progress: &dyn Progress,
        f: impl FnOnce(&Classes<'_>, Vec<(ClassifierTask, crate::classifier_tasks::Work)>) -> T,
    ) -> Result<T, PipelineError> {
        let (rows, n_train) = self.classifier_rows()?;
        let learned = self.learned.as_ref().expect("loaded above");
        let c = self.classes(learned, &rows, n_train, progress)?;
        let tasks = c.tasks();
        Ok(f(&c, tasks))
    }

    /// The tasks of the classifier stage whose results the run folder lacks,
    /// after the encode pass: one per term kernel, then one per report row
    /// (kernel path, [`ClassifierTask::wave`] 0 and 1), or one per report
    /// row (primal path), in the order the stage uses them.
    ///
    /// # Errors
    /// No fitted models in the run folder, a store that cannot be opened, a
    /// class without a readable image; a file system that cannot hold every
    /// term kernel the tasks are to write (they coexist until the report).
    pub fn classifier_tasks(&mut self) -> Result<Vec<ClassifierTask>, PipelineError> {
        let todo = self.with_tasks(&crate::NoProgress, |c, tasks| {
            tasks
                .into_iter()
                .filter(|(t, w)| !c.task_done(t, w))
                .collect::<Vec<_>>()
        })?;
        let kernels = todo
            .iter()
            .filter(|(_, w)| matches!(w, crate::classifier_tasks::Work::Kernel { .. }))
            .count();
        let n = self.inputs.names.len();
        crate::disk::check_task_kernels(&self.folder.dir, kernels, self.inputs.n_train, n)?;
        Ok(todo.into_iter().map(|(t, _)| t).collect())
    }

    /// Runs the classifier task `name` here (any process that opened the
    /// same job after the encode pass) and keeps its result in the run
    /// folder; a task whose result is there already is not run again.
    /// Returns the seconds it took.
    ///
    /// # Errors
    /// A task this run does not have, a failed read of a store, a failed
    /// SVM, a failed write to the run folder.
    pub fn run_classifier_task(
        &mut self,
        name: &str,
        progress: &dyn Progress,
    ) -> Result<f64, PipelineError> {
        let t = Instant::now();
        let mut timings = Vec::new();
        self.with_tasks(progress, |c, tasks| {
            let (task, work) = tasks.iter().find(|(t, _)| t.name == name).ok_or_else(|| {
                PipelineError::Config(format!(
                    "this run has no classifier task `{name}` (a task of another run's settings?)"
                ))
            })?;
            c.run_task(task, work, &mut timings, progress)
        })??;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Ends the run after the classifier tasks `done` ran elsewhere: checks
    /// that the run folder holds each one's result (a worker on another node
    /// writes there only if the cache folder is on a shared file system),
    /// then [`Job::finish`], which reads them instead of computing them.
    ///
    /// # Errors
    /// A missing result; as [`Job::finish`].
    pub fn finish_classifier_tasks(
        mut self,
        done: &[String],
        progress: &dyn Progress,
    ) -> Result<Report, PipelineError> {
        let missing: Vec<String> = self.with_tasks(progress, |c, tasks| {
            done.iter()
                .filter(|name| {
                    !tasks
                        .iter()
                        .any(|(t, w)| &&t.name == name && c.task_done(t, w))
                })
                .cloned()
                .collect()
        })?;
        if let Some(name) = missing.first() {
            return Err(PipelineError::Io {
                path: self.folder.dir.display().to_string(),
                message: format!(
                    "the result of classifier task `{name}` is not in the run folder ({} of {} missing): on a cluster, put the cache folder on a file system every node sees",
                    missing.len(),
                    done.len()
                ),
            });
        }
        self.finish(progress)
    }
}
