//! [`CnnChoice`]: the checked CNN of a run, a built-in network or an ONNX
//! model with its preprocessing, and how it is loaded.

use super::pipeline::DescriptorsConfig;
use crate::PipelineError;
use fisherkit_cnn::{Backbone, BackboneKind};
use std::path::PathBuf;

/// The preprocessing options of an ONNX model (docs/backbones.md); `None`:
/// the model's input side (else 224) and ImageNet's mean and deviation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OnnxSettings {
    /// Side patches are resized to.
    pub input_side: Option<usize>,
    /// Per-channel mean on the 0–1 scale, in the model's channel order.
    pub mean: Option<[f32; 3]>,
    /// Per-channel standard deviation on the 0–1 scale.
    pub std: Option<[f32; 3]>,
    /// The model takes BGR channels.
    pub bgr: bool,
    /// The tensor of class scores (`None`: the first graph output).
    pub output: Option<String>,
}

/// The CNN of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum CnnChoice {
    /// A built-in network.
    Builtin(BackboneKind),
    /// An ONNX image classifier (a build with the `onnx` feature).
    Onnx {
        /// The `.onnx` file.
        path: PathBuf,
        /// Its preprocessing.
        settings: OnnxSettings,
    },
}

impl Default for CnnChoice {
    fn default() -> Self {
        CnnChoice::Builtin(BackboneKind::default())
    }
}

impl CnnChoice {
    /// The network of `d.cnn` (a built-in name or a path ending in `.onnx`)
    /// with its `onnx_*` options, checked: ONNX options only for an ONNX
    /// model, an input side ≥ 1, finite positive deviations.
    ///
    /// # Errors
    /// A [`PipelineError::Config`] naming the option.
    pub fn from_config(d: &DescriptorsConfig) -> Result<Self, PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(m));
        let settings = OnnxSettings {
            input_side: d.onnx_input_side,
            mean: d.onnx_mean,
            std: d.onnx_std,
            bgr: d.onnx_bgr,
            output: d.onnx_output.clone(),
        };
        if let Ok(kind) = d.cnn.parse::<BackboneKind>() {
            if settings != OnnxSettings::default() {
                return bad(format!(
                    "the onnx_* options (--onnx-*) need an ONNX model (cnn = FILE.onnx), not the built-in {}",
                    d.cnn
                ));
            }
            return Ok(CnnChoice::Builtin(kind));
        }
        if !d.cnn.to_ascii_lowercase().ends_with(".onnx") {
            return bad(format!(
                "unknown CNN `{}` (expected squeezenet, efficientnet-lite0 or a path to an .onnx model)",
                d.cnn
            ));
        }
        if !cfg!(feature = "onnx") {
            return bad(format!(
                "cnn {}: this fisherkit was built without ONNX support; rebuild with --features onnx \
                 (cargo install --path crates/fisherkit-cli --features onnx)",
                d.cnn
            ));
        }
        if settings.input_side == Some(0) {
            return bad("onnx_input_side (--onnx-input-side) must be at least 1".into());
        }
        if let Some(s) = settings.std.filter(|s| s.iter().any(|v| *v <= 0.0)) {
            return bad(format!(
                "onnx_std (--onnx-std) {s:?}: every deviation must be > 0"
            ));
        }
        Ok(CnnChoice::Onnx {
            path: PathBuf::from(&d.cnn),
            settings,
        })
    }

    /// Writes this choice back into `d` (the inverse of [`Self::from_config`]).
    pub(crate) fn write_into(&self, d: &mut DescriptorsConfig) {
        let (name, s) = match self {
            CnnChoice::Builtin(k) => (builtin_name(*k).to_string(), OnnxSettings::default()),
            CnnChoice::Onnx { path, settings } => (path.display().to_string(), settings.clone()),
        };
        d.cnn = name;
        d.onnx_input_side = s.input_side;
        d.onnx_mean = s.mean;
        d.onnx_std = s.std;
        d.onnx_bgr = s.bgr;
        d.onnx_output = s.output;
    }

    /// The built-in network, `None` for an ONNX model.
    pub fn builtin(&self) -> Option<BackboneKind> {
        match self {
            CnnChoice::Builtin(k) => Some(*k),
            CnnChoice::Onnx { .. } => None,
        }
    }

    /// Loads the network.
    ///
    /// # Errors
    /// The built-in weights or the ONNX model cannot be loaded, or this build
    /// has no ONNX support (the message names the file and the problem).
    pub fn load(&self) -> Result<Backbone, PipelineError> {
        match self {
            CnnChoice::Builtin(k) => Backbone::builtin(*k)
                .map_err(|e| PipelineError::Config(format!("built-in CNN {k}: {e}"))),
            CnnChoice::Onnx { path, settings } => load_onnx(path, settings),
        }
    }
}

/// The name the configuration writes for a built-in network (its `--cnn` word).
fn builtin_name(k: BackboneKind) -> &'static str {
    match k {
        BackboneKind::SqueezeNet => "squeezenet",
        BackboneKind::EfficientNetLite0 => "efficientnet-lite0",
    }
}

#[cfg(feature = "onnx")]
fn load_onnx(path: &std::path::Path, s: &OnnxSettings) -> Result<Backbone, PipelineError> {
    let d = fisherkit_cnn::OnnxOptions::default();
    let options = fisherkit_cnn::OnnxOptions {
        input_side: s.input_side,
        mean: s.mean.unwrap_or(d.mean),
        std: s.std.unwrap_or(d.std),
        bgr: s.bgr,
        output: s.output.clone(),
        ..d
    };
    fisherkit_cnn::OnnxCnn::load(path, &options)
        .map(Backbone::from)
        .map_err(|e| PipelineError::Config(e.to_string()))
}

#[cfg(not(feature = "onnx"))]
fn load_onnx(path: &std::path::Path, _: &OnnxSettings) -> Result<Backbone, PipelineError> {
    Err(PipelineError::Config(format!(
        "cnn {}: this fisherkit was built without ONNX support; rebuild with --features onnx \
         (cargo install --path crates/fisherkit-cli --features onnx)",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_onnx_options_are_checked() {
        let mut d = DescriptorsConfig::default();
        assert_eq!(CnnChoice::from_config(&d).unwrap(), CnnChoice::default());
        d.cnn = "squeezenet1_1".into();
        let c = CnnChoice::from_config(&d).unwrap();
        assert_eq!(c.builtin(), Some(BackboneKind::SqueezeNet));
        c.write_into(&mut d);
        assert_eq!(d.cnn, "squeezenet");
        d.onnx_bgr = true;
        let e = CnnChoice::from_config(&d).unwrap_err().to_string();
        assert!(e.contains("need an ONNX model"), "{e}");
        d.cnn = "net.onnx".into();
        d.onnx_input_side = Some(0);
        let e = CnnChoice::from_config(&d).unwrap_err().to_string();
        if cfg!(feature = "onnx") {
            assert!(e.contains("onnx_input_side"), "{e}");
            d.onnx_input_side = Some(224);
            let c = CnnChoice::from_config(&d).unwrap();
            let mut back = DescriptorsConfig::default();
            c.write_into(&mut back);
            assert_eq!((back.cnn.as_str(), back.onnx_bgr), ("net.onnx", true));
        } else {
            assert!(e.contains("built without ONNX support"), "{e}");
        }
        d.cnn = "alexnet".into();
        let e = CnnChoice::from_config(&d).unwrap_err().to_string();
        assert!(e.contains("unknown CNN `alexnet`"), "{e}");
    }
}
