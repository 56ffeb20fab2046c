//! The properties the `npy`, `npz`, `model` and `classifier` fuzz targets check, shared with
//! the stable replay of their corpora
//! (`crates/fisherkit-io/tests/fuzz_corpus.rs`), so that both check the same.
//! Each function reads `data` as its target does and panics when a property
//! fails; it returns the reader's error, if any, for the caller to inspect.
#![allow(dead_code)]

use fisherkit_io::{ClassifierFile, Dtype, GmmModel, MfaModel, Model, ModelFile};
use std::path::Path;

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
    let (model, meta) = fisherkit_io::Model::read_bytes(data, name)?;
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

/// Scene-classifier reader: a file that loads validates; its SVM has one
/// row per class and the parts' total width; every array (PCA, background
/// models, whitening, SVM) is finite; and writing it back with
/// `write_classifier` and reading that again gives the same description and
/// bit-identical arrays, and writing the re-read file gives the same bytes.
pub fn classifier(data: &[u8], name: &str) -> fisherkit_io::Result<()> {
    let path = Path::new(name);
    let f = fisherkit_io::read_classifier_bytes(data, path)?;
    f.validate(path).expect("a loaded classifier validates");
    let width: usize = f.info.parts.iter().map(|p| p.width).sum();
    assert_eq!(f.svm.coef().dim(), (f.info.classes.len(), width));
    assert_eq!(f.svm.intercept().len(), f.info.classes.len());
    assert_eq!(f.pcas.len(), f.info.input.scale_names.len());
    assert_eq!(f.whitening.len(), f.info.parts.len());
    assert!(
        all_finite(&f),
        "a loaded classifier holds a non-finite value"
    );
    assert!(
        f.whitening.iter().flatten().flatten().all(|&v| v >= 0.0),
        "negative whitening value"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let p = dir.path().join("c.safetensors");
    fisherkit_io::write_classifier(&p, &f).expect("a loaded classifier can be written back");
    let g = fisherkit_io::read_classifier(&p).expect("a written classifier reads back");
    assert_eq!(g.info, f.info, "the description changed on a round trip");
    assert!(same_arrays(&f, &g), "an array changed on a round trip");
    let q = dir.path().join("d.safetensors");
    fisherkit_io::write_classifier(&q, &g).expect("the re-read classifier can be written");
    assert!(
        std::fs::read(&p).ok() == std::fs::read(&q).ok(),
        "writing is not deterministic"
    );
    Ok(())
}

fn all_finite(f: &ClassifierFile) -> bool {
    fn fin<'a>(mut v: impl Iterator<Item = &'a f32>) -> bool {
        v.all(|x| x.is_finite())
    }
    f.pcas.iter().all(|p| {
        fin(p.mean().iter())
            && fin(p.components().iter())
            && p.explained_variance().iter().all(|v| v.is_finite())
    }) && f
        .gmms
        .iter()
        .flatten()
        .all(|g| fin(g.weights().iter()) && fin(g.means().iter()) && fin(g.variances().iter()))
        && f.mfas.iter().flatten().all(|m| {
            fin(m.weights().iter())
                && fin(m.means().iter())
                && fin(m.loadings().iter())
                && fin(m.psi().iter())
        })
        && f.whitening.iter().flatten().all(|w| fin(w.iter()))
        && fin(f.svm.coef().iter())
        && fin(f.svm.intercept().iter())
}

/// Bit equality of every array of `a` and `b` (so that -0.0 and 0.0 differ).
fn same_arrays(a: &ClassifierFile, b: &ClassifierFile) -> bool {
    fn bits<'a>(v: impl Iterator<Item = &'a f32>) -> Vec<u32> {
        v.map(|x| x.to_bits()).collect()
    }
    fn bits64<'a>(v: impl Iterator<Item = &'a f64>) -> Vec<u64> {
        v.map(|x| x.to_bits()).collect()
    }
    let pca = a.pcas.len() == b.pcas.len()
        && a.pcas.iter().zip(&b.pcas).all(|(p, q)| {
            p.components().dim() == q.components().dim()
                && bits(p.components().iter()) == bits(q.components().iter())
                && bits(p.mean().iter()) == bits(q.mean().iter())
                && bits64(p.explained_variance().iter()) == bits64(q.explained_variance().iter())
        });
    let gmm = a.gmms.len() == b.gmms.len()
        && a.gmms.iter().zip(&b.gmms).all(|(p, q)| match (p, q) {
            (None, None) => true,
            (Some(p), Some(q)) => {
                p.means().dim() == q.means().dim()
                    && bits(p.weights().iter()) == bits(q.weights().iter())
                    && bits(p.means().iter()) == bits(q.means().iter())
                    && bits(p.variances().iter()) == bits(q.variances().iter())
            }
            _ => false,
        });
    let mfa = a.mfas.len() == b.mfas.len()
        && a.mfas.iter().zip(&b.mfas).all(|(p, q)| match (p, q) {
            (None, None) => true,
            (Some(p), Some(q)) => {
                p.loadings().dim() == q.loadings().dim()
                    && p.psi().dim() == q.psi().dim()
                    && bits(p.weights().iter()) == bits(q.weights().iter())
                    && bits(p.means().iter()) == bits(q.means().iter())
                    && bits(p.loadings().iter()) == bits(q.loadings().iter())
                    && bits(p.psi().iter()) == bits(q.psi().iter())
            }
            _ => false,
        });
    let white = a.whitening.len() == b.whitening.len()
        && a.whitening
            .iter()
            .zip(&b.whitening)
            .all(|(p, q)| match (p, q) {
                (None, None) => true,
                (Some(p), Some(q)) => bits(p.iter()) == bits(q.iter()),
                _ => false,
            });
    let svm = a.svm.coef().dim() == b.svm.coef().dim()
        && bits(a.svm.coef().iter()) == bits(b.svm.coef().iter())
        && bits(a.svm.intercept().iter()) == bits(b.svm.intercept().iter());
    pca && gmm && mfa && white && svm
}
