//! `fisherkit predict` and `fisherkit evaluate`: a saved scene classifier
//! applied to new images (or descriptor bags), rows streamed out batch by batch.

use crate::args::{EvaluateArgs, OnnxArgs, PredictArgs, PredictFormat};
use crate::commands::pipeline::Bars;
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::predict::{evaluate_bags, evaluate_folder, Outcome, Predictor};
use fisherkit_pipeline::{CnnChoice, SceneClassifier};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Loads the classifier, naming the file in errors.
fn load(path: &Path) -> Result<SceneClassifier, CliError> {
    SceneClassifier::load(path).map_err(CliError::other)
}

/// The CNN a classifier of images was trained with: the built-in network it
/// names, or the ONNX model given with `--cnn` (checked against the file by
/// [`Predictor::new`]). `None` for a classifier of descriptor files.
fn network(
    clf: &SceneClassifier,
    cnn: Option<&PathBuf>,
    onnx: &OnnxArgs,
) -> Result<Option<Backbone>, CliError> {
    let Some(info) = &clf.info().input.cnn else {
        return Ok(None);
    };
    let choice = match (info.name.parse::<BackboneKind>(), cnn) {
        (Ok(kind), None) => {
            if onnx.any() {
                return Err(CliError::usage("the --onnx-* options need --cnn FILE.onnx"));
            }
            CnnChoice::Builtin(kind)
        }
        (Ok(_), Some(p)) => {
            return Err(CliError::usage(format!(
                "--cnn {}: the classifier was trained with the built-in {}, loaded by that name",
                p.display(),
                info.name
            )))
        }
        (Err(_), Some(p)) => onnx
            .choice(&p.to_string_lossy())
            .map_err(|e| CliError::usage(format!("--cnn {}: {e}", p.display())))?,
        (Err(_), None) => {
            return Err(CliError::usage(format!(
                "the classifier was trained with the ONNX model {}{}: give it with --cnn FILE.onnx and the same --onnx-* options",
                info.name,
                info.onnx_path
                    .as_ref()
                    .map(|p| format!(" (then at {p})"))
                    .unwrap_or_default()
            )))
        }
    };
    choice.load().map(Some).map_err(CliError::other)
}

/// RFC 4180 quoting of one CSV field.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes prediction rows in the chosen format.
struct RowWriter<'a> {
    out: Box<dyn Write + 'a>,
    format: PredictFormat,
    top_k: usize,
    classes: &'a [String],
}

impl RowWriter<'_> {
    fn header(&mut self) -> std::io::Result<()> {
        if self.format != PredictFormat::Csv {
            return Ok(());
        }
        let mut cols = vec!["path".to_string(), "label".into(), "score".into()];
        for k in 2..=self.top_k {
            cols.push(format!("label_{k}"));
            cols.push(format!("score_{k}"));
        }
        cols.push("error".into());
        writeln!(self.out, "{}", cols.join(","))
    }

    /// The top-k (class, score) pairs, best first (the first class on a tie).
    fn top(&self, scores: &[f64]) -> Vec<(usize, f64)> {
        let mut idx: Vec<usize> = (0..scores.len()).collect();
        idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        idx.truncate(self.top_k);
        idx.into_iter().map(|i| (i, scores[i])).collect()
    }

    fn row(&mut self, name: &str, o: &Outcome) -> std::io::Result<()> {
        let (top, error) = match o {
            Ok((s, _)) => {
                let mut t = self.top(&s.scores);
                // The winner is the classifier's own choice (first of equal scores).
                if let Some(first) = t.first_mut() {
                    *first = (s.class, s.scores[s.class]);
                }
                (t, String::new())
            }
            Err(e) => (vec![], e.clone()),
        };
        match self.format {
            PredictFormat::Csv => {
                let mut cols = vec![csv_field(name)];
                for k in 0..self.top_k {
                    match top.get(k) {
                        Some(&(c, v)) => {
                            cols.push(csv_field(&self.classes[c]));
                            cols.push(format!("{v:.6}"));
                        }
                        None => cols.extend([String::new(), String::new()]),
                    }
                }
                cols.push(csv_field(&error));
                writeln!(self.out, "{}", cols.join(","))
            }
            PredictFormat::Jsonl => {
                let mut m = serde_json::Map::new();
                m.insert("path".into(), name.into());
                let label = top.first().map(|&(c, _)| self.classes[c].clone());
                m.insert(
                    "label".into(),
                    label.map_or(serde_json::Value::Null, Into::into),
                );
                m.insert(
                    "score".into(),
                    top.first()
                        .map_or(serde_json::Value::Null, |&(_, v)| v.into()),
                );
                if self.top_k > 1 {
                    let t: Vec<serde_json::Value> = top
                        .iter()
                        .map(|&(c, v)| serde_json::json!({"label": self.classes[c], "score": v}))
                        .collect();
                    m.insert("top".into(), t.into());
                }
                if !error.is_empty() {
                    m.insert("error".into(), error.into());
                }
                writeln!(self.out, "{}", serde_json::Value::Object(m))
            }
        }
    }
}

/// Where the rows go: standard output, or a temporary file beside `--output`
/// renamed over it when every row is written.
enum Sink {
    Stdout,
    File(PathBuf, tempfile::NamedTempFile),
}

impl Sink {
    fn open(output: Option<&Path>) -> Result<Self, CliError> {
        let Some(p) = output else {
            return Ok(Sink::Stdout);
        };
        super::check_output(p)?;
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".predict.")
            .tempfile_in(&dir)
            .map_err(|e| CliError::other(format!("{}: {e}", p.display())))?;
        Ok(Sink::File(p.to_path_buf(), tmp))
    }

    fn writer(&self) -> Result<Box<dyn Write + '_>, CliError> {
        Ok(match self {
            Sink::Stdout => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            Sink::File(p, t) => Box::new(std::io::BufWriter::new(
                t.as_file()
                    .try_clone()
                    .map_err(|e| CliError::other(format!("{}: {e}", p.display())))?,
            )),
        })
    }

    fn finish(self) -> Result<(), CliError> {
        if let Sink::File(p, t) = self {
            t.as_file()
                .sync_all()
                .map_err(|e| CliError::other(format!("{}: {e}", p.display())))?;
            t.persist(&p)
                .map_err(|e| CliError::other(format!("{}: {}", p.display(), e.error)))?;
        }
        Ok(())
    }
}

/// `fisherkit predict`.
pub fn predict_cmd(a: &PredictArgs, ui: &Ui) -> Result<(), CliError> {
    if a.top_k == 0 {
        return Err(CliError::usage("--top-k must be at least 1"));
    }
    if let Some(p) = &a.save_encodings {
        super::check_output(p)?;
    }
    let clf = load(&a.model)?;
    let top_k = a.top_k.min(clf.classes().len());
    let net = match &a.descriptors {
        Some(_) => None,
        None => network(&clf, a.cnn.as_ref(), &a.onnx)?,
    };
    let predictor = Predictor::new(&clf, net.as_ref()).map_err(CliError::other)?;
    let sink = Sink::open(a.output.as_deref())?;
    let mut rows = RowWriter {
        out: sink.writer()?,
        format: a.format,
        top_k,
        classes: clf.classes(),
    };
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::BrokenPipe => CliError::closed_pipe(),
        _ => CliError::other(format!("writing the predictions: {e}")),
    };
    rows.header().map_err(io)?;
    let mut failed = 0usize;
    let mut encodings = None;
    let mut emit = |names: &[String],
                    outcomes: Vec<Outcome>,
                    first: usize,
                    rows: &mut RowWriter<'_>,
                    enc: &mut Option<fisherkit_io::NpyBlockWriter>|
     -> Result<(), CliError> {
        for (i, (name, o)) in names.iter().zip(&outcomes).enumerate() {
            rows.row(name, o).map_err(io)?;
            match o {
                Ok((_, Some(x))) => {
                    if let Some(w) = enc.as_mut() {
                        w.write_row(first + i, x.as_slice().expect("contiguous"))?;
                    }
                }
                Ok(_) => {}
                Err(_) => failed += 1,
            }
        }
        rows.out.flush().map_err(io)
    };
    let features = a.save_encodings.is_some();
    match &a.descriptors {
        Some(file) => {
            let file = fisherkit_pipeline::descriptor_file::DescriptorReader::open(file)?;
            if let Some(p) = &a.save_encodings {
                encodings = Some(fisherkit_io::NpyBlockWriter::create(
                    p,
                    file.len(),
                    clf.dim(),
                )?);
            }
            predictor.predict_file(&file, features, |first, outcomes| {
                let names = &file.names()[first..first + outcomes.len()];
                emit(names, outcomes, first, &mut rows, &mut encodings)
            })?;
        }
        None => {
            let files =
                fisherkit_pipeline::dataset::collect_images(&a.paths).map_err(CliError::other)?;
            if files.is_empty() {
                return Err(CliError::other(
                    "no image (.jpg, .jpeg, .png) among the inputs",
                ));
            }
            if let Some(p) = &a.save_encodings {
                encodings = Some(fisherkit_io::NpyBlockWriter::create(
                    p,
                    files.len(),
                    clf.dim(),
                )?);
            }
            let bar = ui.bar(files.len() as u64, "predict");
            let mut first = 0;
            for batch in files.chunks(predictor.batch_len()) {
                let paths: Vec<&Path> = batch.iter().map(PathBuf::as_path).collect();
                let outcomes = predictor
                    .predict_paths(&paths, features)
                    .map_err(CliError::other)?;
                let names: Vec<String> = batch.iter().map(|p| p.display().to_string()).collect();
                bar.suspend(|| emit(&names, outcomes, first, &mut rows, &mut encodings))?;
                first += batch.len();
                bar.inc(batch.len() as u64);
            }
            bar.finish_and_clear();
        }
    }
    drop(rows);
    sink.finish()?;
    if let Some(w) = encodings {
        w.finish()?;
    }
    if failed > 0 {
        ui.info(format!(
            "{failed} input(s) could not be labelled (see the error column)"
        ));
        if a.strict {
            return Err(CliError::other(format!(
                "--strict: {failed} input(s) could not be labelled"
            )));
        }
    }
    Ok(())
}

/// `fisherkit evaluate`.
pub fn evaluate_cmd(a: &EvaluateArgs, ui: &Ui) -> Result<(), CliError> {
    for p in [&a.report, &a.plot].into_iter().flatten() {
        super::check_output(p)?;
    }
    let clf = load(&a.model)?;
    let bars = Bars::new(ui);
    let e = match (&a.test, &a.test_descriptors) {
        (_, Some(file)) => evaluate_bags(&clf, file, &bars),
        (Some(dir), None) => {
            let net = network(&clf, a.cnn.as_ref(), &a.onnx)?.ok_or_else(|| {
                CliError::usage(
                    "this classifier was trained on descriptor files: give --test-descriptors FILE.npz",
                )
            })?;
            evaluate_folder(&clf, &net, dir, &bars)
        }
        (None, None) => unreachable!("clap requires --test or --test-descriptors"),
    }
    .map_err(CliError::other)?;
    println!(
        "{}: mean per-class accuracy {:.2} % (overall {:.2} %) on {} images of {} classes{}",
        e.encoder,
        100.0 * e.accuracy,
        100.0 * e.overall_accuracy,
        e.n_test,
        e.classes.len(),
        if e.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} unreadable skipped", e.skipped.len())
        }
    );
    for (c, acc) in e.classes.iter().zip(&e.per_class_accuracy) {
        println!("  {c:<30} {:6.2} %", 100.0 * acc);
    }
    if let Some(p) = &a.report {
        let json =
            serde_json::to_vec_pretty(&e).map_err(|e| CliError::other(format!("report: {e}")))?;
        fisherkit_io::write_file(p, &json)?;
        ui.info(format!("report written to {}", p.display()));
    }
    if let Some(p) = &a.plot {
        let svg = fisherkit_pipeline::plot::confusion_svg(
            &e.classes,
            &e.confusion,
            &format!(
                "{}: {:.2} % mean per-class accuracy",
                e.encoder,
                100.0 * e.accuracy
            ),
        );
        fisherkit_io::write_file(p, svg.as_bytes())?;
        ui.info(format!("plot written to {}", p.display()));
    }
    Ok(())
}
