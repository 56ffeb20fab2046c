//! The classifier stage cut into tasks another process can compute from the
//! run folder (docs/pipeline.md §6): on the kernel path one task per term
//! kernel (a part: a term of one store at one scale, whitened or not), then,
//! in a second wave that reads those kernels, one task per report row (an
//! encoder, whitened or not, at one scale or all); on the primal path one
//! task per report row. A task's result is what the single-process stage
//! keeps in the run folder for a resumed run — the kernel files, the finished
//! row and its SVM — computed by the same functions
//! ([`Classes::part_kernel`], [`kernel_row`], [`primal_row`]), so
//! [`crate::EncodedJob::finish`] afterwards reads them instead of computing them,
//! and the report is the single-process one.

use crate::evaluate::{kernel_row, kinds_of, primal_row, report_jobs, sweep_series, Classes};
use crate::kernel::kernel_saved;
use crate::spec::{EncoderSpec, Term};
use crate::stages::ModelKind;
use crate::{PipelineError, Progress};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Instant;

/// One task of the classifier stage, named by its result in the run folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifierTask {
    /// Unique in the run: the name of its result in the run folder.
    pub name: String,
    /// What it computes, for progress lines (`kernel gmm-fv:var scale 28`,
    /// `primal SVM mfa-fs:loading (whitened) scale all`).
    pub label: String,
    /// Tasks of a wave read the results of the earlier waves: 0 the term
    /// kernels (kernel path) or the rows (primal path), 1 the kernel path's
    /// rows. The tasks of one wave are independent.
    pub wave: usize,
}

/// What a task computes.
pub(crate) enum Work {
    /// The kernel of term `term` of `spec` at scale `scale`.
    Kernel {
        spec: EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        term: usize,
        scale: usize,
    },
    /// The kernel path's report row of `spec` at `scale` (`None`: all scales).
    KernelRow {
        spec: EncoderSpec,
        whiten: bool,
        scale: Option<usize>,
    },
    /// The primal report row of `spec` at `scale` (`None`: all scales).
    Primal {
        spec: EncoderSpec,
        whiten: bool,
        scale: Option<usize>,
    },
}

impl Classes<'_> {
    /// Every task of the stage, in the order the single-process stage meets
    /// their results: the report's encoders, then the sweep's (kernel path;
    /// a part shared by several encoders is one task).
    pub(crate) fn tasks(&self) -> Vec<(ClassifierTask, Work)> {
        let kinds = kinds_of(self.cfg);
        let scale_name =
            |s: Option<usize>| s.map_or("all".to_string(), |s| self.inputs.scale_names[s].clone());
        let mut out = Vec::new();
        if self.primal() {
            return self.row_tasks("primal SVM", "primal", 0);
        }
        let mut parts: Vec<(EncoderSpec, (ModelKind, ModelKind), bool)> = report_jobs(self.cfg)
            .into_iter()
            .map(|(spec, whiten)| (spec.clone(), kinds, whiten))
            .collect();
        parts.extend(
            sweep_series(self.cfg, kinds)
                .into_iter()
                .map(|(_, _, spec, k)| (spec, k, false)),
        );
        let mut seen = HashSet::new();
        for (spec, kinds, whiten) in parts {
            for (term, scale) in self.part_list(&spec) {
                let t = &spec.terms[term];
                let name = self.part_kernel_name(t, scale, kinds, whiten);
                if !seen.insert(name.clone()) {
                    continue;
                }
                let label = format!(
                    "kernel {}{} scale {}",
                    t.name(),
                    if whiten && matches!(t, Term::MfaFs(_)) {
                        " (whitened)"
                    } else {
                        ""
                    },
                    scale_name(Some(scale))
                );
                let work = Work::Kernel {
                    spec: spec.clone(),
                    kinds,
                    whiten,
                    term,
                    scale,
                };
                out.push((
                    ClassifierTask {
                        name: format!("kernels/{name}"),
                        label,
                        wave: 0,
                    },
                    work,
                ));
            }
        }
        out.extend(self.row_tasks("kernel SVM", "kernel-rows", 1));
        out
    }

    /// One task per report row (an encoder, whitened or not, at each scale
    /// and all scales), labelled `what …`, named `dir/<row key>`, in `wave`.
    fn row_tasks(&self, what: &str, dir: &str, wave: usize) -> Vec<(ClassifierTask, Work)> {
        let scale_name =
            |s: Option<usize>| s.map_or("all".to_string(), |s| self.inputs.scale_names[s].clone());
        let mut out = Vec::new();
        for (spec, whiten) in report_jobs(self.cfg) {
            for scale in self.report_scales(spec) {
                let label = format!(
                    "{what} {}{} scale {}",
                    spec.name(),
                    if whiten { " (whitened)" } else { "" },
                    scale_name(scale)
                );
                let name = format!("{dir}/{}", self.finished_key(spec, whiten, scale));
                let (spec, task) = (spec.clone(), ClassifierTask { name, label, wave });
                let work = if dir == "primal" {
                    Work::Primal {
                        spec,
                        whiten,
                        scale,
                    }
                } else {
                    Work::KernelRow {
                        spec,
                        whiten,
                        scale,
                    }
                };
                out.push((task, work));
            }
        }
        out
    }

    /// Whether the run folder holds the result of `work`.
    pub(crate) fn task_done(&self, task: &ClassifierTask, work: &Work) -> bool {
        match work {
            Work::Kernel { .. } => {
                let name = task.name.trim_start_matches("kernels/");
                kernel_saved(&self.kernel_dir, name)
            }
            Work::KernelRow {
                spec,
                whiten,
                scale,
            }
            | Work::Primal {
                spec,
                whiten,
                scale,
            } => self.finished.has(
                &self.finished_key(spec, *whiten, *scale),
                self.row_with_model(spec, *scale),
            ),
        }
    }

    /// Computes `work` and keeps its result in the run folder (nothing when
    /// it is there already).
    pub(crate) fn run_task(
        &self,
        task: &ClassifierTask,
        work: &Work,
        timings: &mut Vec<(String, f64)>,
        progress: &dyn Progress,
    ) -> Result<(), PipelineError> {
        if self.task_done(task, work) {
            return Ok(());
        }
        match work {
            Work::Kernel {
                spec,
                kinds,
                whiten,
                term,
                scale,
            } => {
                self.part_kernel(&spec.terms[*term], *scale, *kinds, *whiten, timings)?;
            }
            Work::KernelRow {
                spec,
                whiten,
                scale,
            } => {
                let kinds = kinds_of(self.cfg);
                let t = Instant::now();
                let mut ks = self.kernels(spec, kinds, *whiten, timings)?;
                let seconds = t.elapsed().as_secs_f64();
                // The weights whenever the run may need them: which all-scale
                // row wins is known only when every row is done.
                let keep = |_: f64| self.row_with_model(spec, *scale);
                kernel_row(self, spec, *whiten, kinds, &mut ks, seconds, *scale, &keep)?;
            }
            Work::Primal {
                spec,
                whiten,
                scale,
            } => {
                let kinds = kinds_of(self.cfg);
                let mut norms = None;
                primal_row(
                    self, spec, *whiten, kinds, *scale, &mut norms, timings, progress,
                )?;
            }
        }
        Ok(())
    }
}
