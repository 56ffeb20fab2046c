//! Stages 5–7 of a run: the term kernels accumulated from the stores, the
//! SVM on each encoder's kernel (per scale, all scales, compact), the
//! Figure-1 sweep, the output folder's SVMs and encodings.

use crate::classifier::{part_list as parts_of, term_columns as term_columns_of};
use crate::config::{RunConfig, Whitening};
use crate::error::zeros_checked;
use crate::finished::Finished;
use crate::inputs::Inputs;
use crate::kernel::{load_gram, load_kernel, save_kernel, KernelUses, TermColumns, TermKernel};
use crate::output::{file_stem, OutputDir};
use crate::primal::{FeatureRows, PartNorms};
use crate::progress::stop_if_cancelled;
use crate::report::ModelReport;
use crate::report::{timed, ResultRow, SweepPoint};
use crate::spec::{EncoderSpec, Term};
use crate::stages::{Fitted, Learned, ModelKind, ModelSpec};
use crate::store::Store;
use crate::trained::{self, Candidate, RunParts};
use crate::{PipelineError, Progress};
use fisherkit::svm::{
    argmax, predict_rows, GramSvc, KernelView, LinearSvc, LinearSvcParams, OutOfCoreSvmParams,
    SvmError,
};
use ndarray::{Array1, Array2};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

mod kernel_rows;
mod outputs;
mod primal_rows;
mod sweep;

use kernel_rows::{add_kernel, evaluate_kernel, row_parts};
pub(crate) use kernel_rows::{kernel_row, SpecKernels};
use primal_rows::evaluate_primal;
pub(crate) use primal_rows::primal_row;
use sweep::sweep;
pub(crate) use sweep::sweep_series;

/// The store columns of `term` at `scale`: (store, column ranges).
fn term_columns<'a>(
    term: &Term,
    scale: usize,
    kind_gmm: ModelKind,
    kind_mfa: ModelKind,
    learned: &Learned,
    stores: &'a BTreeMap<ModelSpec, Store>,
    global: &'a Option<Store>,
) -> (&'a Store, Vec<std::ops::Range<usize>>) {
    let gmm = ModelSpec {
        scale,
        kind: kind_gmm,
    };
    let mfa = ModelSpec {
        scale,
        kind: kind_mfa,
    };
    let (store, g, m) = match (term, learned.models.get(&gmm), learned.models.get(&mfa)) {
        (Term::CnnGlobal, _, _) => (
            global.as_ref().expect("opened when a term needs it"),
            None,
            None,
        ),
        (Term::GmmFv(_), Some(Fitted::Gmm(g)), _) => {
            (&stores[&gmm], Some((g.n_components(), g.dim())), None)
        }
        (Term::MfaFs(_), _, Some(Fitted::Mfa(m))) => (
            &stores[&mfa],
            None,
            Some((m.n_components(), m.dim(), m.n_factors())),
        ),
        _ => unreachable!("the plan fits the model of every term"),
    };
    let cols = term_columns_of(term, g, m, store.dim()).expect("the model is there");
    (store, cols)
}

/// An all-scale row's trained SVM, handed by the row code to
/// [`evaluate_rows`], the one place that writes the output folder's files
/// and offers the saved-classifier candidate: its index among the
/// encoder's rows, its `f32` weights over `parts`, and the parts' norms and
/// whitening (no Gram).
pub(crate) struct Trained {
    pub(crate) row: usize,
    pub(crate) model: LinearSvc<f32>,
    pub(crate) parts: Vec<(usize, usize, TermKernel)>,
}

/// The report rows, the sweep and the saved classifier of a run.
type Evaluated = (Vec<ResultRow>, Vec<SweepPoint>, Option<ModelReport>);

/// The whitening's Fisher-information estimate of each part of an encoder (whitened parts).
type Fims = Vec<Option<Array1<f32>>>;

/// The outcome of [`Classes::fit_kernel`]: the SVM, chosen C, the cross-validation table.
type FitKernel = (GramSvc, f64, Vec<(f64, f64)>);

/// The outcome of [`Classes::classify`]: the row's dimension, chosen C,
/// the cross-validation table, test predictions, and the SVM's weights if kept.
type Classified = (
    usize,
    f64,
    Vec<(f64, f64)>,
    Vec<usize>,
    Option<LinearSvc<f32>>,
);

/// What the classification stage needs from the earlier ones.
pub(crate) struct Classes<'a> {
    pub(crate) cfg: &'a RunConfig,
    /// Asked between blocks of columns, CV folds and report rows (Ctrl-C).
    pub(crate) progress: &'a dyn Progress,
    pub(crate) inputs: &'a Inputs<'a>,
    pub(crate) learned: &'a Learned,
    pub(crate) stores: &'a BTreeMap<ModelSpec, Store>,
    pub(crate) global: &'a Option<Store>,
    pub(crate) rows: &'a [usize],
    pub(crate) n_train: usize,
    pub(crate) out: Option<&'a OutputDir>,
    /// Where term kernels are kept (run folder), and the key of `rows`.
    pub(crate) kernel_dir: PathBuf,
    pub(crate) rows_key: String,
    /// Primal path only: the norms and whitening of each part, by part name.
    pub(crate) norms: RefCell<HashMap<String, PartNorms>>,
    /// The report rows finished by this or an earlier (killed) run, or by
    /// classifier tasks of other processes (in the run's path's folder).
    pub(crate) finished: Finished,
}

/// The outcome of [`Classes::classify_primal`]: the SVM, chosen C, the CV table, test predictions.
type ClassifiedPrimal = (LinearSvc<f32>, f64, Vec<(f64, f64)>, Vec<usize>);

impl Classes<'_> {
    fn columns(
        &self,
        term: &Term,
        scale: usize,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
    ) -> TermColumns<'_> {
        let (store, cols) = term_columns(
            term,
            scale,
            kinds.0,
            kinds.1,
            self.learned,
            self.stores,
            self.global,
        );
        TermColumns {
            store,
            cols,
            whiten: whiten && matches!(term, Term::MfaFs(_)),
            norm: self.cfg.normalization,
            progress: self.progress,
        }
    }

    /// The parts of `spec` in output order: (term index, scale), `cnn-global`
    /// once (with the first scale), every other term at every scale.
    pub(crate) fn part_list(&self, spec: &EncoderSpec) -> Vec<(usize, usize)> {
        parts_of(spec, self.inputs.scale_names.len())
    }

    /// The file or cache name of a part's kernel or norms.
    fn part_name(&self, term: &Term, cols: &TermColumns<'_>) -> String {
        format!(
            "{}-{}-w{}-{}",
            cols.store
                .dir()
                .file_name()
                .unwrap_or_default()
                .to_string_lossy(),
            file_stem(&term.name()),
            cols.whiten as u8,
            self.rows_key
        )
    }

    /// The parts of `spec` at every scale (cnn-global counted once, with
    /// the first scale), each computed into the run folder (or found there):
    /// their Grams are dropped here and read back, one at a time, by the
    /// row that sums them ([`SpecKernels::row_kernel`]), so that the rows
    /// of any number of scales hold two kernels, not one per scale; only a
    /// `cnn-global` Gram, which joins every row, stays in memory.
    pub(crate) fn kernels(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<SpecKernels, PipelineError> {
        let mut global: Option<Array2<f32>> = None;
        let mut parts = Vec::new();
        let mut local = Vec::new();
        for (ti, s) in self.part_list(spec) {
            let term = &spec.terms[ti];
            let k = self.part_kernel(term, s, kinds, whiten, timings)?;
            let name = self.part_kernel_name(term, s, kinds, whiten);
            if *term == Term::CnnGlobal {
                add_kernel(
                    &mut global,
                    load_gram(&self.kernel_dir, &name, self.n_train)?,
                );
            } else {
                local.push((s, name));
            }
            parts.push((ti, s, k));
        }
        Ok(SpecKernels {
            local,
            global,
            parts,
        })
    }

    /// The kernel of one part (`term` at scale `s`): computed from the
    /// stores and kept in the run folder, unless it is there already (a
    /// classifier task of the kernel path computes exactly this, in another
    /// process). Returns its norms and whitening; its Gram stays in the run
    /// folder ([`load_gram`]: the returned `gram` is empty, so that no
    /// kernel is read or held for nothing).
    pub(crate) fn part_kernel(
        &self,
        term: &Term,
        s: usize,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<TermKernel, PipelineError> {
        let cols = self.columns(term, s, kinds, whiten);
        let name = self.part_name(term, &cols);
        if let Some(k) = load_kernel(
            &self.kernel_dir,
            &name,
            self.rows.len(),
            self.n_train,
            cols.whiten,
        ) {
            return Ok(k);
        }
        let k = timed(
            timings,
            format!(
                "kernel {} scale {}",
                term.name(),
                self.inputs.scale_names[s]
            ),
            || cols.kernel(self.rows, self.n_train),
        )?;
        save_kernel(&self.kernel_dir, &name, &k)?;
        Ok(TermKernel {
            gram: Array2::zeros((0, 0)),
            ..k
        })
    }

    /// The run-folder name of the kernel of `term` at scale `s` (see [`Classes::part_kernel`]).
    pub(crate) fn part_kernel_name(
        &self,
        term: &Term,
        s: usize,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
    ) -> String {
        let cols = self.columns(term, s, kinds, whiten);
        self.part_name(term, &cols)
    }

    /// Cross-validates C on the training kernel `gram` (n_train, n_train),
    /// trains, and predicts the test rows from the parts of `spec` in
    /// `parts` that the row at `scale` holds (one more pass over their
    /// columns). When `keep(cross-validated accuracy at the chosen C)` says
    /// so, that pass also forms the SVM's `f32` weights over those parts, in
    /// their order (a saved classifier's, an output folder's).
    #[allow(clippy::too_many_arguments)]
    fn classify(
        &self,
        gram: &Array2<f32>,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        parts: &[(usize, usize, TermKernel)],
        scale: Option<usize>,
        keep: &dyn Fn(f64) -> bool,
    ) -> Result<Classified, PipelineError> {
        let nt = self.n_train;
        let (svm, c, cv) = self.fit_kernel(gram.view())?;
        let dual = svm.dual_coef().mapv(|v| v as f32);
        let row = row_parts(spec, parts, scale);
        let widths: Vec<usize> = row
            .iter()
            .map(|(ti, s, _)| self.columns(&spec.terms[*ti], *s, kinds, whiten).width())
            .collect();
        let dim = widths.iter().sum();
        let mut weights = match keep(trained::cv_at(&cv, c)) {
            // classes × dimension: gigabytes at SUN397's size
            true => Some(zeros_checked::<f32>(
                svm.n_classes(),
                dim,
                "SVM",
                "SVM weights",
                "fewer encoders or a smaller encoder (--encoders) lower it",
            )?),
            false => None,
        };
        let mut f = Array2::<f32>::zeros((self.rows.len() - nt, svm.n_classes()));
        let mut off = 0;
        for ((ti, s, k), width) in row.into_iter().zip(widths) {
            let w = weights
                .as_mut()
                .map(|w| w.slice_mut(ndarray::s![.., off..off + width]));
            self.columns(&spec.terms[ti], s, kinds, whiten)
                .add_decisions(self.rows, nt, k, dual.view(), &mut f, w)?;
            off += width;
        }
        let formed = weights
            .map(|w| LinearSvc::from_parts(w, svm.intercept().mapv(|v| v as f32)))
            .transpose()
            .map_err(PipelineError::stage("SVM"))?;
        let pred = f
            .rows()
            .into_iter()
            .map(|r| {
                let d = r.iter().zip(svm.intercept()).map(|(&v, b)| v as f64 + b);
                argmax(d)
            })
            .collect();
        Ok((dim, c, cv, pred, formed))
    }

    /// Cross-validates C on a training kernel (n_train, n_train) and trains.
    fn fit_kernel<'g>(&self, gram: impl Into<KernelView<'g>>) -> Result<FitKernel, PipelineError> {
        let ytr: Vec<usize> = self.rows[..self.n_train]
            .iter()
            .map(|&i| self.inputs.labels[i])
            .collect();
        let progress = self.progress;
        LinearSvcParams {
            seed: self.cfg.seed,
            ..Default::default()
        }
        .check()
        .and_then(|p| {
            p.fit_gram_with_cv_until(
                gram,
                &ytr,
                &self.cfg.c_grid,
                self.cfg.cv_folds,
                self.cfg.seed,
                &move || progress.cancelled(),
            )
        })
        .map_err(|e| self.svm_error(e))
    }

    /// An SVM's error as the run's: [`PipelineError::Cancelled`] when the
    /// run was cancelled meanwhile (the fit stopped, or its row source
    /// refused to read on), the SVM stage's error otherwise.
    fn svm_error(&self, e: SvmError) -> PipelineError {
        if matches!(e, SvmError::Stopped) || self.progress.cancelled() {
            PipelineError::Cancelled
        } else {
            PipelineError::stage("SVM")(e)
        }
    }

    /// The test × train kernel of the row of `spec` at `scale` (the compact variant's kernel PCA).
    fn cross_kernel(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        parts: &[(usize, usize, TermKernel)],
        scale: Option<usize>,
    ) -> Result<Array2<f64>, PipelineError> {
        let nt = self.n_train;
        let mut cross = Array2::<f64>::zeros((self.rows.len() - nt, nt));
        for (ti, s, k) in row_parts(spec, parts, scale) {
            self.columns(&spec.terms[ti], s, kinds, whiten)
                .add_cross(self.rows, nt, k, &mut cross)?;
        }
        Ok(cross)
    }

    /// The norms (and whitening) of every part of `spec`, computed once per
    /// part and kept for the other rows of the report that use it.
    fn part_norms(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<Vec<PartNorms>, PipelineError> {
        let mut v = Vec::new();
        for (ti, s) in self.part_list(spec) {
            let term = &spec.terms[ti];
            let cols = self.columns(term, s, kinds, whiten);
            let name = self.part_name(term, &cols);
            if let Some(n) = self.norms.borrow().get(&name) {
                v.push(n.clone());
                continue;
            }
            let n = timed(
                timings,
                format!("norms {} scale {}", term.name(), self.inputs.scale_names[s]),
                || PartNorms::compute(&cols, self.rows, self.n_train),
            )?;
            self.norms.borrow_mut().insert(name, n.clone());
            v.push(n);
        }
        Ok(v)
    }

    /// The parts of `spec` with their norms and whitening `norms` (in part
    /// order) but no Gram: what [`outputs::outputs`] needs of a row trained
    /// on the primal path or finished by an earlier run.
    fn norm_parts(
        &self,
        spec: &EncoderSpec,
        norms: &[PartNorms],
    ) -> Vec<(usize, usize, TermKernel)> {
        self.part_list(spec)
            .into_iter()
            .zip(norms)
            .map(|((ti, s), n)| {
                let k = TermKernel {
                    gram: Array2::zeros((0, 0)),
                    inv_norm: Array1::from(n.inv_norm.to_vec()),
                    fim: n.fim.clone(),
                };
                (ti, s, k)
            })
            .collect()
    }

    /// The features of the parts of `spec` at `scale` (all scales: `None`),
    /// `cnn-global` with every scale, as an out-of-core row source.
    fn feature_rows(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        norms: &[PartNorms],
        scale: Option<usize>,
    ) -> FeatureRows<'_> {
        let parts = self
            .part_list(spec)
            .into_iter()
            .zip(norms)
            .filter(|((ti, s), _)| {
                scale.is_none_or(|sc| *s == sc || spec.terms[*ti] == Term::CnnGlobal)
            })
            .map(|((ti, s), n)| (self.columns(&spec.terms[ti], s, kinds, whiten), n.clone()))
            .collect();
        FeatureRows::new(parts, self.rows)
    }

    /// Cross-validates C and trains out of core on the training rows of
    /// `src`, then predicts its test rows (streamed).
    fn classify_primal(&self, src: &FeatureRows<'_>) -> Result<ClassifiedPrimal, PipelineError> {
        let nt = self.n_train;
        let ytr: Vec<usize> = self.rows[..nt]
            .iter()
            .map(|&i| self.inputs.labels[i])
            .collect();
        let params = OutOfCoreSvmParams {
            svm: LinearSvcParams {
                seed: self.cfg.seed,
                max_iter: OutOfCoreSvmParams::DEFAULT_MAX_PASSES,
                ..Default::default()
            },
            ..Default::default()
        };
        let p = params.check().map_err(|e| self.svm_error(e))?;
        let train: Vec<usize> = (0..nt).collect();
        let (svm, c, cv) = p
            .fit_with_cv(
                src,
                &train,
                &ytr,
                self.inputs.classes.len(),
                &self.cfg.c_grid,
                self.cfg.cv_folds,
                self.cfg.seed,
            )
            .map_err(|e| self.svm_error(e))?;
        let test: Vec<usize> = (nt..self.rows.len()).collect();
        let pred =
            predict_rows(&svm, src, &test, params.block_bytes).map_err(|e| self.svm_error(e))?;
        Ok((svm, c, cv, pred))
    }

    /// The predictions of `spec` on the test rows by whichever path the run takes (the sweep).
    fn predict_spec(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        timings: &mut Vec<(String, f64)>,
    ) -> Result<Vec<usize>, PipelineError> {
        if self.primal() {
            let norms = self.part_norms(spec, kinds, false, timings)?;
            let src = self.feature_rows(spec, kinds, false, &norms, None);
            return Ok(self.classify_primal(&src)?.3);
        }
        let mut ks = self.kernels(spec, kinds, false, timings)?;
        let g = ks.row_kernel(self, None)?;
        Ok(self
            .classify(&g, spec, kinds, false, &ks.parts, None, &|_| false)?
            .3)
    }

    /// The report rows of `spec`: each scale (with several scales and a
    /// term other than `cnn-global`), then all scales (`None`).
    pub(crate) fn report_scales(&self, spec: &EncoderSpec) -> Vec<Option<usize>> {
        let n_scales = self.inputs.scale_names.len();
        let mut scales: Vec<Option<usize>> = Vec::new();
        if n_scales > 1 && !spec.terms.iter().all(|t| *t == Term::CnnGlobal) {
            scales.extend((0..n_scales).map(Some));
        }
        scales.push(None);
        scales
    }

    /// The name under which the row of `spec` at `scale` is kept:
    /// everything it depends on beyond the run folder's own key (the parts'
    /// stores, whose names list their models' settings, the rows, the
    /// SVM's settings, the normalisation, the store format).
    pub(crate) fn finished_key(
        &self,
        spec: &EncoderSpec,
        whiten: bool,
        scale: Option<usize>,
    ) -> String {
        let cfg = self.cfg;
        let kinds = kinds_of(cfg);
        let parts: Vec<String> = self
            .part_list(spec)
            .into_iter()
            .map(|(ti, s)| self.part_kernel_name(&spec.terms[ti], s, kinds, whiten))
            .collect();
        let k = crate::stages::key(&[
            spec.name(),
            parts.join(","),
            format!("whiten={whiten}"),
            format!("scale={:?}", scale.map(|s| &self.inputs.scale_names[s])),
            format!("c_grid={:?} folds={}", cfg.c_grid, cfg.cv_folds),
            format!("norm={:?}", cfg.normalization),
            format!("store={}", cfg.store_format.name()),
            self.rows_key.clone(),
        ]);
        format!("{}-{k}", file_stem(&spec.name()))
    }

    /// Whether this run trains its SVMs on the primal path (decided on all
    /// the run's training images, as its checks before the first pass were).
    pub(crate) fn primal(&self) -> bool {
        self.cfg.primal_for(self.inputs.n_train)
    }

    /// Whether the row of `spec` at `scale`, trained on the primal path or
    /// by a classifier task, keeps its SVM: the all-scale row, when the run
    /// writes an output folder or may save it.
    pub(crate) fn row_with_model(&self, spec: &EncoderSpec, scale: Option<usize>) -> bool {
        scale.is_none() && (self.out.is_some() || trained::wanted(self.cfg, spec))
    }

    /// The kernel files each step of the kernel path reads (none on the
    /// primal path): the report's encoders `jobs`, then the sweep's points.
    fn kernel_uses(
        &self,
        jobs: &[(&EncoderSpec, bool)],
        kinds: (ModelKind, ModelKind),
    ) -> KernelUses {
        let names = |spec: &EncoderSpec, kinds, whiten| -> Vec<String> {
            self.part_list(spec)
                .into_iter()
                .map(|(ti, s)| self.part_kernel_name(&spec.terms[ti], s, kinds, whiten))
                .collect()
        };
        let steps = if self.primal() {
            Vec::new()
        } else {
            jobs.iter()
                .map(|(spec, whiten)| names(spec, kinds, *whiten))
                .chain(
                    sweep_series(self.cfg, kinds)
                        .into_iter()
                        .map(|(_, _, spec, k)| names(&spec, k, false)),
                )
                .collect()
        };
        KernelUses::new(self.kernel_dir.clone(), steps)
    }

    pub(crate) fn test_labels(&self) -> Vec<usize> {
        self.rows[self.n_train..]
            .iter()
            .map(|&i| self.inputs.labels[i])
            .collect()
    }
}

/// Everything after the models: kernels, SVMs, rows of the report.
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate(
    c: &Classes<'_>,
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<Evaluated, PipelineError> {
    let mut best = None;
    let (results, sweep) = evaluate_rows(c, timings, progress, &mut best)?;
    let model = match (best, &c.cfg.save_model) {
        (Some(cand), Some(path)) => {
            let parts = RunParts {
                cfg: c.cfg,
                inputs: c.inputs,
                learned: c.learned,
                stores: c.stores,
                global: c.global,
                kinds: kinds_of(c.cfg),
            };
            let t = Instant::now();
            let m = parts.save(cand, path, &c.rows[c.n_train..])?;
            timings.push(("save model".into(), t.elapsed().as_secs_f64()));
            progress.note(&format!(
                "classifier {}{} saved to {}: test accuracy {:.2} % (cross-validated {:.2} %)",
                m.encoder,
                if m.whitened { " (whitened)" } else { "" },
                m.path,
                100.0 * m.test_accuracy,
                100.0 * m.cv_accuracy
            ));
            Some(m)
        }
        _ => None,
    };
    Ok((results, sweep, model))
}

/// The GMM and MFA kinds of the run's settings.
pub(crate) fn kinds_of(cfg: &RunConfig) -> (ModelKind, ModelKind) {
    (
        ModelKind::Gmm {
            k: cfg.gmm_components,
        },
        ModelKind::Mfa {
            k: cfg.mfa_components,
            r: cfg.mfa_factors,
        },
    )
}

/// A saved-model candidate from an all-scale row.
fn candidate(
    spec: &EncoderSpec,
    whiten: bool,
    svm: LinearSvc<f32>,
    fims: Vec<Option<Array1<f32>>>,
    row: &ResultRow,
) -> Candidate {
    Candidate {
        spec: spec.clone(),
        whiten,
        svm,
        fims,
        c: row.c,
        cv: trained::cv_score(row),
    }
}

/// The encoders of the report in order, each with whether it is whitened
/// (an MFA encoder twice with `--whitening both`).
pub(crate) fn report_jobs(cfg: &RunConfig) -> Vec<(&EncoderSpec, bool)> {
    let mut jobs = Vec::new();
    for spec in &cfg.encoders {
        match (spec.uses_mfa(), cfg.whitening) {
            (true, Whitening::On) => jobs.push((spec, true)),
            (true, Whitening::Both) => {
                jobs.push((spec, false));
                jobs.push((spec, true));
            }
            _ => jobs.push((spec, false)),
        }
    }
    jobs
}

/// The report rows and the sweep; writes the output folder's files of each
/// encoder's trained all-scale row and offers it to `best` (the one place
/// that does: the row code only computes).
fn evaluate_rows(
    c: &Classes<'_>,
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
    best: &mut Option<Candidate>,
) -> Result<(Vec<ResultRow>, Vec<SweepPoint>), PipelineError> {
    let cfg = c.cfg;
    let yte = c.test_labels();
    let kinds = kinds_of(cfg);
    let jobs = report_jobs(cfg);
    let mut results = Vec::new();
    let primal = c.primal();
    let uses = c.kernel_uses(&jobs, kinds);
    for (spec, whiten) in jobs {
        stop_if_cancelled(progress)?;
        let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
        let (rows, summary, trained) = if primal {
            progress.start(&format!("primal SVM {name}"), 1);
            let (rows, trained) = evaluate_primal(c, spec, whiten, kinds, timings, progress)?;
            let summary = vec![format!("{} result rows", rows.len())];
            (rows, summary, trained)
        } else {
            progress.start(&format!("kernel + SVM {name}"), 1);
            evaluate_kernel(c, spec, whiten, kinds, timings, best)?
        };
        if let Some(t) = trained {
            let row = &rows[t.row];
            let (model, fims) =
                outputs::outputs(c, c.out, spec, whiten, kinds, &t.parts, t.model, row.c)?;
            if trained::wanted(cfg, spec) {
                trained::consider(best, candidate(spec, whiten, model, fims, row));
            }
        }
        if !primal {
            uses.step_done();
        }
        results.extend(rows);
        progress.inc(1);
        progress.finish(&summary.join("; "));
    }
    let sweep = sweep(c, kinds, &yte, timings, progress, &uses)?;
    Ok((results, sweep))
}

/// The report row of `spec` (whitened or not) at `scale` (`None`: all
/// scales) of dimension `dim`: its scores from the test predictions `pred`
/// (in the run's test order), the chosen C and the cross-validation table
/// `(c, cv)`, and the seconds `(encoding or kernels, SVM)`.
#[allow(clippy::too_many_arguments)]
fn result_row(
    cl: &Classes<'_>,
    spec: &EncoderSpec,
    whitened: bool,
    scale: Option<usize>,
    dim: usize,
    pred: &[usize],
    (c, cv): (f64, Vec<(f64, f64)>),
    (encode_seconds, svm_seconds): (f64, f64),
) -> Result<ResultRow, PipelineError> {
    let n_classes = cl.inputs.classes.len();
    let yte = cl.test_labels();
    let (accuracy, overall, per_class, confusion) = crate::predict::scores(&yte, pred, n_classes)?;
    let single = spec.terms.len() == 1;
    Ok(ResultRow {
        encoder: if single {
            spec.terms[0].family().to_string()
        } else {
            "combination".into()
        },
        spec: spec.name(),
        parts: if single {
            spec.terms[0].part_names()
        } else {
            vec![]
        },
        whitened,
        dim,
        accuracy,
        overall_accuracy: overall,
        per_class_accuracy: per_class,
        confusion,
        c,
        cv,
        encode_seconds,
        svm_seconds,
        scale: scale.map(|s| cl.inputs.scale_names[s].clone()),
        compact: None,
    })
}

/// The progress line of a result row: `name [scale s]: acc % (dim d, C = c<extra>)`.
fn row_line(name: &str, row: &ResultRow, extra: &str) -> String {
    let sep = if row.scale.is_some() { " " } else { ": " };
    format!("{name}{sep}{}", row_summary(row, extra))
}

/// A result row in a few words: `[scale S: ]82.40 % (dim 5000, C = 1)`.
fn row_summary(row: &ResultRow, extra: &str) -> String {
    format!(
        "{}{:.2} % (dim {}, C = {}{extra})",
        row.scale
            .as_ref()
            .map(|s| format!("scale {s}: "))
            .unwrap_or_default(),
        100.0 * row.accuracy,
        row.dim,
        row.c
    )
}
