//! A [`PipelineConfig`] from flat options (`pca_dim = 100`, as Python's
//! keyword arguments and the command line's flags name them) and from JSON
//! files (a configuration, or a report that records one).

use super::pipeline::PipelineConfig;
use crate::PipelineError;
use serde_json::{Map, Value};
use std::path::Path;

impl PipelineConfig {
    /// The names of every setting (the leaves of the groups, and `seed`), in
    /// file order: the flat option names, each the `fisherkit run` flag with
    /// underscores.
    pub fn option_names() -> Vec<String> {
        let tree = serde_json::to_value(Self::default()).expect("a config serialises");
        let mut names = Vec::new();
        for (key, value) in tree.as_object().expect("an object") {
            match value.as_object() {
                Some(group) => names.extend(group.keys().cloned()),
                None => names.push(key.clone()),
            }
        }
        names
    }

    /// The group holding the option `name` (`None` for a top-level one such
    /// as `seed`), or an error naming the unknown option.
    fn group_of(tree: &Map<String, Value>, name: &str) -> Result<Option<String>, PipelineError> {
        if tree.get(name).is_some_and(|v| !v.is_object()) {
            return Ok(None);
        }
        tree.iter()
            .find(|(_, g)| g.as_object().is_some_and(|g| g.contains_key(name)))
            .map(|(k, _)| Some(k.clone()))
            .ok_or_else(|| {
                PipelineError::Config(format!(
                    "unknown option `{name}` (fisherkit run has no --{}); the options are: {}",
                    name.replace('_', "-"),
                    Self::option_names().join(", ")
                ))
            })
    }

    /// The value of the option `name` as JSON (`None` for an unknown name).
    pub fn option_value(&self, name: &str) -> Option<Value> {
        let tree = self.to_value().ok()?;
        let root = tree.as_object()?;
        match Self::group_of(root, name).ok()? {
            Some(group) => root[&group].get(name).cloned(),
            None => root.get(name).cloned(),
        }
    }

    /// Sets the option `name` (a leaf, e.g. `pca_dim`, or a whole group such
    /// as `pca` given as an object of its leaves) to the JSON `value`, read as
    /// a configuration file reads it (lists may be comma-separated text).
    ///
    /// # Errors
    /// An unknown name, or a value of the wrong type or range for it; the
    /// message names the option and its flag.
    pub fn set_option(&mut self, name: &str, value: Value) -> Result<(), PipelineError> {
        let mut tree = self.to_value()?;
        let root = tree.as_object_mut().expect("an object");
        if root.get(name).is_some_and(Value::is_object) {
            let Value::Object(leaves) = value else {
                return Err(PipelineError::Config(format!(
                    "option {name}: a group of settings is given as an object of them, not {value}"
                )));
            };
            for (leaf, v) in leaves {
                self.set_option(&leaf, v)?;
            }
            return Ok(());
        }
        match Self::group_of(root, name)? {
            Some(group) => root[&group][name] = value,
            None => root[name] = value,
        }
        *self = serde_json::from_value(tree).map_err(|e| {
            PipelineError::Config(format!("option {name} (--{}): {e}", name.replace('_', "-")))
        })?;
        Ok(())
    }

    /// This configuration with every option of `options` set in order
    /// ([`Self::set_option`]).
    ///
    /// # Errors
    /// The first unknown option or bad value.
    pub fn with_options(mut self, options: &Map<String, Value>) -> Result<Self, PipelineError> {
        for (name, value) in options {
            self.set_option(name, value.clone())?;
        }
        Ok(self)
    }

    /// Reads a configuration from a JSON file: a configuration (missing
    /// settings take their defaults), or the report of a run (`fisherkit run
    /// --report`), whose `config` it takes, so that a run can be repeated
    /// from its report.
    ///
    /// # Errors
    /// An unreadable file, bad JSON, an unknown setting or a bad value; the
    /// message names the file.
    pub fn read(path: &Path) -> Result<Self, PipelineError> {
        let bad = |m: String| PipelineError::Config(format!("{}: {m}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let mut value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let is_report = value.get("results").is_some() && value.get("fisherkit_version").is_some();
        if is_report {
            value = value
                .get_mut("config")
                .map(Value::take)
                .filter(Value::is_object)
                .ok_or_else(|| {
                    bad(
                        "a report without its configuration (written by a fisherkit before 0.30?)"
                            .into(),
                    )
                })?;
        }
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }

    /// The configuration as pretty JSON text (the file [`Self::read`] reads).
    ///
    /// # Errors
    /// A path that is not UTF-8 text.
    pub fn to_json(&self) -> Result<String, PipelineError> {
        serde_json::to_string_pretty(self).map_err(Self::unwritable)
    }

    /// The configuration as a JSON tree.
    fn to_value(&self) -> Result<Value, PipelineError> {
        serde_json::to_value(self).map_err(Self::unwritable)
    }

    fn unwritable(e: serde_json::Error) -> PipelineError {
        PipelineError::Config(format!("the configuration cannot be written as JSON: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn option_names_are_unique_leaves() {
        let names = PipelineConfig::option_names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
        for n in [
            "pca_dim", "scales", "encoders", "c_grid", "cache", "seed", "train",
        ] {
            assert!(names.iter().any(|x| x == n), "{n}");
        }
    }

    #[test]
    fn options_set_their_leaf_and_name_bad_values() {
        let mut c = PipelineConfig::default();
        c.set_option("pca_dim", json!(7)).unwrap();
        c.set_option("scales", json!("28, 20")).unwrap();
        c.set_option("c_grid", json!([0.5, 2])).unwrap();
        c.set_option("encoders", json!("gmm-fv:var,mfa-fs:loading&cnn-global"))
            .unwrap();
        c.set_option("whitening", json!("both")).unwrap();
        c.set_option("seed", json!(3)).unwrap();
        c.set_option("models", json!({"gmm_components": 4}))
            .unwrap();
        assert_eq!(c.pca.pca_dim, 7);
        assert_eq!(c.descriptors.scales, vec![28, 20]);
        assert_eq!(c.svm.c_grid, vec![0.5, 2.0]);
        assert_eq!(c.encoding.encoders.len(), 2);
        assert_eq!(c.seed, 3);
        assert_eq!(c.models.gmm_components, 4);
        let e = c
            .clone()
            .set_option("pca_dims", json!(3))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown option `pca_dims`") && e.contains("--pca-dims"),
            "{e}"
        );
        let e = c
            .clone()
            .set_option("pca_dim", json!("many"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pca_dim (--pca-dim)") && e.contains("string"),
            "{e}"
        );
        let e = c
            .clone()
            .set_option("seed", json!(-1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("seed") && e.contains("-1"), "{e}");
        let e = c
            .clone()
            .set_option("scales", json!("28,x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x` is not a valid value in `28,x`"), "{e}");
        let e = c.set_option("store", json!("f16")).unwrap_err().to_string();
        assert!(e.contains("unknown store format `f16`"), "{e}");
    }

    #[test]
    fn a_json_round_trip_is_the_identity() {
        let mut c = PipelineConfig::demo("tr", "te");
        c.descriptors.onnx_mean = Some([0.5, 0.25, 0.125]);
        c.output.model_encoder = Some(c.encoding.encoders[1].clone());
        c.pca.compact_pca = Some(12);
        let back: PipelineConfig = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        assert_eq!(back, c);
        // missing settings take their defaults; unknown ones are refused
        let partial: PipelineConfig = serde_json::from_str(r#"{"pca": {"pca_dim": 9}}"#).unwrap();
        assert_eq!(partial.pca.pca_dim, 9);
        assert_eq!(partial.models, PipelineConfig::default().models);
        let e = serde_json::from_str::<PipelineConfig>(r#"{"pca": {"pca_dims": 9}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `pca_dims`"), "{e}");
    }

    #[test]
    fn a_file_or_a_report_reads_back() {
        let t = tempfile::tempdir().unwrap();
        let c = PipelineConfig::demo("tr", "te");
        let file = t.path().join("run.json");
        std::fs::write(&file, c.to_json().unwrap()).unwrap();
        assert_eq!(PipelineConfig::read(&file).unwrap(), c);
        let report = json!({"results": [], "fisherkit_version": "x", "config": c});
        std::fs::write(&file, report.to_string()).unwrap();
        assert_eq!(PipelineConfig::read(&file).unwrap(), c);
        std::fs::write(&file, "{\"pca\": 3}").unwrap();
        let e = PipelineConfig::read(&file).unwrap_err().to_string();
        assert!(
            e.contains(&file.display().to_string()) && e.contains("PcaConfig"),
            "{e}"
        );
    }
}
