//! The classifier a run saves (`--save-model`, [`crate::classifier`]): the
//! candidates the evaluation offers (one per encoder row over all scales),
//! the choice among them (`--model-encoder`, else the best cross-validated
//! training accuracy; the first on a tie), and the file built from the
//! chosen one with the run's PCAs and background models, whose own test
//! accuracy is measured on the run's stores before it is written.

use crate::classifier::{part_list, SceneClassifier};
use crate::config::RunConfig;
use crate::inputs::Inputs;
use crate::report::{ModelReport, ResultRow};
use crate::spec::{EncoderSpec, Term};
use crate::stages::{Fitted, Learned, ModelKind, ModelSpec, Source};
use crate::store::Store;
use crate::PipelineError;
use fisherkit::metrics::mean_per_class_accuracy;
use fisherkit::svm::LinearSvc;
use fisherkit_io::{ClassifierFile, ClassifierInfo, InputInfo, PartInfo};
use ndarray::Array1;
use std::collections::BTreeMap;
use std::path::Path;

/// One trained encoder the run could save.
pub(crate) struct Candidate {
    pub spec: EncoderSpec,
    pub whiten: bool,
    /// The one-vs-rest SVM over the spec's parts (f32 weights).
    pub svm: LinearSvc<f32>,
    /// The whitening's Fisher-information estimate of each part (whitened MFA-FS parts).
    pub fims: Vec<Option<Array1<f32>>>,
    /// The cost chosen by cross-validation and the cross-validated accuracy at it.
    pub c: f64,
    pub cv: f64,
}

/// Whether the run saves a classifier and `spec` may be it.
pub(crate) fn wanted(cfg: &RunConfig, spec: &EncoderSpec) -> bool {
    cfg.save_model.is_some() && cfg.model_encoder.as_ref().is_none_or(|m| m == spec)
}

/// The cross-validated accuracy of a row at its chosen C.
pub(crate) fn cv_score(row: &ResultRow) -> f64 {
    cv_at(&row.cv, row.c)
}

/// The accuracy at the cost `c` of a cross-validation table `(C, accuracy)`.
pub(crate) fn cv_at(cv: &[(f64, f64)], c: f64) -> f64 {
    cv.iter()
        .find(|(ci, _)| *ci == c)
        .map(|&(_, a)| a)
        .unwrap_or(f64::NEG_INFINITY)
}

/// Whether a candidate of cross-validated accuracy `cv` would beat `best`
/// (strictly: the first of equals stays), so that its weights are worth forming.
pub(crate) fn improves(best: &Option<Candidate>, cv: f64) -> bool {
    best.as_ref().is_none_or(|b| cv > b.cv)
}

/// Keeps `new` if it beats `best` ([`improves`]).
pub(crate) fn consider(best: &mut Option<Candidate>, new: Candidate) {
    if improves(best, new.cv) {
        *best = Some(new);
    }
}

/// What the classifier file needs from the run.
pub(crate) struct RunParts<'a> {
    pub cfg: &'a RunConfig,
    pub inputs: &'a Inputs<'a>,
    pub learned: &'a Learned,
    pub stores: &'a BTreeMap<ModelSpec, Store>,
    pub global: &'a Option<Store>,
    pub kinds: (ModelKind, ModelKind),
}

impl RunParts<'_> {
    fn model(&self, scale: usize, kind: ModelKind) -> Option<&Fitted> {
        self.learned.models.get(&ModelSpec { scale, kind })
    }

    /// The classifier of `cand` with the run's PCAs and models.
    pub(crate) fn classifier(&self, cand: Candidate) -> Result<SceneClassifier, PipelineError> {
        let n_scales = self.inputs.scale_names.len();
        let spec = &cand.spec;
        let uses = |f: fn(&Term) -> bool| spec.terms.iter().any(f);
        let gmms = (0..n_scales)
            .map(|s| match self.model(s, self.kinds.0) {
                Some(Fitted::Gmm(g)) if uses(|t| matches!(t, Term::GmmFv(_))) => {
                    Some((**g).clone())
                }
                _ => None,
            })
            .collect();
        let mfas = (0..n_scales)
            .map(|s| match self.model(s, self.kinds.1) {
                Some(Fitted::Mfa(m)) if uses(|t| matches!(t, Term::MfaFs(_))) => {
                    Some((**m).clone())
                }
                _ => None,
            })
            .collect::<Vec<_>>();
        let descriptor_dim = self.inputs.source.descriptor_dim();
        let parts = part_list(spec, n_scales)
            .into_iter()
            .zip(&cand.fims)
            .map(|((ti, s), fim)| {
                let term = &spec.terms[ti];
                let width = self.part_width(term, s, descriptor_dim);
                PartInfo {
                    term: term.name(),
                    scale: s,
                    width,
                    whitened: fim.is_some(),
                }
            })
            .collect();
        let file = ClassifierFile {
            info: ClassifierInfo {
                input: self.input_info(),
                encoder: spec.name(),
                whitened: cand.whiten,
                parts,
                power: self.cfg.normalization.power,
                l2: self.cfg.normalization.l2,
                classes: self.inputs.classes.clone(),
                c: cand.c,
                cv_accuracy: cand.cv,
                training: self.training(),
            },
            pcas: self.learned.pcas.clone(),
            gmms,
            mfas,
            whitening: cand.fims,
            svm: cand.svm,
        };
        SceneClassifier::from_file(file, Path::new("the trained classifier"))
    }

    fn part_width(&self, term: &Term, s: usize, global_dim: usize) -> usize {
        let gmm = match self.model(s, self.kinds.0) {
            Some(Fitted::Gmm(g)) => Some((g.n_components(), g.dim())),
            _ => None,
        };
        let mfa = match self.model(s, self.kinds.1) {
            Some(Fitted::Mfa(m)) => Some((m.n_components(), m.dim(), m.n_factors())),
            _ => None,
        };
        let global_dim = match term {
            Term::CnnGlobal => self.global.as_ref().map_or(global_dim, Store::dim),
            _ => global_dim,
        };
        crate::classifier::term_columns(term, gmm, mfa, global_dim)
            .map(|c| c.iter().map(|r| r.len()).sum())
            .unwrap_or(0)
    }

    fn input_info(&self) -> InputInfo {
        let d = &self.cfg.descriptors;
        let images = match &self.inputs.source {
            Source::Images { net, .. } => Some(crate::classifier::cnn_info(net, None)),
            Source::Bags(_) => None,
        };
        InputInfo {
            scales: if images.is_some() {
                d.scales.clone()
            } else {
                vec![]
            },
            patch_mode: format!("{:?}", d.mode).to_lowercase(),
            stride: d.stride as f64,
            max_image_side: d.max_image_side,
            cnn: images,
            scale_names: self.inputs.scale_names.clone(),
            descriptor_dim: self.inputs.source.descriptor_dim(),
        }
    }

    /// The run's configuration as a JSON object (the report's `config`).
    fn training(&self) -> serde_json::Value {
        serde_json::to_value(self.cfg.to_config(self.inputs.images))
            .unwrap_or_else(|e| serde_json::json!({ "unrecorded": e.to_string() }))
    }

    /// The classifier's predictions on the test rows `test`, from the raw
    /// encodings the stores hold (the same features `fisherkit evaluate`
    /// computes from the images).
    pub(crate) fn predict_stored(
        &self,
        clf: &SceneClassifier,
        test: &[usize],
    ) -> Result<Vec<usize>, PipelineError> {
        use rayon::prelude::*;
        let n_scales = self.inputs.scale_names.len();
        let read = |store: &Store, i: usize| -> Result<Array1<f32>, PipelineError> {
            let mut row = vec![0.0f32; store.dim()];
            store.read_block(&[i], 0..store.dim(), &mut row)?;
            Ok(Array1::from(row))
        };
        let feature = |i: usize| -> Result<Array1<f32>, PipelineError> {
            let mut raw = crate::classifier::RawEncodings {
                gmm: vec![None; n_scales],
                mfa: vec![None; n_scales],
                global: None,
            };
            for s in 0..n_scales {
                for (kind, slot) in [
                    (self.kinds.0, &mut raw.gmm[s]),
                    (self.kinds.1, &mut raw.mfa[s]),
                ] {
                    if let Some(store) = self.stores.get(&ModelSpec { scale: s, kind }) {
                        *slot = Some(read(store, i)?);
                    }
                }
            }
            if let Some(g) = self.global {
                raw.global = Some(read(g, i)?);
            }
            clf.features(&raw)
        };
        // Scored 32 at a time: the SVM's weights are read once per batch.
        let mut pred = Vec::with_capacity(test.len());
        for batch in test.chunks(32) {
            let xs: Vec<Array1<f32>> = batch
                .par_iter()
                .map(|&i| feature(i))
                .collect::<Result<_, _>>()?;
            let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
            pred.extend(clf.score_batch(&views)?.into_iter().map(|s| s.class));
        }
        Ok(pred)
    }

    /// Builds the classifier of `cand`, measures it on the test rows and writes it to `path`.
    pub(crate) fn save(
        &self,
        cand: Candidate,
        path: &Path,
        test: &[usize],
    ) -> Result<ModelReport, PipelineError> {
        let (encoder, whitened) = (cand.spec.name(), cand.whiten);
        let clf = self.classifier(cand)?;
        let pred = self.predict_stored(&clf, test)?;
        let truth: Vec<usize> = test.iter().map(|&i| self.inputs.labels[i]).collect();
        let test_accuracy = mean_per_class_accuracy(&truth, &pred, self.inputs.classes.len())
            .map_err(PipelineError::stage("metrics"))?;
        clf.save(path)?;
        Ok(ModelReport {
            path: path.display().to_string(),
            encoder,
            whitened,
            c: clf.info().c,
            cv_accuracy: clf.info().cv_accuracy,
            test_accuracy,
            test_predictions: pred,
        })
    }
}
