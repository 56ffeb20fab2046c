//! The defaults of the pipeline's settings, written once: [`super::PipelineConfig`]'s
//! `Default` (and so [`super::RunConfig::new`], the command line's help and
//! Python's `fisherkit.pipeline.run`) takes them from here. The CNN's (scales,
//! patch mode, image size) are `DescriptorParams::default`'s, the
//! normalisation's `Normalization::default`'s.

/// Descriptor dimension after PCA (the paper: 500).
pub const PCA_DIM: usize = 500;
/// Training images the PCA and the models learn from.
pub const SAMPLE_IMAGES: usize = 500;
/// Descriptors per scale for the PCA.
pub const PCA_SAMPLE: usize = 200_000;
/// Descriptors per scale for the background models.
pub const MODEL_SAMPLE: usize = 100_000;
/// GMM components K.
pub const GMM_COMPONENTS: usize = 50;
/// GMM EM iterations at most.
pub const GMM_MAX_ITER: usize = 100;
/// MFA components K.
pub const MFA_COMPONENTS: usize = 50;
/// MFA factors R.
pub const MFA_FACTORS: usize = 10;
/// MFA EM iterations at most.
pub const MFA_MAX_ITER: usize = 30;
/// When the EM of the run's GMMs and MFAs stops (or at the iteration
/// cap): the library's rule and default, an absolute change of the mean
/// log-likelihood per row below [`fisherkit::stream::em_defaults::TOL`]
/// (1e-3, scikit-learn's). Every object-scene table of docs/evidence before
/// 2026-12-06 was measured under the former relative 1e-6; `fisherkit demo`
/// gives the same fits and table under both, and on the quarter-size and
/// the full MIT-shaped object-scene sets no iteration of any fit changes by
/// less than 1.7e-2, so under either rule every fit runs to its cap and the
/// models and tables are the same (docs/pipeline.md §2,
/// docs/evidence/em-rules-2026-12-06.md). Run-folder
/// names carry the rule when it is not relative 1e-6, so models of the two
/// rules are never mixed.
pub const EM_TOL: fisherkit::stream::EmTol =
    fisherkit::stream::EmTol::Absolute(fisherkit::stream::em_defaults::TOL);
/// SVM costs tried by cross-validation.
pub const C_GRID: [f64; 4] = [0.01, 0.1, 1.0, 10.0];
/// Cross-validation folds.
pub const CV_FOLDS: usize = 3;
/// Seed of every random choice.
pub const SEED: u64 = 0;
/// The CNN of `fisherkit run` (and of Python's `pipeline.run` and
/// `cnn.Descriptors`), chosen by measurement on photo-sized scenes
/// (README, docs/backbones.md): on the MIT-Indoor-shaped object-scene set
/// (1/4 size) EfficientNet-Lite0 gives MFA-FS(Λ) 36.7 % against SqueezeNet's
/// 24.8 % (±2.6) and GMM-FV(σ) 28.1 % against 17.6 %, at about the same
/// pipeline time per image (fewer cells to encode, a slower network).
/// [`fisherkit_cnn::BackboneKind::default`] is the same network (a test checks).
pub const CNN: &str = "efficientnet-lite0";
/// The CNN of `fisherkit demo`: its bundled images are 28 px, one patch
/// each, where SqueezeNet's 13×13 cells beat EfficientNet-Lite0's 7×7
/// (MFA-FS(Λ) 86.0 % against 83.2 %, ±1.7).
pub const DEMO_CNN: &str = "squeezenet";
/// The run-folder root of `fisherkit run`.
pub const CACHE_DIR: &str = ".fisherkit-cache";
/// Most bytes of (n, n) `f32` training kernels [`super::Classifier::Auto`]
/// lets the kernel path hold ([`super::Classifier::kernel_bytes`]: 2 at any
/// number of scales, 3 with `cnn-global`): 0.2 GB at MIT Indoor's 5 360
/// training images, 3.2 GB at SUN397's 19 850 (its descriptor files, and its
/// images at three scales). Within it the kernel path is the faster and the
/// measured one (a 397-class, 10 322-image, 25 000-dim run: 112 s against
/// 1 568 s on the primal path, docs/evidence/sun397-classifier-2026-12-06.md);
/// above it (more than 23 170 training images; 18 918 with `cnn-global`) the
/// primal path, whose memory does not grow with n².
pub const KERNEL_MAX_BYTES: u64 = 4 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_default_cnn_everywhere() {
        let kind: fisherkit_cnn::BackboneKind = CNN.parse().unwrap();
        assert_eq!(kind, fisherkit_cnn::BackboneKind::default());
        let demo: fisherkit_cnn::BackboneKind = DEMO_CNN.parse().unwrap();
        assert_eq!(demo, fisherkit_cnn::BackboneKind::SqueezeNet);
    }
}
