//! The whole pipeline: [`run`] on image folders, [`run_descriptors`] on
//! descriptor files; both share the stages from PCA onwards.

use crate::dataset::{train_label, ImageSet};
use crate::descriptor_file::{read_descriptor_file, DescriptorSet};
use crate::descriptors::ImageDescriptors;
use crate::kernel::{kernel_pca, load_kernel, save_kernel, TermColumns, TermKernel};
use crate::output::{file_stem, OutputDir};
use crate::report::{DatasetInfo, Report, ResultRow, SweepPoint};
use crate::spec::{EncoderSpec, Term};
use crate::stages::{
    self, encode_all, fit_pca, key, project_sample, sample_images, FitSettings, Fitted, ImageLog,
    ModelKind, ModelSpec, RunFolder, SampleSettings, Source, Target,
};
use crate::store::Store;
use crate::{PipelineError, Progress};
use fisherkit::encode::{FvPart, MfaPart};
use fisherkit::metrics::{confusion_matrix, mean_per_class_accuracy};
use fisherkit::pca::Pca;
use fisherkit::svm::{GramSvc, LinearSvc, LinearSvcParams};
use fisherkit::Normalization;
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use fisherkit_cnn::Backbone;
use ndarray::{concatenate, s, Array2, Axis};
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
    /// Training images (a seeded subset) the PCA and the background models
    /// learn from; the CNN runs on them once more. Default 500.
    pub sample_images: usize,
    /// Descriptors per scale, drawn evenly over the sample images (seeded),
    /// whose covariance gives the PCA. Default 200 000.
    pub pca_sample: usize,
    /// Descriptors per scale, drawn the same way, to learn the background models. Default 100 000.
    pub model_sample: usize,
    /// Also evaluate each MFA-FS encoder compressed by a PCA of the training
    /// encodings to this many dimensions (the paper's Table 3, 5 000). Default `None`.
    pub compact_dim: Option<usize>,
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
            sample_images: 500,
            pca_sample: 200_000,
            model_sample: 100_000,
            compact_dim: None,
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
            ("sample images", self.sample_images),
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
        if self.compact_dim == Some(0) {
            return bad("the compact PCA dimension must be at least 1".into());
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
            ("sample_images".into(), self.sample_images.to_string()),
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
        if let Some(d) = self.compact_dim {
            v.push(("compact_dim".into(), d.to_string()));
        }
        if let Some(dir) = &self.save_descriptors {
            v.push(("save_descriptors".into(), dir.display().to_string()));
        }
        v
    }
}

/// The data of a run: names, labels and where the descriptors come from.
struct Inputs<'a> {
    /// Class names; labels index into them.
    classes: Vec<String>,
    /// `<class>/<file>` (images) or the descriptor file's names, train then test.
    names: Vec<String>,
    /// Label of every image, train then test.
    labels: Vec<usize>,
    /// Images `0..n_train` are the training images.
    n_train: usize,
    source: Source<'a>,
    /// One name per descriptor scale, for messages, timings and file names.
    scale_names: Vec<String>,
    /// What identifies the data (file names, sizes and times) in the run folder's key.
    data_key: Vec<String>,
    /// The data came from image folders.
    images: bool,
}

fn timed<T>(timings: &mut Vec<(String, f64)>, name: String, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    timings.push((name, t.elapsed().as_secs_f64()));
    r
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

/// `path`'s size and modification time, for the run folder's key.
fn file_stamp(path: &Path) -> String {
    let m = std::fs::metadata(path).ok();
    let size = m.as_ref().map_or(0, |m| m.len());
    let mtime = m
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{}|{size}|{mtime}", path.display())
}

/// Runs the whole pipeline (see the crate docs) on the image folders
/// `cfg.train` and `cfg.test` and returns the report. Streamed: memory is
/// bounded by the batch, the samples, the models and the N × N kernels, not
/// by the number of images × dimension (docs/pipeline.md).
/// `net` is the ImageNet CNN (normally [`Backbone::builtin`]).
///
/// ```no_run
/// use fisherkit_pipeline::{run, NoProgress, RunConfig};
/// let cfg = RunConfig::new("scenes/train".into(), "scenes/test".into());
/// let net = fisherkit_cnn::Backbone::builtin(fisherkit_cnn::BackboneKind::SqueezeNet)?;
/// let report = run(&cfg, &net, &NoProgress)?;
/// for row in &report.results {
///     println!("{} {:.1} %", row.spec, 100.0 * row.accuracy);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(
    cfg: &RunConfig,
    net: &Backbone,
    progress: &dyn Progress,
) -> Result<Report, PipelineError> {
    cfg.validate()?;
    let train_set = ImageSet::scan(&cfg.train)?;
    let test_set = ImageSet::scan(&cfg.test)?.align_to(&train_set)?;
    check_class_count(&train_set.classes, &cfg.train)?;
    let classes = train_set.classes.clone();
    let items: Vec<&(PathBuf, usize)> = train_set.items.iter().chain(&test_set.items).collect();
    let names = items
        .iter()
        .map(|(p, y)| {
            let file = p.file_name().unwrap_or_default().to_string_lossy();
            format!("{}/{file}", classes[*y])
        })
        .collect();
    let inputs = Inputs {
        names,
        labels: items.iter().map(|(_, y)| *y).collect(),
        n_train: train_set.items.len(),
        data_key: items.iter().map(|(p, _)| file_stamp(p)).collect(),
        source: Source::Images {
            net,
            paths: items.iter().map(|(p, _)| p.clone()).collect(),
            params: &cfg.descriptors,
            with_global: cfg
                .encoders
                .iter()
                .any(|s| s.terms.contains(&Term::CnnGlobal)),
        },
        scale_names: cfg.descriptors.scales.iter().map(u32::to_string).collect(),
        classes,
        images: true,
    };
    streamed(cfg, inputs, progress)
}

/// Runs the pipeline from PCA onwards on precomputed descriptors: `cfg.train`
/// and `cfg.test` are descriptor files (see [`crate::descriptor_file`]); each
/// file's bags are one scale, and the CNN settings of `cfg.descriptors` are not
/// used. `cnn-global` is not available (the files hold no image-level scores).
/// The files are read whole (they are the user's own arrays); everything
/// after is streamed as for [`run`].
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
    progress.start("read descriptors", 2);
    let train = read_descriptor_file(&cfg.train)?;
    progress.inc(1);
    let test = read_descriptor_file(&cfg.test)?;
    progress.inc(1);
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
    let labels = train
        .labels
        .iter()
        .chain(&test.labels)
        .map(|name| train_label(name, &classes))
        .collect::<Result<Vec<_>, _>>()?;
    progress.finish(&format!(
        "{} training and {} test images, {} classes, D = {}",
        train.bags.len(),
        test.bags.len(),
        classes.len(),
        train.dim()
    ));
    let n_train = train.bags.len();
    let DescriptorSet { names, bags, .. } = train;
    let (names, bags) = (
        names.into_iter().chain(test.names).collect(),
        bags.into_iter().chain(test.bags).collect(),
    );
    let inputs = Inputs {
        classes,
        names,
        labels,
        n_train,
        source: Source::Bags(bags),
        scale_names: vec!["file".into()],
        data_key: vec![file_stamp(&cfg.train), file_stamp(&cfg.test)],
        images: false,
    };
    streamed(cfg, inputs, progress)
}

/// The run folder of `cfg` and `inputs`: under the cache folder, keyed by the
/// data and every setting the PCA and the sample depend on; a temporary
/// folder (removed at the end) without a cache.
fn run_folder(cfg: &RunConfig, inputs: &Inputs<'_>) -> Result<RunFolder, PipelineError> {
    let d = &cfg.descriptors;
    let mut parts = inputs.data_key.clone();
    parts.extend([
        format!("fisherkit-run-v1 images={}", inputs.images),
        format!(
            "cnn={} scales={:?} mode={:?} stride={} max={:?}",
            // Descriptor-file runs use no CNN; they keep the historical key (valid caches).
            inputs.source.cnn_name().unwrap_or("squeezenet1_1"),
            d.scales,
            d.mode,
            d.stride,
            d.max_image_side
        ),
        format!(
            "pca={} sample_images={} pca_sample={} seed={}",
            cfg.pca_dim, cfg.sample_images, cfg.pca_sample, cfg.seed
        ),
    ]);
    let (dir, temporary) = match &cfg.cache_dir {
        Some(c) => (c.join("runs").join(key(&parts)), false),
        None => {
            let t = std::env::temp_dir().join(format!(
                "fisherkit-run-{}-{}",
                std::process::id(),
                key(&parts)
            ));
            (t, true)
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| PipelineError::Io {
        path: dir.display().to_string(),
        message: format!("cannot create the run folder: {e}"),
    })?;
    Ok(RunFolder { dir, temporary })
}

/// The explicit list of background models the encoders and the sweep need.
fn model_plan(cfg: &RunConfig, n_scales: usize) -> Vec<ModelSpec> {
    let mut kinds = std::collections::BTreeSet::new();
    for spec in &cfg.encoders {
        for t in &spec.terms {
            match t {
                Term::GmmFv(_) => kinds.insert(ModelKind::Gmm {
                    k: cfg.gmm_components,
                }),
                Term::MfaFs(_) => kinds.insert(ModelKind::Mfa {
                    k: cfg.mfa_components,
                    r: cfg.mfa_factors,
                }),
                Term::CnnGlobal => false,
            };
        }
    }
    for &k in &cfg.sweep_gmm_components {
        kinds.insert(ModelKind::Gmm { k });
    }
    for &r in &cfg.sweep_mfa_factors {
        kinds.insert(ModelKind::Mfa {
            k: cfg.mfa_components,
            r,
        });
    }
    (0..n_scales)
        .flat_map(|scale| kinds.iter().map(move |&kind| ModelSpec { scale, kind }))
        .collect()
}

/// The settings every model of the run shares.
fn fit_settings(cfg: &RunConfig) -> FitSettings {
    FitSettings {
        gmm_max_iter: cfg.gmm_max_iter,
        mfa_max_iter: cfg.mfa_max_iter,
        model_sample: cfg.model_sample,
        seed: cfg.seed,
    }
}

/// The PCA of every scale and every planned model: read from the run folder,
/// or learned (sample pass, PCA, EM) and written there.
struct Learned {
    pcas: Vec<Pca<f32>>,
    models: BTreeMap<ModelSpec, Fitted>,
}

fn read_pca_file(p: &Path) -> Option<Pca<f32>> {
    fisherkit_io::read_pca(p).ok()?.to_dtype::<f32>().ok()
}

fn read_fitted(p: &Path, kind: ModelKind) -> Option<Fitted> {
    match kind {
        ModelKind::Gmm { .. } => Some(Fitted::Gmm(Box::new(
            fisherkit_io::read_gmm(p).ok()?.to_dtype::<f32>().ok()?,
        ))),
        ModelKind::Mfa { .. } => Some(Fitted::Mfa(Box::new(
            fisherkit_io::read_mfa(p).ok()?.to_dtype::<f32>().ok()?,
        ))),
    }
}

fn write_fitted(p: &Path, f: &Fitted) -> Result<(), PipelineError> {
    let meta = BTreeMap::new();
    match f {
        Fitted::Gmm(g) => fisherkit_io::write_gmm(p, g, &meta),
        Fitted::Mfa(m) => fisherkit_io::write_mfa_model(p, m, &meta),
    }
    .map_err(|e| PipelineError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    })
}

/// Stage 1–3: sample → PCA → models, each reused from the run folder when a
/// killed or earlier run finished it.
fn learn(
    cfg: &RunConfig,
    inputs: &Inputs<'_>,
    folder: &RunFolder,
    plan: &[ModelSpec],
    log: &mut ImageLog,
    progress: &dyn Progress,
    timings: &mut Vec<(String, f64)>,
) -> Result<Learned, PipelineError> {
    let fit = fit_settings(cfg);
    let names = &inputs.scale_names;
    let pca_path = |s: usize| folder.path(&format!("pca-{}.safetensors", names[s]));
    let model_path =
        |m: &ModelSpec| folder.path(&format!("{}.safetensors", m.stem(&names[m.scale], &fit)));
    let mut pcas: Vec<Option<Pca<f32>>> = (0..names.len())
        .map(|s| read_pca_file(&pca_path(s)))
        .collect();
    let mut models: BTreeMap<ModelSpec, Fitted> = plan
        .iter()
        .filter_map(|m| read_fitted(&model_path(m), m.kind).map(|f| (*m, f)))
        .collect();
    let need_sample = pcas.iter().any(Option::is_none) || models.len() < plan.len();
    if need_sample {
        let settings = SampleSettings {
            images: cfg.sample_images,
            pca_rows: cfg.pca_sample,
            model_rows: cfg.model_sample,
            seed: cfg.seed,
        };
        let images = sample_images(inputs.n_train, &settings);
        let t = Instant::now();
        let sample = stages::sample(
            &inputs.source,
            &images,
            names.len(),
            &settings,
            &inputs.names,
            log,
            &folder.path("images.tsv"),
            progress,
        )?;
        timings.push(("sample pass (CNN)".into(), t.elapsed().as_secs_f64()));
        let fresh = timed(timings, "pca".into(), || fit_pca(&sample, cfg.pca_dim))?;
        for (s, p) in fresh.into_iter().enumerate() {
            if pcas[s].is_none() {
                fisherkit_io::write_pca(pca_path(s), &p, &BTreeMap::new()).map_err(|e| {
                    PipelineError::Io {
                        path: pca_path(s).display().to_string(),
                        message: e.to_string(),
                    }
                })?;
                pcas[s] = Some(p);
            }
        }
        let pcas: Vec<Pca<f32>> = pcas.iter().map(|p| p.clone().expect("set")).collect();
        let xs = project_sample(&sample, &pcas)?;
        drop(sample);
        for m in plan {
            if models.contains_key(m) {
                continue;
            }
            let (f, secs) = stages::fit_model(m, &xs[m.scale], &fit, &names[m.scale], progress)?;
            timings.push((format!("em {}", m.stem(&names[m.scale], &fit)), secs));
            write_fitted(&model_path(m), &f)?;
            models.insert(*m, f);
        }
    }
    Ok(Learned {
        pcas: pcas.into_iter().map(|p| p.expect("learned")).collect(),
        models,
    })
}

/// The stores of the planned models (and of the global vectors), opened in the run folder.
fn open_stores(
    cfg: &RunConfig,
    inputs: &Inputs<'_>,
    folder: &RunFolder,
    learned: &Learned,
    with_global: bool,
) -> Result<(BTreeMap<ModelSpec, Store>, Option<Store>), PipelineError> {
    let fit = fit_settings(cfg);
    let n = inputs.names.len();
    let mut stores = BTreeMap::new();
    for (m, f) in &learned.models {
        let dim = f.raw_encoder()?.output_dim();
        let dir = folder.path(&format!(
            "{}.store",
            m.stem(&inputs.scale_names[m.scale], &fit)
        ));
        stores.insert(*m, Store::open(&dir, n, dim)?);
    }
    let global = if with_global {
        Some(Store::open(
            &folder.path("global.store"),
            n,
            fisherkit_cnn::net::NUM_CLASSES,
        )?)
    } else {
        None
    };
    Ok((stores, global))
}

/// Streams `--save-descriptors` into two descriptor files as images pass.
struct DescriptorSink {
    train: crate::descriptor_file::DescriptorFileWriter,
    test: crate::descriptor_file::DescriptorFileWriter,
    n_train: usize,
}

/// Stage 4: every image missing from a store once through the CNN and the encoders.
#[allow(clippy::too_many_arguments)]
fn encode_stage(
    cfg: &RunConfig,
    inputs: &Inputs<'_>,
    folder: &RunFolder,
    learned: &Learned,
    stores: &mut BTreeMap<ModelSpec, Store>,
    global: &mut Option<Store>,
    log: &mut ImageLog,
    progress: &dyn Progress,
    timings: &mut Vec<(String, f64)>,
) -> Result<(), PipelineError> {
    let n = inputs.names.len();
    let mut sink = match &cfg.save_descriptors {
        Some(dir) => Some(DescriptorSink {
            train: crate::descriptor_file::DescriptorFileWriter::create(&dir.join("train.npz"))?,
            test: crate::descriptor_file::DescriptorFileWriter::create(&dir.join("test.npz"))?,
            n_train: inputs.n_train,
        }),
        None => None,
    };
    let todo: Vec<usize> = (0..n)
        .filter(|i| !log.skipped.contains_key(i))
        .filter(|&i| {
            sink.is_some()
                || stores.values().any(|s| !s.has(i))
                || global.as_ref().is_some_and(|g| !g.has(i))
        })
        .collect();
    let mut targets: Vec<Target<'_>> = Vec::new();
    for (m, store) in stores.iter_mut() {
        targets.push(Target {
            scale: m.scale,
            encoder: Some(learned.models[m].raw_encoder()?),
            store,
        });
    }
    if let Some(g) = global.as_mut() {
        targets.push(Target {
            scale: 0,
            encoder: None,
            store: g,
        });
    }
    let names = &inputs.names;
    let labels = &inputs.labels;
    let classes = &inputs.classes;
    let mut hook = |i: usize, d: &ImageDescriptors| -> Result<(), PipelineError> {
        let s = sink.as_mut().expect("hook only with a sink");
        let stacked = concatenate(
            Axis(0),
            &d.scales.iter().map(|a| a.view()).collect::<Vec<_>>(),
        )
        .expect("same width");
        let w = if i < s.n_train {
            &mut s.train
        } else {
            &mut s.test
        };
        w.push(&names[i], stacked.view(), &classes[labels[i]])
    };
    let with_sink = cfg.save_descriptors.is_some();
    let times = encode_all(
        &inputs.source,
        &todo,
        &learned.pcas,
        &mut targets,
        log,
        &folder.path("images.tsv"),
        names,
        if with_sink { Some(&mut hook) } else { None },
        progress,
    )?;
    timings.push((format!("cnn ({} images)", times.images), times.cnn));
    timings.push(("encoding".into(), times.encode));
    if let Some(s) = sink {
        s.train.finish()?;
        s.test.finish()?;
    }
    Ok(())
}

/// The images every needed store holds, train rows first: (rows, train count).
fn usable_rows(
    inputs: &Inputs<'_>,
    log: &ImageLog,
    stores: &BTreeMap<ModelSpec, Store>,
    global: &Option<Store>,
    test_source: &Path,
) -> Result<(Vec<usize>, usize), PipelineError> {
    let ok = |i: &usize| {
        !log.skipped.contains_key(i)
            && stores.values().all(|s| s.has(*i))
            && global.as_ref().is_none_or(|g| g.has(*i))
    };
    let train: Vec<usize> = (0..inputs.n_train).filter(ok).collect();
    let test: Vec<usize> = (inputs.n_train..inputs.names.len()).filter(ok).collect();
    for (c, name) in inputs.classes.iter().enumerate() {
        if !train.iter().any(|&i| inputs.labels[i] == c) {
            return Err(PipelineError::Dataset(format!(
                "training class `{name}` has no readable image"
            )));
        }
    }
    if test.is_empty() {
        return Err(PipelineError::Dataset(format!(
            "{} has no readable image",
            test_source.display()
        )));
    }
    let n_train = train.len();
    Ok((train.into_iter().chain(test).collect(), n_train))
}

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
    match term {
        Term::CnnGlobal => {
            let g = global.as_ref().expect("opened when a term needs it");
            (g, std::iter::once(0..g.dim()).collect())
        }
        Term::GmmFv(parts) => {
            let spec = ModelSpec {
                scale,
                kind: kind_gmm,
            };
            let Fitted::Gmm(g) = &learned.models[&spec] else {
                unreachable!("a GMM spec holds a GMM")
            };
            let (k, d) = (g.n_components(), g.dim());
            let mut cols = Vec::new();
            for (p, r) in [
                (FvPart::Prior, 0..k),
                (FvPart::Mean, k..k + k * d),
                (FvPart::Var, k + k * d..k + 2 * k * d),
            ] {
                if parts.contains(&p) {
                    cols.push(r);
                }
            }
            (&stores[&spec], cols)
        }
        Term::MfaFs(parts) => {
            let spec = ModelSpec {
                scale,
                kind: kind_mfa,
            };
            let Fitted::Mfa(m) = &learned.models[&spec] else {
                unreachable!("an MFA spec holds an MFA")
            };
            let (k, d, r) = (m.n_components(), m.dim(), m.n_factors());
            let mut cols = Vec::new();
            if parts.contains(&MfaPart::Mean) {
                cols.push(0..k * d);
            }
            if parts.contains(&MfaPart::Loading) {
                cols.push(k * d..k * d + k * d * r);
            }
            (&stores[&spec], cols)
        }
    }
}

/// The outcome of [`Classes::classify`]: the SVM, chosen C, the cross-validation table, test predictions.
type Classified = (GramSvc, f64, Vec<(f64, f64)>, Vec<usize>);

/// What the classification stage needs from the earlier ones.
struct Classes<'a> {
    cfg: &'a RunConfig,
    inputs: &'a Inputs<'a>,
    learned: &'a Learned,
    stores: &'a BTreeMap<ModelSpec, Store>,
    global: &'a Option<Store>,
    rows: &'a [usize],
    n_train: usize,
    out: Option<&'a OutputDir>,
    /// Where term kernels are kept (run folder), and the key of `rows`.
    kernel_dir: PathBuf,
    rows_key: String,
}

/// One evaluated encoder: its kernel per scale and what the outputs need.
struct SpecKernels {
    /// Σ over the local terms of the term kernels, per scale.
    per_scale: Vec<Array2<f64>>,
    /// The kernel of a `cnn-global` term (one per image, not per scale).
    global: Option<Array2<f64>>,
    /// (term index, scale, kernel without the Gram) in output order, for weights and encodings.
    parts: Vec<(usize, usize, TermKernel)>,
}

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
        }
    }

    /// The kernels of `spec` at every scale (cnn-global counted once, with the first scale).
    fn kernels(
        &self,
        spec: &EncoderSpec,
        kinds: (ModelKind, ModelKind),
        whiten: bool,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<SpecKernels, PipelineError> {
        let n_scales = self.inputs.scale_names.len();
        let n = self.rows.len();
        let mut per_scale = vec![Array2::<f64>::zeros((n, n)); n_scales];
        let mut global: Option<Array2<f64>> = None;
        let mut parts = Vec::new();
        for (ti, term) in spec.terms.iter().enumerate() {
            let scales: Vec<usize> = if *term == Term::CnnGlobal {
                vec![0]
            } else {
                (0..n_scales).collect()
            };
            for s in scales {
                let cols = self.columns(term, s, kinds, whiten);
                let name = format!(
                    "{}-{}-w{}-{}",
                    cols.store
                        .dir()
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy(),
                    file_stem(&term.name()),
                    cols.whiten as u8,
                    self.rows_key
                );
                let mut k = match load_kernel(&self.kernel_dir, &name, n, cols.whiten) {
                    Some(k) => k,
                    None => {
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
                        k
                    }
                };
                let gram = std::mem::replace(&mut k.gram, Array2::zeros((0, 0)));
                if *term == Term::CnnGlobal {
                    *global.get_or_insert_with(|| Array2::zeros((n, n))) += &gram;
                } else {
                    per_scale[s] += &gram;
                }
                parts.push((ti, s, k));
            }
        }
        Ok(SpecKernels {
            per_scale,
            global,
            parts,
        })
    }

    /// Cross-validates C on the training block of `gram`, trains, predicts the test rows.
    fn classify(&self, gram: &Array2<f64>) -> Result<Classified, PipelineError> {
        let nt = self.n_train;
        let ytr: Vec<usize> = self.rows[..nt]
            .iter()
            .map(|&i| self.inputs.labels[i])
            .collect();
        let (svm, c, cv) = LinearSvcParams {
            seed: self.cfg.seed,
            ..Default::default()
        }
        .fit_gram_with_cv(
            gram.slice(s![..nt, ..nt]).to_owned(),
            &ytr,
            &self.cfg.c_grid,
            self.cfg.cv_folds,
            self.cfg.seed,
        )
        .map_err(PipelineError::stage("SVM"))?;
        let pred = svm
            .predict(gram.slice(s![nt.., ..nt]))
            .map_err(PipelineError::stage("SVM"))?;
        Ok((svm, c, cv, pred))
    }

    fn test_labels(&self) -> Vec<usize> {
        self.rows[self.n_train..]
            .iter()
            .map(|&i| self.inputs.labels[i])
            .collect()
    }
}

/// Everything after the models: kernels, SVMs, rows of the report.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    c: &Classes<'_>,
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<(Vec<ResultRow>, Vec<SweepPoint>), PipelineError> {
    let cfg = c.cfg;
    let n_classes = c.inputs.classes.len();
    let yte = c.test_labels();
    let kinds = (
        ModelKind::Gmm {
            k: cfg.gmm_components,
        },
        ModelKind::Mfa {
            k: cfg.mfa_components,
            r: cfg.mfa_factors,
        },
    );
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
    let n_scales = c.inputs.scale_names.len();
    let mut results = Vec::new();
    for (spec, whiten) in jobs {
        let name = format!("{}{}", spec.name(), if whiten { " (whitened)" } else { "" });
        progress.start(&format!("kernel + SVM {name}"), 1);
        let t = Instant::now();
        let ks = c.kernels(spec, kinds, whiten, timings)?;
        let kernel_seconds = t.elapsed().as_secs_f64();
        let dim_of = |s: Option<usize>| -> usize {
            ks.parts
                .iter()
                .filter(|(ti, sc, _)| {
                    s.is_none_or(|s| *sc == s || spec.terms[*ti] == Term::CnnGlobal)
                })
                .map(|(ti, sc, _)| c.columns(&spec.terms[*ti], *sc, kinds, whiten).width())
                .sum()
        };
        let with_global = |mut g: Array2<f64>| {
            if let Some(k) = &ks.global {
                g += k;
            }
            g
        };
        let mut total = Array2::<f64>::zeros(ks.per_scale[0].dim());
        for g in &ks.per_scale {
            total += g;
        }
        let total = with_global(total);
        let mut evals: Vec<(Option<usize>, Array2<f64>)> = Vec::new();
        if n_scales > 1 && !spec.terms.iter().all(|t| *t == Term::CnnGlobal) {
            for s in 0..n_scales {
                evals.push((Some(s), with_global(ks.per_scale[s].clone())));
            }
        }
        evals.push((None, total));
        for (scale, g) in evals {
            let t = Instant::now();
            let (svm, cc, cv, pred) = c.classify(&g)?;
            let svm_seconds = t.elapsed().as_secs_f64();
            let mut row = result_row(
                spec,
                whiten,
                dim_of(scale),
                n_classes,
                &yte,
                &pred,
                cc,
                cv,
                kernel_seconds,
                svm_seconds,
            )?;
            row.scale = scale.map(|s| c.inputs.scale_names[s].clone());
            if scale.is_none() {
                if let Some(out) = c.out {
                    save_outputs(c, out, spec, whiten, kinds, &ks, &svm, cc)?;
                }
            }
            progress.warn(&format!(
                "{name}{}: {:.2} % (dim {}, C = {cc})",
                row.scale
                    .as_ref()
                    .map(|s| format!(" scale {s}"))
                    .unwrap_or_default(),
                100.0 * row.accuracy,
                row.dim
            ));
            results.push(row);
            if let (None, Some(d), true) = (scale, cfg.compact_dim, spec.uses_mfa()) {
                let t = Instant::now();
                let nt = c.n_train;
                let (ktr, kte, kept) =
                    kernel_pca(g.slice(s![..nt, ..nt]), g.slice(s![nt.., ..nt]), d)?;
                let mut gc = Array2::<f64>::zeros(g.dim());
                gc.slice_mut(s![..nt, ..nt]).assign(&ktr);
                gc.slice_mut(s![nt.., ..nt]).assign(&kte);
                let (_, cc, cv, pred) = c.classify(&gc)?;
                let mut row = result_row(
                    spec,
                    whiten,
                    kept,
                    n_classes,
                    &yte,
                    &pred,
                    cc,
                    cv,
                    kernel_seconds,
                    t.elapsed().as_secs_f64(),
                )?;
                row.compact = Some(kept);
                progress.warn(&format!(
                    "{name} + PCA ({kept}): {:.2} %",
                    100.0 * row.accuracy
                ));
                results.push(row);
            }
        }
        progress.inc(1);
        progress.finish(&name);
    }
    let sweep = sweep(c, kinds, &yte, timings, progress)?;
    Ok((results, sweep))
}

/// The Figure-1 sweep: GMM-FV(σ) over K and MFA-FS(Λ) over R, all scales.
fn sweep(
    c: &Classes<'_>,
    kinds: (ModelKind, ModelKind),
    yte: &[usize],
    timings: &mut Vec<(String, f64)>,
    progress: &dyn Progress,
) -> Result<Vec<SweepPoint>, PipelineError> {
    let cfg = c.cfg;
    let n_classes = c.inputs.classes.len();
    let series: Vec<(Term, ModelKind)> = cfg
        .sweep_gmm_components
        .iter()
        .map(|&k| (Term::GmmFv(vec![FvPart::Var]), ModelKind::Gmm { k }))
        .chain(cfg.sweep_mfa_factors.iter().map(|&r| {
            (
                Term::MfaFs(vec![MfaPart::Loading]),
                ModelKind::Mfa {
                    k: cfg.mfa_components,
                    r,
                },
            )
        }))
        .collect();
    let mut out = Vec::new();
    for (term, kind) in series {
        let k = match kind {
            ModelKind::Gmm { .. } => (kind, kinds.1),
            ModelKind::Mfa { .. } => (kinds.0, kind),
        };
        let spec = EncoderSpec {
            terms: vec![term.clone()],
        };
        let ks = c.kernels(&spec, k, false, timings)?;
        let mut g = Array2::<f64>::zeros(ks.per_scale[0].dim());
        for s in &ks.per_scale {
            g += s;
        }
        let (_, _, _, pred) = c.classify(&g)?;
        let accuracy = mean_per_class_accuracy(yte, &pred, n_classes)
            .map_err(PipelineError::stage("metrics"))?;
        let dim: usize = (0..ks.per_scale.len())
            .map(|s| c.columns(&term, s, k, false).width())
            .sum();
        let (components, factors) = match kind {
            ModelKind::Gmm { k } => (k, None),
            ModelKind::Mfa { k, r } => (k, Some(r)),
        };
        progress.warn(&format!(
            "sweep {} K={components}{}: {:.2} % (dim {dim})",
            term.name(),
            factors.map(|r| format!(" R={r}")).unwrap_or_default(),
            100.0 * accuracy
        ));
        out.push(SweepPoint {
            series: term.name(),
            components,
            factors,
            dim,
            accuracy,
        });
    }
    Ok(out)
}

/// Writes the SVM (weights formed block by block), the whitened MFA files and,
/// if asked, the encodings of one encoder to the output folder.
#[allow(clippy::too_many_arguments)]
fn save_outputs(
    c: &Classes<'_>,
    out: &OutputDir,
    spec: &EncoderSpec,
    whiten: bool,
    kinds: (ModelKind, ModelKind),
    ks: &SpecKernels,
    svm: &GramSvc,
    cost: f64,
) -> Result<(), PipelineError> {
    let nt = c.n_train;
    let (train_rows, test_rows) = c.rows.split_at(nt);
    let dim: usize = ks
        .parts
        .iter()
        .map(|(ti, s, _)| c.columns(&spec.terms[*ti], *s, kinds, whiten).width())
        .sum();
    let stem = format!("{}{}", spec.name(), if whiten { "-whitened" } else { "" });
    let mut weights = Array2::<f64>::zeros((svm.n_classes(), dim));
    let mut writers = if out.encodings {
        Some((
            out.encoding_writer(&stem, "train", nt, dim)?,
            out.encoding_writer(&stem, "test", test_rows.len(), dim)?,
        ))
    } else {
        None
    };
    let mut off = 0;
    for (ti, s, k) in &ks.parts {
        let cols = c.columns(&spec.terms[*ti], *s, kinds, whiten);
        let (inv_tr, inv_te) = k.inv_norm.as_slice().expect("contiguous").split_at(nt);
        cols.for_each_block(train_rows, k, inv_tr, |x| {
            let w = svm.weights_block(x).map_err(PipelineError::stage("SVM"))?;
            weights.slice_mut(s![.., off..off + x.ncols()]).assign(&w);
            if let Some((tr, _)) = writers.as_mut() {
                tr.write_columns(off, x)
                    .map_err(|e| PipelineError::at("output", e))?;
            }
            off += x.ncols();
            Ok(())
        })?;
        if let Some((_, te)) = writers.as_mut() {
            let mut toff = off - cols.width();
            cols.for_each_block(test_rows, k, inv_te, |x| {
                te.write_columns(toff, x)
                    .map_err(|e| PipelineError::at("output", e))?;
                toff += x.ncols();
                Ok(())
            })?;
        }
        if let (Term::MfaFs(parts), Some(fim)) = (&spec.terms[*ti], &k.fim) {
            let Fitted::Mfa(m) = &c.learned.models[&ModelSpec {
                scale: *s,
                kind: kinds.1,
            }] else {
                unreachable!("an MFA spec holds an MFA")
            };
            out.mfa_whitened(&c.inputs.scale_names[*s], m, parts, fim)?;
        }
    }
    if let Some((tr, te)) = writers {
        tr.finish().map_err(|e| PipelineError::at("output", e))?;
        te.finish().map_err(|e| PipelineError::at("output", e))?;
    }
    let model = LinearSvc::from_parts(
        weights.mapv(|v| v as f32),
        svm.intercept().mapv(|v| v as f32),
    )
    .map_err(PipelineError::stage("SVM"))?;
    out.svm(&stem, model, &c.inputs.classes, cost)
}

/// The whole streamed run on `inputs`: learn → encode → evaluate → report.
fn streamed(
    cfg: &RunConfig,
    inputs: Inputs<'_>,
    progress: &dyn Progress,
) -> Result<Report, PipelineError> {
    let out = output_dir(cfg)?;
    if let Some(dir) = &cfg.save_descriptors {
        std::fs::create_dir_all(dir).map_err(|e| PipelineError::Io {
            path: dir.display().to_string(),
            message: format!("cannot create the descriptor output folder: {e}"),
        })?;
    }
    let mut timings = Vec::new();
    let folder = run_folder(cfg, &inputs)?;
    let mut log = ImageLog::load(&folder.path("images.tsv"));
    let plan = model_plan(cfg, inputs.scale_names.len());
    let with_global = cfg
        .encoders
        .iter()
        .any(|s| s.terms.contains(&Term::CnnGlobal));
    let learned = learn(
        cfg,
        &inputs,
        &folder,
        &plan,
        &mut log,
        progress,
        &mut timings,
    )?;
    if let Some(out) = &out {
        for (s, p) in learned.pcas.iter().enumerate() {
            out.pca(&inputs.scale_names[s], p)?;
        }
        for (m, f) in &learned.models {
            match f {
                Fitted::Gmm(g) => out.gmm(&inputs.scale_names[m.scale], g)?,
                Fitted::Mfa(x) => out.mfa(&inputs.scale_names[m.scale], x)?,
            }
        }
    }
    let (mut stores, mut global) = open_stores(cfg, &inputs, &folder, &learned, with_global)?;
    encode_stage(
        cfg,
        &inputs,
        &folder,
        &learned,
        &mut stores,
        &mut global,
        &mut log,
        progress,
        &mut timings,
    )?;
    let (rows, n_train) = usable_rows(&inputs, &log, &stores, &global, &cfg.test)?;
    if let Some(out) = &out {
        let (tr, te) = rows.split_at(n_train);
        let names = |r: &[usize]| {
            r.iter()
                .map(|&i| inputs.names[i].clone())
                .collect::<Vec<_>>()
        };
        let labels = |r: &[usize]| r.iter().map(|&i| inputs.labels[i]).collect::<Vec<_>>();
        out.image_list("train", &names(tr), &labels(tr), &inputs.classes)?;
        out.image_list("test", &names(te), &labels(te), &inputs.classes)?;
    }
    let c = Classes {
        cfg,
        inputs: &inputs,
        learned: &learned,
        stores: &stores,
        global: &global,
        rows: &rows,
        n_train,
        out: out.as_ref(),
        kernel_dir: folder.path("kernels"),
        rows_key: key(&rows.iter().map(usize::to_string).collect::<Vec<_>>()),
    };
    std::fs::create_dir_all(&c.kernel_dir).map_err(|e| PipelineError::Io {
        path: c.kernel_dir.display().to_string(),
        message: format!("cannot create the kernel folder: {e}"),
    })?;
    let (results, sweep) = evaluate(&c, &mut timings, progress)?;
    let n_scales = inputs.scale_names.len();
    let per_image: Vec<f64> = (0..n_scales)
        .map(|s| {
            let v: Vec<usize> = rows[..n_train]
                .iter()
                .filter_map(|i| log.counts.get(i).map(|c| c[s]))
                .collect();
            v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
        })
        .collect();
    let skipped = log
        .skipped
        .iter()
        .map(|(&i, reason)| match &inputs.source {
            Source::Images { paths, .. } => (paths[i].display().to_string(), reason.clone()),
            Source::Bags(_) => (inputs.names[i].clone(), reason.clone()),
        })
        .collect();
    Ok(Report {
        results,
        sweep,
        dataset: DatasetInfo {
            train: cfg.train.display().to_string(),
            test: cfg.test.display().to_string(),
            classes: inputs.classes.clone(),
            n_train,
            n_test: rows.len() - n_train,
            skipped,
            descriptors_per_image: per_image,
            pca_dims: learned.pcas.iter().map(|p| p.n_components()).collect(),
        },
        timings,
        config: cfg.describe(inputs.images),
        peak_rss_mb: peak_rss_mb(),
        fisherkit_version: env!("CARGO_PKG_VERSION").to_string(),
        cnn: inputs.source.cnn_name().map(str::to_string),
    })
}

/// The process's peak resident memory so far (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
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
        scale: None,
        compact: None,
    })
}
