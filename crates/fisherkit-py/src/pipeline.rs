//! The pipeline's pieces from Python: `fisherkit.cnn.Descriptors` (the CNN
//! descriptors `--save-descriptors` writes) and the [`Job`] that
//! `fisherkit.ray.run_pipeline` drives, whose passes over images and
//! classifier tasks run in Ray tasks (docs/pipeline.md §6). The whole run is in `run.rs`.

use crate::interrupt::interruptible;
use crate::run::{builtin, checked, net, Stderr};
use fisherkit::pca::PcaMoments;
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use fisherkit_cnn::BackboneKind;
use fisherkit_pipeline::descriptors::describe_batch;
use fisherkit_pipeline::{
    EncodedJob, EncodedPart, FittedJob, ImageEntry, Job, LearnedJob, Sample, SamplePart,
};
use ndarray::{Array1, Array2, Array3};
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;
use std::path::PathBuf;

/// One image for [`cnn_descriptors`]: a path, or an array (H, W), (H, W, 1),
/// (H, W, 3) or (H, W, 4) — uint8 in 0–255, or float in [0, 1].
#[derive(FromPyObject)]
pub(crate) enum ImageArg<'py> {
    Path(PathBuf),
    U8(PyReadonlyArrayDyn<'py, u8>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// The largest value of a float image: images in [0, 1] are multiplied by
/// 255 (scikit-image's convention → the CNN's 0–255 input).
const FLOAT_IMAGE_MAX: f64 = 1.0;

/// An array image as (H, W, 3) f32 in 0–255, converted as the file reader
/// converts files (`fisherkit_cnn::image::decode_image`, the `image` crate's
/// `to_rgb8`): grey (H, W) or (H, W, 1) replicated to the three channels, the
/// alpha channel of (H, W, 4) dropped. `value` maps an element to 0–255.
fn to_rgb<T: Copy>(
    i: usize,
    a: ndarray::ArrayViewD<'_, T>,
    value: impl Fn(T) -> f32,
) -> Result<Array3<f32>, String> {
    let shape = a.shape().to_vec();
    let (h, w, c) = match shape[..] {
        [h, w] => (h, w, 1),
        [h, w, c @ (1 | 3 | 4)] => (h, w, c),
        _ => {
            return Err(format!(
                "image {i} has shape {shape:?}; expected (H, W) or (H, W, 1) grey, (H, W, 3) RGB or (H, W, 4) RGBA"
            ))
        }
    };
    if h == 0 || w == 0 {
        return Err(format!("image {i} is empty: shape {shape:?}"));
    }
    let a = a
        .into_shape_with_order((h, w, c))
        .map_err(|e| format!("image {i}: {e}"))?;
    Ok(Array3::from_shape_fn((h, w, 3), |(y, x, k)| {
        value(a[[y, x, if c == 1 { 0 } else { k }]])
    }))
}

/// A float image's values, checked to lie in [0, 1]: otherwise the error
/// names the image, the range found and the two accepted conventions.
fn check_unit_range(i: usize, values: impl Iterator<Item = f64>) -> Result<(), String> {
    let (mut lo, mut hi, mut bad) = (f64::INFINITY, f64::NEG_INFINITY, None);
    for v in values {
        if !v.is_finite() {
            bad.get_or_insert(v);
        } else {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    let found = match bad {
        Some(v) => format!("has the non-finite value {v}"),
        None if lo >= 0.0 && hi <= FLOAT_IMAGE_MAX => return Ok(()),
        None => format!("has values in [{lo}, {hi}]"),
    };
    Err(format!(
        "image {i} is a float array that {found}; images are uint8 arrays in 0..255 or float arrays in [0, 1] \
         (scikit-image's convention), so convert it (e.g. img.astype(np.uint8) for a float image in 0..255, \
         or img / img.max())"
    ))
}

/// The image as (H, W, 3) f32 in 0–255, or why it cannot be used.
impl ImageArg<'_> {
    /// How messages name image `i` of a call: its path, or `image <i>`.
    pub(crate) fn name(&self, i: usize) -> String {
        match self {
            ImageArg::Path(p) => p.display().to_string(),
            _ => format!("image {i}"),
        }
    }
}

pub(crate) fn decode(i: usize, img: &ImageArg<'_>) -> Result<Array3<f32>, String> {
    match img {
        ImageArg::Path(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|e| format!("cannot read image {name}: {e}"))?;
            fisherkit_cnn::image::decode_image(&bytes, &name).map_err(|e| e.to_string())
        }
        ImageArg::U8(a) => to_rgb(i, a.as_array(), f32::from),
        ImageArg::F32(a) => {
            let a = a.as_array();
            check_unit_range(i, a.iter().map(|&v| f64::from(v)))?;
            to_rgb(i, a, |v| v * 255.0)
        }
        ImageArg::F64(a) => {
            let a = a.as_array();
            check_unit_range(i, a.iter().copied())?;
            to_rgb(i, a, |v| (v * 255.0) as f32)
        }
    }
}

/// The CNN descriptors of `images` (paths or arrays, see [`ImageArg`]):
/// per image, one (n_i, 1000) float32 array, the rows of every scale stacked
/// in scale order — the rows `fisherkit run --save-descriptors` writes —
/// and, with `with_global`, the image-level vector (1000).
#[pyfunction]
#[pyo3(signature = (images, cnn, scales, patch_mode, max_image_side, stride, with_global))]
#[allow(clippy::too_many_arguments)]
fn cnn_descriptors<'py>(
    py: Python<'py>,
    images: Vec<ImageArg<'py>>,
    cnn: &str,
    scales: Vec<u32>,
    patch_mode: &str,
    max_image_side: Option<u32>,
    stride: f32,
    with_global: bool,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mode = match patch_mode {
        "dense" => PatchMode::Dense,
        "exact" => PatchMode::Exact,
        m => {
            return Err(PyValueError::new_err(format!(
                "patch_mode must be 'dense' or 'exact', got {m:?}"
            )))
        }
    };
    let params = DescriptorParams {
        scales,
        mode,
        stride,
        max_image_side,
    };
    params
        .validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let kind: BackboneKind = cnn.parse().map_err(PyValueError::new_err)?;
    let net = net(kind)?;
    // arrays are converted here, with the GIL (they are Python objects);
    // files are read and decoded by the worker, batch by batch
    let pending: Vec<Result<Result<Array3<f32>, String>, PathBuf>> = images
        .iter()
        .enumerate()
        .map(|(i, im)| match im {
            ImageArg::Path(p) => Err(p.clone()),
            _ => Ok(decode(i, im)),
        })
        .collect();
    let names: Vec<String> = images
        .iter()
        .enumerate()
        .map(|(i, im)| im.name(i))
        .collect();
    let batch = 4 * rayon::current_num_threads().max(1);
    // batches in a worker thread; Ctrl-C stops them after the current batch
    let computed = interruptible(py, |cancel| {
        let mut out = Vec::with_capacity(pending.len());
        let mut it = pending.into_iter().zip(names.iter().cloned());
        loop {
            let (d, n): (Vec<_>, Vec<_>) = it.by_ref().take(batch).unzip();
            if d.is_empty() || cancel.is_set() {
                break;
            }
            let d = d
                .into_par_iter()
                .map(|r| r.unwrap_or_else(|p| decode(0, &ImageArg::Path(p))))
                .collect();
            out.extend(describe_batch(net, d, &n, &params, with_global)?);
        }
        Ok::<_, fisherkit_pipeline::PipelineError>(out)
    })?;
    let computed = computed.map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut result = Vec::with_capacity(computed.len());
    for d in computed {
        let d = d.map_err(PyValueError::new_err)?;
        let views: Vec<_> = d.scales.iter().map(|a| a.view()).collect();
        let stacked = ndarray::concatenate(ndarray::Axis(0), &views)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let item = match (with_global, d.global) {
            (true, Some(g)) => (stacked.into_pyarray(py), g.into_pyarray(py))
                .into_pyobject(py)?
                .into_any(),
            _ => stacked.into_pyarray(py).into_any(),
        };
        result.push(item);
    }
    Ok(result)
}

/// A pipeline run driven from Python, one stage call at a time (see
/// `fisherkit_pipeline::job`); the sample and encode passes and the
/// classifier tasks may run in other processes, each with its own `Job` of
/// the same arguments. Python may call any method at any time: the job
/// keeps its phase and refuses, with a `ValueError` naming the call to make
/// first, a call its phase does not offer.
#[pyclass(name = "Job", module = "fisherkit._fisherkit")]
struct PyJob {
    phase: Phase,
}

/// The phase of a [`PyJob`]: one `fisherkit_pipeline` type per phase.
enum Phase {
    /// Opened: the sample pass.
    Sampling(Job<'static>),
    /// A worker's job after `load_learned`: the encode pass's computation.
    Learned(LearnedJob<'static>),
    /// The owner's job after `fit`: the encode pass.
    Fitted(FittedJob<'static>),
    /// The stores hold every image: the classifier stage.
    Encoded(EncodedJob<'static>),
    /// Used up by `finish` or `finish_classifier_tasks`.
    Finished,
    /// A change of phase failed in the call named: the job is lost.
    Failed(&'static str),
}

impl Phase {
    /// The error of `call` (a method name) in this phase, which does not
    /// offer it. `first` names the call(s) that lead from the sample pass to
    /// the call's phase; `None` for a call of the sample pass.
    fn refuse(&self, call: &str, first: Option<&str>) -> PyErr {
        PyValueError::new_err(match (self, first) {
            (Phase::Finished, _) => "this job has finished already".to_string(),
            (Phase::Failed(c), _) => format!("this job's {c}() failed: open a new Job"),
            (_, None) => format!(
                "{call}() belongs to the sample pass, which is over (fit() or load_learned() was called)"
            ),
            (Phase::Sampling(_), Some(first)) => {
                format!("{call}() comes after the sample pass: call {first} first")
            }
            (Phase::Learned(_), Some(_)) => format!(
                "{call}() is the owner's (the job that called fit()): this job called load_learned()"
            ),
            (Phase::Fitted(_) | Phase::Encoded(_), Some(_)) => {
                format!("{call}() belongs to the encode pass, which is over")
            }
        })
    }
}

fn err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn entries_to_py<'py>(py: Python<'py>, entries: &[ImageEntry]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for (i, e) in entries {
        match e {
            Ok(c) => l.append((*i, Some(c.clone()), None::<String>))?,
            Err(r) => l.append((*i, None::<Vec<usize>>, Some(r.clone())))?,
        }
    }
    Ok(l)
}

type EntryTuple = (usize, Option<Vec<usize>>, Option<String>);

fn entries_from_py(v: Vec<EntryTuple>) -> PyResult<Vec<ImageEntry>> {
    v.into_iter()
        .map(|(i, c, r)| match (c, r) {
            (Some(c), None) => Ok((i, Ok(c))),
            (None, Some(r)) => Ok((i, Err(r))),
            _ => Err(PyValueError::new_err(format!(
                "entry of image {i}: give either the descriptor counts or the reason it was skipped"
            ))),
        })
        .collect()
}

fn item<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
    d: &Bound<'py, PyDict>,
    key: &str,
) -> PyResult<T> {
    let v = d
        .get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("the part has no `{key}`")))?;
    let r = match v.extract::<T>() {
        Ok(t) => Ok(t),
        Err(e) => {
            let e: PyErr = e.into();
            Err(PyTypeError::new_err(format!("the part's `{key}`: {e}")))
        }
    };
    r
}

type MomentTuple<'py> = (
    PyReadonlyArray1<'py, f64>,
    usize,
    PyReadonlyArray1<'py, f64>,
    PyReadonlyArray2<'py, f64>,
);

#[pymethods]
impl PyJob {
    /// Opens the run of the configuration `request` (JSON text, as
    /// `fisherkit.pipeline.run` sends it) on image folders.
    #[new]
    fn new(request: &str) -> PyResult<Self> {
        let cfg = checked(request)?;
        if cfg.input() != fisherkit_pipeline::InputKind::Images {
            return Err(PyValueError::new_err(
                "a distributed run starts from image folders (train/test), not descriptor files",
            ));
        }
        let job = Job::images(cfg.run_config(), net(builtin(&cfg)?)?).map_err(err)?;
        Ok(Self {
            phase: Phase::Sampling(job),
        })
    }

    /// The run folder.
    fn folder(&self) -> PyResult<String> {
        let folder = match &self.phase {
            Phase::Sampling(j) => j.folder(),
            Phase::Learned(j) => j.folder(),
            Phase::Fitted(j) => j.folder(),
            Phase::Encoded(j) => j.folder(),
            p => return Err(p.refuse("folder", Some("fit()"))),
        };
        Ok(folder.display().to_string())
    }

    /// The sample pass's chunks (lists of image indices), in order.
    fn sample_chunks(&self) -> PyResult<Vec<Vec<usize>>> {
        Ok(self.sampling("sample_chunks")?.sample_chunks())
    }

    /// The sample pass over one chunk, as a dict of plain values and arrays.
    fn sample_chunk<'py>(
        &self,
        py: Python<'py>,
        chunk: Vec<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let job = self.sampling("sample_chunk")?;
        let (part, kept) = py
            .detach(|| job.sample_chunk_keeping(&chunk))
            .map_err(err)?;
        let d = PyDict::new(py);
        // the CNN output the encode pass reads back instead of running the CNN again
        let cnn = PyList::empty(py);
        for k in kept {
            cnn.append((k.image, pyo3::types::PyBytes::new(py, &k.bytes)))?;
        }
        d.set_item("cnn", cnn)?;
        d.set_item("images", part.images.clone())?;
        d.set_item("dim", part.sample.dim)?;
        d.set_item("entries", entries_to_py(py, &part.entries)?)?;
        let moments = PyList::empty(py);
        for m in &part.sample.moments {
            match m {
                Some(m) => {
                    let (s, n, sum, sc) = m.parts();
                    moments.append((
                        s.clone().into_pyarray(py),
                        n,
                        sum.clone().into_pyarray(py),
                        sc.clone().into_pyarray(py),
                    ))?
                }
                None => moments.append(py.None())?,
            }
        }
        d.set_item("moments", moments)?;
        let rows = PyList::empty(py);
        for r in part.sample.rows {
            rows.append(Array1::from(r).into_pyarray(py))?;
        }
        d.set_item("rows", rows)?;
        Ok(d)
    }

    /// Adds the next chunk's sample part (from `sample_chunk`, in chunk order).
    fn add_sample(&mut self, part: &Bound<'_, PyDict>, verbose: bool) -> PyResult<()> {
        let moments: Vec<Option<MomentTuple<'_>>> = item(part, "moments")?;
        let moments = moments
            .into_iter()
            .map(|m| {
                m.map(|(s, n, sum, sc)| {
                    PcaMoments::from_parts(
                        s.as_array().to_owned(),
                        n,
                        sum.as_array().to_owned(),
                        sc.as_array().to_owned(),
                    )
                    .map_err(err)
                })
                .transpose()
            })
            .collect::<PyResult<Vec<_>>>()?;
        let rows: Vec<PyReadonlyArray1<'_, f32>> = item(part, "rows")?;
        // optional: a part from an older driver has no kept CNN output
        let kept: Vec<(usize, Bound<'_, pyo3::types::PyBytes>)> = match part.get_item("cnn")? {
            Some(_) => item(part, "cnn")?,
            None => Vec::new(),
        };
        let kept = kept
            .into_iter()
            .map(|(image, bytes)| fisherkit_pipeline::KeptCnn {
                image,
                bytes: bytes.as_bytes().to_vec(),
            })
            .collect();
        let part = SamplePart {
            images: item(part, "images")?,
            sample: Sample {
                moments,
                rows: rows.iter().map(|r| r.as_array().to_vec()).collect(),
                dim: item(part, "dim")?,
            },
            entries: entries_from_py(item(part, "entries")?)?,
        };
        match &mut self.phase {
            Phase::Sampling(job) => job
                .add_sample_keeping(part, kept, &Stderr::new(verbose, None))
                .map_err(err),
            p => Err(p.refuse("add_sample", None)),
        }
    }

    /// Fits (or reads) the PCA and the models and opens the stores: the
    /// encode pass.
    fn fit(&mut self, py: Python<'_>, verbose: bool) -> PyResult<()> {
        let job = match std::mem::replace(&mut self.phase, Phase::Failed("fit")) {
            Phase::Sampling(job) => job,
            Phase::Fitted(job) => {
                self.phase = Phase::Fitted(job);
                return Err(PyValueError::new_err("fit() was called already"));
            }
            p => {
                self.phase = p;
                return Err(self.phase.refuse("fit", None));
            }
        };
        let fitted = py
            .detach(|| job.fit(&Stderr::new(verbose, None)))
            .map_err(err)?;
        self.phase = Phase::Fitted(fitted);
        Ok(())
    }

    /// Reads the fitted PCA and models from the run folder (a worker's job),
    /// for `encode_images`; nothing once they are there.
    fn load_learned(&mut self) -> PyResult<()> {
        self.check_learned("load_learned")?;
        match std::mem::replace(&mut self.phase, Phase::Failed("load_learned")) {
            Phase::Sampling(job) => self.phase = Phase::Learned(job.load_learned().map_err(err)?),
            p @ (Phase::Learned(_) | Phase::Fitted(_) | Phase::Encoded(_)) => self.phase = p,
            p => {
                self.phase = p;
                return Err(self.phase.refuse("load_learned", None));
            }
        }
        Ok(())
    }

    /// The images the encode pass still has to do.
    fn encode_todo(&self) -> PyResult<Vec<usize>> {
        match &self.phase {
            Phase::Fitted(job) => Ok(job.encode_todo()),
            p => Err(p.refuse("encode_todo", Some("fit()"))),
        }
    }

    /// The encode pass over `images`, as a dict: `images` (those read),
    /// `rows` (one (n, dim) float32 array per target), `entries`.
    fn encode_images<'py>(
        &self,
        py: Python<'py>,
        images: Vec<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let part = match &self.phase {
            Phase::Fitted(job) => py.detach(|| job.encode_images(&images)),
            Phase::Learned(job) => py.detach(|| job.encode_images(&images)),
            p => return Err(p.refuse("encode_images", Some("fit() or load_learned()"))),
        }
        .map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("entries", entries_to_py(py, &part.entries)?)?;
        d.set_item(
            "images",
            part.rows.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        )?;
        let n_targets = part.rows.first().map_or(0, |(_, r)| r.len());
        let rows = PyList::empty(py);
        for t in 0..n_targets {
            let dim = part.rows[0].1[t].len();
            let mut a = Array2::<f32>::zeros((part.rows.len(), dim));
            for (k, (_, r)) in part.rows.iter().enumerate() {
                a.row_mut(k).assign(&r[t]);
            }
            rows.append(a.into_pyarray(py))?;
        }
        d.set_item("rows", rows)?;
        Ok(d)
    }

    /// Writes an encoded part (from `encode_images`) into the stores.
    fn put_encoded(&mut self, py: Python<'_>, part: &Bound<'_, PyDict>) -> PyResult<()> {
        let images: Vec<usize> = item(part, "images")?;
        let rows: Vec<PyReadonlyArray2<'_, f32>> = item(part, "rows")?;
        let entries = entries_from_py(item(part, "entries")?)?;
        let mut per_image: Vec<(usize, Vec<Array1<f32>>)> = images
            .iter()
            .map(|&i| (i, Vec::with_capacity(rows.len())))
            .collect();
        for r in &rows {
            let a = r.as_array();
            if a.nrows() != images.len() {
                return Err(PyValueError::new_err(format!(
                    "the part has {} images but an encoding array of {} rows",
                    images.len(),
                    a.nrows()
                )));
            }
            for (k, row) in a.outer_iter().enumerate() {
                per_image[k].1.push(row.to_owned());
            }
        }
        let part = EncodedPart {
            rows: per_image,
            entries,
        };
        match &mut self.phase {
            Phase::Fitted(job) => py.detach(|| job.put_encoded(part)).map_err(err),
            p => Err(p.refuse("put_encoded", Some("fit()"))),
        }
    }

    /// Adds a stage's wall-clock seconds to the report.
    fn add_timing(&mut self, name: &str, seconds: f64) -> PyResult<()> {
        match &mut self.phase {
            Phase::Sampling(j) => j.add_timing(name, seconds),
            Phase::Learned(j) => j.add_timing(name, seconds),
            Phase::Fitted(j) => j.add_timing(name, seconds),
            Phase::Encoded(j) => j.add_timing(name, seconds),
            p => return Err(p.refuse("add_timing", Some("fit()"))),
        }
        Ok(())
    }

    /// The classifier stage's tasks whose results the run folder lacks
    /// (after the encode pass; a fresh job reads the models and opens the
    /// stores first): `(name, label, wave)` triples, in the stage's order; a
    /// task reads the results of the earlier waves' tasks (docs/pipeline.md
    /// §6).
    fn classifier_tasks(&mut self, py: Python<'_>) -> PyResult<Vec<(String, String, usize)>> {
        let job = self.take_encoded(py, "classifier_tasks", true)?;
        let tasks = py.detach(|| job.classifier_tasks());
        self.phase = Phase::Encoded(job);
        Ok(tasks
            .map_err(err)?
            .into_iter()
            .map(|t| (t.name, t.label, t.wave))
            .collect())
    }

    /// Runs the classifier task `name` in this process (a worker's job of
    /// the same settings, fresh or not) and keeps its result in the run
    /// folder; returns its seconds.
    fn run_classifier_task(&mut self, py: Python<'_>, name: &str, verbose: bool) -> PyResult<f64> {
        let job = self.take_encoded(py, "run_classifier_task", true)?;
        let seconds = py.detach(|| job.run_classifier_task(name, &Stderr::new(verbose, None)));
        self.phase = Phase::Encoded(job);
        seconds.map_err(err)
    }

    /// `finish` after the classifier tasks `done` ran elsewhere: checks that
    /// the run folder holds their results, then the report (JSON text). The
    /// job is used up.
    fn finish_classifier_tasks(
        &mut self,
        py: Python<'_>,
        done: Vec<String>,
        verbose: bool,
    ) -> PyResult<String> {
        let job = self.take_encoded(py, "finish_classifier_tasks", true)?;
        self.phase = Phase::Finished;
        let report = py
            .detach(|| job.finish_classifier_tasks(&done, &Stderr::new(verbose, None)))
            .map_err(err)?;
        serde_json::to_string(&report).map_err(|e| PyValueError::new_err(format!("report: {e}")))
    }

    /// Kernels, SVMs and the report (JSON text), after the encode pass;
    /// writes the configuration's `report` and `plot` if given. The job is
    /// used up.
    fn finish(&mut self, py: Python<'_>, verbose: bool) -> PyResult<String> {
        let job = self.take_encoded(py, "finish", false)?;
        self.phase = Phase::Finished;
        let report = py
            .detach(|| job.finish(&Stderr::new(verbose, None)))
            .map_err(err)?;
        serde_json::to_string(&report).map_err(|e| PyValueError::new_err(format!("report: {e}")))
    }
}

impl PyJob {
    /// The job of the sample pass, for `call`.
    fn sampling(&self, call: &str) -> PyResult<&Job<'static>> {
        match &self.phase {
            Phase::Sampling(job) => Ok(job),
            p => Err(p.refuse(call, None)),
        }
    }

    /// Refuses `call`, leaving the job as it is, when it would read the
    /// PCA and models from a run folder that lacks some (the error of
    /// `fisherkit_pipeline::Job::load_learned`, which would use the job up).
    fn check_learned(&self, call: &str) -> PyResult<()> {
        match &self.phase {
            Phase::Sampling(job) if job.needs_sample() => Err(PyValueError::new_err(format!(
                "{call}(): the run folder {} holds no fitted PCA and models: call fit() first (on a cluster, put the cache folder on a file system every node sees)",
                job.folder().display()
            ))),
            _ => Ok(()),
        }
    }

    /// The job of the classifier stage, for `call`, taken out of `self` (the
    /// caller puts it back or uses it up): a fitted job once its stores hold
    /// every image (otherwise an error that leaves it as it was), a
    /// worker's after its stores are opened, and with `load` a fresh job
    /// after the models are read from the run folder too.
    fn take_encoded(
        &mut self,
        py: Python<'_>,
        call: &'static str,
        load: bool,
    ) -> PyResult<EncodedJob<'static>> {
        if let Phase::Fitted(job) = &self.phase {
            let missing = job.unstored().len();
            if missing > 0 {
                return Err(PyValueError::new_err(format!(
                    "the encode pass is not over: the stores lack {missing} images; put_encoded() the encode_images() of every image of encode_todo() before {call}()"
                )));
            }
        }
        if load {
            self.check_learned(call)?;
        }
        let reached = match std::mem::replace(&mut self.phase, Phase::Failed(call)) {
            Phase::Encoded(job) => Ok(job),
            Phase::Fitted(job) => py.detach(|| job.encoded()),
            Phase::Learned(job) => py.detach(|| job.encoded()),
            Phase::Sampling(job) if load => {
                py.detach(|| job.load_learned().and_then(LearnedJob::encoded))
            }
            p => {
                self.phase = p;
                return Err(self.phase.refuse(call, Some("fit()")));
            }
        };
        reached.map_err(err)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cnn_descriptors, m)?)?;
    m.add_class::<PyJob>()?;
    Ok(())
}
