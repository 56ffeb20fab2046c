//! `fisherkit run` and `fisherkit demo`: the scene-classification pipeline on
//! image folders, with progress bars and a results table.

use crate::args::{DemoArgs, RunArgs};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit_cnn::descriptors::PatchMode;
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::report::Report;
use fisherkit_pipeline::{
    CheckedConfig, CnnChoice, InputKind, PipelineConfig, PipelineError, Progress,
};
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
        self.note(message);
    }
    fn note(&self, message: &str) {
        let guard = self.bar.lock().expect("not poisoned");
        let line = format!("[{:6.1} s] {message}", self.start.elapsed().as_secs_f64());
        match &*guard {
            Some((b, _)) => b.suspend(|| self.ui.info(&line)),
            None => self.ui.info(&line),
        }
    }
}

/// A configuration error is bad usage (exit status 2), anything else a failure.
fn config_error(e: PipelineError) -> CliError {
    match e {
        PipelineError::Config(_) | PipelineError::Spec(_) => CliError::usage(e.to_string()),
        e => CliError::other(e),
    }
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

/// Says where the run wrote its files.
fn announce_outputs(cfg: &CheckedConfig, r: &Report, ui: &Ui) {
    let run = cfg.run_config();
    if let Some(p) = &run.report {
        ui.info(format!("report written to {}", p.display()));
    }
    if let (Some(p), false) = (&run.plot, r.sweep.is_empty()) {
        ui.info(format!("plot written to {}", p.display()));
    }
    if let Some(p) = &run.save_model {
        ui.info(format!("classifier written to {}", p.display()));
    }
}

/// Loads the network of an image run, saying what an ONNX model is.
fn network(cfg: &CheckedConfig, ui: &Ui) -> Result<Backbone, CliError> {
    let net = cfg.run_config().cnn.load().map_err(CliError::other)?;
    #[cfg(feature = "onnx")]
    if let Backbone::Onnx(n) = &net {
        ui.info(format!("ONNX model {}", n.summary()));
        let d = &cfg.run_config().descriptors;
        if !fisherkit_cnn::Cnn::dense(&**n) && d.mode == PatchMode::Dense {
            ui.info(format!(
                "the model is not fully convolutional: exact patches (stride {}) instead of dense ones",
                d.stride
            ));
        }
    }
    #[cfg(not(feature = "onnx"))]
    let _ = (ui, PatchMode::Dense);
    Ok(net)
}

/// Runs the checked configuration with progress bars on `ui`.
fn execute(cfg: &CheckedConfig, ui: &Ui) -> Result<Report, CliError> {
    let bars = Bars::new(ui);
    let net = match cfg.input() {
        InputKind::Images => Some(network(cfg, ui)?),
        InputKind::DescriptorFiles => None,
    };
    let r = cfg.execute(net.as_ref(), &bars).map_err(CliError::other)?;
    announce_outputs(cfg, &r, ui);
    Ok(r)
}

/// `fisherkit run`: `--config` and the flags → the checked configuration →
/// the run (or, with `--print-config`, the configuration as JSON).
pub fn run_cmd(a: &RunArgs, ui: &Ui) -> Result<(), CliError> {
    let cfg = a.pipeline_config().map_err(config_error)?;
    let checked = cfg.check().map_err(config_error)?;
    if a.print_config {
        println!("{}", checked.config().to_json().map_err(config_error)?);
        return Ok(());
    }
    let r = execute(&checked, ui)?;
    print_table(&r);
    Ok(())
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
            return Ok(std::fs::canonicalize(&d).unwrap_or(d));
        }
    }
    Err(CliError::other(
        "the bundled demo data (data/fashion-mnist-demo) was not found; run from the fisherkit checkout or pass --data DIR",
    ))
}

/// The demo's configuration: [`PipelineConfig::demo`] on `data`, its CNN,
/// and every output in `a.out`.
fn demo_config(a: &DemoArgs, data: &Path) -> Result<PipelineConfig, PipelineError> {
    let mut cfg = PipelineConfig::demo(data.join("train"), data.join("test"));
    cfg.set_option("cnn", serde_json::Value::String(a.cnn.clone()))?;
    a.onnx.overlay(&mut cfg)?;
    cfg.output.cache = a.out.join("cache");
    cfg.output.save_model = Some(a.out.join("scene.safetensors"));
    cfg.output.report = Some(a.out.join("report.json"));
    cfg.output.plot = Some(a.out.join("figure1.svg"));
    Ok(cfg)
}

/// `fisherkit demo`: the Table-1 comparison and the Figure-1 sweep on the bundled
/// Fashion-MNIST subset.
pub fn demo_cmd(a: &DemoArgs, ui: &Ui) -> Result<(), CliError> {
    let data = demo_data(a)?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::other(format!("{}: {e}", a.out.display())))?;
    let checked = demo_config(a, &data)
        .and_then(|c| c.check())
        .map_err(config_error)?;
    let cfg = checked.run_config();
    ui.info(format!(
        "fisherkit demo: Fashion-MNIST subset in {}, {} descriptors of whole 28-px images ({}), PCA {}, GMM K={}, MFA K={} R={}",
        data.display(),
        match &cfg.cnn {
            CnnChoice::Builtin(k) => k.to_string(),
            CnnChoice::Onnx { path, .. } => path.display().to_string(),
        },
        match cfg.cnn.builtin() {
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
    let r = execute(&checked, ui)?;
    print_table(&r);
    let model = cfg
        .save_model
        .clone()
        .expect("the demo saves its classifier");
    demo_predictions(&model, &data.join("test"), &cfg.cnn)?;
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
    let net = cnn.load().map_err(CliError::other)?;
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
    use crate::args::{Cli, Command};

    fn run_args(args: &[&str]) -> RunArgs {
        let argv = ["fisherkit", "run"].iter().chain(args);
        match Cli::try_parse_args(argv).unwrap().command {
            Command::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    /// One default per setting: `fisherkit run` with only its folders is
    /// the configuration's defaults, and every flag of `run` is a setting of
    /// the configuration whose help shows that setting's default.
    #[test]
    fn the_command_lines_defaults_are_the_configurations() {
        let got = run_args(&["--train", "tr", "--test", "te"])
            .pipeline_config()
            .unwrap();
        assert_eq!(got, PipelineConfig::images("tr", "te"));
        let names = PipelineConfig::option_names();
        let mut cmd = Cli::definition();
        let run = cmd.find_subcommand_mut("run").unwrap();
        let mut help = String::new();
        for arg in run.get_arguments() {
            help += &arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let id = arg.get_id().as_str();
            if matches!(id, "config" | "print_config" | "help") {
                continue;
            }
            assert!(
                names.iter().any(|n| n == id),
                "--{id} sets no setting of the configuration"
            );
        }
        for shown in [
            "[default: 500]",
            "[default: 96,128,160]",
            "[default: efficientnet-lite0]",
            "[default: 0.01,0.1,1,10]",
            "[default: gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading]",
            "[default: .fisherkit-cache]",
            "[default: off]",
            "[default: q8]",
        ] {
            assert!(help.contains(shown), "{shown} missing from the help");
        }
    }

    #[test]
    fn flags_override_the_config_file() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("run.json");
        let mut base = PipelineConfig::demo("a", "b");
        base.seed = 9;
        std::fs::write(&file, base.to_json().unwrap()).unwrap();
        let f = file.to_str().unwrap();
        let got = run_args(&[
            "--config",
            f,
            "--pca-dim",
            "7",
            "--train-descriptors",
            "x.npz",
            "--test-descriptors",
            "y.npz",
            "--no-cache",
            "--whitening",
            "on",
        ])
        .pipeline_config()
        .unwrap();
        let mut want = base.clone();
        want.pca.pca_dim = 7;
        want.data = fisherkit_pipeline::config::DataConfig {
            train_descriptors: Some("x.npz".into()),
            test_descriptors: Some("y.npz".into()),
            ..Default::default()
        };
        want.output.no_cache = true;
        want.encoding.whitening = fisherkit_pipeline::Whitening::On;
        assert_eq!(got, want);
        let e = run_args(&["--train", "a", "--test", "b", "--scales", "28,x"])
            .pipeline_config()
            .unwrap_err()
            .to_string();
        assert!(e.contains("scales (--scales)") && e.contains("`x`"), "{e}");
    }
}
