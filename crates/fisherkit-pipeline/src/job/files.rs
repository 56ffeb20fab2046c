//! What a [`Job`](super::Job) reads and writes before its stages: the output
//! and run folders, the model plan, the PCA and model files of the run folder.

use crate::config::RunConfig;
use crate::inputs::Inputs;
use crate::output::OutputDir;
use crate::spec::Term;
use crate::stages::{key, EmRecord, FitSettings, Fitted, ModelKind, ModelSpec, RunFolder};
use crate::PipelineError;
use fisherkit::pca::Pca;
use std::collections::BTreeMap;
use std::path::Path;

/// Creates the output folder of `cfg`, if any, and checks that the output
/// files can be written, before any work is done.
pub(super) fn output_dir(cfg: &RunConfig) -> Result<Option<OutputDir>, PipelineError> {
    let out = cfg
        .output_dir
        .as_deref()
        .map(|d| OutputDir::create(d, cfg.save_encodings))
        .transpose()?;
    for path in [&cfg.report, &cfg.plot, &cfg.save_model]
        .into_iter()
        .flatten()
    {
        fisherkit_io::check_writable(path)?;
    }
    Ok(out)
}

/// The run folder of `cfg` and `inputs`: under the cache folder, keyed by the
/// data and every setting the PCA and the sample depend on; a temporary
/// folder (removed at the end) without a cache.
pub(super) fn run_folder(cfg: &RunConfig, inputs: &Inputs<'_>) -> Result<RunFolder, PipelineError> {
    let d = &cfg.descriptors;
    let mut parts = inputs.data_key.clone();
    parts.extend([
        format!("fisherkit-run-v1 images={}", inputs.images),
        format!(
            "cnn={} scales={:?} mode={:?} stride={} max={:?}",
            // Descriptor-file runs use no CNN; they keep the historical key (valid caches).
            inputs.source.cnn_name().unwrap_or("squeezenet1_1"),
            d.scales,
            d.mode,
            d.stride,
            d.max_image_side
        ),
        format!(
            "pca={} sample_images={} pca_sample={} seed={}",
            cfg.pca_dim, cfg.sample_images, cfg.pca_sample, cfg.seed
        ),
    ]);
    let (dir, temporary) = match &cfg.cache_dir {
        Some(c) => (c.join("runs").join(key(&parts)), false),
        None => {
            let t = std::env::temp_dir().join(format!(
                "fisherkit-run-{}-{}",
                std::process::id(),
                key(&parts)
            ));
            (t, true)
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| PipelineError::Io {
        path: dir.display().to_string(),
        message: format!("cannot create the run folder: {e}"),
    })?;
    Ok(RunFolder { dir, temporary })
}

/// The explicit list of background models the encoders and the sweep need.
pub(super) fn model_plan(cfg: &RunConfig, n_scales: usize) -> Vec<ModelSpec> {
    let mut kinds = std::collections::BTreeSet::new();
    for spec in &cfg.encoders {
        for t in &spec.terms {
            match t {
                Term::GmmFv(_) => kinds.insert(ModelKind::Gmm {
                    k: cfg.gmm_components,
                }),
                Term::MfaFs(_) => kinds.insert(ModelKind::Mfa {
                    k: cfg.mfa_components,
                    r: cfg.mfa_factors,
                }),
                Term::CnnGlobal => false,
            };
        }
    }
    for &k in &cfg.sweep_gmm_components {
        kinds.insert(ModelKind::Gmm { k });
    }
    for &r in &cfg.sweep_mfa_factors {
        kinds.insert(ModelKind::Mfa {
            k: cfg.mfa_components,
            r,
        });
    }
    (0..n_scales)
        .flat_map(|scale| kinds.iter().map(move |&kind| ModelSpec { scale, kind }))
        .collect()
}

/// The settings every model of the run shares.
pub(super) fn fit_settings(cfg: &RunConfig) -> FitSettings {
    FitSettings {
        gmm_max_iter: cfg.gmm_max_iter,
        mfa_max_iter: cfg.mfa_max_iter,
        model_sample: cfg.model_sample,
        seed: cfg.seed,
    }
}

pub(super) fn read_pca_file(p: &Path) -> Option<Pca<f32>> {
    <fisherkit_io::PcaModel as fisherkit_io::ModelFile>::read(p)
        .ok()?
        .to_dtype::<f32>()
        .ok()
}

/// A model of the run folder, and how it was fitted if its file says so
/// (the metadata keys of `fisherkit gmm fit`: `n_iter`, `max_iter`,
/// `converged`, `mean_log_likelihood`; and `log_likelihood_history`, every
/// iteration's, comma-separated, absent from older run folders).
pub(super) fn read_fitted(p: &Path, kind: ModelKind) -> Option<(Fitted, Option<EmRecord>)> {
    let (model, meta) =
        <fisherkit_io::Model as fisherkit_io::ModelFile>::read_with_metadata(p).ok()?;
    let fitted = match (kind, model) {
        (ModelKind::Gmm { .. }, fisherkit_io::Model::Gmm(g)) => {
            Fitted::Gmm(Box::new(g.to_dtype::<f32>().ok()?))
        }
        (ModelKind::Mfa { .. }, fisherkit_io::Model::Mfa(m)) => {
            Fitted::Mfa(Box::new(m.to_dtype::<f32>().ok()?))
        }
        _ => return None,
    };
    let record = (|| {
        Some(EmRecord {
            iterations: meta.get("n_iter")?.parse().ok()?,
            max_iter: meta.get("max_iter")?.parse().ok()?,
            converged: meta.get("converged")?.parse().ok()?,
            log_likelihood: meta.get("mean_log_likelihood")?.parse().ok()?,
            history: meta
                .get(HISTORY_KEY)
                .map(|h| h.split(',').map(str::parse).collect::<Result<_, _>>())
                .transpose()
                .ok()?
                .unwrap_or_default(),
        })
    })();
    Some((fitted, record))
}

/// The model-file metadata key of a fit's log-likelihood history.
const HISTORY_KEY: &str = "log_likelihood_history";

/// Writes a fitted model with its [`EmRecord`] and the run's stopping rule
/// as metadata (the history with `{:e}`: it reads back to the same bits).
pub(super) fn write_fitted(p: &Path, f: &Fitted, r: &EmRecord) -> Result<(), PipelineError> {
    let tol = crate::defaults::EM_TOL;
    let meta = BTreeMap::from([
        ("n_iter".to_string(), r.iterations.to_string()),
        ("max_iter".to_string(), r.max_iter.to_string()),
        ("converged".to_string(), r.converged.to_string()),
        (
            "mean_log_likelihood".to_string(),
            r.log_likelihood.to_string(),
        ),
        ("tol".to_string(), tol.value().to_string()),
        ("tol_mode".to_string(), tol.mode().to_string()),
        (
            HISTORY_KEY.to_string(),
            r.history
                .iter()
                .map(|v| format!("{v:e}"))
                .collect::<Vec<_>>()
                .join(","),
        ),
    ]);
    match f {
        Fitted::Gmm(g) => fisherkit_io::ModelFile::write(&**g, p, &meta),
        Fitted::Mfa(m) => fisherkit_io::ModelFile::write(&**m, p, &meta),
    }
    .map_err(|e| PipelineError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    })
}
