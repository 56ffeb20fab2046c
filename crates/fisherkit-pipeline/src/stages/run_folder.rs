//! The run folder ([`RunFolder`]) and the keys of what it holds ([`key`]).

use crate::descriptors::fnv1a64;
use crate::store::StoreFormat;
use std::path::PathBuf;

/// The run folder: models, samples, stores and the image journal of one data
/// set and one set of CNN/PCA/sample settings (docs/pipeline.md §3). Every
/// path in it is named here, and only here:
///
/// | path | what |
/// |---|---|
/// | `images.tsv` | the image journal (each image's descriptor counts, or why it was skipped) |
/// | `pca-<scale>.safetensors` | each scale's PCA |
/// | `<model stem>.safetensors` | each background model, its EM record as metadata |
/// | `<model stem>.store/`, `.q8.store/`, `global.store/` | the encodings ([`crate::store`]) |
/// | `sample-ms<rows>/part-<chunk>.safetensors` | the sample pass's finished chunks |
/// | `cnn-sample/` | the sample images' CNN output, kept for the encode pass |
/// | `kernels/` | term kernels of the kernel path ([`crate::kernel`]) |
/// | `primal/`, `kernel-rows/` | finished report rows of either classifier path ([`crate::finished`]) |
pub(crate) struct RunFolder {
    pub dir: PathBuf,
    /// Removed when the run ends (no cache folder was given).
    pub temporary: bool,
}

impl RunFolder {
    /// The image journal.
    pub(crate) fn image_log(&self) -> PathBuf {
        self.dir.join("images.tsv")
    }

    /// The PCA of the scale named `scale`.
    pub(crate) fn pca(&self, scale: &str) -> PathBuf {
        self.dir.join(format!("pca-{scale}.safetensors"))
    }

    /// The background model whose file stem is `stem` ([`super::ModelSpec::stem`]).
    pub(crate) fn model(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.safetensors"))
    }

    /// The store of the encodings of `stem` (a model stem, or `global`) in `format`.
    pub(crate) fn store(&self, stem: &str, format: StoreFormat) -> PathBuf {
        self.dir.join(match format {
            StoreFormat::F32 => format!("{stem}.store"),
            StoreFormat::Q8 => format!("{stem}.q8.store"),
        })
    }

    /// Where the sample pass keeps its finished chunks: keyed by the model
    /// sample's size, the one sample setting not already in the run
    /// folder's key (docs/pipeline.md §2).
    pub(crate) fn sample_parts(&self, model_sample: usize) -> PathBuf {
        self.dir.join(format!("sample-ms{model_sample}"))
    }

    /// The finished chunk `chunk` of the sample pass (see [`Self::sample_parts`]).
    pub(crate) fn sample_part(&self, model_sample: usize, chunk: usize) -> PathBuf {
        self.sample_parts(model_sample)
            .join(format!("part-{chunk:05}.safetensors"))
    }

    /// Where the sample pass keeps its CNN output for the encode pass.
    pub(crate) fn kept_cnn(&self) -> PathBuf {
        self.dir.join("cnn-sample")
    }

    /// Where the kernel path keeps its term kernels.
    pub(crate) fn kernels(&self) -> PathBuf {
        self.dir.join("kernels")
    }

    /// Where the primal path (`primal`) or the kernel path keeps its
    /// finished report rows (a row of either path is its own result: the
    /// paths solve the same problem to a tolerance, not to the same bits).
    pub(crate) fn finished_rows(&self, primal: bool) -> PathBuf {
        self.dir.join(if primal { "primal" } else { "kernel-rows" })
    }
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A 64-bit key of `parts`, in hex.
pub(crate) fn key(parts: &[String]) -> String {
    format!("{:016x}", fnv1a64(parts.join("\u{1f}").as_bytes(), 0))
}
