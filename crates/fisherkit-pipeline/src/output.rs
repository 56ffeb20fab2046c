//! What `fisherkit run --output-dir DIR` writes: the trained pieces of the
//! pipeline as model files a user can reload (`fisherkit encode`, the Python
//! module's `load`), and optionally the encodings.
//!
//! | file | content |
//! |---|---|
//! | `pca-<scale>.safetensors` | kind `pca`: the per-scale PCA |
//! | `gmm-K<K>-<scale>.safetensors` | kind `gmm`: a background GMM |
//! | `mfa-K<K>-R<R>-<scale>.safetensors` | kind `mfa`: a background MFA |
//! | `mfa-K<K>-R<R>-<scale>-whitened-<parts>.safetensors` | the same MFA with the whitening (diagonal Fisher information) estimated for MFA-FS parts `<parts>` (`mean`, `loading`, `mean+loading`) |
//! | `svm-<encoder>.safetensors` | kind `linear-svm`: the one-vs-rest SVM, classes = folder names |
//! | `<encoder>.train.npy`, `<encoder>.test.npy` | (images, dim) f32 encodings (with `--save-encodings`) |
//! | `images.train.txt`, `images.test.txt` | one line per encoding row: `<image name>\t<class>` |
//!
//! `<scale>` is the patch size in pixels (`file` for descriptor files);
//! `<encoder>` is the encoder specification with every character outside
//! `[A-Za-z0-9.-]` replaced by `_` (`gmm-fv:mean+var` → `gmm-fv_mean_var`),
//! plus `-whitened` for a whitened MFA-FS. Every file is written atomically
//! (temporary file, then rename).

use crate::PipelineError;
use fisherkit::encode::MfaPart;
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::pca::Pca;
use fisherkit::svm::LinearSvc;
use fisherkit_io::{ClassLabels, LabelledSvm, MfaArrays, MfaWhitening, ModelFile};
use ndarray::{Array1, Array2};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The output folder of a run (created on [`OutputDir::create`]).
#[derive(Debug, Clone)]
pub struct OutputDir {
    dir: PathBuf,
    /// Whether the encodings are written too.
    pub encodings: bool,
}

/// Writes the report `r` as pretty JSON to `report` and the sweep's SVG
/// (the paper's Figure 1) to `plot` when the run has a sweep; each file
/// atomically.
///
/// # Errors
/// A file that cannot be written (the error names it).
pub(crate) fn write_report_files(
    r: &crate::report::Report,
    report: Option<&Path>,
    plot: Option<&Path>,
) -> Result<(), PipelineError> {
    if let Some(p) = report {
        let json = serde_json::to_vec_pretty(r).map_err(|e| PipelineError::Io {
            path: p.display().to_string(),
            message: format!("the report cannot be written as JSON: {e}"),
        })?;
        fisherkit_io::write_file(p, &json)?;
    }
    if let (Some(p), false) = (plot, r.sweep.is_empty()) {
        let svg = crate::plot::sweep_svg(&r.sweep, "Accuracy against encoding dimension");
        fisherkit_io::write_file(p, svg.as_bytes())?;
    }
    Ok(())
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// `spec` as a file-name part: characters outside `[A-Za-z0-9.-]` become `_`.
pub fn file_stem(spec: &str) -> String {
    spec.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl OutputDir {
    /// Creates `dir` (and its parents) if needed; an error names the folder.
    pub fn create(dir: &Path, encodings: bool) -> Result<Self, PipelineError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io_err(dir, format!("cannot create the output folder: {e}")))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            encodings,
        })
    }

    fn meta(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// Writes the PCA of scale `scale`.
    pub fn pca(&self, scale: &str, pca: &Pca<f32>) -> Result<(), PipelineError> {
        let p = self.dir.join(format!("pca-{scale}.safetensors"));
        pca.write(&p, &Self::meta(&[("scale", scale.into())]))
            .map_err(|e| io_err(&p, e))
    }

    /// Writes a background GMM of scale `scale`.
    pub fn gmm(&self, scale: &str, gmm: &DiagGmm<f32>) -> Result<(), PipelineError> {
        let p = self
            .dir
            .join(format!("gmm-K{}-{scale}.safetensors", gmm.n_components()));
        gmm.write(&p, &Self::meta(&[("scale", scale.into())]))
            .map_err(|e| io_err(&p, e))
    }

    /// Writes a background MFA of scale `scale`.
    pub fn mfa(&self, scale: &str, mfa: &Mfa<f32>) -> Result<(), PipelineError> {
        let p = self.dir.join(format!(
            "mfa-K{}-R{}-{scale}.safetensors",
            mfa.n_components(),
            mfa.n_factors()
        ));
        mfa.write(&p, &Self::meta(&[("scale", scale.into())]))
            .map_err(|e| io_err(&p, e))
    }

    /// Writes a background MFA of scale `scale` with the whitening `fim`
    /// (the diagonal Fisher-information estimate) of the MFA-FS `parts`, so
    /// that `fisherkit encode` applies it.
    pub fn mfa_whitened(
        &self,
        scale: &str,
        mfa: &Mfa<f32>,
        parts: &[MfaPart],
        fim: &Array1<f32>,
    ) -> Result<(), PipelineError> {
        let w = MfaWhitening::new(parts, fim);
        let p = self.dir.join(format!(
            "mfa-K{}-R{}-{scale}-whitened-{}.safetensors",
            mfa.n_components(),
            mfa.n_factors(),
            w.parts_string().replace(',', "+")
        ));
        fisherkit_io::Whitened {
            model: MfaArrays::from_mfa(mfa),
            whitening: Some(w.clone()),
        }
        .write(&p, &Self::meta(&[("scale", scale.into())]))
        .map_err(|e| io_err(&p, e))
    }

    /// Writes the SVM trained on encoder `name` (the report's encoder name),
    /// with the class names and the cross-validated cost `c`; hands the SVM
    /// back (at SUN397's size its weights are gigabytes, not copied).
    pub fn svm(
        &self,
        name: &str,
        svm: LinearSvc<f32>,
        classes: &[String],
        c: f64,
    ) -> Result<LinearSvc<f32>, PipelineError> {
        let p = self
            .dir
            .join(format!("svm-{}.safetensors", file_stem(name)));
        let model = LabelledSvm {
            svm,
            classes: ClassLabels::Str(classes.to_vec()),
            c: Some(c),
        };
        model
            .write(&p, &Self::meta(&[("encoder", name.into())]))
            .map_err(|e| io_err(&p, e))?;
        Ok(model.svm)
    }

    /// Writes the train and test encodings of encoder `name` (if asked for).
    pub fn encodings(
        &self,
        name: &str,
        train: &Array2<f32>,
        test: &Array2<f32>,
    ) -> Result<(), PipelineError> {
        if !self.encodings {
            return Ok(());
        }
        for (split, x) in [("train", train), ("test", test)] {
            let p = self.dir.join(format!("{}.{split}.npy", file_stem(name)));
            fisherkit_io::write_npy(&p, x.view()).map_err(|e| io_err(&p, e))?;
        }
        Ok(())
    }

    /// A block writer for `<encoder>.<split>.npy` (rows × dim f32), filled
    /// column block by column block and renamed into place when finished.
    pub fn encoding_writer(
        &self,
        name: &str,
        split: &str,
        rows: usize,
        dim: usize,
    ) -> Result<fisherkit_io::NpyBlockWriter, PipelineError> {
        let p = self.dir.join(format!("{}.{split}.npy", file_stem(name)));
        fisherkit_io::NpyBlockWriter::create(&p, rows, dim).map_err(|e| io_err(&p, e))
    }

    /// Writes `images.<split>.txt`: one `<name>\t<class>` line per encoding row.
    pub fn image_list(
        &self,
        split: &str,
        names: &[String],
        labels: &[usize],
        classes: &[String],
    ) -> Result<(), PipelineError> {
        if !self.encodings {
            return Ok(());
        }
        let p = self.dir.join(format!("images.{split}.txt"));
        let text: String = names
            .iter()
            .zip(labels)
            .map(|(n, &y)| format!("{n}\t{}\n", classes[y]))
            .collect();
        fisherkit_io::write_file(&p, text.as_bytes()).map_err(|e| io_err(&p, e))
    }
}
