//! `fisherkit run` and `fisherkit demo`: the scene-classification pipeline on
//! image folders, with progress bars and a results table.

use crate::args::{
    ClassifierArg, CnnArg, DemoArgs, OnnxArgs, PatchModeArg, RunArgs, StoreArg, WhiteningArg,
};
use crate::error::CliError;
use crate::progress::Ui;
use clap::Parser;
use fisherkit_cnn::descriptors::PatchMode;
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::report::Report;
use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::{plot, run, run_descriptors, Progress, RunConfig, Whitening};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Draws one bar per pipeline stage.
pub struct Bars<'a> {
    ui: &'a Ui,
    bar: Mutex<Option<(ProgressBar, String)>>,
    start: Instant,
}

impl<'a> Bars<'a> {
    /// Bars on `ui`, times counted from now.
    pub fn new(ui: &'a Ui) -> Self {
        Self {
            ui,
            bar: Mutex::new(None),
            start: Instant::now(),
        }
    }
}

impl Progress for Bars<'_> {
    fn start(&self, stage: &str, len: u64) {
        let bar = self.ui.bar(len, "");
        bar.set_message(stage.to_string());
        *self.bar.lock().expect("not poisoned") = Some((bar, stage.to_string()));
    }
    fn inc(&self, n: u64) {
        if let Some((b, _)) = &*self.bar.lock().expect("not poisoned") {
            b.inc(n);
        }
    }
    fn finish(&self, summary: &str) {
        if let Some((b, stage)) = self.bar.lock().expect("not poisoned").take() {
            b.finish_and_clear();
            self.ui.info(format!(
                "[{:6.1} s] {stage}: {summary}",
                self.start.elapsed().as_secs_f64()
            ));
        }
    }
    fn warn(&self, message: &str) {
        let guard = self.bar.lock().expect("not poisoned");
        let line = format!("[{:6.1} s] {message}", self.start.elapsed().as_secs_f64());
        match &*guard {
            Some((b, _)) => b.suspend(|| self.ui.info(&line)),
            None => self.ui.info(&line),
        }
    }
}

fn parse_list<T: std::str::FromStr>(flag: &str, s: &str) -> Result<Vec<T>, CliError> {
    s.split(',')
        .map(|t| {
            t.trim().parse().map_err(|_| {
                CliError::usage(format!("{flag}: `{t}` is not a valid value in `{s}`"))
            })
        })
        .collect()
}

fn config(a: &RunArgs, train: PathBuf, test: PathBuf) -> Result<RunConfig, CliError> {
    let mut c = RunConfig::new(train, test);
    c.encoders =
        parse_encoders(&a.encoders).map_err(|e| CliError::usage(format!("--encoders: {e}")))?;
    c.descriptors.scales = parse_list("--scales", &a.scales)?;
    c.descriptors.mode = match a.patch_mode {
        PatchModeArg::Dense => PatchMode::Dense,
        PatchModeArg::Exact => PatchMode::Exact,
    };
    if let Some(stride) = a.stride {
        if c.descriptors.mode != PatchMode::Exact {
            return Err(CliError::usage(
                "--stride applies to --patch-mode exact only (dense cells are the CNN's own grid)",
            ));
        }
        c.descriptors.stride = stride;
    }
    c.descriptors.max_image_side = if a.max_image_side == 0 {
        None
    } else {
        Some(a.max_image_side)
    };
    c.output_dir = a.output_dir.clone();
    c.save_encodings = a.save_encodings;
    c.save_model = a.save_model.clone();
    if let Some(m) = &a.model_encoder {
        let mut specs =
            parse_encoders(m).map_err(|e| CliError::usage(format!("--model-encoder: {e}")))?;
        if specs.len() != 1 {
            return Err(CliError::usage(format!(
                "--model-encoder `{m}`: one encoder, not a list"
            )));
        }
        c.model_encoder = Some(specs.remove(0));
    }
    c.pca_dim = a.pca_dim;
    c.sample_images = a.sample_images;
    c.pca_sample = a.pca_sample;
    c.compact_dim = a.compact_pca;
    c.model_sample = a.model_sample;
    c.gmm_components = a.gmm_components;
    c.gmm_max_iter = a.gmm_max_iter;
    c.mfa_components = a.mfa_components;
    c.mfa_factors = a.mfa_factors;
    c.mfa_max_iter = a.mfa_max_iter;
    c.whitening = match a.whitening {
        WhiteningArg::Off => Whitening::Off,
        WhiteningArg::On => Whitening::On,
        WhiteningArg::Both => Whitening::Both,
    };
    c.normalization.power = a.power;
    c.c_grid = parse_list("--c-grid", &a.c_grid)?;
    c.cv_folds = a.cv_folds;
    c.classifier = match a.classifier {
        ClassifierArg::Auto => fisherkit_pipeline::Classifier::Auto,
        ClassifierArg::Kernel => fisherkit_pipeline::Classifier::Kernel,
        ClassifierArg::Primal => fisherkit_pipeline::Classifier::Primal,
    };
    c.store_format = match a.store {
        StoreArg::Q8 => fisherkit_pipeline::StoreFormat::Q8,
        StoreArg::F32 => fisherkit_pipeline::StoreFormat::F32,
    };
    c.seed = a.seed;
    c.save_descriptors = a.save_descriptors.clone();
    c.cache_dir = if a.no_cache {
        None
    } else {
        Some(a.cache.clone())
    };
    if let Some(s) = &a.sweep_gmm {
        c.sweep_gmm_components = parse_list("--sweep-gmm", s)?;
    }
    if let Some(s) = &a.sweep_mfa {
        c.sweep_mfa_factors = parse_list("--sweep-mfa", s)?;
    }
    Ok(c)
}

/// Prints the results table on stdout.
fn print_table(r: &Report) {
    println!(
        "{} classes, {} training and {} test images{}; descriptors per image and scale: {:?}; PCA dims: {:?}",
        r.dataset.classes.len(),
        r.dataset.n_train,
        r.dataset.n_test,
        if r.dataset.skipped.is_empty() { String::new() } else { format!(" ({} unreadable skipped)", r.dataset.skipped.len()) },
        r.dataset.descriptors_per_image.iter().map(|v| v.round() as usize).collect::<Vec<_>>(),
        r.dataset.pca_dims,
    );
    println!();
    println!(
        "{:<44} {:>9} {:>10} {:>7} {:>9}",
        "encoder", "dim", "accuracy", "C", "seconds"
    );
    for row in &r.results {
        let name = format!(
            "{}{}{}{}",
            row.spec,
            if row.whitened { " (whitened)" } else { "" },
            row.scale
                .as_ref()
                .map(|s| format!(" [scale {s}]"))
                .unwrap_or_default(),
            row.compact
                .map(|d| format!(" + PCA ({d})"))
                .unwrap_or_default()
        );
        println!(
            "{:<44} {:>9} {:>9.2}% {:>7} {:>9.1}",
            name,
            row.dim,
            100.0 * row.accuracy,
            row.c,
            row.encode_seconds + row.svm_seconds
        );
    }
    if !r.sweep.is_empty() {
        println!();
        println!("accuracy against dimension (Figure 1):");
        for p in &r.sweep {
            let size = match p.factors {
                Some(f) => format!("K={} R={f}", p.components),
                None => format!("K={}", p.components),
            };
            println!(
                "  {:<16} {:<12} dim {:>8}  {:6.2}%",
                p.series,
                size,
                p.dim,
                100.0 * p.accuracy
            );
        }
    }
    println!("(accuracy = mean per-class accuracy on the test images)");
    if let Some(mb) = r.peak_rss_mb {
        println!("peak memory {mb:.0} MB");
    }
}

fn write_outputs(
    r: &Report,
    report: Option<&Path>,
    plot_path: Option<&Path>,
    ui: &Ui,
) -> Result<(), CliError> {
    if let Some(p) = report {
        let json =
            serde_json::to_vec_pretty(r).map_err(|e| CliError::other(format!("report: {e}")))?;
        fisherkit_io::write_file(p, &json)?;
        ui.info(format!("report written to {}", p.display()));
    }
    if let Some(p) = plot_path {
        if !r.sweep.is_empty() {
            let svg = plot::sweep_svg(&r.sweep, "Accuracy against encoding dimension");
            fisherkit_io::write_file(p, svg.as_bytes())?;
            ui.info(format!("plot written to {}", p.display()));
        }
    }
    Ok(())
}

/// The CNN of a run: a built-in network, or an ONNX model and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum CnnChoice {
    /// `--cnn squeezenet` / `efficientnet-lite0`.
    Builtin(BackboneKind),
    /// `--cnn FILE.onnx` with the `--onnx-*` options (parsed and checked).
    Onnx {
        path: PathBuf,
        input_side: Option<usize>,
        mean: Option<[f32; 3]>,
        std: Option<[f32; 3]>,
        bgr: bool,
        output: Option<String>,
    },
}

/// Three comma-separated numbers (`--onnx-mean`, `--onnx-std`).
fn three(flag: &str, s: &str) -> Result<[f32; 3], CliError> {
    let v: Result<Vec<f32>, _> = s.split(',').map(|t| t.trim().parse::<f32>()).collect();
    match v {
        Ok(v) if v.len() == 3 && v.iter().all(|x| x.is_finite()) => Ok([v[0], v[1], v[2]]),
        _ => Err(CliError::usage(format!(
            "{flag} `{s}`: expected three comma-separated numbers, one per channel"
        ))),
    }
}

impl CnnChoice {
    /// `--cnn` and the `--onnx-*` options, checked: ONNX options only with an ONNX model, and
    /// an ONNX model only in a build with the `onnx` feature.
    ///
    /// # Errors
    /// A usage error naming the problem.
    pub fn from_args(cnn: &CnnArg, onnx: &OnnxArgs) -> Result<Self, CliError> {
        match cnn {
            CnnArg::Onnx(path) => {
                if !cfg!(feature = "onnx") {
                    return Err(CliError::usage(format!(
                        "--cnn {}: this fisherkit was built without ONNX support; rebuild with \
                         --features onnx (cargo install --path crates/fisherkit-cli --features onnx)",
                        path.display()
                    )));
                }
                Ok(CnnChoice::Onnx {
                    path: path.clone(),
                    input_side: match onnx.onnx_input_side {
                        Some(0) => return Err(CliError::usage("--onnx-input-side must be >= 1")),
                        v => v,
                    },
                    mean: onnx
                        .onnx_mean
                        .as_deref()
                        .map(|s| three("--onnx-mean", s))
                        .transpose()?,
                    std: onnx
                        .onnx_std
                        .as_deref()
                        .map(|s| three("--onnx-std", s))
                        .transpose()?,
                    bgr: onnx.onnx_bgr,
                    output: onnx.onnx_output.clone(),
                })
            }
            builtin => {
                if onnx.any() {
                    return Err(CliError::usage(
                        "the --onnx-* options need an ONNX model: --cnn FILE.onnx",
                    ));
                }
                Ok(CnnChoice::Builtin(
                    builtin.kind().expect("a built-in network"),
                ))
            }
        }
    }

    /// The built-in network, `None` for an ONNX model.
    pub fn builtin(&self) -> Option<BackboneKind> {
        match self {
            CnnChoice::Builtin(k) => Some(*k),
            CnnChoice::Onnx { .. } => None,
        }
    }

    /// Loads the network.
    ///
    /// # Errors
    /// The built-in weights or the ONNX model cannot be loaded (the message names the file and
    /// the problem).
    pub fn load(&self) -> Result<Backbone, CliError> {
        match self {
            CnnChoice::Builtin(k) => {
                Backbone::builtin(*k).map_err(|e| CliError::other(format!("built-in CNN {k}: {e}")))
            }
            #[cfg(feature = "onnx")]
            CnnChoice::Onnx {
                path,
                input_side,
                mean,
                std,
                bgr,
                output,
            } => {
                let d = fisherkit_cnn::OnnxOptions::default();
                let options = fisherkit_cnn::OnnxOptions {
                    input_side: *input_side,
                    mean: mean.unwrap_or(d.mean),
                    std: std.unwrap_or(d.std),
                    bgr: *bgr,
                    output: output.clone(),
                    ..d
                };
                fisherkit_cnn::OnnxCnn::load(path, &options)
                    .map(Backbone::from)
                    .map_err(|e| CliError::other(e.to_string()))
            }
            #[cfg(not(feature = "onnx"))]
            CnnChoice::Onnx { path, .. } => Err(CliError::usage(format!(
                "--cnn {}: this fisherkit was built without ONNX support; rebuild with --features onnx",
                path.display()
            ))),
        }
    }
}

/// Runs the pipeline on image folders, or on descriptor files if `descriptor_files`.
fn execute(
    cfg: &RunConfig,
    descriptor_files: bool,
    cnn: &CnnChoice,
    ui: &Ui,
) -> Result<Report, CliError> {
    let bars = Bars::new(ui);
    if descriptor_files {
        return run_descriptors(cfg, &bars).map_err(CliError::other);
    }
    let net = cnn.load()?;
    #[cfg(feature = "onnx")]
    if let Backbone::Onnx(n) = &net {
        ui.info(format!("ONNX model {}", n.summary()));
        if !fisherkit_cnn::Cnn::dense(&**n) && cfg.descriptors.mode == PatchMode::Dense {
            ui.info(format!(
                "the model is not fully convolutional: exact patches (stride {}) instead of dense ones",
                cfg.descriptors.stride
            ));
        }
    }
    run(cfg, &net, &bars).map_err(CliError::other)
}

/// A parsed `fisherkit run` command line: the settings and where its outputs go.
#[derive(Debug, Clone)]
pub struct RunInvocation {
    /// The run's settings.
    pub config: RunConfig,
    /// The inputs are descriptor files, not image folders.
    pub descriptor_files: bool,
    /// `--cnn` (and the `--onnx-*` options): the network of the patch descriptors.
    pub cnn: CnnChoice,
    /// `--report FILE`.
    pub report: Option<PathBuf>,
    /// `--plot FILE`.
    pub plot: Option<PathBuf>,
}

/// Parses the arguments of `fisherkit run` (without the program and
/// subcommand names: `["--train", "DIR", "--test", "DIR", …]`) exactly as
/// the command line does, creating the output folder and checking the
/// output paths.
///
/// # Errors
/// An unknown flag, a bad value, an output path that cannot be written.
pub fn run_argv(args: &[String]) -> Result<RunInvocation, CliError> {
    let argv = ["fisherkit".to_string(), "run".to_string()]
        .into_iter()
        .chain(args.iter().cloned());
    let cli = crate::args::Cli::try_parse_from(argv).map_err(|e| {
        let text = e.render().to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        CliError::usage(first.to_string())
    })?;
    match cli.command {
        crate::args::Command::Run(a) => invocation(&a),
        _ => Err(CliError::usage("not a `fisherkit run` command line")),
    }
}

/// The settings and outputs of `a`, with the output folder created.
fn invocation(a: &RunArgs) -> Result<RunInvocation, CliError> {
    // The report may go inside the output folder: create it before checking.
    if let Some(d) = &a.output_dir {
        std::fs::create_dir_all(d).map_err(|e| {
            CliError::other(format!(
                "{}: cannot create the output folder: {e}",
                d.display()
            ))
        })?;
    }
    for p in [&a.report, &a.plot, &a.save_model].into_iter().flatten() {
        super::check_output(p)?;
    }
    // clap guarantees one complete pair (--train/--test or the descriptor files).
    let (train, test, files) = match (&a.train_descriptors, &a.test_descriptors, &a.train, &a.test)
    {
        (Some(tr), Some(te), _, _) => (tr, te, true),
        (_, _, Some(tr), Some(te)) => (tr, te, false),
        _ => return Err(CliError::usage(
            "give --train and --test (image folders) or --train-descriptors and --test-descriptors",
        )),
    };
    Ok(RunInvocation {
        config: config(a, train.clone(), test.clone())?,
        descriptor_files: files,
        cnn: CnnChoice::from_args(&a.cnn, &a.onnx)?,
        report: a.report.clone(),
        plot: a.plot.clone(),
    })
}

impl RunInvocation {
    /// Runs it with progress on `ui` and writes the report and plot files.
    ///
    /// # Errors
    /// Any failure of the run or of writing its outputs.
    pub fn execute(&self, ui: &Ui) -> Result<Report, CliError> {
        let r = execute(&self.config, self.descriptor_files, &self.cnn, ui)?;
        self.write_outputs(&r, ui)?;
        Ok(r)
    }

    /// Writes the report and plot files of `r`, if asked for.
    ///
    /// # Errors
    /// An output that cannot be written.
    pub fn write_outputs(&self, r: &Report, ui: &Ui) -> Result<(), CliError> {
        write_outputs(r, self.report.as_deref(), self.plot.as_deref(), ui)
    }
}

/// `fisherkit run`.
pub fn run_cmd(a: &RunArgs, ui: &Ui) -> Result<(), CliError> {
    let inv = invocation(a)?;
    let r = execute(&inv.config, inv.descriptor_files, &inv.cnn, ui)?;
    print_table(&r);
    write_outputs(&r, inv.report.as_deref(), inv.plot.as_deref(), ui)
}

/// Where the bundled demo images are: `--data`, else `data/fashion-mnist-demo`
/// of the source tree this binary was built from, else of the current folder.
fn demo_data(a: &DemoArgs) -> Result<PathBuf, CliError> {
    if let Some(d) = &a.data {
        return Ok(d.clone());
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/fashion-mnist-demo");
    for d in [built, PathBuf::from("data/fashion-mnist-demo")] {
        if d.join("train").is_dir() {
            return Ok(d);
        }
    }
    Err(CliError::other(
        "the bundled demo data (data/fashion-mnist-demo) was not found; run from the fisherkit checkout or pass --data DIR",
    ))
}

/// `fisherkit demo`: the Table-1 comparison and the Figure-1 sweep on the bundled
/// Fashion-MNIST subset.
pub fn demo_cmd(a: &DemoArgs, ui: &Ui) -> Result<(), CliError> {
    let data = demo_data(a)?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::other(format!("{}: {e}", a.out.display())))?;
    let mut run = RunArgs::demo_defaults(data.join("train"), data.join("test"));
    run.cache = a.out.join("cache");
    run.cnn = a.cnn.clone();
    run.onnx = a.onnx.clone();
    let cnn = CnnChoice::from_args(&a.cnn, &a.onnx)?;
    let mut cfg = config(&run, data.join("train"), data.join("test"))?;
    let model = a.out.join("scene.safetensors");
    cfg.save_model = Some(model.clone());
    ui.info(format!(
        "fisherkit demo: Fashion-MNIST subset in {}, {} descriptors of whole 28-px images ({}), PCA {}, GMM K={}, MFA K={} R={}",
        data.display(),
        match &cnn {
            CnnChoice::Builtin(k) => k.to_string(),
            CnnChoice::Onnx { path, .. } => path.display().to_string(),
        },
        match cnn.builtin() {
            Some(BackboneKind::SqueezeNet) => "13x13 cells",
            Some(BackboneKind::EfficientNetLite0) => "7x7 cells",
            None => "the ONNX model's cells",
        },
        cfg.pca_dim,
        cfg.gmm_components,
        cfg.mfa_components,
        cfg.mfa_factors
    ));
    let t = Instant::now();
    let r = execute(&cfg, false, &cnn, ui)?;
    print_table(&r);
    write_outputs(
        &r,
        Some(&a.out.join("report.json")),
        Some(&a.out.join("figure1.svg")),
        ui,
    )?;
    demo_predictions(&model, &data.join("test"), &cnn)?;
    ui.info(format!(
        "demo finished in {:.0} s",
        t.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The end of the demo: the saved classifier, loaded back, labels the first
/// test image of each class (what `fisherkit predict` does).
fn demo_predictions(model: &Path, test: &Path, cnn: &CnnChoice) -> Result<(), CliError> {
    let clf = fisherkit_pipeline::SceneClassifier::load(model).map_err(CliError::other)?;
    let net = cnn.load()?;
    let p =
        fisherkit_pipeline::predict::Predictor::new(&clf, Some(&net)).map_err(CliError::other)?;
    let set = fisherkit_pipeline::dataset::ImageSet::scan(test).map_err(CliError::other)?;
    let mut picked: Vec<(PathBuf, usize)> = Vec::new();
    for (path, y) in set.items {
        if picked.iter().all(|(_, c)| *c != y) {
            picked.push((path, y));
        }
    }
    let paths: Vec<&Path> = picked.iter().map(|(p, _)| p.as_path()).collect();
    let outcomes = p.predict_paths(&paths, false).map_err(CliError::other)?;
    println!();
    println!(
        "the saved classifier ({}, {}) on one test image per class:",
        model.display(),
        clf.info().encoder
    );
    println!("  fisherkit predict --model {} IMAGE...", model.display());
    for ((path, y), o) in picked.iter().zip(outcomes) {
        let label = match o {
            Ok((s, _)) => format!(
                "{} (score {:.3})",
                clf.classes()[s.class],
                s.scores[s.class]
            ),
            Err(e) => format!("error: {e}"),
        };
        println!(
            "  {:<48} true {:<12} predicted {label}",
            path.display(),
            set.classes[*y]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One default per setting: `fisherkit run` with only its folders has
    /// the library's defaults ([`RunConfig::new`]), so the help, which shows
    /// the flags' defaults, cannot disagree with the library.
    #[test]
    fn the_command_lines_defaults_are_the_librarys() {
        let args: Vec<String> = ["--train", "tr", "--test", "te"].map(String::from).to_vec();
        let inv = run_argv(&args).unwrap();
        let got = &inv.config;
        let want = RunConfig::new("tr".into(), "te".into());
        assert_eq!(got.encoders, want.encoders);
        assert_eq!(got.descriptors, want.descriptors);
        assert_eq!(
            (
                got.pca_dim,
                got.sample_images,
                got.pca_sample,
                got.model_sample
            ),
            (
                want.pca_dim,
                want.sample_images,
                want.pca_sample,
                want.model_sample
            )
        );
        assert_eq!(
            (
                got.gmm_components,
                got.gmm_max_iter,
                got.mfa_components,
                got.mfa_factors,
                got.mfa_max_iter
            ),
            (
                want.gmm_components,
                want.gmm_max_iter,
                want.mfa_components,
                want.mfa_factors,
                want.mfa_max_iter
            )
        );
        assert_eq!(
            (got.whitening, got.classifier, got.store_format),
            (want.whitening, want.classifier, want.store_format)
        );
        assert_eq!(got.normalization, want.normalization);
        assert_eq!(
            (&got.c_grid, got.cv_folds, got.seed),
            (&want.c_grid, want.cv_folds, want.seed)
        );
        assert_eq!(
            (got.compact_dim, &got.save_model, &got.model_encoder),
            (None, &None, &None)
        );
        assert_eq!(
            got.cache_dir.as_deref(),
            Some(Path::new(fisherkit_pipeline::defaults::CACHE_DIR))
        );
        assert_eq!(inv.cnn, CnnChoice::Builtin(BackboneKind::default()));
    }
}
