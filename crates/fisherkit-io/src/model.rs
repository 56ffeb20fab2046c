//! Model files: safetensors with metadata `kind` = `gmm` or `mfa` (and `pca`,
//! `linear-svm`: see [`crate::linear_models`]; [`read_model`] refuses those
//! with a message naming their kind).
//!
//! The contract (docs/formats.md §2), tensors all `F32` or all `F64`:
//!
//! | kind | tensor | shape |
//! |---|---|---|
//! | gmm | `weights` | (K) |
//! | gmm | `means` | (K, D) |
//! | gmm | `variances` | (K, D), the diagonal $\sigma^2$ |
//! | mfa | `weights` | (K) |
//! | mfa | `means` | (K, D) |
//! | mfa | `loadings` | (K, D, R), $\Lambda_k$ |
//! | mfa | `psi` | (D) shared, or (K, D) per component |
//! | mfa, optional | `fisher_information` | (P), see below |
//!
//! An MFA file may carry a whitening block: the tensor `fisher_information`,
//! a diagonal Fisher-information estimate $\hat F$ of the MFA Fisher score
//! (what `fisherkit::encode::MfaFisherScore::fit_whitening` returns), in the
//! model's dtype, plus the metadata key `whitening_parts` naming the score
//! parts it was estimated for: `mean`, `loading` or `mean,loading` (canonical
//! order), so that P = K·D for `mean`, K·D·R for `loading`, their sum for
//! both. Values are finite and ≥ 0; the tensor and the key come together or
//! not at all. See [`MfaWhitening`].
//!
//! Metadata written: `kind`, `format_version` (= [`FORMAT_VERSION`]),
//! `fisherkit_version`, `dtype`, plus any extra keys the caller passes: the
//! command line and the Python module store a fit's hyper-parameters and
//! state as the optional keys of docs/formats.md §2.2/§2.3 (`max_iter`,
//! `tol`, `n_init`, `init`, `variance_floor`, `seed`, `psi`, `psi_floor`,
//! `n_iter`, `converged`, `mean_log_likelihood`). They are returned by
//! [`read_model_with_metadata`] and never needed to read the model, so files
//! without them load as before. Readers accept a
//! missing `format_version` (files written by other tools) and refuse any
//! other version than [`FORMAT_VERSION`].

use crate::atomic::write_atomically;
use crate::error::{IoError, Result};
use crate::npy::{py_shape, Dtype, Element, NPY_MAGIC, ZIP_MAGIC};
use fisherkit::encode::MfaPart;
use fisherkit::gmm::{DiagGmm, GmmError};
use fisherkit::mfa::{Mfa, MfaError};
use fisherkit::Float;
use ndarray::{Array1, Array2, Array3, ArrayD, IxDyn};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

/// Version of the model file layout this crate writes and reads.
pub const FORMAT_VERSION: &str = "1";

/// Tolerance on $|\sum_k w_k - 1|$ for MFA weights: the library's own
/// ([`fisherkit::mfa::WEIGHT_SUM_TOL`]), applied by `Mfa::new`, which
/// validates every MFA this crate reads or writes ([`MfaArrays::validate`]).
pub const MFA_WEIGHT_SUM_TOL: f64 = fisherkit::mfa::WEIGHT_SUM_TOL;

/// Largest safetensors header accepted (the safetensors crate's own limit).
const MAX_HEADER: u64 = 100_000_000;

/// The parameters of a mixture of factor analysers as plain arrays.
///
/// * `weights`: (K), positive, summing to 1;
/// * `means`: (K, D);
/// * `loadings`: (K, D, R), the factor loading matrices $\Lambda_k$;
/// * `psi`: (1, D) for a noise variance $\Psi$ shared by all components, or
///   (K, D) for one per component; positive.
#[derive(Debug, Clone, PartialEq)]
pub struct MfaArrays<F> {
    /// Mixture weights (K).
    pub weights: Array1<F>,
    /// Component means (K, D).
    pub means: Array2<F>,
    /// Factor loadings (K, D, R).
    pub loadings: Array3<F>,
    /// Diagonal noise variances, (1, D) shared or (K, D) per component.
    pub psi: Array2<F>,
}

impl<F: Float> MfaArrays<F> {
    /// Number of components K.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        self.means.ncols()
    }

    /// Number of factors R.
    pub fn n_factors(&self) -> usize {
        self.loadings.dim().2
    }

    /// `true` when `psi` is shared by all components (one row).
    pub fn shared_psi(&self) -> bool {
        self.psi.nrows() == 1
    }

    /// Checks that the arrays are an MFA the library accepts, by building it
    /// with [`Mfa::new`] (the one place of these checks): shapes (K, D, R)
    /// consistent with K ≥ 1 and 0 < R < D, `psi` (1, D) or (K, D); values
    /// finite; weights positive, summing to 1 within [`MFA_WEIGHT_SUM_TOL`];
    /// `psi` positive; every $M_k = I + \Lambda_k^\top\Psi_k^{-1}\Lambda_k$
    /// positive definite. The error is the library's, naming the array and
    /// the index of the first bad value.
    ///
    /// ```
    /// use fisherkit_io::MfaArrays;
    /// use ndarray::{array, Array3};
    ///
    /// let mut m = MfaArrays {
    ///     weights: array![0.5, 0.5],
    ///     means: array![[0.0, 0.0], [1.0, 1.0]],
    ///     loadings: Array3::from_elem((2, 2, 1), 0.5),
    ///     psi: array![[1.0, 1.0]], // shared
    /// };
    /// m.validate()?;
    /// m.weights[1] = 0.4;
    /// let e = m.validate().unwrap_err().to_string();
    /// assert!(e.contains("weights sum to 0.9, not 1"), "{e}");
    /// # Ok::<(), fisherkit::mfa::MfaError>(())
    /// ```
    pub fn validate(&self) -> Result<(), MfaError> {
        self.to_mfa::<F>().map(|_| ())
    }

    /// The parameters of a library model.
    pub fn from_mfa(m: &Mfa<F>) -> Self {
        MfaArrays {
            weights: m.weights().to_owned(),
            means: m.means().to_owned(),
            loadings: m.loadings().to_owned(),
            psi: m.psi().to_owned(),
        }
    }

    /// The library model in element type `G` (validated by [`Mfa::new`],
    /// which also requires $0 < R < D$).
    pub fn to_mfa<G: Float>(&self) -> Result<Mfa<G>, MfaError> {
        let c = self.cast::<G>();
        Mfa::new(c.weights, c.means, c.loadings, c.psi)
    }

    /// The same arrays in another float type (rounding to nearest).
    pub fn cast<G: Float>(&self) -> MfaArrays<G> {
        let c = |v: &F| G::from_f64_lossy(v.as_f64());
        MfaArrays {
            weights: self.weights.map(c),
            means: self.means.map(c),
            loadings: self.loadings.map(c),
            psi: self.psi.map(c),
        }
    }
}

/// Finds the first non-finite value of a tensor and names it with its index.
pub(crate) fn check_finite<'a, F: Float>(
    name: &str,
    values: impl Iterator<Item = &'a F>,
    shape: &[usize],
) -> Result<(), String> {
    for (flat, v) in values.enumerate() {
        if !v.is_finite() {
            // Unravel the C-order flat index.
            let mut idx = vec![0; shape.len()];
            let mut rem = flat;
            for (slot, &n) in idx.iter_mut().zip(shape).rev() {
                *slot = rem % n.max(1);
                rem /= n.max(1);
            }
            let idx = idx
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(format!(
                "tensor `{name}` has a non-finite value ({v}) at [{idx}]"
            ));
        }
    }
    Ok(())
}

/// Name of the optional whitening tensor of an MFA file.
pub const WHITENING_TENSOR: &str = "fisher_information";
/// Metadata key naming the parts the whitening tensor was estimated for.
pub const WHITENING_PARTS_KEY: &str = "whitening_parts";

/// The optional whitening block of an MFA file: a diagonal estimate
/// $\hat F$ of the Fisher information of the MFA Fisher score restricted to
/// `parts`.
///
/// * `parts`: the score parts, canonical order (mean, then loading), not empty;
/// * `fisher_information`: (P) with P = K·D (mean) + K·D·R (loading) for the
///   parts present, finite, ≥ 0. Held as `f64`: a file's `F32` values widen
///   exactly, so writing an `f32` model back gives the same bits.
#[derive(Debug, Clone, PartialEq)]
pub struct MfaWhitening {
    /// The MFA Fisher score parts, in canonical order.
    pub parts: Vec<MfaPart>,
    /// The diagonal Fisher-information estimate (P).
    pub fisher_information: Array1<f64>,
}

impl MfaWhitening {
    /// A whitening block from the estimate `fisher_information` (any float
    /// type, stored exactly as `f64`) for `parts` (sorted to canonical order,
    /// duplicates dropped). Not validated: see [`MfaWhitening::validate`].
    pub fn new<F: Float>(parts: &[MfaPart], fisher_information: &Array1<F>) -> Self {
        let mut p = Vec::new();
        for want in [MfaPart::Mean, MfaPart::Loading] {
            if parts.contains(&want) {
                p.push(want);
            }
        }
        MfaWhitening {
            parts: p,
            fisher_information: fisher_information.mapv(|v| v.as_f64()),
        }
    }

    /// The `whitening_parts` metadata value, e.g. `"mean,loading"`.
    pub fn parts_string(&self) -> String {
        mfa_parts_string(&self.parts)
    }

    /// The estimate in element type `F` (rounded to nearest).
    pub fn fisher_information_as<F: Float>(&self) -> Array1<F> {
        self.fisher_information.mapv(F::from_f64_lossy)
    }

    /// Checks the block against a model of K components, dimension D and R
    /// factors: parts non-empty and in canonical order, length
    /// `expected_len(k, d, r)`, values finite and ≥ 0. The message names the
    /// tensor or key.
    pub fn validate(&self, k: usize, d: usize, r: usize) -> Result<(), String> {
        let canonical = [
            &[MfaPart::Mean][..],
            &[MfaPart::Loading],
            &[MfaPart::Mean, MfaPart::Loading],
        ];
        if !canonical.contains(&self.parts.as_slice()) {
            return Err(format!(
                "metadata `{WHITENING_PARTS_KEY}` must name the parts mean and/or loading, in that order, once each"
            ));
        }
        let want = mfa_parts_len(&self.parts, k, d, r);
        let n = self.fisher_information.len();
        if n != want {
            return Err(format!(
                "tensor `{WHITENING_TENSOR}` has shape ({n},) but the parts \"{}\" of an MFA with \
                 (K, D, R) = ({k}, {d}, {r}) have {want} values",
                self.parts_string()
            ));
        }
        check_finite(WHITENING_TENSOR, self.fisher_information.iter(), &[n])?;
        if let Some((i, v)) = self
            .fisher_information
            .iter()
            .enumerate()
            .find(|(_, v)| **v < 0.0)
        {
            return Err(format!(
                "tensor `{WHITENING_TENSOR}` [{i}] is {v}; a Fisher-information estimate must be >= 0"
            ));
        }
        Ok(())
    }
}

/// Number of MFA Fisher score values of `parts`: K·D for mean, K·D·R for loading.
pub fn mfa_parts_len(parts: &[MfaPart], k: usize, d: usize, r: usize) -> usize {
    parts.iter().map(|p| p.n_values(k, d, r)).sum()
}

/// The canonical spelling of a list of parts (`"mean"`, `"loading"`, `"mean,loading"`).
pub fn mfa_parts_string(parts: &[MfaPart]) -> String {
    parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(",")
}

/// Parses a `whitening_parts` metadata value: exactly `mean`, `loading` or
/// `mean,loading` (the canonical spellings the writer uses).
fn parse_whitening_parts(s: &str) -> Result<Vec<MfaPart>, String> {
    let canonical: [&[MfaPart]; 3] = [&[MfaPart::Mean], &[MfaPart::Loading], &MfaPart::ALL];
    canonical
        .into_iter()
        .find(|parts| mfa_parts_string(parts) == s)
        .map(<[MfaPart]>::to_vec)
        .ok_or_else(|| {
            format!(
                "metadata `{WHITENING_PARTS_KEY}` is \"{s}\"; expected \"mean\", \"loading\" or \"mean,loading\""
            )
        })
}

/// A diagonal GMM in the element type of its file.
#[derive(Debug, Clone, PartialEq)]
pub enum GmmModel {
    /// `F32` tensors.
    F32(DiagGmm<f32>),
    /// `F64` tensors.
    F64(DiagGmm<f64>),
}

impl GmmModel {
    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            GmmModel::F32(_) => Dtype::F32,
            GmmModel::F64(_) => Dtype::F64,
        }
    }

    /// Number of components K.
    pub fn n_components(&self) -> usize {
        match self {
            GmmModel::F32(g) => g.n_components(),
            GmmModel::F64(g) => g.n_components(),
        }
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        match self {
            GmmModel::F32(g) => g.dim(),
            GmmModel::F64(g) => g.dim(),
        }
    }

    /// The mixture in element type `F`, re-validated after a narrowing cast
    /// (an `f64` variance of 1e-50 becomes 0 in `f32` and is refused).
    pub fn to_dtype<F: Float>(&self) -> Result<DiagGmm<F>, GmmError> {
        fn conv<A: Float, B: Float>(g: &DiagGmm<A>) -> Result<DiagGmm<B>, GmmError> {
            let c = |v: &A| B::from_f64_lossy(v.as_f64());
            DiagGmm::new(g.weights().map(c), g.means().map(c), g.variances().map(c))
        }
        match self {
            GmmModel::F32(g) => conv(g),
            GmmModel::F64(g) => conv(g),
        }
    }
}

/// MFA parameters in the element type of their file.
#[derive(Debug, Clone, PartialEq)]
pub enum MfaModel {
    /// `F32` tensors.
    F32(MfaArrays<f32>),
    /// `F64` tensors.
    F64(MfaArrays<f64>),
}

impl MfaModel {
    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            MfaModel::F32(_) => Dtype::F32,
            MfaModel::F64(_) => Dtype::F64,
        }
    }

    /// Dimension D.
    pub fn dim(&self) -> usize {
        match self {
            MfaModel::F32(m) => m.dim(),
            MfaModel::F64(m) => m.dim(),
        }
    }

    /// The library model in element type `F` (cast if the file's differs).
    pub fn to_dtype<F: Float>(&self) -> Result<Mfa<F>, MfaError> {
        match self {
            MfaModel::F32(m) => m.to_mfa(),
            MfaModel::F64(m) => m.to_mfa(),
        }
    }
}

/// A model loaded from a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// `kind` = `gmm`.
    Gmm(GmmModel),
    /// `kind` = `mfa`.
    Mfa(MfaModel),
}

impl Model {
    /// The `kind` metadata value (`"gmm"` or `"mfa"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Model::Gmm(_) => "gmm",
            Model::Mfa(_) => "mfa",
        }
    }

    /// Dimension D of the descriptors the model describes.
    pub fn dim(&self) -> usize {
        match self {
            Model::Gmm(g) => g.dim(),
            Model::Mfa(m) => m.dim(),
        }
    }

    /// Element type of the file.
    pub fn dtype(&self) -> Dtype {
        match self {
            Model::Gmm(g) => g.dtype(),
            Model::Mfa(m) => m.dtype(),
        }
    }
}

// ---------------------------------------------------------------------------
// Writing

pub(crate) fn st_dtype(d: Dtype) -> safetensors::Dtype {
    match d {
        Dtype::F32 => safetensors::Dtype::F32,
        Dtype::F64 => safetensors::Dtype::F64,
    }
}

pub(crate) fn to_le_bytes<'a, F: Element>(values: impl Iterator<Item = &'a F>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        v.push_le(&mut out);
    }
    out
}

/// Serialises named tensors (shape, little-endian bytes) with metadata and
/// writes them atomically.
///
/// The safetensors layout is written here rather than by
/// `safetensors::serialize` so that the file is byte-for-byte deterministic
/// (that function emits the metadata from a `HashMap`, in random order): an
/// 8-byte little-endian header length, the JSON header with sorted keys
/// (`__metadata__`, then each tensor's `dtype`, `shape`, `data_offsets`),
/// padded with spaces to a multiple of 8 bytes, then the tensors' data
/// back to back in the order of their names.
fn write_safetensors<F: Element>(
    path: &Path,
    kind: &str,
    tensors: Vec<(&str, Vec<usize>, Vec<u8>)>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    let tensors = tensors
        .into_iter()
        .map(|(n, s, d)| (n, F::DTYPE, s, d))
        .collect();
    write_safetensors_typed(path, kind, F::DTYPE, tensors, extra)
}

/// [`write_safetensors`] with a dtype per tensor; the `dtype` metadata key
/// names `dtype`, the element type of the model's parameters.
pub(crate) fn write_safetensors_typed(
    path: &Path,
    kind: &str,
    dtype: Dtype,
    mut tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    let mut meta = extra.clone();
    meta.insert("kind".into(), kind.into());
    meta.insert("format_version".into(), FORMAT_VERSION.into());
    meta.insert("fisherkit_version".into(), env!("CARGO_PKG_VERSION").into());
    meta.insert("dtype".into(), dtype.numpy_name().into());
    tensors.sort_by(|a, b| a.0.cmp(b.0));
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!(meta));
    let mut offset = 0usize;
    for (name, dt, shape, data) in &tensors {
        debug_assert_eq!(shape.iter().product::<usize>() * dt.size(), data.len());
        header.insert(
            name.to_string(),
            serde_json::json!({
                "dtype": st_dtype(*dt).to_string(),
                "shape": shape,
                "data_offsets": [offset, offset + data.len()],
            }),
        );
        offset += data.len();
    }
    let mut json = serde_json::to_vec(&serde_json::Value::Object(header))
        .map_err(|e| IoError::model(path, format!("cannot serialise the header: {e}")))?;
    json.resize(json.len().div_ceil(8) * 8, b' ');
    write_atomically(path, |w| {
        w.write_all(&(json.len() as u64).to_le_bytes())?;
        w.write_all(&json)?;
        for (_, _, _, data) in &tensors {
            w.write_all(data)?;
        }
        Ok(())
    })
}

/// Writes a diagonal GMM as a `kind = gmm` safetensors file, atomically.
/// `extra` metadata keys are stored too (the standard keys win over them).
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_gmm, write_gmm, GmmModel};
/// use ndarray::array;
/// let gmm = DiagGmm::new(array![0.25, 0.75], array![[0.0, 1.0], [2.0, 3.0]], array![[1.0, 1.0], [0.5, 2.0]])?;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("gmm.safetensors");
/// write_gmm(&path, &gmm, &Default::default())?;
/// let GmmModel::F64(back) = read_gmm(&path)? else { panic!("float64 in, float64 out") };
/// assert_eq!(back, gmm);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_gmm<F: Element>(
    path: impl AsRef<Path>,
    gmm: &DiagGmm<F>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    let (k, d) = (gmm.n_components(), gmm.dim());
    write_safetensors::<F>(
        path.as_ref(),
        "gmm",
        vec![
            ("weights", vec![k], to_le_bytes(gmm.weights().iter())),
            ("means", vec![k, d], to_le_bytes(gmm.means().iter())),
            ("variances", vec![k, d], to_le_bytes(gmm.variances().iter())),
        ],
        extra,
    )
}

/// Writes MFA parameters as a `kind = mfa` safetensors file, atomically,
/// after [`MfaArrays::validate`] (so every file written can be read back).
/// A shared `psi` (1, D) is stored as a (D) tensor, a per-component one as
/// (K, D). No whitening block (a `whitening_parts` key in `extra` is
/// dropped): see [`write_mfa_with_whitening`].
pub fn write_mfa<F: Element>(
    path: impl AsRef<Path>,
    mfa: &MfaArrays<F>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    write_mfa_with_whitening(path, mfa, None, extra)
}

/// [`write_mfa`] plus, if given, the whitening block (tensor
/// `fisher_information` in the model's dtype `F`, metadata `whitening_parts`),
/// after [`MfaWhitening::validate`] against the model's (K, D, R) — also
/// after rounding to `F`, so an `f32` file never holds an infinity. Without a
/// block, a `whitening_parts` key in `extra` is dropped (the file would
/// otherwise be refused on load).
pub fn write_mfa_with_whitening<F: Element>(
    path: impl AsRef<Path>,
    mfa: &MfaArrays<F>,
    whitening: Option<&MfaWhitening>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    let path = path.as_ref();
    mfa.validate()
        .map_err(|e| IoError::model(path, format!("refusing to write: {e}")))?;
    let (k, d, r) = (mfa.n_components(), mfa.dim(), mfa.n_factors());
    let mut extra = extra.clone();
    extra.remove(WHITENING_PARTS_KEY);
    let mut block = None;
    if let Some(w) = whitening {
        let cast = MfaWhitening {
            parts: w.parts.clone(),
            fisher_information: w.fisher_information_as::<F>().mapv(|v| v.as_f64()),
        };
        w.validate(k, d, r)
            .and_then(|_| cast.validate(k, d, r))
            .map_err(|e| {
                IoError::model(path, format!("refusing to write an invalid whitening: {e}"))
            })?;
        extra.insert(WHITENING_PARTS_KEY.into(), w.parts_string());
        block = Some(w.fisher_information_as::<F>());
    }
    let psi_shape = if mfa.shared_psi() {
        vec![d]
    } else {
        vec![k, d]
    };
    let std = |a: &Array3<F>| a.as_standard_layout().to_owned();
    let mut tensors = vec![
        ("weights", vec![k], to_le_bytes(mfa.weights.iter())),
        ("means", vec![k, d], to_le_bytes(mfa.means.iter())),
        (
            "loadings",
            vec![k, d, r],
            to_le_bytes(std(&mfa.loadings).iter()),
        ),
        ("psi", psi_shape, to_le_bytes(mfa.psi.iter())),
    ];
    if let Some(f) = &block {
        tensors.push((WHITENING_TENSOR, vec![f.len()], to_le_bytes(f.iter())));
    }
    write_safetensors::<F>(path, "mfa", tensors, &extra)
}

/// Writes a fitted library MFA with [`write_mfa`].
pub fn write_mfa_model<F: Element>(
    path: impl AsRef<Path>,
    mfa: &Mfa<F>,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    write_mfa(path, &MfaArrays::from_mfa(mfa), extra)
}

/// Writes a [`Model`] in its own element type.
pub fn write_model(
    path: impl AsRef<Path>,
    model: &Model,
    extra: &BTreeMap<String, String>,
) -> Result<()> {
    match model {
        Model::Gmm(GmmModel::F32(g)) => write_gmm(path, g, extra),
        Model::Gmm(GmmModel::F64(g)) => write_gmm(path, g, extra),
        Model::Mfa(MfaModel::F32(m)) => write_mfa(path, m, extra),
        Model::Mfa(MfaModel::F64(m)) => write_mfa(path, m, extra),
    }
}

// ---------------------------------------------------------------------------
// Reading

/// Reads the whole file after checking it plausibly is safetensors (so a
/// large foreign file is refused without being read).
pub(crate) fn read_file_checked(path: &Path) -> Result<Vec<u8>> {
    let mut f = std::fs::File::open(path).map_err(|e| IoError::os(path, e))?;
    let meta = f.metadata().map_err(|e| IoError::os(path, e))?;
    if meta.is_dir() {
        return Err(IoError::model(path, "is a directory, not a model file"));
    }
    let len = meta.len();
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(IoError::os(path, e)),
        }
    }
    check_head(path, &head[..got], len)?;
    let mut buf = Vec::with_capacity(len as usize);
    buf.extend_from_slice(&head);
    f.read_to_end(&mut buf).map_err(|e| IoError::os(path, e))?;
    Ok(buf)
}

/// Checks the first (up to 8) bytes of a file of `len` bytes plausibly start
/// a safetensors file: not another fisherkit format, and a header length
/// that fits in the file.
pub(crate) fn check_head(path: &Path, head: &[u8], len: u64) -> Result<()> {
    let got = head.len();
    if got >= 6 && &head[..6] == NPY_MAGIC {
        return Err(IoError::model(
            path,
            "is an .npy array, not a safetensors model file",
        ));
    }
    if got >= 4 && &head[..4] == ZIP_MAGIC {
        return Err(IoError::model(
            path,
            "is a zip/.npz archive, not a safetensors model file",
        ));
    }
    if got < 8 {
        return Err(IoError::model(
            path,
            format!("not a safetensors model file (only {len} bytes)"),
        ));
    }
    let n = u64::from_le_bytes(head[..8].try_into().expect("8 bytes checked above"));
    if n > MAX_HEADER || n > len.saturating_sub(8) {
        return Err(IoError::model(
            path,
            format!(
                "not a safetensors model file (its first 8 bytes give a header length of {n} \
                 bytes, but the file has {len} bytes)"
            ),
        ));
    }
    Ok(())
}

/// A tensor decoded to `f64` with its shape, for validation before the
/// typed conversion.
pub(crate) struct RawTensor<'a> {
    pub(crate) name: &'static str,
    pub(crate) view: TensorView<'a>,
}

/// Looks up `name`, checks its dtype is F32/F64 and equal to `dtype` (the
/// first tensor's), and returns it.
pub(crate) fn get_tensor<'a>(
    path: &Path,
    st: &SafeTensors<'a>,
    kind: &str,
    name: &'static str,
    required: &str,
    dtype: &mut Option<(Dtype, &'static str)>,
) -> Result<RawTensor<'a>> {
    let view = st.tensor(name).map_err(|_| {
        IoError::model(
            path,
            format!("missing tensor `{name}` (a {kind} model file needs {required})"),
        )
    })?;
    let dt = match view.dtype() {
        safetensors::Dtype::F32 => Dtype::F32,
        safetensors::Dtype::F64 => Dtype::F64,
        other => {
            return Err(IoError::model(
                path,
                format!("tensor `{name}` has dtype {other}; expected F32 or F64"),
            ))
        }
    };
    match dtype {
        None => *dtype = Some((dt, name)),
        Some((first, first_name)) if *first != dt => {
            return Err(IoError::model(
                path,
                format!(
                "tensor `{name}` is {} but `{first_name}` is {}; all tensors must have one dtype",
                st_dtype(dt),
                st_dtype(*first)
            ),
            ))
        }
        Some(_) => {}
    }
    Ok(RawTensor { name, view })
}

impl RawTensor<'_> {
    pub(crate) fn shape(&self) -> &[usize] {
        self.view.shape()
    }

    pub(crate) fn expect_rank(&self, path: &Path, rank: usize, what: &str) -> Result<()> {
        if self.shape().len() != rank {
            return Err(IoError::model(
                path,
                format!(
                    "tensor `{}` must have shape {what}, got {}",
                    self.name,
                    py_shape(self.shape())
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn to_array<F: Element>(&self, path: &Path) -> Result<ArrayD<F>> {
        let size = F::DTYPE.size();
        let data: Vec<F> = self
            .view
            .data()
            .chunks_exact(size)
            .map(F::from_le)
            .collect();
        let a = ArrayD::from_shape_vec(IxDyn(self.shape()), data)
            .map_err(|e| IoError::model(path, format!("tensor `{}`: {e}", self.name)))?;
        check_finite(self.name, a.iter(), self.shape()).map_err(|e| IoError::model(path, e))?;
        Ok(a)
    }
}

pub(crate) fn dims<const N: usize, F>(a: ArrayD<F>) -> ndarray::Array<F, ndarray::Dim<[usize; N]>>
where
    ndarray::Dim<[usize; N]>: ndarray::Dimension,
{
    a.into_dimensionality()
        .expect("rank checked before conversion")
}

fn read_gmm_tensors<F: Element>(
    path: &Path,
    w: &RawTensor<'_>,
    m: &RawTensor<'_>,
    v: &RawTensor<'_>,
) -> Result<DiagGmm<F>> {
    let weights: Array1<F> = dims(w.to_array(path)?);
    let means: Array2<F> = dims(m.to_array(path)?);
    let variances: Array2<F> = dims(v.to_array(path)?);
    DiagGmm::new(weights, means, variances).map_err(|source| IoError::Gmm {
        path: path.to_path_buf(),
        source,
    })
}

/// The shapes of an MFA file's tensors against each other, in the file's
/// terms: these checks stay here, although [`Mfa::new`] repeats them on the
/// arrays, because a file stores a shared `psi` as (D) where the library
/// holds (1, D), and the message must name the tensor with the shape the
/// file has. Ranks are checked before; K = 0, D = 0, R = 0 and R ≥ D are
/// consistent shapes, left to the library.
fn check_mfa_shapes(
    path: &Path,
    w: &RawTensor<'_>,
    m: &RawTensor<'_>,
    l: &RawTensor<'_>,
    p: &RawTensor<'_>,
) -> Result<()> {
    let k = w.shape()[0];
    let (km, d) = (m.shape()[0], m.shape()[1]);
    let bad = |reason: String| Err(IoError::model(path, reason));
    if km != k {
        return bad(format!(
            "tensor `means` has shape {} but `weights` has K = {k} entries",
            py_shape(m.shape())
        ));
    }
    if l.shape()[..2] != [k, d] {
        return bad(format!(
            "tensor `loadings` has shape {} but (K, D, R) = ({k}, {d}, R) was expected",
            py_shape(l.shape())
        ));
    }
    // (1, D) is a shared psi too (as the library holds it).
    if !(p.shape() == [d] || p.shape() == [1, d] || p.shape() == [k, d]) {
        return bad(format!(
            "tensor `psi` has shape {} but (D) = ({d},) or (K, D) = ({k}, {d}) was expected",
            py_shape(p.shape())
        ));
    }
    Ok(())
}

fn read_mfa_tensors<F: Element>(
    path: &Path,
    w: &RawTensor<'_>,
    m: &RawTensor<'_>,
    l: &RawTensor<'_>,
    p: &RawTensor<'_>,
) -> Result<MfaArrays<F>> {
    let psi = p.to_array::<F>(path)?;
    let psi: Array2<F> = if psi.ndim() == 1 {
        let d = psi.len();
        psi.into_shape_with_order((1, d))
            .expect("a (D) tensor reshapes to (1, D)")
    } else {
        dims(psi)
    };
    let mfa = MfaArrays {
        weights: dims(w.to_array(path)?),
        means: dims(m.to_array(path)?),
        loadings: dims(l.to_array(path)?),
        psi,
    };
    // Shapes and finiteness were checked on the tensors; the rest (K ≥ 1,
    // 0 < R < D, weights, psi > 0, M_k positive definite) is the library's.
    mfa.validate().map_err(|source| IoError::Mfa {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(mfa)
}

/// Reads a model file and its metadata (all keys, including `kind`).
///
/// Checks, in order: that the file is safetensors; `kind` is present and
/// `gmm` or `mfa`; `format_version`, if present, is [`FORMAT_VERSION`]; every
/// required tensor is present, `F32` or `F64`, all of one dtype; ranks and
/// shapes agree (K, D, R); every value is finite; then the model's own
/// validation (weights positive and summing to 1, variances / psi > 0);
/// finally that the `dtype` metadata key, if present, names the tensors' type.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_model_with_metadata, write_gmm, GmmModel, Model};
/// use ndarray::array;
/// use std::collections::BTreeMap;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-meta-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![0.5f32, 0.5], array![[0.0f32], [4.0]], array![[1.0f32], [2.0]])?;
/// let extra = BTreeMap::from([("seed".to_string(), "7".to_string())]);
/// write_gmm(&path, &gmm, &extra)?;
/// let (model, meta) = read_model_with_metadata(&path)?;
/// assert!(matches!(model, Model::Gmm(GmmModel::F32(ref g)) if *g == gmm));
/// assert_eq!((meta["kind"].as_str(), meta["format_version"].as_str()), ("gmm", "1"));
/// assert_eq!((meta["dtype"].as_str(), meta["seed"].as_str()), ("float32", "7"));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_with_metadata(
    path: impl AsRef<Path>,
) -> Result<(Model, BTreeMap<String, String>)> {
    read_model_with_whitening(path).map(|(m, _, meta)| (m, meta))
}

/// [`read_model_with_metadata`] plus the optional whitening block of an MFA
/// file (always `None` for a GMM). The block is checked on every read of an
/// MFA file, by every reader: `fisher_information` and `whitening_parts`
/// both present or both absent, the parts a canonical list, the tensor (P)
/// in the model's dtype with P the parts' score length, finite, ≥ 0.
///
/// ```
/// use fisherkit::encode::MfaPart;
/// use fisherkit_io::{read_model_with_whitening, write_mfa_with_whitening, MfaArrays, MfaWhitening, Model};
/// use ndarray::{array, Array1, Array3};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-whiten-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("mfa.safetensors");
/// // K = 2 components in D = 2 with R = 1 factor, shared psi
/// let mfa = MfaArrays {
///     weights: array![0.5, 0.5],
///     means: array![[0.0, 0.0], [3.0, 1.0]],
///     loadings: Array3::from_shape_vec((2, 2, 1), vec![1.0, 0.0, 0.0, 1.0])?,
///     psi: array![[0.5, 0.5]],
/// };
/// // the `mean` part of the score has K·D = 4 entries
/// let w = MfaWhitening::new(&[MfaPart::Mean], &Array1::from(vec![1.0, 2.0, 3.0, 4.0]));
/// write_mfa_with_whitening(&path, &mfa, Some(&w), &Default::default())?;
/// let (model, back, meta) = read_model_with_whitening(&path)?;
/// assert_eq!(model.kind(), "mfa");
/// assert_eq!(back, Some(w));
/// assert_eq!(meta["whitening_parts"], "mean");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_with_whitening(
    path: impl AsRef<Path>,
) -> Result<(Model, Option<MfaWhitening>, BTreeMap<String, String>)> {
    let path = path.as_ref();
    let buf = read_file_checked(path)?;
    parse_model(&buf, path)
}

/// Reads a model and its metadata from the bytes of a model file (see
/// [`read_model_with_metadata`], same checks); `name` stands for the file in
/// error messages.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_model_bytes, write_gmm, Model};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-bytes-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![1.0], array![[1.0, 2.0]], array![[0.5, 0.5]])?;
/// write_gmm(&path, &gmm, &Default::default())?;
/// let bytes = std::fs::read(&path)?;
/// let (model, meta) = read_model_bytes(&bytes, "received.safetensors")?;
/// assert_eq!((model.kind(), model.dim()), ("gmm", 2));
/// assert_eq!(meta["kind"], "gmm");
/// // a cut file is refused under the name given
/// let e = read_model_bytes(&bytes[..bytes.len() - 8], "received.safetensors").unwrap_err();
/// assert!(e.to_string().starts_with("received.safetensors: "), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_bytes(
    bytes: &[u8],
    name: impl AsRef<Path>,
) -> Result<(Model, BTreeMap<String, String>)> {
    let path = name.as_ref();
    check_head(path, &bytes[..bytes.len().min(8)], bytes.len() as u64)?;
    parse_model(bytes, path).map(|(m, _, meta)| (m, meta))
}

/// The `kind` values of the model files fisherkit reads: [`read_model`]
/// takes `gmm` and `mfa`, [`crate::read_pca`] `pca`, [`crate::read_linear_svm`]
/// `linear-svm`.
pub const MODEL_KINDS: [&str; 5] = ["gmm", "mfa", "pca", "linear-svm", "scene-classifier"];

/// The kinds of model file fisherkit reads, as the error messages list them.
pub(crate) const KINDS: &str = "\"gmm\", \"mfa\", \"pca\", \"linear-svm\" or \"scene-classifier\"";

/// The error for a `kind` that is none of [`MODEL_KINDS`].
fn unknown_kind(path: &Path, kind: &str) -> IoError {
    IoError::model(
        path,
        format!("unknown model kind \"{kind}\"; expected {KINDS}"),
    )
}

/// The `kind` of a model file, one of [`MODEL_KINDS`], to choose its reader
/// (the Python module's `load_model` does).
///
/// Checks what every reader checks first: the safetensors framing (the
/// whole file is read and its header and tensor table parsed), `kind`
/// present and known, `format_version` if present equal to
/// [`FORMAT_VERSION`]. The tensors are not decoded: the reader of that kind
/// validates them. Errors name the file: [`IoError::Os`] for a missing or
/// unreadable one, [`IoError::Model`] otherwise.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_model_kind, write_gmm};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-kind-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![1.0f32], array![[0.0f32, 1.0]], array![[1.0f32, 2.0]])?;
/// write_gmm(&path, &gmm, &Default::default())?;
/// assert_eq!(read_model_kind(&path)?, "gmm");
/// // not a model file: the error names the file and the problem
/// std::fs::write(dir.join("notes.txt"), "not a model")?;
/// let e = read_model_kind(dir.join("notes.txt")).unwrap_err().to_string();
/// assert!(e.contains("notes.txt") && e.contains("not a safetensors model file"), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model_kind(path: impl AsRef<Path>) -> Result<&'static str> {
    let path = path.as_ref();
    let buf = read_file_checked(path)?;
    let (_, _, kind) = open_model(&buf, path)?;
    MODEL_KINDS
        .into_iter()
        .find(|k| *k == kind)
        .ok_or_else(|| unknown_kind(path, &kind))
}

/// Checks the safetensors framing, the presence of `kind` and the
/// `format_version`; returns the parsed file, its metadata and its kind.
pub(crate) fn open_model<'a>(
    buf: &'a [u8],
    path: &Path,
) -> Result<(SafeTensors<'a>, BTreeMap<String, String>, String)> {
    let (_, header) = SafeTensors::read_metadata(buf)
        .map_err(|e| IoError::model(path, format!("not a valid safetensors file: {e}")))?;
    let st = SafeTensors::deserialize(buf)
        .map_err(|e| IoError::model(path, format!("not a valid safetensors file: {e}")))?;
    let meta: BTreeMap<String, String> = header
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let kind = meta
        .get("kind")
        .ok_or_else(|| {
            IoError::model(
                path,
                format!(
                    "missing metadata key `kind` (expected {KINDS}); \
                     is this a fisherkit model file?"
                ),
            )
        })?
        .clone();
    if let Some(v) = meta.get("format_version") {
        if v != FORMAT_VERSION {
            return Err(IoError::model(
                path,
                format!(
                    "unsupported format_version \"{v}\"; this fisherkit reads format_version \
                     \"{FORMAT_VERSION}\""
                ),
            ));
        }
    }
    Ok((st, meta, kind))
}

/// The `dtype` key fisherkit writes must describe the parameters it sits beside.
pub(crate) fn check_dtype_metadata(
    path: &Path,
    meta: &BTreeMap<String, String>,
    dtype: Dtype,
) -> Result<()> {
    if let Some(d) = meta.get("dtype") {
        if d != dtype.numpy_name() {
            return Err(IoError::model(
                path,
                format!(
                    "metadata `dtype` is \"{d}\" but the tensors are {} ({})",
                    st_dtype(dtype),
                    dtype
                ),
            ));
        }
    }
    Ok(())
}

/// The message for a file of another kind than the reader expects, e.g.
/// `is a PCA model (kind "pca"); a GMM (kind "gmm") was expected`.
pub(crate) fn wrong_kind(path: &Path, got: &str, expected: &str) -> IoError {
    fn name(kind: &str) -> String {
        match kind {
            "gmm" => "a GMM".into(),
            "mfa" => "an MFA".into(),
            "pca" => "a PCA".into(),
            "linear-svm" => "a linear SVM".into(),
            "scene-classifier" => "a scene classifier".into(),
            other => format!("a \"{other}\""),
        }
    }
    IoError::model(
        path,
        format!(
            "is {} model (kind \"{got}\"); {} (kind \"{expected}\") was expected",
            name(got),
            name(expected)
        ),
    )
}

/// The optional whitening block of an MFA file (see [`MfaWhitening`]),
/// validated against (K, D, R); `dtype` is the model tensors' dtype.
fn read_whitening(
    path: &Path,
    st: &SafeTensors<'_>,
    meta: &BTreeMap<String, String>,
    dtype: &mut Option<(Dtype, &'static str)>,
    (k, d, r): (usize, usize, usize),
) -> Result<Option<MfaWhitening>> {
    let has_tensor = st.tensor(WHITENING_TENSOR).is_ok();
    let parts = match (has_tensor, meta.get(WHITENING_PARTS_KEY)) {
        (false, None) => return Ok(None),
        (true, None) => {
            return Err(IoError::model(
                path,
                format!(
                    "tensor `{WHITENING_TENSOR}` without metadata key `{WHITENING_PARTS_KEY}` \
                     (the MFA Fisher score parts it was estimated for)"
                ),
            ))
        }
        (false, Some(p)) => {
            return Err(IoError::model(
                path,
                format!(
                    "metadata key `{WHITENING_PARTS_KEY}` (\"{p}\") without tensor \
                     `{WHITENING_TENSOR}`"
                ),
            ))
        }
        (true, Some(p)) => parse_whitening_parts(p).map_err(|e| IoError::model(path, e))?,
    };
    let t = get_tensor(path, st, "mfa", WHITENING_TENSOR, "", dtype)?;
    t.expect_rank(path, 1, "(P)")?;
    let values: Array1<f64> = match dtype.map(|x| x.0) {
        Some(Dtype::F32) => dims::<1, f32>(t.to_array(path)?).mapv(f64::from),
        _ => dims(t.to_array(path)?),
    };
    let w = MfaWhitening {
        parts,
        fisher_information: values,
    };
    w.validate(k, d, r).map_err(|e| IoError::model(path, e))?;
    Ok(Some(w))
}

fn parse_model(
    buf: &[u8],
    path: &Path,
) -> Result<(Model, Option<MfaWhitening>, BTreeMap<String, String>)> {
    let (st, meta, kind) = open_model(buf, path)?;
    let mut dtype = None;
    let mut whitening = None;
    let model = match kind.as_str() {
        "gmm" => {
            let req = "weights, means, variances";
            let w = get_tensor(path, &st, "gmm", "weights", req, &mut dtype)?;
            let m = get_tensor(path, &st, "gmm", "means", req, &mut dtype)?;
            let v = get_tensor(path, &st, "gmm", "variances", req, &mut dtype)?;
            w.expect_rank(path, 1, "(K)")?;
            m.expect_rank(path, 2, "(K, D)")?;
            v.expect_rank(path, 2, "(K, D)")?;
            let k = w.shape()[0];
            if m.shape()[0] != k {
                return Err(IoError::model(
                    path,
                    format!(
                        "tensor `means` has shape {} but `weights` has K = {k} entries",
                        py_shape(m.shape())
                    ),
                ));
            }
            if v.shape() != m.shape() {
                return Err(IoError::model(
                    path,
                    format!(
                        "tensor `variances` has shape {} but `means` has shape {}",
                        py_shape(v.shape()),
                        py_shape(m.shape())
                    ),
                ));
            }
            match dtype.map(|d| d.0) {
                Some(Dtype::F32) => Model::Gmm(GmmModel::F32(read_gmm_tensors(path, &w, &m, &v)?)),
                _ => Model::Gmm(GmmModel::F64(read_gmm_tensors(path, &w, &m, &v)?)),
            }
        }
        "mfa" => {
            let req = "weights, means, loadings, psi";
            let w = get_tensor(path, &st, "mfa", "weights", req, &mut dtype)?;
            let m = get_tensor(path, &st, "mfa", "means", req, &mut dtype)?;
            let l = get_tensor(path, &st, "mfa", "loadings", req, &mut dtype)?;
            let p = get_tensor(path, &st, "mfa", "psi", req, &mut dtype)?;
            w.expect_rank(path, 1, "(K)")?;
            m.expect_rank(path, 2, "(K, D)")?;
            l.expect_rank(path, 3, "(K, D, R)")?;
            if !(1..=2).contains(&p.shape().len()) {
                return Err(IoError::model(
                    path,
                    format!(
                        "tensor `psi` must have shape (D) or (K, D), got {}",
                        py_shape(p.shape())
                    ),
                ));
            }
            check_mfa_shapes(path, &w, &m, &l, &p)?;
            let model = match dtype.map(|d| d.0) {
                Some(Dtype::F32) => {
                    Model::Mfa(MfaModel::F32(read_mfa_tensors(path, &w, &m, &l, &p)?))
                }
                _ => Model::Mfa(MfaModel::F64(read_mfa_tensors(path, &w, &m, &l, &p)?)),
            };
            let (k, d, r) = (l.shape()[0], l.shape()[1], l.shape()[2]);
            whitening = read_whitening(path, &st, &meta, &mut dtype, (k, d, r))?;
            model
        }
        "pca" | "linear-svm" | "scene-classifier" => {
            let what = match kind.as_str() {
                "pca" => "a PCA",
                "linear-svm" => "a linear SVM",
                _ => "a scene classifier",
            };
            return Err(IoError::model(
                path,
                format!(
                    "is {what} model (kind \"{kind}\"), not a GMM or MFA model (kind \"gmm\" \
                     or \"mfa\")"
                ),
            ));
        }
        other => return Err(unknown_kind(path, other)),
    };
    check_dtype_metadata(path, &meta, model.dtype())?;
    Ok((model, whitening, meta))
}

/// Reads a model file (see [`read_model_with_metadata`]).
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_model, write_gmm, Dtype, GmmModel, Model};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-model-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![0.25, 0.75], array![[0.0, 1.0], [2.0, 3.0]], array![[1.0, 1.0], [0.5, 2.0]])?;
/// write_gmm(&path, &gmm, &Default::default())?;
/// let model = read_model(&path)?;
/// assert_eq!((model.kind(), model.dim(), model.dtype()), ("gmm", 2, Dtype::F64));
/// let Model::Gmm(g) = model else { panic!("a GMM file") };
/// assert_eq!(g, GmmModel::F64(gmm.clone()));
/// // the model in the other element type, validated again
/// assert_eq!(g.to_dtype::<f32>()?.means(), gmm.means().mapv(|v| v as f32));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_model(path: impl AsRef<Path>) -> Result<Model> {
    read_model_with_metadata(path).map(|(m, _)| m)
}

/// Reads a `kind = gmm` model file; an MFA file is an error.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{read_gmm, write_gmm, write_mfa, GmmModel, MfaArrays};
/// use ndarray::{array, Array3};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-gmm-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![1.0f32], array![[0.0f32, 1.0]], array![[1.0f32, 2.0]])?;
/// write_gmm(&path, &gmm, &Default::default())?;
/// assert_eq!(read_gmm(&path)?, GmmModel::F32(gmm));
/// // an MFA file is not a GMM
/// let mfa = MfaArrays {
///     weights: array![1.0],
///     means: array![[0.0, 0.0]],
///     loadings: Array3::from_elem((1, 2, 1), 1.0),
///     psi: array![[1.0, 1.0]],
/// };
/// write_mfa(dir.join("mfa.safetensors"), &mfa, &Default::default())?;
/// let e = read_gmm(dir.join("mfa.safetensors")).unwrap_err().to_string();
/// assert!(e.contains("mfa.safetensors") && e.contains("is an MFA model"), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_gmm(path: impl AsRef<Path>) -> Result<GmmModel> {
    let path = path.as_ref();
    match read_model(path)? {
        Model::Gmm(g) => Ok(g),
        Model::Mfa(_) => Err(IoError::model(
            path,
            "is an MFA model (kind \"mfa\"); a GMM (kind \"gmm\") was expected",
        )),
    }
}

/// [`read_mfa`] plus the file's optional whitening block (see
/// [`read_model_with_whitening`]).
///
/// ```
/// use fisherkit::encode::MfaPart;
/// use fisherkit_io::{read_mfa_with_whitening, write_mfa, write_mfa_with_whitening, MfaArrays, MfaModel, MfaWhitening};
/// use ndarray::{array, Array1, Array3};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-mfaw-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mfa = MfaArrays {
///     weights: array![1.0f32],
///     means: array![[0.0f32, 0.0, 0.0]],
///     loadings: Array3::from_elem((1, 3, 1), 0.5f32),
///     psi: array![[1.0f32, 1.0, 1.0]],
/// };
/// // without a block
/// write_mfa(dir.join("plain.safetensors"), &mfa, &Default::default())?;
/// let (m, w) = read_mfa_with_whitening(dir.join("plain.safetensors"))?;
/// assert_eq!((m, w), (MfaModel::F32(mfa.clone()), None));
/// // with the `loading` part: K·D·R = 3 values
/// let block = MfaWhitening::new(&[MfaPart::Loading], &Array1::from(vec![0.5f32, 1.0, 2.0]));
/// write_mfa_with_whitening(dir.join("w.safetensors"), &mfa, Some(&block), &Default::default())?;
/// let (_, w) = read_mfa_with_whitening(dir.join("w.safetensors"))?;
/// assert_eq!(w, Some(block));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_mfa_with_whitening(path: impl AsRef<Path>) -> Result<(MfaModel, Option<MfaWhitening>)> {
    let path = path.as_ref();
    match read_model_with_whitening(path)? {
        (Model::Mfa(m), w, _) => Ok((m, w)),
        (Model::Gmm(_), _, _) => Err(wrong_kind(path, "gmm", "mfa")),
    }
}

/// Reads a `kind = mfa` model file; a GMM file is an error. The parameters
/// are also checked by [`Mfa::new`] (for example $0 < R < D$).
///
/// ```
/// use fisherkit::mfa::Mfa;
/// use fisherkit_io::{read_mfa, write_mfa, MfaArrays, MfaModel};
/// use ndarray::{array, Array3};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-mfa-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("mfa.safetensors");
/// // per-component psi (K, D): stored as (K, D), a shared one (1, D) as (D)
/// let mfa = MfaArrays {
///     weights: array![0.25, 0.75],
///     means: array![[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]],
///     loadings: Array3::from_shape_fn((2, 3, 2), |(k, d, r)| (k + d * r) as f64 * 0.1),
///     psi: array![[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]],
/// };
/// write_mfa(&path, &mfa, &Default::default())?;
/// let back = read_mfa(&path)?;
/// assert_eq!(back, MfaModel::F64(mfa));
/// let m: Mfa<f32> = back.to_dtype()?;
/// assert_eq!((m.n_components(), m.dim(), m.n_factors()), (2, 3, 2));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_mfa(path: impl AsRef<Path>) -> Result<MfaModel> {
    let path = path.as_ref();
    match read_model(path)? {
        Model::Mfa(m) => Ok(m),
        Model::Gmm(_) => Err(IoError::model(
            path,
            "is a GMM model (kind \"gmm\"); an MFA (kind \"mfa\") was expected",
        )),
    }
}
