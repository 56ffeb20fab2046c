//! Image-folder data sets: `DIR/<class name>/*.{jpg,jpeg,png}`.

use crate::PipelineError;
use std::path::{Path, PathBuf};

/// Image file extensions recognised (case-insensitive).
pub const IMAGE_EXTENSIONS: [&str; 3] = ["jpg", "jpeg", "png"];

/// A labelled list of image files.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    /// Class names, sorted; labels index into it.
    pub classes: Vec<String>,
    /// (path, label) pairs, sorted by class then file name.
    pub items: Vec<(PathBuf, usize)>,
}

impl ImageSet {
    /// Scans `dir`: each sub-folder is a class, each image file in it (not recursive) a sample.
    /// Errors: unreadable or empty folder, a class folder without images.
    pub fn scan(dir: &Path) -> Result<Self, PipelineError> {
        let io = |e: std::io::Error| PipelineError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        let mut class_dirs: Vec<(String, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            if path.is_dir() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') {
                    class_dirs.push((name, path));
                }
            }
        }
        if class_dirs.is_empty() {
            return Err(PipelineError::Dataset(format!(
                "{} has no class sub-folders (expected {}/<class name>/*.png|jpg)",
                dir.display(),
                dir.display()
            )));
        }
        class_dirs.sort();
        let mut items = Vec::new();
        let mut classes = Vec::new();
        for (label, (name, path)) in class_dirs.into_iter().enumerate() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
                .map_err(|e| PipelineError::Io {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && is_image(p))
                .collect();
            if files.is_empty() {
                return Err(PipelineError::Dataset(format!(
                    "class folder {} holds no .jpg/.jpeg/.png image",
                    path.display()
                )));
            }
            files.sort();
            items.extend(files.into_iter().map(|f| (f, label)));
            classes.push(name);
        }
        Ok(Self { classes, items })
    }

    /// Relabels a test set to the class list of `train`; a test class absent from
    /// training is an error.
    pub fn align_to(mut self, train: &ImageSet) -> Result<Self, PipelineError> {
        let map = self
            .classes
            .iter()
            .map(|c| train_label(c, &train.classes))
            .collect::<Result<Vec<_>, _>>()?;
        for item in &mut self.items {
            item.1 = map[item.1];
        }
        self.classes = train.classes.clone();
        Ok(self)
    }
}

/// The label of the test class `name` in the training `classes`; a class absent
/// from training is an error.
pub(crate) fn train_label(name: &str, classes: &[String]) -> Result<usize, PipelineError> {
    classes.iter().position(|t| t == name).ok_or_else(|| {
        PipelineError::Dataset(format!(
            "test class `{name}` does not exist in the training set (classes: {})",
            classes.join(", ")
        ))
    })
}

/// The image files of `inputs`, in order: a file as given, a folder's
/// images (`.jpg`, `.jpeg`, `.png`, any case) walked recursively in sorted
/// order (for `fisherkit predict`).
///
/// # Errors
/// A path that does not exist or a folder that cannot be read.
pub fn collect_images(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, PipelineError> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PipelineError> {
        let err = |e: std::io::Error| PipelineError::Io {
            path: dir.display().to_string(),
            message: format!("cannot read the folder: {e}"),
        };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(err)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(err)?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if is_image(&p) {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(PipelineError::Io {
                path: p.display().to_string(),
                message: "no such file or folder".into(),
            });
        }
    }
    Ok(out)
}

fn is_image(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .map(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn scans_sorted_classes_and_aligns_test_labels() {
        let t = tempfile::tempdir().unwrap();
        touch(&t.path().join("train/b/1.png"));
        touch(&t.path().join("train/a/2.JPG"));
        touch(&t.path().join("train/a/notes.txt"));
        touch(&t.path().join("test/b/9.jpeg"));
        let train = ImageSet::scan(&t.path().join("train")).unwrap();
        assert_eq!(train.classes, vec!["a", "b"]);
        assert_eq!(train.items.len(), 2);
        let test = ImageSet::scan(&t.path().join("test"))
            .unwrap()
            .align_to(&train)
            .unwrap();
        assert_eq!(test.items[0].1, 1);
    }

    #[test]
    fn empty_class_missing_class_and_empty_folder_are_errors() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("empty")).unwrap();
        let e = ImageSet::scan(&t.path().join("empty")).unwrap_err();
        assert!(e.to_string().contains("no class sub-folders"), "{e}");
        touch(&t.path().join("d/a/1.png"));
        std::fs::create_dir_all(t.path().join("d/b")).unwrap();
        let e = ImageSet::scan(&t.path().join("d")).unwrap_err();
        assert!(e.to_string().contains("holds no"), "{e}");
        touch(&t.path().join("tr/a/1.png"));
        touch(&t.path().join("te/z/1.png"));
        let tr = ImageSet::scan(&t.path().join("tr")).unwrap();
        let e = ImageSet::scan(&t.path().join("te"))
            .unwrap()
            .align_to(&tr)
            .unwrap_err();
        assert!(e.to_string().contains("`z`"), "{e}");
        let e = ImageSet::scan(&t.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
