//! Checkpoints of a running fit: a model file (see [`crate::model`]) whose
//! metadata also hold the state of the EM run. The model tensors must come
//! back bit for bit so that a resumed fit equals an uninterrupted one;
//! [`crate::GmmModel::read`](crate::ModelFile::read) renormalises GMM weights, so this module reads them
//! raw.

use crate::error::{IoError, Result};
use crate::model::{GmmModel, MfaArrays, MfaModel, Model, ModelFile};
use crate::npy::Element;
use ndarray::{Array1, Array2};
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::path::Path;

/// The raw parameters of a GMM file: weights (K), means (K, D), variances
/// (K, D), exactly as stored, and the file's metadata.
pub type GmmArrays<F> = (Array1<F>, Array2<F>, Array2<F>);

/// Reads a `kind = gmm` file of element type `F`, validated like
/// [`GmmModel::read`](crate::ModelFile::read), but returns the stored weights unchanged (not
/// renormalised). A file of the other dtype or kind is an error.
///
/// ```
/// use fisherkit::gmm::DiagGmm;
/// use fisherkit_io::checkpoint::read_gmm_exact;
/// use fisherkit_io::ModelFile;
/// use ndarray::array;
/// use std::collections::BTreeMap;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-gmm-exact-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("fit.ckpt");
/// let gmm = DiagGmm::new(array![0.5f32, 0.5], array![[0.0f32], [1.0]], array![[1.0f32], [1.0]])?;
/// gmm.write(&path, &BTreeMap::from([("n_iter".to_string(), "3".to_string())]))?;
/// let ((w, m, v), meta) = read_gmm_exact::<f32>(&path)?;
/// assert_eq!((w.view(), m.view(), v.view()), (gmm.weights(), gmm.means(), gmm.variances()));
/// assert_eq!(meta["n_iter"], "3");
/// // the element type must be the file's
/// let e = read_gmm_exact::<f64>(&path).unwrap_err().to_string();
/// assert!(e.contains("fit.ckpt") && e.contains("holds float32 tensors, expected float64"), "{e}");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_gmm_exact<F: Element>(
    path: impl AsRef<Path>,
) -> Result<(GmmArrays<F>, BTreeMap<String, String>)> {
    let path = path.as_ref();
    let (model, meta) = Model::read_with_metadata(path)?;
    let Model::Gmm(g) = model else {
        return Err(IoError::model(path, "is not a GMM (kind \"gmm\") file"));
    };
    if g.dtype() != F::DTYPE {
        return Err(IoError::model(
            path,
            format!("holds {} tensors, expected {}", g.dtype(), F::DTYPE),
        ));
    }
    let (_, means, variances) = match g {
        GmmModel::F32(g) => {
            let (w, m, v) = g.into_parts();
            let c = |a: f32| F::from_f64_lossy(a as f64);
            (w.mapv(c), m.mapv(c), v.mapv(c))
        }
        GmmModel::F64(g) => {
            let (w, m, v) = g.into_parts();
            (
                w.mapv(F::from_f64_lossy),
                m.mapv(F::from_f64_lossy),
                v.mapv(F::from_f64_lossy),
            )
        }
    };
    let buf = std::fs::read(path).map_err(|e| IoError::os(path, e))?;
    let st = SafeTensors::deserialize(&buf)
        .map_err(|e| IoError::model(path, format!("not a valid safetensors file: {e}")))?;
    let w = st
        .tensor("weights")
        .map_err(|e| IoError::model(path, format!("tensor `weights`: {e}")))?;
    let weights: Array1<F> = w
        .data()
        .chunks_exact(F::DTYPE.size())
        .map(F::from_le)
        .collect();
    Ok(((weights, means, variances), meta))
}

/// Reads a `kind = mfa` file of element type `F` (its arrays are not
/// altered by reading) with its metadata.
///
/// ```
/// use fisherkit_io::checkpoint::read_mfa_exact;
/// use fisherkit_io::{MfaArrays, ModelFile};
/// use ndarray::{array, Array3};
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-mfa-exact-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("fit.ckpt");
/// let mfa = MfaArrays {
///     weights: array![0.5, 0.5],
///     means: array![[0.0, 0.0], [1.0, 1.0]],
///     loadings: Array3::from_elem((2, 2, 1), 0.25),
///     psi: array![[1.0, 2.0]],
/// };
/// mfa.write(&path, &Default::default())?;
/// let (back, meta) = read_mfa_exact::<f64>(&path)?;
/// assert_eq!(back, mfa);
/// assert_eq!(meta["kind"], "mfa");
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_mfa_exact<F: Element>(
    path: impl AsRef<Path>,
) -> Result<(MfaArrays<F>, BTreeMap<String, String>)> {
    let path = path.as_ref();
    let (model, meta) = Model::read_with_metadata(path)?;
    let Model::Mfa(m) = model else {
        return Err(IoError::model(path, "is not an MFA (kind \"mfa\") file"));
    };
    if m.dtype() != F::DTYPE {
        return Err(IoError::model(
            path,
            format!("holds {} tensors, expected {}", m.dtype(), F::DTYPE),
        ));
    }
    let arrays = match m {
        MfaModel::F32(a) => a.cast::<F>(),
        MfaModel::F64(a) => a.cast::<F>(),
    };
    Ok((arrays, meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelFile;
    use fisherkit::gmm::DiagGmm;
    use ndarray::array;

    #[test]
    fn gmm_weights_come_back_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.safetensors");
        // weights summing to 1 + 3e-8 in f64: `read_gmm` renormalises them
        let w = array![0.3f32, 0.3, 0.4 + 3e-8];
        let g = DiagGmm::new(
            w,
            array![[0.0f32], [1.0], [2.0]],
            array![[1.0f32], [1.0], [1.0]],
        )
        .unwrap();
        let mut meta = BTreeMap::new();
        meta.insert("ckpt".to_string(), "yes".to_string());
        g.write(&p, &meta).unwrap();
        let ((w2, m2, v2), meta2) = read_gmm_exact::<f32>(&p).unwrap();
        assert_eq!(w2, g.weights());
        assert_eq!(m2, g.means());
        assert_eq!(v2, g.variances());
        assert_eq!(meta2["ckpt"], "yes");
        assert!(read_gmm_exact::<f64>(&p)
            .unwrap_err()
            .to_string()
            .contains("float32"));
        assert!(read_mfa_exact::<f32>(&p).is_err());
    }
}
