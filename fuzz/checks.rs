//! The properties the `npy`, `npz` and `model` fuzz targets check, shared with
//! the stable replay of their corpora
//! (`crates/fisherkit-io/tests/fuzz_corpus.rs`), so that both check the same.
//! Each function reads `data` as its target does and panics when a property
//! fails; it returns the reader's error, if any, for the caller to inspect.
#![allow(dead_code)]

use fisherkit_io::{Dtype, GmmModel, MfaModel, Model};

/// `.npy` reader: what was read is backed by the input's bytes (a header
/// claiming 10^12 elements is refused before anything is allocated).
pub fn npy(data: &[u8], name: &str) -> fisherkit_io::Result<()> {
    let m = fisherkit_io::read_npy_bytes(data, name)?;
    let (n, d) = m.dim();
    let size = match m.dtype() {
        Dtype::F32 => 4,
        Dtype::F64 => 8,
    };
    assert!(
        n.checked_mul(d)
            .and_then(|e| e.checked_mul(size))
            .is_some_and(|b| b <= data.len()),
        "{n}×{d} {size}-byte values read from {} bytes",
        data.len()
    );
    Ok(())
}

/// `.npz` reader: at least one bag, one name per bag, every bag of the first
/// bag's width.
pub fn npz(data: &[u8], name: &str) -> fisherkit_io::Result<()> {
    let b = fisherkit_io::read_npz_bytes(data, name)?;
    assert!(!b.is_empty());
    assert_eq!(b.names().len(), b.len());
    let _ = b.dim();
    Ok(())
}

/// Model loader: a model that loads has the `kind` of its metadata and valid
/// parameters (GMM weights summing to 1, an MFA that validates); it widens
/// to `f64` without error, and narrowing to `f32` either fails cleanly or
/// gives a model as valid.
pub fn model(data: &[u8], name: &str) -> fisherkit_io::Result<()> {
    let (model, meta) = fisherkit_io::read_model_bytes(data, name)?;
    assert_eq!(meta.get("kind").map(String::as_str), Some(model.kind()));
    match &model {
        Model::Gmm(g) => {
            let w: f64 = match g {
                GmmModel::F32(g) => g.weights().iter().map(|&v| v as f64).sum(),
                GmmModel::F64(g) => g.weights().sum(),
            };
            assert!((w - 1.0).abs() < 1e-3, "weights sum to {w}");
            let wide = g.to_dtype::<f64>().expect("a loaded GMM converts to f64");
            assert!((wide.weights().sum() - 1.0).abs() < 1e-3);
            if let Ok(narrow) = g.to_dtype::<f32>() {
                assert!(narrow.variances().iter().all(|&v| v > 0.0 && v.is_finite()));
            }
        }
        Model::Mfa(m) => {
            match m {
                MfaModel::F32(a) => a.validate().expect("a loaded MFA validates"),
                MfaModel::F64(a) => a.validate().expect("a loaded MFA validates"),
            }
            let wide = m.to_dtype::<f64>().expect("a loaded MFA converts to f64");
            assert!(wide.psi().iter().all(|&v| v > 0.0 && v.is_finite()));
            if let Ok(narrow) = m.to_dtype::<f32>() {
                assert!(narrow.psi().iter().all(|&v| v > 0.0 && v.is_finite()));
            }
        }
    }
    Ok(())
}
