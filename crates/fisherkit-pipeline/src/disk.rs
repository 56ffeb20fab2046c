//! The disk a run needs, estimated before its first CNN pass
//! (docs/pipeline.md §3): a run that cannot fit is refused with one line
//! instead of failing hours later on a full disk.
//!
//! What grows with the data in the run folder: the encoding stores,
//! $N \times$ the row bytes of each planned model (and of the CNN's global
//! vectors), and on the kernel path the saved term kernels, $4N_{train}^2 + 8N$
//! bytes each (one per term, scale and whitening of the evaluated encoders
//! and the sweep; in one process only those of one step at a time, as
//! `kernel::KernelUses` removes them). Samples, models and journals are small
//! beside them and counted through the margin. What the folder already holds (a resumed run) is
//! subtracted.

use crate::config::{RunConfig, Whitening};
use crate::spec::Term;
use crate::stages::{ModelKind, ModelSpec};
use crate::PipelineError;
use std::collections::BTreeSet;
use std::path::Path;

/// Bytes of the estimate's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiskNeed {
    pub stores: u64,
    /// The kernel files on disk at once in one process (each removed after
    /// the last step that reads it): one encoder's parts, at SUN397's size.
    /// Classifier tasks write them all first ([`check_task_kernels`]).
    pub kernels: u64,
}

impl DiskNeed {
    /// The run's whole need with a 5 % + 16 MB margin (samples, models, journals).
    pub(crate) fn total(&self) -> u64 {
        let t = self.stores + self.kernels;
        t + t / 20 + (16 << 20)
    }
}

/// Width of a model's raw encoding for descriptors of `dim` after PCA.
fn encoding_dim(kind: ModelKind, dim: usize) -> usize {
    match kind {
        ModelKind::Gmm { k } => k * (1 + 2 * dim),
        ModelKind::Mfa { k, r } => k * dim * (1 + r),
    }
}

/// The estimate for `n_images` images (`n_train` of them for training)
/// whose descriptors have `desc_dim` values (before the PCA), at `n_scales`
/// scales, with the models `plan`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn estimate(
    cfg: &RunConfig,
    plan: &[ModelSpec],
    n_images: usize,
    n_train: usize,
    desc_dim: usize,
    n_scales: usize,
    global_dim: Option<usize>,
) -> DiskNeed {
    let n = n_images as u64;
    let dim = cfg.pca_dim.min(desc_dim);
    let row = |d: usize| cfg.store_format.row_bytes(d) as u64;
    let mut stores: u64 = plan
        .iter()
        .map(|m| n * row(encoding_dim(m.kind, dim)))
        .sum();
    if let Some(g) = global_dim {
        stores += n * row(g);
    }
    let mut kernels = 0;
    if !cfg.primal_for(n_train) {
        let nt = n_train as u64;
        kernels = peak_files(&kernel_steps(cfg, n_scales)) as u64 * (4 * nt * nt + 8 * n);
    }
    DiskNeed { stores, kernels }
}

/// A kernel file: (term, whitened, scale, sweep point (0: the report's)).
type Part = (String, bool, usize, usize);

/// The kernel files each step of the kernel path reads, in the run's order:
/// each report encoder (whitened or not), then each sweep point.
fn kernel_steps(cfg: &RunConfig, n_scales: usize) -> Vec<BTreeSet<Part>> {
    let mut steps = Vec::new();
    for spec in &cfg.encoders {
        let whitenings: &[bool] = match (spec.uses_mfa(), cfg.whitening) {
            (true, Whitening::On) => &[true],
            (true, Whitening::Both) => &[false, true],
            _ => &[false],
        };
        for &w in whitenings {
            let mut parts = BTreeSet::new();
            for t in &spec.terms {
                let w = w && matches!(t, Term::MfaFs(_));
                let scales = if *t == Term::CnnGlobal { 1 } else { n_scales };
                for s in 0..scales {
                    parts.insert((t.name(), w, s, 0usize));
                }
            }
            steps.push(parts);
        }
    }
    let sweep = cfg.sweep_gmm_components.len() + cfg.sweep_mfa_factors.len();
    for i in 0..sweep {
        steps.push(
            (0..n_scales)
                .map(|s| (String::new(), false, s, i + 1))
                .collect(),
        );
    }
    steps
}

/// The most kernel files on disk at once when each is written by the first
/// step that reads it and removed after the last (`kernel::KernelUses`).
fn peak_files(steps: &[BTreeSet<Part>]) -> usize {
    (0..steps.len())
        .map(|i| {
            let before: BTreeSet<&Part> = steps[..i].iter().flatten().collect();
            let after: BTreeSet<&Part> = steps[i + 1..].iter().flatten().collect();
            let kept = before.intersection(&after).count();
            kept + steps[i]
                .iter()
                .filter(|p| !(before.contains(p) && after.contains(p)))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Bytes the files under `dir` take on disk (allocated blocks: the stores are sparse).
fn used_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => used_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Bytes as GB from 1 GB, MB below.
fn gb(b: u64) -> String {
    if b >= 1_000_000_000 {
        format!("{:.1} GB", b as f64 / 1e9)
    } else {
        format!("{:.1} MB", b as f64 / 1e6)
    }
}

/// Refuses the kernel path's classifier tasks when the file system of the
/// run folder `dir` cannot hold the `files` term kernels they are still to
/// write (n_train² f32 and n f64 each): the tasks compute every kernel
/// before the row tasks read them, where one process keeps one step's.
pub(crate) fn check_task_kernels(
    dir: &Path,
    files: usize,
    n_train: usize,
    n: usize,
) -> Result<(), PipelineError> {
    let free = fisherkit_io::available_space(dir).map_err(|e| PipelineError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    task_kernels_with(dir, files, n_train, n, free)
}

fn task_kernels_with(
    dir: &Path,
    files: usize,
    n_train: usize,
    n: usize,
    free: u64,
) -> Result<(), PipelineError> {
    let nt = n_train as u64;
    let bytes = (files as u64).saturating_mul(4 * nt * nt + 8 * n as u64);
    if bytes <= free {
        return Ok(());
    }
    Err(PipelineError::Io {
        path: dir.display().to_string(),
        message: format!(
            "not enough disk for the classifier tasks: they write all {files} term kernels before the rows read them, about {}, and the file system has {} free; run the stage in one process (classifier_tasks=False: one encoder's kernels at a time), or --classifier primal (no kernel files)",
            gb(bytes),
            gb(free)
        ),
    })
}

/// Refuses the run when `free` bytes cannot hold what `need` adds to the
/// `used` bytes already in the run folder `dir`.
pub(crate) fn check_with(
    dir: &Path,
    need: DiskNeed,
    used: u64,
    free: u64,
    cfg: &RunConfig,
) -> Result<(), PipelineError> {
    let more = need.total().saturating_sub(used);
    if more <= free {
        return Ok(());
    }
    let mut ways = Vec::new();
    if cfg.store_format == crate::store::StoreFormat::F32 {
        ways.push("--store q8 (a quarter of the stores)");
    }
    if need.kernels > 0 {
        ways.push("--classifier primal (no kernel files)");
    }
    ways.push("fewer --encoders, scales or a smaller --pca-dim");
    ways.push("--cache on a larger disk");
    Err(PipelineError::Io {
        path: dir.display().to_string(),
        message: format!(
            "not enough disk: the run needs about {} more (encoding stores {}, kernels {}), the file system has {} free; lower it with {}",
            gb(more),
            gb(need.stores),
            gb(need.kernels),
            gb(free),
            ways.join(", ")
        ),
    })
}

/// [`check_with`] on the run folder `dir`'s file system and usage.
pub(crate) fn check(dir: &Path, need: DiskNeed, cfg: &RunConfig) -> Result<(), PipelineError> {
    let free = fisherkit_io::available_space(dir)?;
    check_with(dir, need, used_bytes(dir), free, cfg)
}

/// Whether `bytes` more (the sample pass's kept CNN output, which the
/// encode pass frees as the stores fill) can be written in the run folder
/// `dir` and still leave the `need` bytes of [`check`]'s estimate free:
/// `Err` says why not.
pub(crate) fn room_to_keep(dir: &Path, bytes: u64, need: u64) -> Result<(), String> {
    let free = fisherkit_io::available_space(dir).map_err(|e| e.to_string())?;
    room_with(bytes, need, free)
}

fn room_with(bytes: u64, need: u64, free: u64) -> Result<(), String> {
    if bytes.saturating_add(need) <= free {
        return Ok(());
    }
    Err(format!(
        "{} of it and the run's {} would not fit in the {} free",
        gb(bytes),
        gb(need),
        gb(free)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RunConfig {
        RunConfig::new("a".into(), "b".into())
    }

    #[test]
    fn the_estimate_counts_stores_and_kernels() {
        let mut c = cfg();
        c.store_format = crate::store::StoreFormat::Q8;
        let plan = [
            ModelSpec {
                scale: 0,
                kind: ModelKind::Gmm { k: 50 },
            },
            ModelSpec {
                scale: 0,
                kind: ModelKind::Mfa { k: 50, r: 10 },
            },
        ];
        // descriptor files of D = 512, PCA 500: GMM 50 050 values, MFA 275 000
        let need = estimate(&c, &plan, 39_700, 19_850, 512, 3, None);
        let q8 = |d: u64| 4 * d.div_ceil(256) + d;
        assert_eq!(need.stores, 39_700 * (q8(50_050) + q8(275_000)));
        // the kernel path (3.2 GB held at any number of scales): one f32
        // training kernel and the norms per part, a part per term and scale;
        // in one process one encoder's parts at a time
        let part = 4 * 19_850 * 19_850 + 8 * 39_700;
        assert_eq!(need.kernels, 3 * part);
        let need = estimate(&c, &plan, 39_700, 19_850, 512, 1, None);
        assert_eq!(need.kernels, part);
        // with cnn-global its kernel is held too (4.7 GB): the primal path, no kernel files
        c.encoders
            .extend(crate::spec::parse_encoders("cnn-global").unwrap());
        let need = estimate(&c, &plan, 39_700, 19_850, 512, 3, Some(1000));
        assert_eq!(need.kernels, 0);
        let need = estimate(&c, &plan, 1_000, 800, 512, 1, Some(1000));
        assert!(need.kernels > 0);
        assert_eq!(need.stores, 1_000 * (q8(50_050) + q8(275_000) + q8(1000)));
    }

    #[test]
    fn classifier_tasks_that_cannot_write_their_kernels_are_refused() {
        // SUN397's image run: 12 kernels of 19 850² f32, 19 GB
        let e = task_kernels_with(Path::new("/run"), 12, 19_850, 39_700, 10_000_000_000)
            .unwrap_err()
            .to_string();
        for part in [
            "/run",
            "12 term kernels",
            "18.9 GB",
            "10.0 GB free",
            "classifier_tasks=False",
        ] {
            assert!(e.contains(part), "`{part}` missing: {e}");
        }
        assert!(task_kernels_with(Path::new("/run"), 12, 100, 200, 1 << 30).is_ok());
    }

    #[test]
    fn the_peak_counts_files_kept_for_later_steps() {
        let p = |name: &str, s| (name.to_string(), false, s, 0usize);
        let set = |v: Vec<Part>| v.into_iter().collect::<BTreeSet<Part>>();
        // a (2 scales), then b (2 scales), then a sweep point reading a's scale 0
        let steps = [
            set(vec![p("a", 0), p("a", 1)]),
            set(vec![p("b", 0), p("b", 1)]),
            set(vec![p("a", 0)]),
        ];
        // during b: b's two files and a's scale 0, kept for the last step
        assert_eq!(peak_files(&steps), 3);
        assert_eq!(peak_files(&steps[..2]), 2);
        assert_eq!(peak_files(&[]), 0);
    }

    #[test]
    fn the_sample_output_is_kept_only_beside_the_runs_need() {
        assert!(room_with(100, 900, 1000).is_ok());
        let e = room_with(3_000_000_000, 9_000_000_000, 10_000_000_000).unwrap_err();
        assert!(
            e.contains("3.0 GB") && e.contains("9.0 GB") && e.contains("10.0 GB free"),
            "{e}"
        );
        assert!(room_with(101, 900, 1000).is_err());
        assert!(room_with(u64::MAX, 1, u64::MAX - 1).is_err());
    }

    #[test]
    fn a_run_that_cannot_fit_is_refused_naming_need_free_and_flags() {
        let mut c = cfg();
        c.store_format = crate::store::StoreFormat::F32;
        let need = DiskNeed {
            stores: 10_000_000_000,
            kernels: 2_000_000_000,
        };
        let e = check_with(Path::new("/run"), need, 0, 1_000_000_000, &c)
            .unwrap_err()
            .to_string();
        for part in [
            "/run",
            "not enough disk",
            "12.",
            "1.0 GB free",
            "--store q8",
            "--classifier primal",
        ] {
            assert!(e.contains(part), "`{part}` missing in: {e}");
        }
        assert!(!e.contains('\n'), "one line");
        // a resumed run that already holds most of it passes
        assert!(check_with(Path::new("/run"), need, 12_000_000_000, 1_000_000_000, &c).is_ok());
        assert!(check_with(Path::new("/run"), need, 0, need.total(), &c).is_ok());
    }
}
