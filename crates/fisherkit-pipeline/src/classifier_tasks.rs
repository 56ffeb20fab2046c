//! The classifier stage cut into tasks another process can compute from the
//! run folder (docs/pipeline.md §6): on the kernel path one task per term
//! kernel (a part: a term of one store at one scale, whitened or not), on
//! the primal path one task per report row (an encoder, whitened or not, at
//! one scale or all). A task's result is what the single-process stage keeps
//! in the run folder for a resumed run — the kernel files, the finished
//! primal row and its SVM — computed by the same functions
//! ([`Classes::part_kernel`], [`primal_row`]), so [`crate::Job::finish`]
//! afterwards reads them instead of computing them, and the report is the
//! single-process one.

use crate::evaluate::{kinds_of, primal_row, report_jobs, sweep_series, Classes};
use crate::kernel::kernel_saved;
use crate::spec::{EncoderSpec, Term};
use crate::stages::ModelKind;
use crate::{PipelineError, Progress};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// One task of the classifier stage, named by its result in the run folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassifierTask {
    /// Unique in the run: the name of its result in the run folder.
    pub name: String,
    /// What it computes, for progress lines (`kernel gmm-fv:var scale 28`,
    /// `primal SVM mfa-fs:loading (whitened) scale all`).
    pub label: String,
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
            for (spec, whiten) in report_jobs(self.cfg) {
                for scale in self.report_scales(spec) {
                    let label = format!(
                        "primal SVM {}{} scale {}",
                        spec.name(),
                        if whiten { " (whitened)" } else { "" },
                        scale_name(scale)
                    );
                    let name = format!("primal/{}", self.finished_key(spec, whiten, scale));
                    let work = Work::Primal {
                        spec: spec.clone(),
                        whiten,
                        scale,
                    };
                    out.push((ClassifierTask { name, label }, work));
                }
            }
            return out;
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
                    },
                    work,
                ));
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
            Work::Primal {
                spec,
                whiten,
                scale,
                ..
            } => self.finished.has(
                &self.finished_key(spec, *whiten, *scale),
                self.primal_with_model(spec, *scale),
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
