//! A saved scene classifier from Python (`fisherkit.SceneClassifier` wraps
//! it): loaded from the file `fisherkit run --save-model` writes, applied to
//! images (paths or arrays) or descriptor bags batch by batch, the GIL
//! released while a batch computes and signals checked between batches.

use crate::pipeline::{decode, ImageArg};
use crate::run::net;
use fisherkit_cnn::{Backbone, BackboneKind};
use fisherkit_pipeline::predict::{Outcome, Predictor};
use fisherkit_pipeline::SceneClassifier;
use ndarray::{Array1, Array2, Array3};
use numpy::{IntoPyArray, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::path::PathBuf;

fn err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A loaded classifier file and, for a classifier of images, its built-in CNN.
#[pyclass(name = "SceneModel", module = "fisherkit._fisherkit", frozen)]
pub(crate) struct SceneModel {
    clf: SceneClassifier,
    net: Option<&'static Backbone>,
}

impl SceneModel {
    fn predictor(&self) -> PyResult<Predictor<'_>> {
        Predictor::new(&self.clf, self.net).map_err(err)
    }

    fn needs_net(&self) -> PyResult<()> {
        match (&self.clf.info().input.cnn, self.net) {
            (Some(_), Some(_)) => Ok(()),
            (Some(c), None) => Err(PyValueError::new_err(format!(
                "this classifier was trained with the ONNX model {}; the Python module is built \
                 without ONNX support: use the fisherkit command line built with --features onnx",
                c.name
            ))),
            (None, _) => Err(PyValueError::new_err(
                "this classifier was trained on descriptor files: give it bags of descriptors",
            )),
        }
    }
}

/// Runs `batch(range)` over `0..n` in ranges of `size`, checking for
/// signals (Ctrl-C) before each, and gathers the outcomes in order.
fn in_batches(
    py: Python<'_>,
    n: usize,
    size: usize,
    mut batch: impl FnMut(
        std::ops::Range<usize>,
    ) -> Result<Vec<Outcome>, fisherkit_pipeline::PipelineError>,
) -> PyResult<Vec<Outcome>> {
    let mut all = Vec::with_capacity(n);
    for start in (0..n).step_by(size) {
        py.check_signals()?;
        all.extend(batch(start..(start + size).min(n)).map_err(err)?);
    }
    Ok(all)
}

/// Turns outcomes into (class index or -1, scores (N, K), features (N, D) or
/// None, error message or None per input).
fn outcomes_to_py<'py>(
    py: Python<'py>,
    outcomes: Vec<Outcome>,
    n_classes: usize,
    dim: usize,
    features: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let n = outcomes.len();
    let mut classes = Vec::with_capacity(n);
    let mut scores = Array2::<f64>::zeros((n, n_classes));
    let mut feats = features.then(|| Array2::<f32>::zeros((n, dim)));
    let mut errors: Vec<Option<String>> = Vec::with_capacity(n);
    for (i, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok((s, x)) => {
                classes.push(s.class as i64);
                scores.row_mut(i).assign(&Array1::from(s.scores));
                if let (Some(f), Some(x)) = (feats.as_mut(), x) {
                    f.row_mut(i).assign(&x);
                }
                errors.push(None);
            }
            Err(e) => {
                classes.push(-1);
                errors.push(Some(e));
            }
        }
    }
    let feats = match feats {
        Some(f) => f.into_pyarray(py).into_any(),
        None => py.None().into_bound(py),
    };
    (
        Array1::from(classes).into_pyarray(py),
        scores.into_pyarray(py),
        feats,
        errors,
    )
        .into_pyobject(py)
}

#[pymethods]
impl SceneModel {
    /// Reads and checks a classifier file (see `fisherkit_io::classifier`).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let clf = py
            .detach(|| SceneClassifier::load(&path))
            .map_err(|e| match e {
                fisherkit_pipeline::PipelineError::File(fisherkit_io::IoError::Os {
                    path,
                    source,
                }) if source.kind() == std::io::ErrorKind::NotFound => {
                    pyo3::exceptions::PyFileNotFoundError::new_err(format!(
                        "{}: {source}",
                        path.display()
                    ))
                }
                e => err(e),
            })?;
        let net = match &clf.info().input.cnn {
            Some(c) => match c.name.parse::<BackboneKind>() {
                Ok(kind) => {
                    let n = net(kind)?;
                    clf.check_cnn(n).map_err(err)?;
                    Some(n)
                }
                Err(_) => None,
            },
            None => None,
        };
        Ok(Self { clf, net })
    }

    /// Writes the classifier to `path` (atomically).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.clf.save(&path)).map_err(err)
    }

    /// The class names, in score order.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.clf.classes().to_vec()
    }

    /// Length of the feature the SVM reads.
    #[getter]
    fn dim(&self) -> usize {
        self.clf.dim()
    }

    /// The classifier's description (input, encoder, parts, classes, training settings) as JSON.
    #[getter]
    fn info_json(&self) -> PyResult<String> {
        serde_json::to_string(self.clf.info()).map_err(err)
    }

    /// Labels `images` (paths or (H, W, 3) RGB arrays), `batch` at a time;
    /// returns (classes, scores, features or None, errors).
    #[pyo3(signature = (images, features, batch=None))]
    fn predict_images<'py>(
        &self,
        py: Python<'py>,
        images: Vec<ImageArg<'py>>,
        features: bool,
        batch: Option<usize>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.needs_net()?;
        let p = self.predictor()?;
        let batch = batch.unwrap_or_else(|| p.batch_len()).max(1);
        let all = in_batches(py, images.len(), batch, |range| {
            // arrays are Python objects: converted here, with the GIL
            let chunk = &images[range.clone()];
            let decoded: Vec<Result<Array3<f32>, String>> = range
                .clone()
                .zip(chunk)
                .map(|(i, im)| decode(i, im))
                .collect();
            let names: Vec<String> = range.zip(chunk).map(|(i, im)| im.name(i)).collect();
            py.detach(|| p.predict_arrays(decoded, &names, features))
        })?;
        outcomes_to_py(py, all, self.clf.classes().len(), self.clf.dim(), features)
    }

    /// Labels encoded image files given as bytes (PNG or JPEG), e.g. a Ray
    /// Data column of `read_binary_files`; `names` name them in messages.
    #[pyo3(signature = (data, names, features, batch=None))]
    fn predict_encoded<'py>(
        &self,
        py: Python<'py>,
        data: Vec<Vec<u8>>,
        names: Vec<String>,
        features: bool,
        batch: Option<usize>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.needs_net()?;
        if names.len() != data.len() {
            return Err(err(format!(
                "{} names for {} images",
                names.len(),
                data.len()
            )));
        }
        let p = self.predictor()?;
        let batch = batch.unwrap_or_else(|| p.batch_len()).max(1);
        let all = in_batches(py, data.len(), batch, |range| {
            py.detach(|| {
                let decoded = data[range.clone()]
                    .iter()
                    .zip(&names[range.clone()])
                    .map(|(b, n)| {
                        fisherkit_cnn::image::decode_image(b, n).map_err(|e| e.to_string())
                    })
                    .collect();
                p.predict_arrays(decoded, &names[range], features)
            })
        })?;
        outcomes_to_py(py, all, self.clf.classes().len(), self.clf.dim(), features)
    }

    /// Labels bags of descriptors ((n_i, D) float32, a classifier of
    /// descriptor files); returns as `predict_images`.
    fn predict_bags<'py>(
        &self,
        py: Python<'py>,
        bags: Vec<PyReadonlyArray2<'py, f32>>,
        features: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let p = self.predictor()?;
        let owned: Vec<Array2<f32>> = bags.iter().map(|b| b.as_array().to_owned()).collect();
        let out = py.detach(|| p.predict_bags(&owned, features));
        outcomes_to_py(py, out, self.clf.classes().len(), self.clf.dim(), features)
    }
}

/// Copies the classifier file `src` to `dst` with the class names `names`
/// (same count and order) and the training note `labels` (the Python type
/// of the labels, `"int"` or `"str"`), for `SceneClassifier.fit`, whose run
/// names its class folders by index.
#[pyfunction]
fn relabel_classifier(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    names: Vec<String>,
    labels: &str,
) -> PyResult<()> {
    py.detach(|| {
        let mut f = fisherkit_io::read_classifier(&src).map_err(err)?;
        if names.len() != f.info.classes.len() {
            return Err(err(format!(
                "{} class names for a classifier of {} classes",
                names.len(),
                f.info.classes.len()
            )));
        }
        f.info.classes = names;
        if let serde_json::Value::Object(m) = &mut f.info.training {
            m.insert("python_labels".into(), labels.into());
        }
        fisherkit_io::write_classifier(&dst, &f).map_err(err)
    })
}

/// Writes an image (a path is copied as decoded; an array as given, in
/// 0–255) as an 8-bit RGB PNG, for `SceneClassifier.fit` on arrays.
#[pyfunction]
fn write_png(path: PathBuf, image: ImageArg<'_>) -> PyResult<()> {
    let a = decode(0, &image).map_err(PyValueError::new_err)?;
    let (h, w, _) = a.dim();
    let data: Vec<u8> = a
        .iter()
        .map(|&v| v.round().clamp(0.0, 255.0) as u8)
        .collect();
    let img = image::RgbImage::from_raw(w as u32, h as u32, data)
        .ok_or_else(|| err("image buffer of the wrong size"))?;
    img.save_with_format(&path, image::ImageFormat::Png)
        .map_err(|e| err(format!("{}: {e}", path.display())))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SceneModel>()?;
    m.add_function(wrap_pyfunction!(relabel_classifier, m)?)?;
    m.add_function(wrap_pyfunction!(write_png, m)?)?;
    Ok(())
}
