//! The whole pipeline: [`run`] on image folders, [`run_descriptors`] on
//! descriptor files; both share the stages from PCA onwards.

use crate::dataset::{train_label, ImageSet};
use crate::descriptor_file::{read_descriptor_file, write_descriptor_file, DescriptorSet};
use crate::descriptors::{compute_all, ImageDescriptors};
use crate::output::OutputDir;
use crate::report::{DatasetInfo, Report, ResultRow, SweepPoint};
use crate::spec::{EncoderSpec, Term};
use crate::{PipelineError, Progress};
use fisherkit::encode::{
    FisherVector, FisherVectorParams, FvPart, MfaFisherScore, MfaFisherScoreParams, MfaPart,
};
use fisherkit::gmm::{DiagGmm, GmmParams};
use fisherkit::metrics::{confusion_matrix, mean_per_class_accuracy};
use fisherkit::mfa::{Mfa, MfaParams};
use fisherkit::pca::{Pca, PcaParams};
use fisherkit::svm::{LinearSvc, LinearSvcParams};
use fisherkit::{Encoder, Normalization};
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use fisherkit_cnn::SqueezeNet;
use ndarray::{concatenate, s, Array1, Array2, ArrayView2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Whether MFA Fisher scores are whitened by the diagonal Fisher-information
/// estimate (the empirical variance of the raw scores over the training images).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Whitening {
    /// The paper's scores (default).
    #[default]
    Off,
    /// Whitened scores only.
    On,
    /// Both, as two result rows.
    Both,
}

/// Settings of one pipeline run. [`RunConfig::new`] gives the paper's defaults.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Training image folder `DIR/<class>/*.png|jpg` ([`run`]), or descriptor
    /// file ([`run_descriptors`], see [`crate::descriptor_file`]).
    pub train: PathBuf,
    /// Test image folder (same layout, classes among the training ones) or descriptor file.
    pub test: PathBuf,
    /// Encoders to evaluate.
    pub encoders: Vec<EncoderSpec>,
    /// Image runs only: also write the descriptors of the readable images to
    /// `DIR/train.npz` and `DIR/test.npz` (descriptor files, one array per image
    /// named `<class>/<file>`, the rows of all scales stacked), the input of
    /// [`run_descriptors`]. Default `None`.
    pub save_descriptors: Option<PathBuf>,
    /// Patch scales and mode of the CNN descriptors (image runs only).
    pub descriptors: DescriptorParams,
    /// Descriptor dimension after PCA (clamped to what the data allow). Default 500.
    pub pca_dim: usize,
    /// Descriptors sampled (seeded) from the training images to learn the PCA. Default 200 000.
    pub pca_sample: usize,
    /// Descriptors sampled to learn the background models. Default 100 000.
    pub model_sample: usize,
    /// GMM components K. Default 50.
    pub gmm_components: usize,
    /// GMM EM iterations at most. Default 100.
    pub gmm_max_iter: usize,
    /// MFA components K. Default 50.
    pub mfa_components: usize,
    /// MFA factors R. Default 10.
    pub mfa_factors: usize,
    /// MFA EM iterations at most. Default 30.
    pub mfa_max_iter: usize,
    /// MFA-FS whitening.
    pub whitening: Whitening,
    /// Signed power and L2 of every encoding.
    pub normalization: Normalization,
    /// SVM costs tried by cross-validation. Default 0.01, 0.1, 1, 10.
    pub c_grid: Vec<f64>,
    /// Cross-validation folds. Default 3.
    pub cv_folds: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Descriptor cache folder (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// Folder for the trained models (PCA, GMM, MFA, SVMs) and, with
    /// `save_encodings`, the encodings (see [`crate::output`]).
    pub output_dir: Option<PathBuf>,
    /// Also write each encoder's train and test encodings to `output_dir`.
    pub save_encodings: bool,
    /// GMM sizes K of the Figure-1 sweep of `gmm-fv:var` (empty: no sweep).
    pub sweep_gmm_components: Vec<usize>,
    /// MFA factor counts R of the Figure-1 sweep of `mfa-fs:loading` (empty: no sweep).
    pub sweep_mfa_factors: Vec<usize>,
}

impl RunConfig {
    /// The paper's defaults on the given folders: scales 96/128/160 px (dense),
    /// PCA 500, GMM K = 50, MFA K = 50 R = 10, the Table-1 encoders.
    pub fn new(train: PathBuf, test: PathBuf) -> Self {
        Self {
            train,
            test,
            encoders: crate::spec::parse_encoders(crate::spec::DEFAULT_ENCODERS)
                .expect("the default encoders parse"),
            save_descriptors: None,
            descriptors: DescriptorParams::default(),
            pca_dim: 500,
            pca_sample: 200_000,
            model_sample: 100_000,
            gmm_components: 50,
            gmm_max_iter: 100,
            mfa_components: 50,
            mfa_factors: 10,
            mfa_max_iter: 30,
            whitening: Whitening::Off,
            normalization: Normalization::default(),
            c_grid: vec![0.01, 0.1, 1.0, 10.0],
            cv_folds: 3,
            seed: 0,
            cache_dir: None,
            output_dir: None,
            save_encodings: false,
            sweep_gmm_components: vec![],
            sweep_mfa_factors: vec![],
        }
    }

    fn validate(&self) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        if self.save_encodings && self.output_dir.is_none() {
            return bad("saving the encodings needs an output folder".into());
        }
        if self.encoders.is_empty()
            && self.sweep_gmm_components.is_empty()
            && self.sweep_mfa_factors.is_empty()
        {
            return bad("no encoder to evaluate".into());
        }
        for (name, v) in [
            ("pca dimension", self.pca_dim),
            ("PCA sample size", self.pca_sample),
            ("model sample size", self.model_sample),
            ("GMM components", self.gmm_components),
            ("GMM iterations", self.gmm_max_iter),
            ("MFA components", self.mfa_components),
            ("MFA factors", self.mfa_factors),
            ("MFA iterations", self.mfa_max_iter),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        if self.cv_folds < 2 {
            return bad(format!(
                "cross-validation needs at least 2 folds, got {}",
                self.cv_folds
            ));
        }
        if let Some(c) = self.c_grid.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return bad(format!("SVM cost {c} must be a finite number > 0"));
        }
        if self.c_grid.is_empty() {
            return bad("the SVM cost grid is empty".into());
        }
        if let Some(k) = self.sweep_gmm_components.iter().find(|k| **k == 0) {
            return bad(format!("sweep GMM size {k} must be at least 1"));
        }
        if let Some(r) = self.sweep_mfa_factors.iter().find(|r| **r == 0) {
            return bad(format!("sweep MFA factor count {r} must be at least 1"));
        }
        self.normalization
            .validate()
            .map_err(PipelineError::Config)?;
        self.descriptors
            .validate()
            .map_err(|e| PipelineError::Config(e.to_string()))
    }

    /// The configuration as text; `images`: the input was image folders (else
    /// descriptor files, and the CNN settings did not apply).
    fn describe(&self, images: bool) -> Vec<(String, String)> {
        let d = &self.descriptors;
        let mut v = vec![(
            "encoders".to_string(),
            self.encoders
                .iter()
                .map(EncoderSpec::name)
                .collect::<Vec<_>>()
                .join(","),
        )];
        if images {
            v.push(("scales".into(), format!("{:?}", d.scales)));
            v.push(("patch_mode".into(), format!("{:?}", d.mode)));
            if d.mode == PatchMode::Exact {
                v.push(("stride".into(), d.stride.to_string()));
            }
            v.push(("max_image_side".into(), format!("{:?}", d.max_image_side)));
        } else {
            v.push(("input".into(), "descriptor files".into()));
        }
        v.extend([
            ("pca_dim".into(), self.pca_dim.to_string()),
            ("pca_sample".into(), self.pca_sample.to_string()),
            ("model_sample".into(), self.model_sample.to_string()),
            (
                "gmm".into(),
                format!("K={} max_iter={}", self.gmm_components, self.gmm_max_iter),
            ),
            (
                "mfa".into(),
                format!(
                    "K={} R={} max_iter={}",
                    self.mfa_components, self.mfa_factors, self.mfa_max_iter
                ),
            ),
            ("whitening".into(), format!("{:?}", self.whitening)),
            (
                "normalization".into(),
                format!(
                    "power {} l2 {}",
                    self.normalization.power, self.normalization.l2
                ),
            ),
            ("c_grid".into(), format!("{:?}", self.c_grid)),
            ("cv_folds".into(), self.cv_folds.to_string()),
            ("seed".into(), self.seed.to_string()),
        ]);
        if let Some(dir) = &self.save_descriptors {
            v.push(("save_descriptors".into(), dir.display().to_string()));
        }
        v
    }
}

/// Per-scale state: the PCA and the projected bags of every image.
struct Scale {
    train: Vec<Array2<f32>>,
    test: Vec<Array2<f32>>,
    sample: Array2<f32>,
}

/// Samples `n` rows (without replacement, seeded, in ascending order) from the
/// concatenation of `bags`; all rows if there are no more than `n`.
fn sample_rows(bags: &[&Array2<f32>], n: usize, seed: u64) -> Array2<f32> {
    let total: usize = bags.iter().map(|b| b.nrows()).sum();
    let d = bags[0].ncols();
    let mut idx: Vec<usize> = if total <= n {
        (0..total).collect()
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rand::seq::index::sample(&mut rng, total, n).into_vec()
    };
    idx.sort_unstable();
    let mut out = Array2::<f32>::zeros((idx.len(), d));
    let (mut bag, mut start) = (0usize, 0usize);
    for (o, &i) in idx.iter().enumerate() {
        while i >= start + bags[bag].nrows() {
            start += bags[bag].nrows();
            bag += 1;
        }
        out.row_mut(o).assign(&bags[bag].row(i - start));
    }
    out
}

fn timed<T>(timings: &mut Vec<(String, f64)>, name: String, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    timings.push((name, t.elapsed().as_secs_f64()));
    r
}

/// The one-line summary of an EM fit shown when its stage ends.
fn em_summary(n_iter: usize, log_likelihood: &[f64], converged: bool) -> String {
    let ll = log_likelihood
        .last()
        .map(|v| format!(", log-likelihood {v:.4}"))
        .unwrap_or_default();
    let tail = if converged { "" } else { " (not converged)" };
    format!("{n_iter} iterations{ll}{tail}")
}

/// Background models per scale, fitted on demand and kept.
struct Models<'a> {
    cfg: &'a RunConfig,
    scales: &'a [Scale],
    scale_names: &'a [String],
    gmm: BTreeMap<(usize, usize), DiagGmm<f32>>,
    mfa: BTreeMap<(usize, usize, usize), Mfa<f32>>,
    whitening: BTreeMap<(usize, usize, usize, String), Array1<f32>>,
    out: Option<&'a OutputDir>,
}

impl Models<'_> {
    fn gmm(
        &mut self,
        scale: usize,
        k: usize,
        progress: &dyn Progress,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<&DiagGmm<f32>, PipelineError> {
        if !self.gmm.contains_key(&(scale, k)) {
            let x = self.scales[scale].sample.view();
            let k_eff = k.min(x.nrows());
            let cfg = self.cfg;
            progress.start(
                &format!("GMM K={k_eff} (scale {})", self.scale_names[scale]),
                cfg.gmm_max_iter as u64,
            );
            let fit = timed(
                timings,
                format!("gmm K={k_eff} scale {}", self.scale_names[scale]),
                || {
                    GmmParams::<f32>::new(k_eff)
                        .max_iter(cfg.gmm_max_iter)
                        .seed(cfg.seed)
                        .fit_with_progress(x, &mut |_| progress.inc(1))
                },
            )
            .map_err(PipelineError::stage("GMM training"))?;
            progress.finish(&em_summary(fit.n_iter, &fit.log_likelihood, fit.converged));
            if let Some(out) = self.out {
                out.gmm(&self.scale_names[scale], &fit.model)?;
            }
            self.gmm.insert((scale, k), fit.model);
        }
        Ok(&self.gmm[&(scale, k)])
    }

    fn mfa(
        &mut self,
        scale: usize,
        k: usize,
        r: usize,
        progress: &dyn Progress,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<&Mfa<f32>, PipelineError> {
        if !self.mfa.contains_key(&(scale, k, r)) {
            let x = self.scales[scale].sample.view();
            let cfg = self.cfg;
            let d = x.ncols();
            if r >= d {
                return Err(PipelineError::Config(format!(
                    "MFA factors R = {r} must be below the descriptor dimension {d} after PCA"
                )));
            }
            let k_eff = k.min(x.nrows());
            progress.start(
                &format!("MFA K={k_eff} R={r} (scale {})", self.scale_names[scale]),
                cfg.mfa_max_iter as u64,
            );
            let fit = timed(
                timings,
                format!("mfa K={k_eff} R={r} scale {}", self.scale_names[scale]),
                || {
                    MfaParams::new(k_eff, r)
                        .max_iter(cfg.mfa_max_iter)
                        .seed(cfg.seed)
                        .fit_with_progress(x, &mut |_| progress.inc(1))
                },
            )
            .map_err(PipelineError::stage("MFA training"))?;
            progress.finish(&em_summary(fit.n_iter, &fit.log_likelihood, fit.converged));
            if let Some(out) = self.out {
                out.mfa(&self.scale_names[scale], &fit.model)?;
            }
            self.mfa.insert((scale, k, r), fit.model);
        }
        Ok(&self.mfa[&(scale, k, r)])
    }
}

/// Encodes the train and test bags of every scale with one term and concatenates
/// the scales: returns (train (n_train, dim), test (n_test, dim)).
#[allow(clippy::too_many_arguments)]
fn encode_term(
    term: &Term,
    k_gmm: usize,
    kr_mfa: (usize, usize),
    whiten: bool,
    models: &mut Models<'_>,
    globals: (&Array2<f32>, &Array2<f32>),
    progress: &dyn Progress,
    timings: &mut Vec<(String, f64)>,
) -> Result<(Array2<f32>, Array2<f32>), PipelineError> {
    const STAGE: &str = "encoding";
    let norm = models.cfg.normalization;
    if let Term::CnnGlobal = term {
        let f = |a: &Array2<f32>| {
            let mut a = a.clone();
            a.rows_mut().into_iter().for_each(|r| norm.apply(r));
            a
        };
        return Ok((f(globals.0), f(globals.1)));
    }
    let mut tr = Vec::new();
    let mut te = Vec::new();
    for scale in 0..models.scales.len() {
        let encoder: Box<dyn Encoder<f32>> = match term {
            Term::GmmFv(parts) => {
                let gmm = models.gmm(scale, k_gmm, progress, timings)?;
                Box::new(
                    FisherVector::new(
                        gmm,
                        FisherVectorParams {
                            parts: parts.clone(),
                            normalization: norm,
                            ..Default::default()
                        },
                    )
                    .map_err(|e| PipelineError::at(STAGE, e))?,
                )
            }
            Term::MfaFs(parts) => {
                let (k, r) = kr_mfa;
                let mfa_model = models.mfa(scale, k, r, progress, timings)?.clone();
                let mut enc = MfaFisherScore::new(
                    mfa_model.clone(),
                    MfaFisherScoreParams {
                        parts: parts.clone(),
                        normalization: norm,
                        whitening: None,
                    },
                )
                .map_err(|e| PipelineError::at(STAGE, e))?;
                if whiten {
                    let key = (scale, k, r, format!("{parts:?}"));
                    if !models.whitening.contains_key(&key) {
                        let bags: Vec<ArrayView2<f32>> = models.scales[scale]
                            .train
                            .iter()
                            .map(|b| b.view())
                            .collect();
                        let w = enc
                            .fit_whitening(&bags)
                            .map_err(|e| PipelineError::at(STAGE, e))?;
                        if let Some(out) = models.out {
                            out.mfa_whitened(&models.scale_names[scale], &mfa_model, parts, &w)?;
                        }
                        models.whitening.insert(key.clone(), w);
                    }
                    enc.set_whitening(models.whitening[&key].clone())
                        .map_err(|e| PipelineError::at(STAGE, e))?;
                }
                Box::new(enc)
            }
            Term::CnnGlobal => unreachable!("handled above"),
        };
        let sc = &models.scales[scale];
        tr.push(
            encoder
                .encode_batch(&views(&sc.train))
                .map_err(|e| PipelineError::at(STAGE, e))?,
        );
        te.push(
            encoder
                .encode_batch(&views(&sc.test))
                .map_err(|e| PipelineError::at(STAGE, e))?,
        );
    }
    let cat = |v: &[Array2<f32>]| {
        concatenate(Axis(1), &v.iter().map(|a| a.view()).collect::<Vec<_>>()).expect("same rows")
    };
    Ok((cat(&tr), cat(&te)))
}

fn views(b: &[Array2<f32>]) -> Vec<ArrayView2<'_, f32>> {
    b.iter().map(|x| x.view()).collect()
}

/// The outcome of [`classify`]: the SVM, chosen C, the cross-validation table, test predictions.
type Classified = (LinearSvc<f32>, f64, Vec<(f64, f64)>, Vec<usize>);

/// Cross-validates C on the training encodings, trains, and scores the test set.
fn classify(
    cfg: &RunConfig,
    n_classes: usize,
    (xtr, ytr): (&Array2<f32>, &[usize]),
    (xte, yte): (&Array2<f32>, &[usize]),
) -> Result<Classified, PipelineError> {
    const STAGE: &str = "SVM";
    // fit_with_cv shares one Gram matrix between the folds, the C grid and the final fit.
    let (svm, c, cv) = LinearSvcParams {
        seed: cfg.seed,
        ..Default::default()
    }
    .fit_with_cv(xtr.view(), ytr, &cfg.c_grid, cfg.cv_folds, cfg.seed)
    .map_err(|e| PipelineError::at(STAGE, e))?;
    if svm.n_classes() != n_classes {
        return Err(PipelineError::at(
            STAGE,
            format!("trained {} classes, expected {n_classes}", svm.n_classes()),
        ));
    }
    let pred = svm
        .predict(xte.view())
        .map_err(|e| PipelineError::at(STAGE, e))?;
    debug_assert_eq!(pred.len(), yte.len());
    Ok((svm, c, cv, pred))
}

/// Labelled bags of descriptors: what the shared stages (PCA onwards) start from.
struct Labelled {
    /// Class names; labels index into it.
    classes: Vec<String>,
    /// (descriptors, label) of each training image.
    train: Vec<(ImageDescriptors, usize)>,
    /// (descriptors, label) of each test image.
    test: Vec<(ImageDescriptors, usize)>,
    /// Images that could not be read, with the reason.
    skipped: Vec<(String, String)>,
    /// One name per descriptor scale, for messages, timings and file names.
    scale_names: Vec<String>,
    /// The (training, test) image names, in the order of `train` and `test`.
    names: (Vec<String>, Vec<String>),
    /// Where the trained models go, if anywhere.
    out: Option<OutputDir>,
}

/// Creates the output folder of `cfg`, if any, before any work is done.
fn output_dir(cfg: &RunConfig) -> Result<Option<OutputDir>, PipelineError> {
    cfg.output_dir
        .as_deref()
        .map(|d| OutputDir::create(d, cfg.save_encodings))
        .transpose()
}

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

/// Runs the whole pipeline (see the crate docs) on the image folders
/// `cfg.train` and `cfg.test` and returns the report.
/// `net` is the ImageNet CNN (normally [`SqueezeNet::builtin`]).
pub fn run(
    cfg: &RunConfig,
    net: &SqueezeNet,
    progress: &dyn Progress,
) -> Result<Report, PipelineError> {
    cfg.validate()?;
    let mut timings = Vec::new();
    let train_set = ImageSet::scan(&cfg.train)?;
    let test_set = ImageSet::scan(&cfg.test)?.align_to(&train_set)?;
    check_class_count(&train_set.classes, &cfg.train)?;
    let out = output_dir(cfg)?;
    if let Some(dir) = &cfg.save_descriptors {
        std::fs::create_dir_all(dir).map_err(|e| PipelineError::Io {
            path: dir.display().to_string(),
            message: format!("cannot create the descriptor output folder: {e}"),
        })?;
    }
    let with_global = cfg
        .encoders
        .iter()
        .any(|s| s.terms.contains(&Term::CnnGlobal));

    // 1. CNN descriptors (cached).
    let paths: Vec<PathBuf> = train_set
        .items
        .iter()
        .chain(&test_set.items)
        .map(|(p, _)| p.clone())
        .collect();
    let mut descs = timed(&mut timings, "descriptors".into(), || {
        compute_all(
            net,
            &paths,
            &cfg.descriptors,
            with_global,
            cfg.cache_dir.as_deref(),
            progress,
        )
    })?;
    let classes = &train_set.classes;
    let mut skipped = Vec::new();
    // The readable images, with their names `<class>/<file>`.
    let mut keep = |items: &[(PathBuf, usize)], descs: Vec<Result<ImageDescriptors, String>>| {
        let mut kept = Vec::new();
        let mut names = Vec::new();
        for ((p, y), d) in items.iter().zip(descs) {
            match d {
                Ok(d) => {
                    let file = p.file_name().unwrap_or_default().to_string_lossy();
                    names.push(format!("{}/{file}", classes[*y]));
                    kept.push((d, *y));
                }
                Err(e) => skipped.push((p.display().to_string(), e)),
            }
        }
        (kept, names)
    };
    let test_descs = descs.split_off(train_set.items.len());
    let (train, train_names) = keep(&train_set.items, descs);
    let (test, test_names) = keep(&test_set.items, test_descs);
    for (c, name) in classes.iter().enumerate() {
        if !train.iter().any(|(_, y)| *y == c) {
            return Err(PipelineError::Dataset(format!(
                "training class `{name}` has no readable image"
            )));
        }
    }
    if test.is_empty() {
        return Err(PipelineError::Dataset(format!(
            "{} has no readable image",
            cfg.test.display()
        )));
    }
    if let Some(dir) = &cfg.save_descriptors {
        progress.start("save descriptors", 2);
        timed(&mut timings, "save descriptors".into(), || {
            for (split, names, items) in [
                ("train", &train_names, &train),
                ("test", &test_names, &test),
            ] {
                save_split(&dir.join(format!("{split}.npz")), names, items, classes)?;
                progress.inc(1);
            }
            Ok::<_, PipelineError>(())
        })?;
        progress.finish(&format!(
            "{}/train.npz, {}/test.npz",
            dir.display(),
            dir.display()
        ));
    }
    let data = Labelled {
        classes: train_set.classes.clone(),
        train,
        test,
        skipped,
        scale_names: cfg.descriptors.scales.iter().map(u32::to_string).collect(),
        names: (train_names, test_names),
        out,
    };
    classify_all(cfg, data, true, progress, timings)
}

/// Writes one split's descriptors as a descriptor file (one array per image,
/// the rows of all scales stacked).
fn save_split(
    path: &Path,
    names: &[String],
    items: &[(ImageDescriptors, usize)],
    classes: &[String],
) -> Result<(), PipelineError> {
    let stacked: Vec<Array2<f32>> = items
        .iter()
        .filter(|(d, _)| d.scales.len() > 1)
        .map(|(d, _)| concatenate(Axis(0), &views(&d.scales)).expect("same width"))
        .collect();
    let bags: Vec<ArrayView2<f32>> = if stacked.is_empty() {
        items.iter().map(|(d, _)| d.scales[0].view()).collect()
    } else {
        views(&stacked)
    };
    let labels: Vec<String> = items.iter().map(|(_, y)| classes[*y].clone()).collect();
    write_descriptor_file(path, names, &bags, &labels)
}

/// Runs the pipeline from PCA onwards on precomputed descriptors: `cfg.train`
/// and `cfg.test` are descriptor files (see [`crate::descriptor_file`]); each
/// file's bags are one scale, and the CNN settings of `cfg.descriptors` are not
/// used. `cnn-global` is not available (the files hold no image-level scores).
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
    let out = output_dir(cfg)?;
    let mut timings = Vec::new();
    progress.start("read descriptors", 2);
    let (train, test) = timed(&mut timings, "read descriptors".into(), || {
        let train = read_descriptor_file(&cfg.train)?;
        progress.inc(1);
        let test = read_descriptor_file(&cfg.test)?;
        progress.inc(1);
        Ok::<_, PipelineError>((train, test))
    })?;
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
    let label = |set: DescriptorSet| -> Result<Vec<(ImageDescriptors, usize)>, PipelineError> {
        set.bags
            .into_iter()
            .zip(&set.labels)
            .map(|(bag, name)| {
                let d = ImageDescriptors {
                    scales: vec![bag],
                    global: None,
                };
                Ok((d, train_label(name, &classes)?))
            })
            .collect()
    };
    let names = (train.names.clone(), test.names.clone());
    let (train, test) = (label(train)?, label(test)?);
    progress.finish(&format!(
        "{} training and {} test images, {} classes, D = {}",
        train.len(),
        test.len(),
        classes.len(),
        train[0].0.scales[0].ncols()
    ));
    let data = Labelled {
        classes,
        train,
        test,
        skipped: vec![],
        scale_names: vec!["file".into()],
        names,
        out,
    };
    classify_all(cfg, data, false, progress, timings)
}

/// The shared stages: PCA per scale, background models, encoders, SVMs, the
/// sweep, and the report. `images` tells whether the data came from image
/// folders (for the report's configuration).
fn classify_all(
    cfg: &RunConfig,
    data: Labelled,
    images: bool,
    progress: &dyn Progress,
    mut timings: Vec<(String, f64)>,
) -> Result<Report, PipelineError> {
    let Labelled {
        classes,
        mut train,
        mut test,
        skipped,
        scale_names,
        names,
        out,
    } = data;
    let out = out.as_ref();
    let n_classes = classes.len();
    let with_global = cfg
        .encoders
        .iter()
        .any(|s| s.terms.contains(&Term::CnnGlobal));
    let with_local = !cfg.sweep_gmm_components.is_empty()
        || !cfg.sweep_mfa_factors.is_empty()
        || cfg
            .encoders
            .iter()
            .any(|s| s.terms.iter().any(|t| *t != Term::CnnGlobal));
    let ytr: Vec<usize> = train.iter().map(|(_, y)| *y).collect();
    let yte: Vec<usize> = test.iter().map(|(_, y)| *y).collect();

    // 2. PCA per scale, then the background-model training sample.
    let n_scales = scale_names.len();
    let mut scales = Vec::new();
    let mut pca_dims = Vec::new();
    let mut per_image = Vec::new();
    if with_local {
        progress.start("PCA", n_scales as u64);
        for (s, scale_name) in scale_names.iter().enumerate() {
            let tr_bags: Vec<&Array2<f32>> = train.iter().map(|(d, _)| &d.scales[s]).collect();
            per_image.push(
                tr_bags.iter().map(|b| b.nrows()).sum::<usize>() as f64 / tr_bags.len() as f64,
            );
            let x = sample_rows(&tr_bags, cfg.pca_sample, cfg.seed ^ (s as u64 + 1));
            let pca: Pca<f32> = timed(&mut timings, format!("pca scale {scale_name}"), || {
                PcaParams::new(cfg.pca_dim)
                    .clamp_components(true)
                    .fit(x.view())
            })
            .map_err(PipelineError::stage("PCA"))?;
            if let Some(out) = out {
                out.pca(scale_name, &pca)?;
            }
            // Each image's raw descriptors are dropped once projected.
            let proj =
                |v: &mut [(ImageDescriptors, usize)]| -> Result<Vec<Array2<f32>>, PipelineError> {
                    v.iter_mut()
                        .map(|(d, _)| {
                            let raw = std::mem::take(&mut d.scales[s]);
                            pca.transform(raw.view())
                                .map_err(PipelineError::stage("PCA"))
                        })
                        .collect()
                };
            let ptr = proj(&mut train)?;
            let pte = proj(&mut test)?;
            let refs: Vec<&Array2<f32>> = ptr.iter().collect();
            let sample = sample_rows(&refs, cfg.model_sample, cfg.seed ^ (0x5eed_0000 + s as u64));
            pca_dims.push(pca.n_components());
            scales.push(Scale {
                train: ptr,
                test: pte,
                sample,
            });
            progress.inc(1);
        }
        progress.finish(&format!("{pca_dims:?} dimensions"));
    }
    let globals = if with_global {
        let g = |v: &[(ImageDescriptors, usize)]| {
            let rows: Vec<_> = v
                .iter()
                .map(|(d, _)| d.global.as_ref().expect("computed").view())
                .collect();
            ndarray::stack(Axis(0), &rows).expect("same length")
        };
        (g(&train), g(&test))
    } else {
        (Array2::zeros((0, 0)), Array2::zeros((0, 0)))
    };
    let (n_train, n_test) = (train.len(), test.len());
    drop((train, test));
    if let Some(out) = out {
        out.image_list("train", &names.0, &ytr, &classes)?;
        out.image_list("test", &names.1, &yte, &classes)?;
    }

    // 3. Encoders and SVMs.
    let mut models = Models {
        cfg,
        scales: &scales,
        scale_names: &scale_names,
        gmm: BTreeMap::new(),
        mfa: BTreeMap::new(),
        whitening: BTreeMap::new(),
        out,
    };
    let mut results = Vec::new();
    let mut jobs: Vec<(&EncoderSpec, bool)> = Vec::new();
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
    for (spec, whiten) in jobs {
        let t = Instant::now();
        let mut tr = Vec::new();
        let mut te = Vec::new();
        for term in &spec.terms {
            let (a, b) = encode_term(
                term,
                cfg.gmm_components,
                (cfg.mfa_components, cfg.mfa_factors),
                whiten,
                &mut models,
                (&globals.0, &globals.1),
                progress,
                &mut timings,
            )?;
            tr.push(a);
            te.push(b);
        }
        let cat = |v: &[Array2<f32>]| {
            concatenate(Axis(1), &v.iter().map(|a| a.view()).collect::<Vec<_>>())
                .expect("same rows")
        };
        let (xtr, xte) = (cat(&tr), cat(&te));
        let encode_seconds = t.elapsed().as_secs_f64();
        let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
        progress.start(&format!("SVM {name}"), 1);
        let t = Instant::now();
        let (svm, c, cv, pred) = classify(cfg, n_classes, (&xtr, &ytr), (&xte, &yte))?;
        let svm_seconds = t.elapsed().as_secs_f64();
        if let Some(out) = out {
            let stem = format!("{}{}", spec.name(), if whiten { "-whitened" } else { "" });
            out.svm(&stem, svm, &classes, c)?;
            out.encodings(&stem, &xtr, &xte)?;
        }
        let row = result_row(
            spec,
            whiten,
            xtr.ncols(),
            n_classes,
            &yte,
            &pred,
            c,
            cv,
            encode_seconds,
            svm_seconds,
        )?;
        progress.inc(1);
        progress.finish(&format!(
            "{name}: {:.2} % (dim {}, C = {c})",
            100.0 * row.accuracy,
            row.dim
        ));
        results.push(row);
    }

    // 4. The Figure-1 sweep.
    let mut sweep = Vec::new();
    let series: Vec<(Term, usize, Option<usize>)> = cfg
        .sweep_gmm_components
        .iter()
        .map(|&k| (Term::GmmFv(vec![FvPart::Var]), k, None))
        .chain(cfg.sweep_mfa_factors.iter().map(|&r| {
            (
                Term::MfaFs(vec![MfaPart::Loading]),
                cfg.mfa_components,
                Some(r),
            )
        }))
        .collect();
    for (term, k, r) in series {
        let (xtr, xte) = encode_term(
            &term,
            k,
            (k, r.unwrap_or(0)),
            false,
            &mut models,
            (&globals.0, &globals.1),
            progress,
            &mut timings,
        )?;
        let (_, _, _, pred) = classify(cfg, n_classes, (&xtr, &ytr), (&xte, &yte))?;
        let accuracy = mean_per_class_accuracy(&yte, &pred, n_classes)
            .map_err(PipelineError::stage("metrics"))?;
        progress.warn(&format!(
            "sweep {} K={k}{}: {:.2} % (dim {})",
            term.name(),
            r.map(|r| format!(" R={r}")).unwrap_or_default(),
            100.0 * accuracy,
            xtr.ncols()
        ));
        sweep.push(SweepPoint {
            series: term.name(),
            components: k,
            factors: r,
            dim: xtr.ncols(),
            accuracy,
        });
    }

    Ok(Report {
        results,
        sweep,
        dataset: DatasetInfo {
            train: cfg.train.display().to_string(),
            test: cfg.test.display().to_string(),
            classes,
            n_train,
            n_test,
            skipped,
            descriptors_per_image: per_image,
            pca_dims,
        },
        timings,
        config: cfg.describe(images),
        fisherkit_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

#[allow(clippy::too_many_arguments)]
fn result_row(
    spec: &EncoderSpec,
    whitened: bool,
    dim: usize,
    n_classes: usize,
    yte: &[usize],
    pred: &[usize],
    c: f64,
    cv: Vec<(f64, f64)>,
    encode_seconds: f64,
    svm_seconds: f64,
) -> Result<ResultRow, PipelineError> {
    const STAGE: &str = "metrics";
    let conf = confusion_matrix(yte, pred, n_classes).map_err(|e| PipelineError::at(STAGE, e))?;
    let accuracy =
        mean_per_class_accuracy(yte, pred, n_classes).map_err(|e| PipelineError::at(STAGE, e))?;
    let per_class: Vec<f64> = (0..n_classes)
        .map(|i| {
            let row = conf.slice(s![i, ..]);
            let n: usize = row.sum();
            if n == 0 {
                0.0
            } else {
                row[i] as f64 / n as f64
            }
        })
        .collect();
    let overall = (0..n_classes).map(|i| conf[[i, i]]).sum::<usize>() as f64 / yte.len() as f64;
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
        confusion: conf.outer_iter().map(|r| r.to_vec()).collect(),
        c,
        cv,
        encode_seconds,
        svm_seconds,
    })
}
