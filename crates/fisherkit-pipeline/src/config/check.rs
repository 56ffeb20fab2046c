//! [`PipelineConfig::check`] → [`CheckedConfig`], and back
//! ([`RunConfig::to_config`], what the report records).

use super::cnn::CnnChoice;
use super::defaults;
use super::pipeline::{
    DataConfig, DescriptorsConfig, EncodingConfig, ModelsConfig, OutputConfig, PcaConfig,
    PipelineConfig, SvmConfig,
};
use super::run::RunConfig;
use crate::report::Report;
use crate::{PipelineError, Progress};
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use fisherkit_cnn::Backbone;
use std::path::PathBuf;

/// What a run reads: image folders (through the CNN) or descriptor files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// `DIR/<class>/*.jpg|png` folders.
    Images,
    /// Descriptor files ([`crate::descriptor_file`]).
    DescriptorFiles,
}

/// A configuration that passed [`PipelineConfig::check`]: the settings the
/// job reads and which input it is.
#[derive(Debug, Clone)]
pub struct CheckedConfig {
    run: RunConfig,
    input: InputKind,
}

impl CheckedConfig {
    /// The settings the job reads.
    pub fn run_config(&self) -> &RunConfig {
        &self.run
    }

    /// Image folders or descriptor files.
    pub fn input(&self) -> InputKind {
        self.input
    }

    /// The configuration in its canonical form (what the report records).
    pub fn config(&self) -> PipelineConfig {
        self.run.to_config(self.input == InputKind::Images)
    }

    /// Runs the pipeline: [`crate::run`] on image folders with `net` (loaded
    /// from the configuration's `cnn` when `None`), or
    /// [`crate::run_descriptors`] on descriptor files.
    ///
    /// # Errors
    /// Any failure of the run, or a network that cannot be loaded.
    pub fn execute(
        &self,
        net: Option<&Backbone>,
        progress: &dyn Progress,
    ) -> Result<Report, PipelineError> {
        match (self.input, net) {
            (InputKind::DescriptorFiles, _) => crate::run_descriptors(&self.run, progress),
            (InputKind::Images, Some(net)) => crate::run(&self.run, net, progress),
            (InputKind::Images, None) => crate::run(&self.run, &self.run.cnn.load()?, progress),
        }
    }
}

impl PipelineConfig {
    /// Validates every setting (delegating to the GMM's, MFA's, SVM's and
    /// CNN's own parameter checks) into the settings a run reads. Touches no
    /// file: missing folders are found when the run opens them.
    ///
    /// # Errors
    /// A [`PipelineError::Config`] naming the setting and the problem.
    pub fn check(&self) -> Result<CheckedConfig, PipelineError> {
        let (train, test, input) = self.data.check()?;
        let images = input == InputKind::Images;
        let cnn = CnnChoice::from_config(&self.descriptors)?;
        if !images && self.output.save_descriptors.is_some() {
            return Err(PipelineError::Config(
                "save_descriptors (--save-descriptors) writes the CNN descriptors of image \
                 folders, not to descriptor files"
                    .into(),
            ));
        }
        let run = RunConfig {
            descriptors: self.descriptors.params(images)?,
            cnn,
            ..self.flat(train, test)
        };
        run.validate()?;
        self.check_models()?;
        Ok(CheckedConfig { run, input })
    }

    /// The flat settings of the groups but the descriptors'.
    fn flat(&self, train: PathBuf, test: PathBuf) -> RunConfig {
        let (p, m, e, s, o) = (
            &self.pca,
            &self.models,
            &self.encoding,
            &self.svm,
            &self.output,
        );
        RunConfig {
            train,
            test,
            encoders: e.encoders.clone(),
            save_descriptors: o.save_descriptors.clone(),
            descriptors: DescriptorParams::default(),
            cnn: CnnChoice::default(),
            pca_dim: p.pca_dim,
            sample_images: p.sample_images,
            pca_sample: p.pca_sample,
            model_sample: m.model_sample,
            compact_dim: p.compact_pca,
            gmm_components: m.gmm_components,
            gmm_max_iter: m.gmm_max_iter,
            mfa_components: m.mfa_components,
            mfa_factors: m.mfa_factors,
            mfa_max_iter: m.mfa_max_iter,
            whitening: e.whitening,
            normalization: fisherkit::Normalization {
                power: e.power,
                l2: e.l2,
            },
            c_grid: s.c_grid.clone(),
            cv_folds: s.cv_folds,
            classifier: s.classifier,
            store_format: o.store,
            seed: self.seed,
            cache_dir: (!o.no_cache).then(|| o.cache.clone()),
            output_dir: o.output_dir.clone(),
            save_encodings: o.save_encodings,
            save_model: o.save_model.clone(),
            model_encoder: o.model_encoder.clone(),
            report: o.report.clone(),
            plot: o.plot.clone(),
            sweep_gmm_components: m.sweep_gmm.clone(),
            sweep_mfa_factors: m.sweep_mfa.clone(),
        }
    }

    /// The background models' own parameter checks (the run's EM rule).
    fn check_models(&self) -> Result<(), PipelineError> {
        let m = &self.models;
        let bad =
            |what: &str, e: &dyn std::fmt::Display| PipelineError::Config(format!("{what}: {e}"));
        fisherkit::gmm::GmmParams::<f32>::new(m.gmm_components)
            .max_iter(m.gmm_max_iter)
            .tol(defaults::EM_TOL)
            .seed(self.seed)
            .check()
            .map_err(|e| bad("gmm_components/gmm_max_iter (--gmm-*)", &e))?;
        fisherkit::mfa::MfaParams::new(m.mfa_components, m.mfa_factors)
            .max_iter(m.mfa_max_iter)
            .tol(defaults::EM_TOL)
            .seed(self.seed)
            .check()
            .map_err(|e| bad("mfa_components/mfa_factors/mfa_max_iter (--mfa-*)", &e))?;
        for &c in &self.svm.c_grid {
            fisherkit::svm::LinearSvcParams {
                c,
                ..Default::default()
            }
            .check()
            .map_err(|e| bad("c_grid (--c-grid)", &e))?;
        }
        Ok(())
    }
}

impl DataConfig {
    /// The one complete pair of inputs.
    fn check(&self) -> Result<(PathBuf, PathBuf, InputKind), PipelineError> {
        let images = (&self.train, &self.test);
        let files = (&self.train_descriptors, &self.test_descriptors);
        match (images, files) {
            ((Some(tr), Some(te)), (None, None)) => Ok((tr.clone(), te.clone(), InputKind::Images)),
            ((None, None), (Some(tr), Some(te))) => {
                Ok((tr.clone(), te.clone(), InputKind::DescriptorFiles))
            }
            ((None, None), (None, None)) => Err(PipelineError::Config(
                "no data: give image folders (train and test: --train, --test) or descriptor \
                 files (train_descriptors and test_descriptors: --train-descriptors, \
                 --test-descriptors)"
                    .into(),
            )),
            ((Some(_), Some(_)), _) | (_, (Some(_), Some(_))) => Err(PipelineError::Config(
                "give either image folders (--train, --test) or descriptor files \
                 (--train-descriptors, --test-descriptors), not both"
                    .into(),
            )),
            _ => Err(PipelineError::Config(
                "train and test come in a pair: give both image folders (--train, --test) or \
                 both descriptor files (--train-descriptors, --test-descriptors)"
                    .into(),
            )),
        }
    }
}

impl DescriptorsConfig {
    /// The patch settings (checked by the CNN crate's own check); settings
    /// other than the defaults are refused for descriptor files, to which
    /// they do not apply.
    fn params(&self, images: bool) -> Result<DescriptorParams, PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        if !images {
            let d = DescriptorsConfig::default();
            fn cnn_part(a: &DescriptorsConfig) -> (&str, &[u32], PatchMode, Option<f32>, u32) {
                (&a.cnn, &a.scales, a.patch_mode, a.stride, a.max_image_side)
            }
            if cnn_part(self) != cnn_part(&d) {
                return bad(
                    "the CNN settings (cnn, scales, patch_mode, stride, max_image_side) \
                            apply to image folders, not to descriptor files"
                        .into(),
                );
            }
        }
        let mut p = DescriptorParams {
            scales: self.scales.clone(),
            mode: self.patch_mode,
            max_image_side: (self.max_image_side > 0).then_some(self.max_image_side),
            ..DescriptorParams::default()
        };
        if let Some(stride) = self.stride {
            if self.patch_mode != PatchMode::Exact {
                return bad(
                    "stride (--stride) applies to --patch-mode exact only (dense cells \
                            are the CNN's own grid)"
                        .into(),
                );
            }
            p.stride = stride;
        }
        p.validate()
            .map_err(|e| PipelineError::Config(e.to_string()))?;
        Ok(p)
    }
}

impl RunConfig {
    /// The configuration these settings were checked from, in canonical
    /// form: the report records it, and [`PipelineConfig::check`] of it
    /// gives these settings back. `images`: the inputs are image folders
    /// (else descriptor files).
    pub fn to_config(&self, images: bool) -> PipelineConfig {
        let (train, test) = (Some(self.train.clone()), Some(self.test.clone()));
        let data = if images {
            DataConfig {
                train,
                test,
                ..Default::default()
            }
        } else {
            DataConfig {
                train_descriptors: train,
                test_descriptors: test,
                ..Default::default()
            }
        };
        let mut descriptors = DescriptorsConfig::default();
        if images {
            let d = &self.descriptors;
            descriptors.scales = d.scales.clone();
            descriptors.patch_mode = d.mode;
            descriptors.stride = (d.mode == PatchMode::Exact).then_some(d.stride);
            descriptors.max_image_side = d.max_image_side.unwrap_or(0);
            self.cnn.write_into(&mut descriptors);
        }
        PipelineConfig {
            data,
            descriptors,
            pca: PcaConfig {
                pca_dim: self.pca_dim,
                sample_images: self.sample_images,
                pca_sample: self.pca_sample,
                compact_pca: self.compact_dim,
            },
            models: ModelsConfig {
                model_sample: self.model_sample,
                gmm_components: self.gmm_components,
                gmm_max_iter: self.gmm_max_iter,
                mfa_components: self.mfa_components,
                mfa_factors: self.mfa_factors,
                mfa_max_iter: self.mfa_max_iter,
                sweep_gmm: self.sweep_gmm_components.clone(),
                sweep_mfa: self.sweep_mfa_factors.clone(),
            },
            encoding: EncodingConfig {
                encoders: self.encoders.clone(),
                whitening: self.whitening,
                power: self.normalization.power,
                l2: self.normalization.l2,
            },
            svm: SvmConfig {
                classifier: self.classifier,
                c_grid: self.c_grid.clone(),
                cv_folds: self.cv_folds,
            },
            output: OutputConfig {
                cache: self
                    .cache_dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(defaults::CACHE_DIR)),
                no_cache: self.cache_dir.is_none(),
                store: self.store_format,
                report: self.report.clone(),
                plot: self.plot.clone(),
                save_model: self.save_model.clone(),
                model_encoder: self.model_encoder.clone(),
                output_dir: self.output_dir.clone(),
                save_encodings: self.save_encodings,
                save_descriptors: self.save_descriptors.clone(),
            },
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> PipelineConfig {
        let mut c = PipelineConfig::demo("tr", "te");
        c.descriptors.patch_mode = PatchMode::Exact;
        c.descriptors.stride = Some(0.25);
        c.pca.compact_pca = Some(20);
        c.output.save_model = Some("m.safetensors".into());
        c.output.model_encoder = Some(c.encoding.encoders[2].clone());
        c.output.report = Some("r.json".into());
        c.output.store = crate::StoreFormat::Q8;
        c
    }

    #[test]
    fn check_then_to_config_is_the_identity_on_canonical_configs() {
        for c in [
            PipelineConfig::images("a", "b"),
            PipelineConfig::descriptor_files("a", "b"),
            full(),
        ] {
            let checked = c.check().unwrap();
            assert_eq!(checked.config(), c);
        }
    }

    #[test]
    fn the_defaults_are_run_config_new() {
        let a = PipelineConfig::images("tr", "te").check().unwrap();
        let b = RunConfig::new("tr".into(), "te".into());
        assert_eq!(a.run_config().to_config(true), b.to_config(true));
    }

    #[test]
    fn bad_settings_are_named() {
        let cases = [
            (json!({"data": {"train": "a"}}), "in a pair"),
            (
                json!({"data": {"train": "a", "test": "b", "train_descriptors": "c", "test_descriptors": "d"}}),
                "not both",
            ),
            (json!({"data": {}}), "no data"),
            (json!({"models": {"mfa_factors": 0}}), "mfa_"),
            (json!({"models": {"gmm_components": 0}}), "gmm"),
            (json!({"svm": {"c_grid": [1, -2]}}), "-2"),
            (json!({"svm": {"cv_folds": 1}}), "folds"),
            (json!({"descriptors": {"stride": 0.5}}), "stride"),
            (json!({"descriptors": {"scales": []}}), "scale"),
            (json!({"output": {"save_encodings": true}}), "output folder"),
            (
                json!({"output": {"model_encoder": "gmm-fv:prior"}}),
                "save-model",
            ),
        ];
        for (patch, want) in cases {
            let mut c = PipelineConfig::images("tr", "te");
            if patch.get("data").is_some() {
                c.data = DataConfig::default();
            }
            for (group, leaves) in patch.as_object().unwrap() {
                c.set_option(group, leaves.clone()).unwrap();
            }
            let e = c.check().unwrap_err().to_string();
            assert!(e.contains(want), "{patch}: {e}");
        }
        let mut c = PipelineConfig::descriptor_files("tr", "te");
        c.descriptors.scales = vec![28];
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("not to descriptor files"), "{e}");
    }
}
