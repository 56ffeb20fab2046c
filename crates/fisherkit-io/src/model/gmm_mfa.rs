//! The `gmm` and `mfa` kinds: their tensors, read and written, and the
//! [`ModelFile`] implementations of the types that hold them.

use super::framing::{
    check_dtype_metadata, dims, get_tensor, open_model, to_le_bytes, unknown_kind,
    write_safetensors, wrong_kind, RawTensor,
};
use super::sealed::Parse;
use super::whitening::read_whitening;
use super::{
    exact, GmmModel, Metadata, MfaArrays, MfaModel, MfaWhitening, Model, ModelFile, Whitened,
    WHITENING_PARTS_KEY, WHITENING_TENSOR,
};
use crate::error::{IoError, Result};
use crate::npy::{py_shape, Dtype, Element};
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use ndarray::{Array1, Array2, Array3};
use std::path::Path;

// ---------------------------------------------------------------------------
// Writing

/// Writes MFA parameters as a `kind = mfa` safetensors file, atomically,
/// after [`MfaArrays::validate`] (so every file written can be read back).
/// A shared `psi` (1, D) is stored as a (D) tensor, a per-component one as
/// (K, D). With a whitening block: the tensor `fisher_information` in the
/// model's dtype `F` and the metadata `whitening_parts`, after
/// [`MfaWhitening::validate`] against the model's (K, D, R) — also after
/// rounding to `F`, so an `f32` file never holds an infinity. Without one, a
/// `whitening_parts` key in `extra` is dropped (the file would otherwise be
/// refused on load).
fn write_mfa<F: Element>(
    path: &Path,
    mfa: &MfaArrays<F>,
    whitening: Option<&MfaWhitening>,
    extra: &Metadata,
) -> Result<()> {
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

// ---------------------------------------------------------------------------
// Reading

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

fn parse_model(buf: &[u8], path: &Path) -> Result<(Whitened<Model>, Metadata)> {
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
    Ok((Whitened { model, whitening }, meta))
}

// ---------------------------------------------------------------------------
// The types

/// A GMM or an MFA file, in its own element type; an MFA's whitening block
/// is checked and dropped (see [`Whitened`]). Any other kind is refused with
/// a message naming it.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::{Dtype, GmmModel, Model, ModelFile};
/// use ndarray::array;
/// use std::collections::BTreeMap;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("gmm.safetensors");
/// let gmm = DiagGmm::new(array![0.25, 0.75], array![[0.0, 1.0], [2.0, 3.0]], array![[1.0, 1.0], [0.5, 2.0]])?;
/// let extra = BTreeMap::from([("seed".to_string(), "7".to_string())]);
/// gmm.write(&path, &extra)?;
/// let (model, meta) = Model::read_with_metadata(&path)?;
/// assert_eq!((model.kind(), model.dim(), model.dtype()), ("gmm", 2, Dtype::F64));
/// assert_eq!((meta["kind"].as_str(), meta["format_version"].as_str()), ("gmm", "1"));
/// assert_eq!((meta["dtype"].as_str(), meta["seed"].as_str()), ("float64", "7"));
/// let Model::Gmm(g) = model else { panic!("a GMM file") };
/// assert_eq!(g, GmmModel::F64(gmm.clone()));
/// // the model in the other element type, validated again
/// assert_eq!(g.to_dtype::<f32>()?.means(), gmm.means().mapv(|v| v as f32));
/// // the bytes of a file, under a name for the errors
/// let bytes = std::fs::read(&path)?;
/// assert_eq!(Model::read_bytes(&bytes, "received.safetensors")?.0.kind(), "gmm");
/// let e = Model::read_bytes(&bytes[..bytes.len() - 8], "received.safetensors").unwrap_err();
/// assert!(e.to_string().starts_with("received.safetensors: "), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ModelFile for Model {
    /// Writes the model in its own element type (an MFA without whitening).
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        match self {
            Model::Gmm(g) => g.write(path, extra),
            Model::Mfa(m) => m.write(path, extra),
        }
    }
}

impl Parse for Model {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        parse_model(bytes, path).map(|(w, meta)| (w.model, meta))
    }
}

/// An MFA file with its whitening block (`None` for a GMM file). A GMM with
/// a block is refused by the writer.
impl ModelFile for Whitened<Model> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        match (&self.model, &self.whitening) {
            (Model::Mfa(m), w) => write_mfa_model(path.as_ref(), m, w.as_ref(), extra),
            (Model::Gmm(g), None) => g.write(path, extra),
            (Model::Gmm(_), Some(_)) => Err(IoError::model(
                path.as_ref(),
                "refusing to write: a GMM model has no whitening block",
            )),
        }
    }
}

impl Parse for Whitened<Model> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        parse_model(bytes, path)
    }
}

/// A `kind = gmm` file in its own element type; an MFA file is an error.
impl ModelFile for GmmModel {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        match self {
            GmmModel::F32(g) => g.write(path, extra),
            GmmModel::F64(g) => g.write(path, extra),
        }
    }
}

impl Parse for GmmModel {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        match Model::parse(bytes, path)? {
            (Model::Gmm(g), meta) => Ok((g, meta)),
            (Model::Mfa(_), _) => Err(wrong_kind(path, "mfa", "gmm")),
        }
    }
}

/// A diagonal GMM as a `kind = gmm` file of its element type `F` (read from
/// a file of that element type only).
impl<F: Element> ModelFile for DiagGmm<F> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        let (k, d) = (self.n_components(), self.dim());
        write_safetensors::<F>(
            path.as_ref(),
            "gmm",
            vec![
                ("weights", vec![k], to_le_bytes(self.weights().iter())),
                ("means", vec![k, d], to_le_bytes(self.means().iter())),
                (
                    "variances",
                    vec![k, d],
                    to_le_bytes(self.variances().iter()),
                ),
            ],
            extra,
        )
    }
}

impl<F: Element> Parse for DiagGmm<F> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        let (g, meta) = GmmModel::parse(bytes, path)?;
        let m = match g {
            GmmModel::F32(g) => exact(path, Dtype::F32, F::DTYPE, g),
            GmmModel::F64(g) => exact(path, Dtype::F64, F::DTYPE, g),
        };
        Ok((m?, meta))
    }
}

/// A `kind = mfa` file in its own element type; a GMM file is an error. The
/// parameters are also checked by [`Mfa::new`] (for example $0 < R < D$).
///
/// ```
/// use fisherkit::mfa::Mfa;
/// use fisherkit_io::{MfaArrays, MfaModel, ModelFile};
/// use ndarray::{array, Array3};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("mfa.safetensors");
/// // per-component psi (K, D): stored as (K, D), a shared one (1, D) as (D)
/// let mfa = MfaArrays {
///     weights: array![0.25, 0.75],
///     means: array![[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]],
///     loadings: Array3::from_shape_fn((2, 3, 2), |(k, d, r)| (k + d * r) as f64 * 0.1),
///     psi: array![[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]],
/// };
/// mfa.write(&path, &Default::default())?;
/// let back = MfaModel::read(&path)?;
/// assert_eq!(back, MfaModel::F64(mfa));
/// let m: Mfa<f32> = back.to_dtype()?;
/// assert_eq!((m.n_components(), m.dim(), m.n_factors()), (2, 3, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ModelFile for MfaModel {
    /// Writes the parameters in their own element type, without whitening.
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        write_mfa_model(path.as_ref(), self, None, extra)
    }
}

impl Parse for MfaModel {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        Whitened::<MfaModel>::parse(bytes, path).map(|(w, meta)| (w.model, meta))
    }
}

/// MFA parameters as a `kind = mfa` file of their element type `F`, after
/// [`MfaArrays::validate`] (so every file written can be read back). A
/// shared `psi` (1, D) is stored as a (D) tensor, a per-component one as
/// (K, D). No whitening block (a `whitening_parts` key in `extra` is
/// dropped): see [`Whitened`].
impl<F: Element> ModelFile for MfaArrays<F> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        write_mfa(path.as_ref(), self, None, extra)
    }
}

impl<F: Element> Parse for MfaArrays<F> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        Whitened::<MfaArrays<F>>::parse(bytes, path).map(|(w, meta)| (w.model, meta))
    }
}

/// A fitted library MFA, written as its [`MfaArrays`].
impl<F: Element> ModelFile for Mfa<F> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        write_mfa(path.as_ref(), &MfaArrays::from_mfa(self), None, extra)
    }
}

impl<F: Element> Parse for Mfa<F> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        let (m, meta) = MfaArrays::<F>::parse(bytes, path)?;
        let mfa = m.to_mfa().map_err(|source| IoError::Mfa {
            path: path.to_path_buf(),
            source,
        })?;
        Ok((mfa, meta))
    }
}

/// [`write_mfa`] in the model's own element type.
fn write_mfa_model(
    path: &Path,
    model: &MfaModel,
    whitening: Option<&MfaWhitening>,
    extra: &Metadata,
) -> Result<()> {
    match model {
        MfaModel::F32(m) => write_mfa(path, m, whitening, extra),
        MfaModel::F64(m) => write_mfa(path, m, whitening, extra),
    }
}

/// A `kind = mfa` file with its whitening block, in its own element type; a
/// GMM file is an error.
///
/// ```
/// use fisherkit::encode::MfaPart;
/// use fisherkit_io::{MfaArrays, MfaModel, MfaWhitening, ModelFile, Whitened};
/// use ndarray::{array, Array1, Array3};
///
/// let dir = tempfile::tempdir()?;
/// let mfa = MfaArrays {
///     weights: array![1.0f32],
///     means: array![[0.0f32, 0.0, 0.0]],
///     loadings: Array3::from_elem((1, 3, 1), 0.5f32),
///     psi: array![[1.0f32, 1.0, 1.0]],
/// };
/// // without a block
/// mfa.write(dir.path().join("plain.safetensors"), &Default::default())?;
/// let back = Whitened::<MfaModel>::read(dir.path().join("plain.safetensors"))?;
/// assert_eq!(back, Whitened { model: MfaModel::F32(mfa.clone()), whitening: None });
/// // with the `loading` part: K·D·R = 3 values
/// let block = MfaWhitening::new(&[MfaPart::Loading], &Array1::from(vec![0.5f32, 1.0, 2.0]));
/// let path = dir.path().join("w.safetensors");
/// Whitened { model: mfa, whitening: Some(block.clone()) }.write(&path, &Default::default())?;
/// assert_eq!(Whitened::<MfaModel>::read(&path)?.whitening, Some(block));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ModelFile for Whitened<MfaModel> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        write_mfa_model(path.as_ref(), &self.model, self.whitening.as_ref(), extra)
    }
}

impl Parse for Whitened<MfaModel> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        match parse_model(bytes, path)? {
            (
                Whitened {
                    model: Model::Mfa(model),
                    whitening,
                },
                meta,
            ) => Ok((Whitened { model, whitening }, meta)),
            (_, _) => Err(wrong_kind(path, "gmm", "mfa")),
        }
    }
}

/// MFA parameters of element type `F` with a whitening block (read from a
/// file of that element type only).
impl<F: Element> ModelFile for Whitened<MfaArrays<F>> {
    fn write(&self, path: impl AsRef<Path>, extra: &Metadata) -> Result<()> {
        write_mfa(path.as_ref(), &self.model, self.whitening.as_ref(), extra)
    }
}

impl<F: Element> Parse for Whitened<MfaArrays<F>> {
    fn parse(bytes: &[u8], path: &Path) -> Result<(Self, Metadata)> {
        let (w, meta) = Whitened::<MfaModel>::parse(bytes, path)?;
        let model = match w.model {
            MfaModel::F32(m) => exact(path, Dtype::F32, F::DTYPE, m),
            MfaModel::F64(m) => exact(path, Dtype::F64, F::DTYPE, m),
        }?;
        let whitening = w.whitening;
        Ok((Whitened { model, whitening }, meta))
    }
}
