//! Model files of the pipeline's linear stages, in the format of
//! [`crate::model`] (safetensors, metadata `kind`, `format_version`,
//! `fisherkit_version`, `dtype`, plus the caller's extra keys):
//!
//! | kind | tensor | shape | dtype |
//! |---|---|---|---|
//! | pca | `mean` | (D) | the model's (`dtype` key) |
//! | pca | `components` | (d, D), rows = principal axes, orthonormal | the model's |
//! | pca | `explained_variance` | (d), $\lambda_j \ge 0$ | F64 (F32 accepted) |
//! | linear-svm | `weights` | (C, D), row $k$ = $w_k$ | the model's |
//! | linear-svm | `bias` | (C), $b_k$ | the model's |
//!
//! PCA metadata: `whiten` = `"true"` / `"false"` (missing: false);
//! `total_variance` = $\operatorname{tr} S$ of the training data, the
//! denominator of the explained-variance ratio (missing: the sum of the kept
//! variances). The explained variances are F64 whatever the model's dtype,
//! because the library keeps them in `f64` (the whitening scale
//! $1/\sqrt{\lambda_j}$ is computed from them): an `f32` PCA then reloads
//! bit for bit, projection included.
//!
//! Linear-SVM metadata: `classes` = a JSON list of the C class labels in the
//! order of the rows of `weights`, all integers (`[0, 1, 5]`) or all strings
//! (`["bedroom", "kitchen"]`), distinct (missing: `[0, 1, …, C-1]`); `c` = the
//! cost $C$ the model was trained with (optional, informational, finite > 0).
//! Decision values are $f_k(x) = w_k^\top x + b_k$, the prediction the label
//! of the largest.
//!
//! Readers check, after the framing, `kind` and `format_version` checks of
//! [`crate::model`]: required tensors present, F32/F64, the parameter
//! tensors of one dtype; ranks and shapes (PCA: $1 \le d \le D$; SVM: C ≥ 2,
//! D ≥ 1); finite values; PCA variances ≥ 0 and components' rows
//! orthonormal within [`PCA_ORTHONORMAL_TOL`]; the metadata values; and the
//! `dtype` key, if present, against the tensors. Writers refuse parameters
//! that would not read back.

use crate::error::{IoError, Result};
use crate::model::sealed::Parse;
use crate::model::{
    check_dtype_metadata, dims, exact, get_tensor, open_model, to_le_bytes,
    write_safetensors_typed, wrong_kind, Metadata, ModelFile, RawTensor,
};
use crate::npy::{py_shape, Dtype, Element};
use fisherkit::linalg::{matmul_new, par_all};
use fisherkit::pca::{Pca, PcaError};
use fisherkit::svm::{LinearSvc, SvmError};
use fisherkit::Float;
use ndarray::{Array1, Array2, ArrayD, ArrayView1, ArrayView2};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Largest accepted $|W W^\top - I|$ entry of a PCA's components (d, D):
/// loose enough for `f32` components accumulated over thousands of
/// dimensions, tight enough to refuse unnormalised or transposed axes.
pub const PCA_ORTHONORMAL_TOL: f64 = 1e-3;

// ---------------------------------------------------------------------------
// PCA

/// A fitted PCA in the element type of its file.
#[derive(Debug, Clone, PartialEq)]
pub enum PcaModel {
    /// `F32` mean and components.
    F32(Pca<f32>),
    /// `F64` mean and components.
    F64(Pca<f64>),
}

impl PcaModel {
    /// Element type of the mean and components.
    pub fn dtype(&self) -> Dtype {
        match self {
            PcaModel::F32(_) => Dtype::F32,
            PcaModel::F64(_) => Dtype::F64,
        }
    }

    /// Input dimension D.
    pub fn dim(&self) -> usize {
        match self {
            PcaModel::F32(p) => p.input_dim(),
            PcaModel::F64(p) => p.input_dim(),
        }
    }

    /// Number of components d.
    pub fn n_components(&self) -> usize {
        match self {
            PcaModel::F32(p) => p.n_components(),
            PcaModel::F64(p) => p.n_components(),
        }
    }

    /// The PCA in element type `G` (mean and components rounded to nearest
    /// if the file's type differs; identical if it is the same).
    pub fn to_dtype<G: Float>(&self) -> Result<Pca<G>, PcaError> {
        fn conv<A: Float, B: Float>(p: &Pca<A>) -> Result<Pca<B>, PcaError> {
            let c = |v: &A| B::from_f64_lossy(v.as_f64());
            Pca::from_parts(
                p.mean().map(c),
                p.components().map(c),
                p.explained_variance().to_owned(),
                p.whiten(),
            )?
            .with_total_variance(p.total_variance())
        }
        match self {
            PcaModel::F32(p) => conv(p),
            PcaModel::F64(p) => conv(p),
        }
    }
}

/// Checks what [`Pca::from_parts`] does not: $d \le D$, variances ≥ 0, and
/// rows of `components` (d, D) orthonormal within [`PCA_ORTHONORMAL_TOL`]
/// ($W W^\top$ computed in `f64` by one GEMM, $d^2 D$ multiply-adds).
/// `explained_variance` is (d). The message names the tensor and the entry.
pub fn validate_pca_parts<F: Float>(
    components: ArrayView2<'_, F>,
    explained_variance: ArrayView1<'_, f64>,
) -> Result<(), String> {
    let (d, dim) = components.dim();
    if d > dim {
        return Err(format!(
            "tensor `components` has shape {}: more components (d = {d}) than dimensions \
             (D = {dim})",
            py_shape(&[d, dim])
        ));
    }
    if let Some((j, v)) = explained_variance
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        return Err(format!(
            "explained_variance [{j}] is {v}; variances must be finite and >= 0"
        ));
    }
    let w = components.mapv(|v| v.as_f64());
    let g = matmul_new(w.view(), w.t(), par_all());
    for ((i, j), &v) in g.indexed_iter() {
        let want = if i == j { 1.0 } else { 0.0 };
        if (v - want).abs() > PCA_ORTHONORMAL_TOL {
            return Err(if i == j {
                format!(
                    "tensor `components` is not orthonormal: row {i} has squared norm {v} \
                     (|W W^T - I| must be <= {PCA_ORTHONORMAL_TOL})"
                )
            } else {
                format!(
                    "tensor `components` is not orthonormal: rows {i} and {j} have dot \
                     product {v} (|W W^T - I| must be <= {PCA_ORTHONORMAL_TOL})"
                )
            });
        }
    }
    Ok(())
}

/// Writes a fitted PCA as a `kind = pca` safetensors file, atomically, after
/// [`validate_pca_parts`]. Metadata `whiten` and `total_variance` are written
/// from the model; `extra` keys are stored too (the model's keys win).
impl<F: Element> ModelFile for Pca<F> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        let pca = self;
        let path = path.as_ref();
        validate_pca_parts(pca.components(), pca.explained_variance())
            .map_err(|e| IoError::model(path, format!("refusing to write an invalid PCA: {e}")))?;
        let (d, dim) = (pca.n_components(), pca.input_dim());
        let mut meta = extra.clone();
        meta.insert("whiten".into(), pca.whiten().to_string());
        // `{:?}` of an f64 is the shortest string that parses back to the same bits.
        meta.insert(
            "total_variance".into(),
            format!("{:?}", pca.total_variance()),
        );
        let comp = pca.components().as_standard_layout().into_owned();
        write_safetensors_typed(
            path,
            "pca",
            F::DTYPE,
            vec![
                ("mean", F::DTYPE, vec![dim], to_le_bytes(pca.mean().iter())),
                (
                    "components",
                    F::DTYPE,
                    vec![d, dim],
                    to_le_bytes(comp.iter()),
                ),
                (
                    "explained_variance",
                    Dtype::F64,
                    vec![d],
                    to_le_bytes(pca.explained_variance().iter()),
                ),
            ],
            &meta,
        )
    }
}

impl<F: Element> Parse for Pca<F> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        let (m, meta) = PcaModel::parse(bytes, path)?;
        let pca = match m {
            PcaModel::F32(p) => exact(path, Dtype::F32, F::DTYPE, p),
            PcaModel::F64(p) => exact(path, Dtype::F64, F::DTYPE, p),
        };
        Ok((pca?, meta))
    }
}

/// Reads a tensor of either float type as `f64` (for `explained_variance`,
/// which does not take part in the one-dtype rule).
fn to_f64_array(t: &RawTensor<'_>, path: &Path) -> Result<ArrayD<f64>> {
    match t.view.dtype() {
        safetensors::Dtype::F32 => Ok(t.to_array::<f32>(path)?.mapv(f64::from)),
        _ => t.to_array::<f64>(path),
    }
}

fn parse_bool(path: &Path, meta: &BTreeMap<String, String>, key: &str) -> Result<bool> {
    match meta.get(key).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(IoError::model(
            path,
            format!("metadata `{key}` is \"{other}\"; expected \"true\" or \"false\""),
        )),
    }
}

fn parse_f64(path: &Path, meta: &BTreeMap<String, String>, key: &str) -> Result<Option<f64>> {
    meta.get(key)
        .map(|v| {
            v.trim().parse::<f64>().map_err(|_| {
                IoError::model(
                    path,
                    format!("metadata `{key}` is \"{v}\"; expected a number"),
                )
            })
        })
        .transpose()
}

fn build_pca<F: Element>(
    path: &Path,
    mean: &RawTensor<'_>,
    comp: &RawTensor<'_>,
    ev: Array1<f64>,
    whiten: bool,
    total: Option<f64>,
) -> Result<Pca<F>> {
    let mean: Array1<F> = dims(mean.to_array(path)?);
    let comp: Array2<F> = dims(comp.to_array(path)?);
    validate_pca_parts(comp.view(), ev.view()).map_err(|e| IoError::model(path, e))?;
    let lib = |e: PcaError| IoError::model(path, e.to_string());
    let pca = Pca::from_parts(mean, comp, ev, whiten).map_err(lib)?;
    match total {
        Some(t) => pca
            .with_total_variance(t)
            .map_err(|e| IoError::model(path, format!("metadata `total_variance`: {e}"))),
        None => Ok(pca),
    }
}

fn parse_pca(buf: &[u8], path: &Path) -> Result<(PcaModel, BTreeMap<String, String>)> {
    let (st, meta, kind) = open_model(buf, path)?;
    if kind != "pca" {
        return Err(wrong_kind(path, &kind, "pca"));
    }
    let req = "mean, components, explained_variance";
    let mut dtype = None;
    let mean = get_tensor(path, &st, "pca", "mean", req, &mut dtype)?;
    let comp = get_tensor(path, &st, "pca", "components", req, &mut dtype)?;
    let ev = get_tensor(path, &st, "pca", "explained_variance", req, &mut None)?;
    mean.expect_rank(path, 1, "(D)")?;
    comp.expect_rank(path, 2, "(d, D)")?;
    ev.expect_rank(path, 1, "(d)")?;
    let dim = mean.shape()[0];
    let (d, dc) = (comp.shape()[0], comp.shape()[1]);
    if dim == 0 {
        return Err(IoError::model(path, "tensor `mean` is empty (D = 0)"));
    }
    if dc != dim {
        return Err(IoError::model(
            path,
            format!(
                "tensor `components` has shape {} but `mean` has D = {dim} entries",
                py_shape(comp.shape())
            ),
        ));
    }
    if d == 0 {
        return Err(IoError::model(
            path,
            "tensor `components` has 0 rows (d = 0 components)",
        ));
    }
    if ev.shape()[0] != d {
        return Err(IoError::model(
            path,
            format!(
                "tensor `explained_variance` has shape {} but `components` has d = {d} rows",
                py_shape(ev.shape())
            ),
        ));
    }
    let ev: Array1<f64> = dims(to_f64_array(&ev, path)?);
    let whiten = parse_bool(path, &meta, "whiten")?;
    let total = parse_f64(path, &meta, "total_variance")?;
    let model = match dtype.map(|d| d.0) {
        Some(Dtype::F32) => PcaModel::F32(build_pca(path, &mean, &comp, ev, whiten, total)?),
        _ => PcaModel::F64(build_pca(path, &mean, &comp, ev, whiten, total)?),
    };
    check_dtype_metadata(path, &meta, model.dtype())?;
    Ok((model, meta))
}

/// A `kind = pca` model file in its own element type (see the module
/// documentation for the checks); a file of another kind is an error naming
/// its kind. Written as its [`Pca`].
///
/// ```
/// use fisherkit_io::{ModelFile, PcaModel};
/// use std::collections::BTreeMap;
/// use fisherkit::pca::PcaParams;
/// use ndarray::Array2;
///
/// // (N, D) = (50, 3) data spread mostly along the first axis
/// let x = Array2::from_shape_fn((50, 3), |(i, j)| ((i * (j + 3)) % 7) as f64 / (j + 1) as f64);
/// let pca = PcaParams::new(2).fit(x.view())?;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("pca.safetensors");
/// pca.write(&path, &BTreeMap::from([("note".to_string(), "x".to_string())]))?;
/// let (model, meta) = PcaModel::read_with_metadata(&path)?;
/// assert_eq!((model.dim(), model.n_components()), (3, 2));
/// assert_eq!((meta["kind"].as_str(), meta["whiten"].as_str(), meta["note"].as_str()), ("pca", "false", "x"));
/// let PcaModel::F64(back) = PcaModel::read(&path)? else { panic!("float64 in, float64 out") };
/// // the same model, so the same projection
/// assert_eq!(back, pca);
/// assert_eq!(back.transform(x.view())?, pca.transform(x.view())?);
/// // the bytes of a file, under a name for the errors
/// let (model, _) = PcaModel::read_bytes(&std::fs::read(&path)?, "sent.safetensors")?;
/// assert_eq!(model.to_dtype::<f64>()?, pca);
/// let e = PcaModel::read_bytes(b"not a model file", "sent.safetensors").unwrap_err();
/// assert!(e.to_string().starts_with("sent.safetensors: "), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ModelFile for PcaModel {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        match self {
            PcaModel::F32(p) => p.write(path, extra),
            PcaModel::F64(p) => p.write(path, extra),
        }
    }
}

impl Parse for PcaModel {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        parse_pca(bytes, path)
    }
}

// ---------------------------------------------------------------------------
// Linear SVM

/// The class labels of a classifier, in the order of its rows: all integers
/// or all strings (the two kinds of label a numpy `classes_` array round
/// trips through JSON without loss).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassLabels {
    /// Integer labels, e.g. `[0, 1, 5]`.
    Int(Vec<i64>),
    /// String labels, e.g. folder names `["bedroom", "kitchen"]`.
    Str(Vec<String>),
}

impl ClassLabels {
    /// The labels `0, 1, …, n-1`.
    pub fn range(n: usize) -> Self {
        ClassLabels::Int((0..n as i64).collect())
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        match self {
            ClassLabels::Int(v) => v.len(),
            ClassLabels::Str(v) => v.len(),
        }
    }

    /// `true` without labels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON list stored in the `classes` metadata key.
    pub fn to_json(&self) -> String {
        match self {
            ClassLabels::Int(v) => serde_json::json!(v).to_string(),
            ClassLabels::Str(v) => serde_json::json!(v).to_string(),
        }
    }

    /// Parses a JSON list of integers or of strings (not mixed).
    pub fn from_json(s: &str) -> Result<Self, String> {
        let v: serde_json::Value =
            serde_json::from_str(s).map_err(|e| format!("not valid JSON ({e})"))?;
        let list = v
            .as_array()
            .ok_or("not a JSON list; expected e.g. [0, 1, 2] or [\"cat\", \"dog\"]")?;
        if list.iter().all(|x| x.is_string()) {
            return Ok(ClassLabels::Str(
                list.iter()
                    .map(|x| x.as_str().unwrap_or_default().to_string())
                    .collect(),
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_i64().ok_or_else(|| {
                    format!(
                        "entry {i} is {x}; labels must be all integers (within 64 bits) or all \
                         strings"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(ClassLabels::Int)
    }

    /// Checks there are `n` labels and no two are equal.
    pub fn validate(&self, n: usize) -> Result<(), String> {
        if self.len() != n {
            return Err(format!(
                "{} class labels for {n} classes (rows of `weights`)",
                self.len()
            ));
        }
        fn dup<T: std::hash::Hash + Eq + std::fmt::Debug>(v: &[T]) -> Result<(), String> {
            let mut seen = HashSet::new();
            match v.iter().enumerate().find(|(_, x)| !seen.insert(*x)) {
                Some((i, x)) => Err(format!("label {x:?} (entry {i}) appears twice")),
                None => Ok(()),
            }
        }
        match self {
            ClassLabels::Int(v) => dup(v),
            ClassLabels::Str(v) => dup(v),
        }
    }

    /// The label of class `k` as text (an integer in decimal).
    pub fn name(&self, k: usize) -> Option<String> {
        match self {
            ClassLabels::Int(v) => v.get(k).map(|x| x.to_string()),
            ClassLabels::Str(v) => v.get(k).cloned(),
        }
    }
}

/// A trained one-vs-rest linear SVM with what a model file keeps beside the
/// weights: its class labels (one per row of [`LinearSvc::coef`]) and the
/// cost C it was trained with.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledSvm<F: Float> {
    /// Weights (C, D) and intercepts (C).
    pub svm: LinearSvc<F>,
    /// The C class labels, in row order.
    pub classes: ClassLabels,
    /// The cost C of training, if known (finite > 0).
    pub c: Option<f64>,
}

impl<F: Float> LabelledSvm<F> {
    /// Checks the labels (one per class, distinct) and C (finite > 0).
    pub fn validate(&self) -> Result<(), String> {
        self.classes
            .validate(self.svm.n_classes())
            .map_err(|e| format!("metadata `classes`: {e}"))?;
        if let Some(c) = self.c {
            if !(c.is_finite() && c > 0.0) {
                return Err(format!(
                    "metadata `c` is {c}; the cost C must be finite and > 0"
                ));
            }
        }
        Ok(())
    }

    /// The class label of each row of `x` (N, D): the label of
    /// $\arg\max_k f_k(x_i)$.
    ///
    /// # Errors
    /// As [`LinearSvc::decision_function`].
    pub fn predict_labels(&self, x: ArrayView2<'_, F>) -> Result<ClassLabels, SvmError> {
        let idx = self.svm.predict(x)?;
        Ok(match &self.classes {
            ClassLabels::Int(v) => ClassLabels::Int(idx.iter().map(|&k| v[k]).collect()),
            ClassLabels::Str(v) => ClassLabels::Str(idx.iter().map(|&k| v[k].clone()).collect()),
        })
    }
}

/// A labelled linear SVM in the element type of its file.
#[derive(Debug, Clone, PartialEq)]
pub enum LinearSvmModel {
    /// `F32` tensors.
    F32(LabelledSvm<f32>),
    /// `F64` tensors.
    F64(LabelledSvm<f64>),
}

impl LinearSvmModel {
    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            LinearSvmModel::F32(_) => Dtype::F32,
            LinearSvmModel::F64(_) => Dtype::F64,
        }
    }

    /// Feature dimension D.
    pub fn dim(&self) -> usize {
        match self {
            LinearSvmModel::F32(m) => m.svm.input_dim(),
            LinearSvmModel::F64(m) => m.svm.input_dim(),
        }
    }

    /// The class labels.
    pub fn classes(&self) -> &ClassLabels {
        match self {
            LinearSvmModel::F32(m) => &m.classes,
            LinearSvmModel::F64(m) => &m.classes,
        }
    }

    /// The cost C of training, if stored.
    pub fn c(&self) -> Option<f64> {
        match self {
            LinearSvmModel::F32(m) => m.c,
            LinearSvmModel::F64(m) => m.c,
        }
    }

    /// The classifier in element type `G` (rounded to nearest if the file's
    /// type differs).
    pub fn to_dtype<G: Float>(&self) -> Result<LinearSvc<G>, SvmError> {
        fn conv<A: Float, B: Float>(s: &LinearSvc<A>) -> Result<LinearSvc<B>, SvmError> {
            let c = |v: &A| B::from_f64_lossy(v.as_f64());
            LinearSvc::from_parts(s.coef().map(c), s.intercept().map(c))
        }
        match self {
            LinearSvmModel::F32(m) => conv(&m.svm),
            LinearSvmModel::F64(m) => conv(&m.svm),
        }
    }
}

/// Writes a labelled linear SVM as a `kind = linear-svm` safetensors file,
/// atomically, after [`LabelledSvm::validate`]: tensors `weights` (C, D) and
/// `bias` (C), metadata `classes` and (if known) `c`; `extra` keys are
/// stored too (the model's keys win).
impl<F: Element> ModelFile for LabelledSvm<F> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        let model = self;
        let path = path.as_ref();
        model.validate().map_err(|e| {
            IoError::model(
                path,
                format!("refusing to write an invalid linear SVM: {e}"),
            )
        })?;
        let (c, dim) = (model.svm.n_classes(), model.svm.input_dim());
        let mut meta = extra.clone();
        meta.insert("classes".into(), model.classes.to_json());
        match model.c {
            Some(v) => meta.insert("c".into(), format!("{v:?}")),
            None => meta.remove("c"),
        };
        let w = model.svm.coef().as_standard_layout().into_owned();
        write_safetensors_typed(
            path,
            "linear-svm",
            F::DTYPE,
            vec![
                ("weights", F::DTYPE, vec![c, dim], to_le_bytes(w.iter())),
                (
                    "bias",
                    F::DTYPE,
                    vec![c],
                    to_le_bytes(model.svm.intercept().iter()),
                ),
            ],
            &meta,
        )
    }
}

impl<F: Element> Parse for LabelledSvm<F> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        let (m, meta) = LinearSvmModel::parse(bytes, path)?;
        let svm = match m {
            LinearSvmModel::F32(s) => exact(path, Dtype::F32, F::DTYPE, s),
            LinearSvmModel::F64(s) => exact(path, Dtype::F64, F::DTYPE, s),
        };
        Ok((svm?, meta))
    }
}

fn build_svm<F: Element>(
    path: &Path,
    w: &RawTensor<'_>,
    b: &RawTensor<'_>,
    classes: ClassLabels,
    c: Option<f64>,
) -> Result<LabelledSvm<F>> {
    let weights: Array2<F> = dims(w.to_array(path)?);
    let bias: Array1<F> = dims(b.to_array(path)?);
    let svm = LinearSvc::from_parts(weights, bias)
        .map_err(|e| IoError::model(path, format!("linear SVM: {e}")))?;
    let m = LabelledSvm { svm, classes, c };
    m.validate().map_err(|e| IoError::model(path, e))?;
    Ok(m)
}

fn parse_linear_svm(buf: &[u8], path: &Path) -> Result<(LinearSvmModel, BTreeMap<String, String>)> {
    let (st, meta, kind) = open_model(buf, path)?;
    if kind != "linear-svm" {
        return Err(wrong_kind(path, &kind, "linear-svm"));
    }
    let req = "weights, bias";
    let mut dtype = None;
    let w = get_tensor(path, &st, "linear-svm", "weights", req, &mut dtype)?;
    let b = get_tensor(path, &st, "linear-svm", "bias", req, &mut dtype)?;
    w.expect_rank(path, 2, "(C, D)")?;
    b.expect_rank(path, 1, "(C)")?;
    let (c, dim) = (w.shape()[0], w.shape()[1]);
    if c < 2 {
        return Err(IoError::model(
            path,
            format!(
                "tensor `weights` has shape {}: a linear SVM needs at least 2 classes (rows)",
                py_shape(w.shape())
            ),
        ));
    }
    if dim == 0 {
        return Err(IoError::model(
            path,
            "tensor `weights` has 0 columns (D = 0)",
        ));
    }
    if b.shape()[0] != c {
        return Err(IoError::model(
            path,
            format!(
                "tensor `bias` has shape {} but `weights` has C = {c} rows",
                py_shape(b.shape())
            ),
        ));
    }
    let classes = match meta.get("classes") {
        Some(s) => ClassLabels::from_json(s)
            .map_err(|e| IoError::model(path, format!("metadata `classes`: {e}")))?,
        None => ClassLabels::range(c),
    };
    let cost = parse_f64(path, &meta, "c")?;
    let model = match dtype.map(|d| d.0) {
        Some(Dtype::F32) => LinearSvmModel::F32(build_svm(path, &w, &b, classes, cost)?),
        _ => LinearSvmModel::F64(build_svm(path, &w, &b, classes, cost)?),
    };
    check_dtype_metadata(path, &meta, model.dtype())?;
    Ok((model, meta))
}

/// A `kind = linear-svm` model file in its own element type (see the module
/// documentation for the checks); a file of another kind is an error naming
/// its kind. Written as its [`LabelledSvm`].
///
/// ```
/// use fisherkit::svm::LinearSvc;
/// use fisherkit_io::{ClassLabels, LabelledSvm, LinearSvmModel, ModelFile};
/// use ndarray::array;
///
/// // two classes in D = 2: w·x + b for each (one vs rest)
/// let svm = LinearSvc::from_parts(array![[1.0f32, -1.0], [-1.0, 1.0]], array![0.5f32, -0.5])?;
/// let labelled = LabelledSvm { svm, classes: ClassLabels::Str(vec!["cat".into(), "dog".into()]), c: Some(1.0) };
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("svm.safetensors");
/// labelled.write(&path, &Default::default())?;
/// let (model, meta) = LinearSvmModel::read_with_metadata(&path)?;
/// assert_eq!((model.dim(), model.c()), (2, Some(1.0)));
/// assert_eq!((meta["kind"].as_str(), meta["dtype"].as_str()), ("linear-svm", "float32"));
/// let LinearSvmModel::F32(back) = LinearSvmModel::read(&path)? else { panic!("float32 in, float32 out") };
/// assert_eq!(back.classes, labelled.classes);
/// // the same decision values: row 0 is class 0 ("cat"), row 1 class 1 ("dog")
/// let x = array![[2.0f32, 0.0], [0.0, 2.0]];
/// assert_eq!(back.svm.decision_function(x.view())?, labelled.svm.decision_function(x.view())?);
/// assert_eq!(back.svm.predict(x.view())?, vec![0, 1]);
/// // the bytes of a file, under a name for the errors
/// let (model, _) = LinearSvmModel::read_bytes(&std::fs::read(&path)?, "sent.safetensors")?;
/// assert_eq!(model.classes(), &labelled.classes);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ModelFile for LinearSvmModel {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        match self {
            LinearSvmModel::F32(m) => m.write(path, extra),
            LinearSvmModel::F64(m) => m.write(path, extra),
        }
    }
}

impl Parse for LinearSvmModel {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        parse_linear_svm(bytes, path)
    }
}
