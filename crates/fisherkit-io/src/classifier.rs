//! The scene-classifier file (`kind` = `scene-classifier`): everything a
//! trained scene classifier needs from an image (or a bag of descriptors) to
//! a label, in one safetensors file (docs/formats.md §5).
//!
//! | tensor | shape | content |
//! |---|---|---|
//! | `pca.<s>.mean` | (D₀) | PCA of scale s: mean of the raw descriptors |
//! | `pca.<s>.components` | (d, D₀) | its orthonormal rows |
//! | `pca.<s>.explained_variance` | (d), F64 | its eigenvalues |
//! | `gmm.<s>.weights`, `.means`, `.variances` | (K), (K, d), (K, d) | background GMM of scale s (if the encoder has a `gmm-fv` term) |
//! | `mfa.<s>.weights`, `.means`, `.loadings`, `.psi` | (K), (K, d), (K, d, R), (1 or K, d) | background MFA of scale s (if it has an `mfa-fs` term) |
//! | `whitening.<p>` | (width of part p) | the whitening's Fisher-information estimate of part p (whitened MFA-FS parts only) |
//! | `svm.weights` | (C, D) | one-vs-rest SVM weights, one row per class |
//! | `svm.bias` | (C) | its intercepts |
//!
//! Every tensor is `F32` but the PCA's eigenvalues (`F64`). The metadata
//! holds `kind`, `format_version`, `fisherkit_version`, `dtype` as every
//! fisherkit model file, plus `classifier_version` (=
//! [`CLASSIFIER_VERSION`]) and `classifier`: the JSON of [`ClassifierInfo`]
//! (the CNN's identity, the scales, the encoder and its parts, the
//! normalisation, the class names, the training settings). The reader
//! checks the framing, the version, every tensor's presence, dtype and shape
//! against the others and against the JSON, and builds each model through
//! the library's own constructor (which checks its values), so a loaded
//! [`ClassifierFile`] is consistent: any truncated, tampered or foreign file
//! is one error naming the file and the problem.

use crate::error::{IoError, Result};
use crate::model::{check_head, open_model, to_le_bytes, wrong_kind};
use crate::npy::{py_shape, Dtype, Element};
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::pca::Pca;
use fisherkit::svm::LinearSvc;
use ndarray::{Array1, Array2, Array3, ArrayD, IxDyn};
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The layout version of `scene-classifier` files this crate writes and reads.
pub const CLASSIFIER_VERSION: &str = "1";

/// The `kind` of a scene-classifier file.
pub const CLASSIFIER_KIND: &str = "scene-classifier";

/// The network that made the descriptors of a classifier trained on images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CnnInfo {
    /// The network's name: `squeezenet1_1`, `efficientnet_lite0`, or
    /// `onnx:<file>#<hash of the file and its preprocessing>`.
    pub name: String,
    /// A 64-bit FNV-1a hash (hex) of the weights file of a built-in network;
    /// `None` for ONNX (its name carries the hash).
    pub weights_hash: Option<String>,
    /// The ONNX model's path when the classifier was trained (a hint for
    /// `--cnn`; the hash in `name` decides).
    pub onnx_path: Option<String>,
}

/// The descriptors a classifier works on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputInfo {
    /// The CNN (images), or `None` (bags of descriptors from descriptor files).
    pub cnn: Option<CnnInfo>,
    /// Patch sides in pixels, one per scale (empty for descriptor files).
    pub scales: Vec<u32>,
    /// `dense` or `exact` (images only).
    pub patch_mode: String,
    /// Grid step of `exact` patches, as a fraction of the patch side.
    pub stride: f64,
    /// Longer side images are shrunk to at most, if any.
    pub max_image_side: Option<u32>,
    /// The scales' names as in the report (`96`, … or `file`).
    pub scale_names: Vec<String>,
    /// Width of a raw descriptor (before the PCA).
    pub descriptor_dim: usize,
}

/// One part of the final feature: a term of the encoder at one scale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// The term (`gmm-fv:var`, `mfa-fs:loading`, `cnn-global`).
    pub term: String,
    /// Index of its scale in [`InputInfo::scales`].
    pub scale: usize,
    /// Its width in the feature.
    pub width: usize,
    /// Whether it is whitened (tensor `whitening.<index of the part>`).
    pub whitened: bool,
}

/// Everything but the arrays: the JSON of the `classifier` metadata key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierInfo {
    /// What the classifier reads.
    pub input: InputInfo,
    /// The encoder specification (`mfa-fs:loading`, `gmm-fv:var&cnn-global`).
    pub encoder: String,
    /// Whether its MFA-FS terms are whitened.
    pub whitened: bool,
    /// The parts of the feature, in order.
    pub parts: Vec<PartInfo>,
    /// Signed power ρ of every part.
    pub power: f64,
    /// Whether every part is L2-normalised.
    pub l2: bool,
    /// The class names, one per row of `svm.weights`.
    pub classes: Vec<String>,
    /// The SVM cost chosen by cross-validation.
    pub c: f64,
    /// The cross-validated training accuracy at `c`.
    pub cv_accuracy: f64,
    /// The training run's settings, for the record.
    pub training: serde_json::Value,
}

/// A scene classifier's arrays and description, as stored.
#[derive(Debug, Clone)]
pub struct ClassifierFile {
    /// The description (see [`ClassifierInfo`]).
    pub info: ClassifierInfo,
    /// The PCA of each scale.
    pub pcas: Vec<Pca<f32>>,
    /// The background GMM of each scale, if the encoder uses one.
    pub gmms: Vec<Option<DiagGmm<f32>>>,
    /// The background MFA of each scale, if the encoder uses one.
    pub mfas: Vec<Option<Mfa<f32>>>,
    /// The Fisher-information estimate of each whitened part (`None` for the others).
    pub whitening: Vec<Option<Array1<f32>>>,
    /// The one-vs-rest SVM over the concatenated parts.
    pub svm: LinearSvc<f32>,
}

fn bad(path: &Path, reason: impl Into<String>) -> IoError {
    IoError::model(path, reason)
}

impl ClassifierFile {
    /// Checks that the parts fit together: one PCA per scale; per part its
    /// scale exists, its model is there, its width and whitening agree; the
    /// SVM has one row per class and the parts' total width; the class
    /// names are distinct. `path` names the file in the error.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let info = &self.info;
        let n_scales = info.input.scale_names.len();
        if n_scales == 0 || self.pcas.len() != n_scales {
            return Err(bad(
                path,
                format!(
                    "{} PCA(s) for {n_scales} scale(s); a classifier needs one per scale",
                    self.pcas.len()
                ),
            ));
        }
        if self.gmms.len() != n_scales || self.mfas.len() != n_scales {
            return Err(bad(path, "one background-model slot per scale expected"));
        }
        for (s, p) in self.pcas.iter().enumerate() {
            if p.input_dim() != info.input.descriptor_dim {
                return Err(bad(
                    path,
                    format!(
                        "the PCA of scale {s} reads {} values, the descriptors have {}",
                        p.input_dim(),
                        info.input.descriptor_dim
                    ),
                ));
            }
            let d = p.n_components();
            let dims = [
                self.gmms[s].as_ref().map(|g| g.dim()),
                self.mfas[s].as_ref().map(|m| m.dim()),
            ];
            if let Some(m) = dims.into_iter().flatten().find(|&m| m != d) {
                return Err(bad(
                    path,
                    format!("a background model of scale {s} has dimension {m}, its PCA gives {d}"),
                ));
            }
        }
        if self.whitening.len() != info.parts.len() {
            return Err(bad(path, "one whitening slot per part expected"));
        }
        let mut dim = 0;
        for (i, (p, w)) in info.parts.iter().zip(&self.whitening).enumerate() {
            if p.scale >= n_scales {
                return Err(bad(
                    path,
                    format!(
                        "part {i} ({}) is at scale {} of {n_scales}",
                        p.term, p.scale
                    ),
                ));
            }
            match w {
                Some(w) if !p.whitened || w.len() != p.width => {
                    return Err(bad(
                        path,
                        format!(
                            "tensor `whitening.{i}` has {} values for part {i} ({}, width {}, whitened {})",
                            w.len(),
                            p.term,
                            p.width,
                            p.whitened
                        ),
                    ))
                }
                None if p.whitened => {
                    return Err(bad(path, format!("missing tensor `whitening.{i}`")))
                }
                _ => {}
            }
            dim += p.width;
        }
        if self.svm.input_dim() != dim {
            return Err(bad(
                path,
                format!(
                    "tensor `svm.weights` has {} columns; the parts add up to {dim}",
                    self.svm.input_dim()
                ),
            ));
        }
        crate::ClassLabels::Str(info.classes.clone())
            .validate(self.svm.n_classes())
            .map_err(|e| bad(path, format!("classes: {e}")))?;
        if !(info.c.is_finite() && info.c > 0.0) {
            return Err(bad(
                path,
                format!("the SVM cost {} is not finite > 0", info.c),
            ));
        }
        if !(info.power.is_finite() && info.power > 0.0 && info.power <= 1.0) {
            return Err(bad(
                path,
                format!("the power {} is not in (0, 1]", info.power),
            ));
        }
        Ok(())
    }
}

/// Writes `file` as a `kind = scene-classifier` safetensors file,
/// atomically, after [`ClassifierFile::validate`].
pub fn write_classifier(path: impl AsRef<Path>, file: &ClassifierFile) -> Result<()> {
    let path = path.as_ref();
    file.validate(path)?;
    let mut t = Tensors::default();
    for (s, p) in file.pcas.iter().enumerate() {
        if p.whiten() {
            return Err(bad(
                path,
                format!("the PCA of scale {s} whitens; a classifier's PCAs do not"),
            ));
        }
        t.pca(s, p);
    }
    for (s, g) in file.gmms.iter().enumerate() {
        if let Some(g) = g {
            t.gmm(s, g);
        }
    }
    for (s, m) in file.mfas.iter().enumerate() {
        if let Some(m) = m {
            t.mfa(s, m);
        }
    }
    for (i, w) in file.whitening.iter().enumerate() {
        if let Some(w) = w {
            t.f32(format!("whitening.{i}"), vec![w.len()], w.iter());
        }
    }
    let w = file.svm.coef().as_standard_layout().into_owned();
    t.f32("svm.weights".into(), w.shape().to_vec(), w.iter());
    t.f32(
        "svm.bias".into(),
        vec![file.svm.n_classes()],
        file.svm.intercept().iter(),
    );
    let json = serde_json::to_string(&file.info)
        .map_err(|e| bad(path, format!("cannot serialise the description: {e}")))?;
    let meta = BTreeMap::from([
        ("classifier".to_string(), json),
        (
            "classifier_version".to_string(),
            CLASSIFIER_VERSION.to_string(),
        ),
    ]);
    let tensors =
        t.0.iter_mut()
            .map(|(n, d, s, b)| (n.as_str(), *d, std::mem::take(s), std::mem::take(b)))
            .collect();
    crate::model::write_safetensors_typed(path, CLASSIFIER_KIND, Dtype::F32, tensors, &meta)
}

/// The tensors of a classifier file as they are collected: (name, dtype,
/// shape, little-endian bytes), in file order.
#[derive(Default)]
struct Tensors(Vec<(String, Dtype, Vec<usize>, Vec<u8>)>);

impl Tensors {
    fn f32<'v>(&mut self, name: String, shape: Vec<usize>, v: impl Iterator<Item = &'v f32>) {
        self.0.push((name, Dtype::F32, shape, to_le_bytes(v)));
    }

    /// `pca.<s>.mean` (D), `.components` (d, D), `.explained_variance` (d, `f64`).
    fn pca(&mut self, s: usize, p: &Pca<f32>) {
        let comp = p.components().as_standard_layout().into_owned();
        self.f32(
            format!("pca.{s}.mean"),
            vec![p.input_dim()],
            p.mean().iter(),
        );
        self.f32(
            format!("pca.{s}.components"),
            comp.shape().to_vec(),
            comp.iter(),
        );
        self.0.push((
            format!("pca.{s}.explained_variance"),
            Dtype::F64,
            vec![p.n_components()],
            to_le_bytes(p.explained_variance().iter()),
        ));
    }

    /// `gmm.<s>.weights` (K), `.means` (K, d), `.variances` (K, d).
    fn gmm(&mut self, s: usize, g: &DiagGmm<f32>) {
        let (k, d) = (g.n_components(), g.dim());
        self.f32(format!("gmm.{s}.weights"), vec![k], g.weights().iter());
        self.f32(format!("gmm.{s}.means"), vec![k, d], g.means().iter());
        self.f32(
            format!("gmm.{s}.variances"),
            vec![k, d],
            g.variances().iter(),
        );
    }

    /// `mfa.<s>.weights`, `.means`, `.loadings`, `.psi` as [`crate::MfaArrays`].
    fn mfa(&mut self, s: usize, m: &Mfa<f32>) {
        let a = crate::MfaArrays::from_mfa(m);
        for (part, x) in [
            ("weights", a.weights.view().into_dyn()),
            ("means", a.means.view().into_dyn()),
            ("loadings", a.loadings.view().into_dyn()),
            ("psi", a.psi.view().into_dyn()),
        ] {
            self.f32(format!("mfa.{s}.{part}"), x.shape().to_vec(), x.iter());
        }
    }
}

/// Reads a `kind = scene-classifier` file (see the module documentation for
/// the checks).
///
/// # Errors
/// [`IoError::Os`] for a missing or unreadable file, [`IoError::Model`]
/// naming the problem otherwise (another kind or version, a missing or
/// misshapen tensor, inconsistent parts, invalid model values).
pub fn read_classifier(path: impl AsRef<Path>) -> Result<ClassifierFile> {
    let path = path.as_ref();
    let buf = crate::model::read_file_checked(path)?;
    read_classifier_bytes(&buf, path)
}

/// [`read_classifier`] on the bytes of a file; `path` names it in errors.
pub fn read_classifier_bytes(buf: &[u8], path: &Path) -> Result<ClassifierFile> {
    check_head(path, &buf[..buf.len().min(8)], buf.len() as u64)?;
    let (st, meta, kind) = open_model(buf, path)?;
    if kind != CLASSIFIER_KIND {
        return Err(wrong_kind(path, &kind, CLASSIFIER_KIND));
    }
    match meta.get("classifier_version").map(String::as_str) {
        Some(CLASSIFIER_VERSION) => {}
        Some(v) => {
            return Err(bad(
                path,
                format!(
                    "scene-classifier version \"{v}\"; this fisherkit ({}) reads version \
                     \"{CLASSIFIER_VERSION}\"",
                    env!("CARGO_PKG_VERSION")
                ),
            ))
        }
        None => return Err(bad(path, "missing metadata key `classifier_version`")),
    }
    let json = meta
        .get("classifier")
        .ok_or_else(|| bad(path, "missing metadata key `classifier`"))?;
    let info: ClassifierInfo = serde_json::from_str(json).map_err(|e| {
        bad(
            path,
            format!("metadata `classifier` is not a valid description: {e}"),
        )
    })?;
    let r = Reader { st: &st, path };
    let n_scales = info.input.scale_names.len();
    let file = ClassifierFile {
        pcas: (0..n_scales).map(|s| r.pca(s)).collect::<Result<_>>()?,
        gmms: (0..n_scales).map(|s| r.gmm(s)).collect::<Result<_>>()?,
        mfas: (0..n_scales).map(|s| r.mfa(s)).collect::<Result<_>>()?,
        whitening: (0..info.parts.len())
            .map(|i| {
                r.optional(&format!("whitening.{i}"), 1)
                    .map(|a| a.map(dims1))
            })
            .collect::<Result<_>>()?,
        svm: r.svm()?,
        info,
    };
    // In name order: `names()` comes from a hash map, and the error should
    // name the same tensor on every run.
    let mut names = st.names();
    names.sort_unstable();
    let extra = names.into_iter().find(|n| !r.known(n, &file));
    if let Some(n) = extra {
        return Err(bad(path, format!("unexpected tensor `{n}`")));
    }
    file.validate(path)?;
    file.whitening
        .iter()
        .enumerate()
        .try_for_each(|(i, w)| match w {
            Some(w) if w.iter().any(|v| !(v.is_finite() && *v >= 0.0)) => Err(bad(
                path,
                format!("tensor `whitening.{i}` holds a negative or non-finite value"),
            )),
            _ => Ok(()),
        })?;
    Ok(file)
}

fn dims1<F>(a: ArrayD<F>) -> Array1<F> {
    a.into_dimensionality().expect("rank checked")
}

fn dims2<F>(a: ArrayD<F>) -> Array2<F> {
    a.into_dimensionality().expect("rank checked")
}

fn dims3<F>(a: ArrayD<F>) -> Array3<F> {
    a.into_dimensionality().expect("rank checked")
}

/// Typed tensor lookups with errors naming the tensor.
struct Reader<'a, 'b> {
    st: &'b SafeTensors<'a>,
    path: &'b Path,
}

impl Reader<'_, '_> {
    /// Tensor `name` of rank `rank` as `F`, or `None` when absent.
    fn optional_as<F: Element>(&self, name: &str, rank: usize) -> Result<Option<ArrayD<F>>> {
        let Ok(view) = self.st.tensor(name) else {
            return Ok(None);
        };
        let want = match F::DTYPE {
            Dtype::F32 => safetensors::Dtype::F32,
            Dtype::F64 => safetensors::Dtype::F64,
        };
        if view.dtype() != want {
            return Err(bad(
                self.path,
                format!(
                    "tensor `{name}` has dtype {}; expected {want}",
                    view.dtype()
                ),
            ));
        }
        if view.shape().len() != rank {
            return Err(bad(
                self.path,
                format!(
                    "tensor `{name}` has shape {}; expected {rank} dimension(s)",
                    py_shape(view.shape())
                ),
            ));
        }
        let data: Vec<F> = view
            .data()
            .chunks_exact(F::DTYPE.size())
            .map(F::from_le)
            .collect();
        ArrayD::from_shape_vec(IxDyn(view.shape()), data)
            .map(Some)
            .map_err(|e| bad(self.path, format!("tensor `{name}`: {e}")))
    }

    fn optional(&self, name: &str, rank: usize) -> Result<Option<ArrayD<f32>>> {
        self.optional_as::<f32>(name, rank)
    }

    fn required_as<F: Element>(&self, name: &str, rank: usize) -> Result<ArrayD<F>> {
        self.optional_as(name, rank)?
            .ok_or_else(|| bad(self.path, format!("missing tensor `{name}`")))
    }

    fn pca(&self, s: usize) -> Result<Pca<f32>> {
        let mean = dims1(self.required_as::<f32>(&format!("pca.{s}.mean"), 1)?);
        let comp = dims2(self.required_as::<f32>(&format!("pca.{s}.components"), 2)?);
        let ev = dims1(self.required_as::<f64>(&format!("pca.{s}.explained_variance"), 1)?);
        crate::validate_pca_parts(comp.view(), ev.view())
            .map_err(|e| bad(self.path, format!("PCA of scale {s}: {e}")))?;
        Pca::from_parts(mean, comp, ev, false)
            .map_err(|e| bad(self.path, format!("PCA of scale {s}: {e}")))
    }

    fn gmm(&self, s: usize) -> Result<Option<DiagGmm<f32>>> {
        let Some(w) = self.optional(&format!("gmm.{s}.weights"), 1)? else {
            return Ok(None);
        };
        let m = dims2(self.required_as(&format!("gmm.{s}.means"), 2)?);
        let v = dims2(self.required_as(&format!("gmm.{s}.variances"), 2)?);
        DiagGmm::new(dims1(w), m, v)
            .map(Some)
            .map_err(|e| bad(self.path, format!("GMM of scale {s}: {e}")))
    }

    fn mfa(&self, s: usize) -> Result<Option<Mfa<f32>>> {
        let Some(w) = self.optional(&format!("mfa.{s}.weights"), 1)? else {
            return Ok(None);
        };
        let a = crate::MfaArrays {
            weights: dims1(w),
            means: dims2(self.required_as(&format!("mfa.{s}.means"), 2)?),
            loadings: dims3(self.required_as(&format!("mfa.{s}.loadings"), 3)?),
            psi: dims2(self.required_as(&format!("mfa.{s}.psi"), 2)?),
        };
        a.to_mfa()
            .map(Some)
            .map_err(|e| bad(self.path, format!("MFA of scale {s}: {e}")))
    }

    fn svm(&self) -> Result<LinearSvc<f32>> {
        let w = dims2(self.required_as("svm.weights", 2)?);
        let b = dims1(self.required_as("svm.bias", 1)?);
        LinearSvc::from_parts(w, b).map_err(|e| bad(self.path, format!("SVM: {e}")))
    }

    /// Whether tensor `name` is one the file's parts account for.
    fn known(&self, name: &str, f: &ClassifierFile) -> bool {
        let mut it = name.splitn(3, '.');
        let (a, b, c) = (it.next(), it.next(), it.next());
        let idx = |b: Option<&str>| b.and_then(|b| b.parse::<usize>().ok());
        match (a, idx(b), c) {
            (Some("pca"), Some(s), Some(_)) => s < f.pcas.len(),
            (Some("gmm"), Some(s), Some(_)) => f.gmms.get(s).is_some_and(Option::is_some),
            (Some("mfa"), Some(s), Some(_)) => f.mfas.get(s).is_some_and(Option::is_some),
            (Some("whitening"), Some(i), None) => f.whitening.get(i).is_some_and(Option::is_some),
            (Some("svm"), None, None) => matches!(b, Some("weights" | "bias")),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
