//! The safetensors framing every model file shares: the deterministic
//! writer, the checked reader of a file's bytes, tensor look-up and the
//! `kind` / `format_version` / `dtype` metadata checks.

use super::FORMAT_VERSION;
use crate::atomic::write_atomically;
use crate::error::{IoError, Result};
use crate::npy::{py_shape, Dtype, Element, NPY_MAGIC, ZIP_MAGIC};
use fisherkit::Float;
use ndarray::{ArrayD, IxDyn};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

/// Largest safetensors header accepted (the safetensors crate's own limit).
const MAX_HEADER: u64 = 100_000_000;
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
pub(crate) fn write_safetensors<F: Element>(
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

/// The `kind` values of the model files fisherkit reads: [`crate::Model`]
/// takes `gmm` and `mfa`, [`crate::PcaModel`] `pca`, [`crate::LinearSvmModel`]
/// `linear-svm`, [`crate::ClassifierFile`] `scene-classifier`.
pub const MODEL_KINDS: [&str; 5] = ["gmm", "mfa", "pca", "linear-svm", "scene-classifier"];

/// The kinds of model file fisherkit reads, as the error messages list them.
pub(crate) const KINDS: &str = "\"gmm\", \"mfa\", \"pca\", \"linear-svm\" or \"scene-classifier\"";

/// The error for a `kind` that is none of [`MODEL_KINDS`].
pub(crate) fn unknown_kind(path: &Path, kind: &str) -> IoError {
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
/// use fisherkit_io::{read_model_kind, ModelFile};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-kind-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![1.0f32], array![[0.0f32, 1.0]], array![[1.0f32, 2.0]])?;
/// gmm.write(&path, &Default::default())?;
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
