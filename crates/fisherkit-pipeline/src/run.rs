//! The whole pipeline: [`run`].

use crate::dataset::ImageSet;
use crate::descriptors::{compute_all, ImageDescriptors};
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
use fisherkit::svm::LinearSvcParams;
use fisherkit::{Encoder, Normalization};
use fisherkit_cnn::descriptors::DescriptorParams;
use fisherkit_cnn::SqueezeNet;
use ndarray::{concatenate, s, Array1, Array2, ArrayView2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// Training image folder `DIR/<class>/*.png|jpg`.
    pub train: PathBuf,
    /// Test image folder, same layout and class names.
    pub test: PathBuf,
    /// Encoders to evaluate.
    pub encoders: Vec<EncoderSpec>,
    /// Patch scales and mode of the CNN descriptors.
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
            sweep_gmm_components: vec![],
            sweep_mfa_factors: vec![],
        }
    }

    fn validate(&self) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
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

    fn describe(&self) -> Vec<(String, String)> {
        let d = &self.descriptors;
        vec![
            (
                "encoders".into(),
                self.encoders
                    .iter()
                    .map(EncoderSpec::name)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("scales".into(), format!("{:?}", d.scales)),
            ("patch_mode".into(), format!("{:?}", d.mode)),
            ("max_image_side".into(), format!("{:?}", d.max_image_side)),
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
        ]
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
    gmm: BTreeMap<(usize, usize), DiagGmm<f32>>,
    mfa: BTreeMap<(usize, usize, usize), Mfa<f32>>,
    whitening: BTreeMap<(usize, usize, usize, String), Array1<f32>>,
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
                &format!("GMM K={k_eff} (scale {})", cfg.descriptors.scales[scale]),
                cfg.gmm_max_iter as u64,
            );
            let fit = timed(
                timings,
                format!("gmm K={k_eff} scale {}", cfg.descriptors.scales[scale]),
                || {
                    GmmParams::<f32>::new(k_eff)
                        .max_iter(cfg.gmm_max_iter)
                        .seed(cfg.seed)
                        .fit_with_progress(x, &mut |_| progress.inc(1))
                },
            )
            .map_err(PipelineError::stage("GMM training"))?;
            progress.finish(&em_summary(fit.n_iter, &fit.log_likelihood, fit.converged));
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
                &format!(
                    "MFA K={k_eff} R={r} (scale {})",
                    cfg.descriptors.scales[scale]
                ),
                cfg.mfa_max_iter as u64,
            );
            let fit = timed(
                timings,
                format!(
                    "mfa K={k_eff} R={r} scale {}",
                    cfg.descriptors.scales[scale]
                ),
                || {
                    MfaParams::new(k_eff, r)
                        .max_iter(cfg.mfa_max_iter)
                        .seed(cfg.seed)
                        .fit_with_progress(x, &mut |_| progress.inc(1))
                },
            )
            .map_err(PipelineError::stage("MFA training"))?;
            progress.finish(&em_summary(fit.n_iter, &fit.log_likelihood, fit.converged));
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
                let mfa = models.mfa(scale, k, r, progress, timings)?.clone();
                let mut enc = MfaFisherScore::new(
                    mfa,
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

/// The outcome of [`classify`]: chosen C, the cross-validation table, test predictions.
type Classified = (f64, Vec<(f64, f64)>, Vec<usize>);

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
    Ok((c, cv, pred))
}

/// Runs the whole pipeline (see the crate docs) and returns the report.
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
    let n_classes = train_set.classes.len();
    if n_classes < 2 {
        return Err(PipelineError::Dataset(format!(
            "{} has {} class; classification needs at least 2",
            cfg.train.display(),
            n_classes
        )));
    }
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

    // 1. CNN descriptors (cached).
    let paths: Vec<PathBuf> = train_set
        .items
        .iter()
        .chain(&test_set.items)
        .map(|(p, _)| p.clone())
        .collect();
    let descs = timed(&mut timings, "descriptors".into(), || {
        compute_all(
            net,
            &paths,
            &cfg.descriptors,
            with_global,
            cfg.cache_dir.as_deref(),
            progress,
        )
    })?;
    let n_train_all = train_set.items.len();
    let mut skipped = Vec::new();
    let mut keep = |items: &[(PathBuf, usize)], descs: Vec<Result<ImageDescriptors, String>>| {
        let mut kept = Vec::new();
        for ((p, y), d) in items.iter().zip(descs) {
            match d {
                Ok(d) => kept.push((d, *y)),
                Err(e) => skipped.push((p.display().to_string(), e)),
            }
        }
        kept
    };
    let mut descs = descs;
    let test_descs = descs.split_off(n_train_all);
    let train = keep(&train_set.items, descs);
    let test = keep(&test_set.items, test_descs);
    for c in 0..n_classes {
        if !train.iter().any(|(_, y)| *y == c) {
            return Err(PipelineError::Dataset(format!(
                "training class `{}` has no readable image",
                train_set.classes[c]
            )));
        }
    }
    if test.is_empty() {
        return Err(PipelineError::Dataset(format!(
            "{} has no readable image",
            cfg.test.display()
        )));
    }
    let ytr: Vec<usize> = train.iter().map(|(_, y)| *y).collect();
    let yte: Vec<usize> = test.iter().map(|(_, y)| *y).collect();

    // 2. PCA per scale, then the background-model training sample.
    let n_scales = cfg.descriptors.scales.len();
    let mut scales = Vec::new();
    let mut pca_dims = Vec::new();
    let mut per_image = Vec::new();
    if with_local {
        progress.start("PCA", n_scales as u64);
        for s in 0..n_scales {
            let tr_bags: Vec<&Array2<f32>> = train.iter().map(|(d, _)| &d.scales[s]).collect();
            per_image.push(
                tr_bags.iter().map(|b| b.nrows()).sum::<usize>() as f64 / tr_bags.len() as f64,
            );
            let x = sample_rows(&tr_bags, cfg.pca_sample, cfg.seed ^ (s as u64 + 1));
            let pca: Pca<f32> = timed(
                &mut timings,
                format!("pca scale {}", cfg.descriptors.scales[s]),
                || {
                    PcaParams::new(cfg.pca_dim)
                        .clamp_components(true)
                        .fit(x.view())
                },
            )
            .map_err(PipelineError::stage("PCA"))?;
            let proj = |bags: &mut dyn Iterator<Item = &Array2<f32>>| -> Result<Vec<Array2<f32>>, PipelineError> {
                bags.map(|b| pca.transform(b.view()).map_err(PipelineError::stage("PCA"))).collect()
            };
            let ptr = proj(&mut train.iter().map(|(d, _)| &d.scales[s]))?;
            let pte = proj(&mut test.iter().map(|(d, _)| &d.scales[s]))?;
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

    // 3. Encoders and SVMs.
    let mut models = Models {
        cfg,
        scales: &scales,
        gmm: BTreeMap::new(),
        mfa: BTreeMap::new(),
        whitening: BTreeMap::new(),
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
        let (c, cv, pred) = classify(cfg, n_classes, (&xtr, &ytr), (&xte, &yte))?;
        let svm_seconds = t.elapsed().as_secs_f64();
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
        let (_, _, pred) = classify(cfg, n_classes, (&xtr, &ytr), (&xte, &yte))?;
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
            classes: train_set.classes.clone(),
            n_train: train.len(),
            n_test: test.len(),
            skipped,
            descriptors_per_image: per_image,
            pca_dims,
        },
        timings,
        config: cfg.describe(),
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
