//! What each image gave in the passes ([`ImageEntry`]), journalled in the
//! run folder's `images.tsv` ([`ImageLog`]).

use crate::PipelineError;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// What one image gave in a pass: its descriptor count per scale, or the
/// reason it was skipped (written to `images.tsv` by the process that owns
/// the run folder).
pub type ImageEntry = (usize, Result<Vec<usize>, String>);

fn io_err(path: &Path, what: &str, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// What happened to each image in earlier passes: descriptors per scale, or
/// the reason it was skipped. Persisted as `images.tsv` in the run folder.
#[derive(Debug, Default, Clone)]
pub(crate) struct ImageLog {
    pub counts: BTreeMap<usize, Vec<usize>>,
    pub skipped: BTreeMap<usize, String>,
}

impl ImageLog {
    pub(crate) fn load(path: &Path) -> Self {
        let mut log = ImageLog::default();
        let Ok(text) = std::fs::read_to_string(path) else {
            return log;
        };
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let mut f = line.trim_end_matches('\n').splitn(3, '\t');
            let (Some(i), Some(kind), Some(rest)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Ok(i) = i.parse::<usize>() else { continue };
            match kind {
                "ok" => {
                    let c: Result<Vec<usize>, _> = rest.split(',').map(str::parse).collect();
                    if let Ok(c) = c {
                        log.counts.insert(i, c);
                    }
                }
                "skip" => {
                    log.skipped.insert(i, rest.to_string());
                }
                _ => {}
            }
        }
        log
    }

    pub(crate) fn append(
        &mut self,
        path: &Path,
        entries: &[ImageEntry],
    ) -> Result<(), PipelineError> {
        let mut text = String::new();
        for (i, e) in entries {
            match e {
                Ok(c) => {
                    let c: Vec<String> = c.iter().map(usize::to_string).collect();
                    text.push_str(&format!("{i}\tok\t{}\n", c.join(",")));
                    self.counts
                        .insert(*i, c.iter().map(|v| v.parse().unwrap_or(0)).collect());
                }
                Err(r) => {
                    let r = r.replace(['\t', '\n'], " ");
                    text.push_str(&format!("{i}\tskip\t{r}\n"));
                    self.skipped.insert(*i, r);
                }
            }
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| io_err(path, "cannot open the image log", e))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| io_err(path, "cannot write the image log", e))
    }
}
