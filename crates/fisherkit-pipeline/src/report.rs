//! The JSON report of a pipeline run (`fisherkit run --report`).

use serde::{Deserialize, Serialize};

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One row per encoder specification (and whitening variant).
    pub results: Vec<ResultRow>,
    /// Accuracy against encoding dimension (the paper's Figure 1), if a sweep was asked for.
    pub sweep: Vec<SweepPoint>,
    /// The data that went in.
    pub dataset: DatasetInfo,
    /// Wall-clock seconds of each shared stage (`descriptors`, `pca`, `gmm K=50`…).
    pub timings: Vec<(String, f64)>,
    /// The whole configuration of the run, checked and in canonical form:
    /// `fisherkit run --config REPORT.json` repeats the run.
    pub config: crate::PipelineConfig,
    /// Peak resident memory of the process at the end of the run, MB (Linux).
    pub peak_rss_mb: Option<f64>,
    /// fisherkit's version.
    pub fisherkit_version: String,
    /// The ImageNet CNN of the patch descriptors (`squeezenet1_1`, `efficientnet_lite0`);
    /// `None` for a run on descriptor files.
    pub cnn: Option<String>,
    /// The saved classifier (`--save-model`), if any.
    pub model: Option<ModelReport>,
    /// How each background model was fitted, in the run's model order.
    pub models: Vec<ModelInfo>,
}

/// How one background model (GMM or MFA of one scale) was fitted by EM.
/// EM stops when the change of the mean log-likelihood per sample row falls
/// below the run's tolerance ([`crate::defaults::EM_TOL`]) or at the
/// iteration cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The run-folder file stem, which names every setting the model depends on
    /// (`gmm-K50-it100-abstol0.001-ms100000-s1`).
    pub name: String,
    /// `gmm` or `mfa`.
    pub kind: String,
    /// Number of components K asked for (capped at the sample's rows when fitted).
    pub components: usize,
    /// Factors R per component (MFA only).
    pub factors: Option<usize>,
    /// The patch scale whose descriptors it models.
    pub scale: String,
    /// EM iterations run; `None` for a model read from a run folder written
    /// before fits were recorded (likewise `converged` and `log_likelihood`).
    pub iterations: Option<usize>,
    /// The iteration cap.
    pub max_iter: usize,
    /// Whether the stopping rule was met before the cap.
    pub converged: Option<bool>,
    /// Mean log-likelihood per sample row of the parameters entering the last iteration.
    pub log_likelihood: Option<f64>,
    /// Every iteration's mean log-likelihood (`iterations` of them), from
    /// which any other stopping rule can be judged; empty for a model read
    /// from a run folder written before histories were kept.
    #[serde(default)]
    pub log_likelihood_history: Vec<f64>,
}

/// The result of one encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Family of the (first) term: `gmm-fv`, `mfa-fs`, `cnn-global`, or `combination`.
    pub encoder: String,
    /// The full specification (`mfa-fs:loading&cnn-global`).
    pub spec: String,
    /// Parts of a single-term spec (empty for combinations and `cnn-global`).
    pub parts: Vec<String>,
    /// MFA-FS whitened by the diagonal Fisher-information estimate.
    pub whitened: bool,
    /// Length of the image representation.
    pub dim: usize,
    /// Mean per-class accuracy on the test set, as a fraction.
    pub accuracy: f64,
    /// Plain accuracy on the test set, as a fraction.
    pub overall_accuracy: f64,
    /// Per-class accuracy (recall), in class order.
    pub per_class_accuracy: Vec<f64>,
    /// Confusion matrix, rows = true class, columns = predicted class.
    pub confusion: Vec<Vec<usize>>,
    /// SVM cost chosen by cross-validation.
    pub c: f64,
    /// (C, cross-validated mean per-class accuracy) for each C tried.
    pub cv: Vec<(f64, f64)>,
    /// Seconds spent forming this encoder's kernels from the stored encodings.
    pub encode_seconds: f64,
    /// Seconds spent on cross-validation and the final SVM.
    pub svm_seconds: f64,
    /// The patch scale of a per-scale row (the paper's Table 2); `None`: all scales.
    pub scale: Option<String>,
    /// The compact variant (the paper's Table 3): the encodings reduced by a
    /// PCA of the training encodings to this many dimensions before the SVM.
    pub compact: Option<usize>,
}

/// One point of the accuracy-against-dimension sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// `gmm-fv:var` (varying K) or `mfa-fs:loading` (varying R).
    pub series: String,
    /// Number of mixture components.
    pub components: usize,
    /// Number of factors (MFA only).
    pub factors: Option<usize>,
    /// Encoding length.
    pub dim: usize,
    /// Mean per-class accuracy, as a fraction.
    pub accuracy: f64,
}

/// What data the run used.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetInfo {
    /// Training folder (or descriptor file).
    pub train: String,
    /// Test folder (or descriptor file).
    pub test: String,
    /// Class names, in label order.
    pub classes: Vec<String>,
    /// Images used for training.
    pub n_train: usize,
    /// Images used for testing.
    pub n_test: usize,
    /// Images that could not be read, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Descriptors per image and scale, averaged over the training images.
    pub descriptors_per_image: Vec<f64>,
    /// Descriptor dimension after PCA, per scale.
    pub pca_dims: Vec<usize>,
}

/// Runs `f` and appends `(name, seconds it took)` to `timings` (the report's
/// per-stage timings).
pub(crate) fn timed<T>(timings: &mut Vec<(String, f64)>, name: String, f: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let r = f();
    timings.push((name, t.elapsed().as_secs_f64()));
    r
}

/// What the report says of the saved classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    /// Where it was written.
    pub path: String,
    /// Its encoder (`mfa-fs:loading`), and whether whitened.
    pub encoder: String,
    pub whitened: bool,
    /// The cost C and the cross-validated training accuracy at it.
    pub c: f64,
    pub cv_accuracy: f64,
    /// Mean per-class accuracy of the saved classifier on the run's test
    /// split, its features computed from the stored encodings exactly as
    /// `fisherkit evaluate` computes them from the images (equal with the
    /// default `f32` stores).
    pub test_accuracy: f64,
    /// Its predicted class index for every test image, in the order of the
    /// report's test images.
    pub test_predictions: Vec<usize>,
}
