//! The classifier stage of an [`EncodedJob`] one task at a time
//! (docs/pipeline.md §6): after the encode pass the owner lists
//! [`EncodedJob::classifier_tasks`], any process that opened the same job
//! runs [`EncodedJob::run_classifier_task`] (a worker's job reaches that
//! phase by [`Job::load_learned`](super::Job::load_learned) then
//! [`LearnedJob::encoded`](super::LearnedJob::encoded); the task reads the
//! stores and keeps its result in the run folder, as the single-process
//! stage does for a resumed run), and the owner ends with
//! [`EncodedJob::finish_classifier_tasks`], which checks the results are
//! there and runs [`EncodedJob::finish`]: the same report as without tasks.

use super::finish::usable_rows;
use super::EncodedJob;
use crate::classifier_tasks::ClassifierTask;
use crate::evaluate::Classes;
use crate::report::Report;
use crate::stages::key;
use crate::{PipelineError, Progress};
use std::time::Instant;

impl EncodedJob<'_> {
    /// What the classifier stage reads: the run's rows (train first) and
    /// where its kernels and finished rows are kept.
    pub(super) fn classes<'b>(
        &'b self,
        rows: &'b [usize],
        n_train: usize,
        progress: &'b dyn Progress,
    ) -> Result<Classes<'b>, PipelineError> {
        let core = &self.core;
        let c = Classes {
            cfg: &core.cfg,
            progress,
            inputs: &core.inputs,
            learned: &self.learned,
            stores: &self.stores.models,
            global: &self.stores.global,
            rows,
            n_train,
            out: core.out.as_ref(),
            kernel_dir: core.folder.kernels(),
            rows_key: key(&rows.iter().map(usize::to_string).collect::<Vec<_>>()),
            norms: Default::default(),
            finished: crate::finished::Finished::new(
                core.folder
                    .finished_rows(core.cfg.primal_for(core.inputs.n_train)),
            ),
        };
        std::fs::create_dir_all(&c.kernel_dir).map_err(|e| PipelineError::Io {
            path: c.kernel_dir.display().to_string(),
            message: format!("cannot create the kernel folder: {e}"),
        })?;
        Ok(c)
    }

    /// The usable rows (train first) and the number of training rows.
    pub(super) fn usable_rows(&self) -> Result<(Vec<usize>, usize), PipelineError> {
        usable_rows(
            &self.core.inputs,
            &self.core.log,
            &self.stores,
            &self.core.cfg.test,
        )
    }

    /// Calls `f` with every task of the classifier stage and whether the run
    /// folder holds its result.
    fn with_tasks<T>(
        &self,
        progress: &dyn Progress,
        f: impl FnOnce(&Classes<'_>, Vec<(ClassifierTask, crate::classifier_tasks::Work)>) -> T,
    ) -> Result<T, PipelineError> {
        let (rows, n_train) = self.usable_rows()?;
        let c = self.classes(&rows, n_train, progress)?;
        let tasks = c.tasks();
        Ok(f(&c, tasks))
    }

    /// The tasks of the classifier stage whose results the run folder lacks:
    /// one per term kernel, then one per report row (kernel path,
    /// [`ClassifierTask::wave`] 0 and 1), or one per report row (primal
    /// path), in the order the stage uses them.
    ///
    /// # Errors
    /// A class without a readable image; a file system that cannot hold
    /// every term kernel the tasks are to write (they coexist until the report).
    pub fn classifier_tasks(&self) -> Result<Vec<ClassifierTask>, PipelineError> {
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
        let inputs = &self.core.inputs;
        let (n_train, n) = (inputs.n_train, inputs.names.len());
        crate::disk::check_task_kernels(&self.core.folder.dir, kernels, n_train, n)?;
        Ok(todo.into_iter().map(|(t, _)| t).collect())
    }

    /// Runs the classifier task `name` here (any process whose job of the
    /// same settings reached this phase) and keeps its result in the run
    /// folder; a task whose result is there already is not run again.
    /// Returns the seconds it took.
    ///
    /// # Errors
    /// A task this run does not have, a failed read of a store, a failed
    /// SVM, a failed write to the run folder.
    pub fn run_classifier_task(
        &self,
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
    /// then [`EncodedJob::finish`], which reads them instead of computing them.
    ///
    /// # Errors
    /// A missing result; as [`EncodedJob::finish`].
    pub fn finish_classifier_tasks(
        self,
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
                path: self.core.folder.dir.display().to_string(),
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
