//! Linear kernels from the encoding stores (docs/pipeline.md §4).
//!
//! A term (`gmm-fv:var`, `mfa-fs:loading`, `cnn-global`) of one scale reads
//! its columns of a store's raw rows $g_i$ and transforms them as the
//! in-memory encoders do: optional whitening $g_{ij} / \sqrt{\max(F_j,
//! 10^{-12}\bar F)}$ with $F_j$ the variance of column j over the training
//! rows, signed power $p_{ij} = \mathrm{sign}(g_{ij})|g_{ij}|^\rho$, then L2,
//! $x_i = p_i/\|p_i\|$. Its kernel over the N training rows,
//! $G_{ij} = x_i^\top x_j$ (N, N, `f32`), adds up over blocks of columns,
//! $G = D^{-1} (\sum_b P_b P_b^\top) D^{-1}$ with $D = \mathrm{diag}\|p_i\|$,
//! so the encodings are streamed once, block by block, and never held; the
//! concatenation of terms or scales (each L2-normalised on its own) has the
//! sum of their kernels. Test rows are not in the kernel: once the SVM is
//! trained on it, their decision values $F = X_{te} (A X_{tr})^\top$ are
//! formed in one more pass over the columns (`add_decisions`), which costs
//! $2 K (N + M) D$ multiply-adds for K classes and M test rows instead of the
//! $N M D$ of a test × train kernel, and no memory of size N·M.

use crate::progress::{stop_if_cancelled, Progress};
use crate::store::Store;
use crate::PipelineError;
use fisherkit::linalg::{gemm, gram_accumulate_lower, mirror_lower, par_all, symmetric_eigen};
use fisherkit::Normalization;
use ndarray::{Array1, Array2, ArrayView2};
use rayon::prelude::*;
use std::ops::Range;

/// Columns per block: at most ~256 MB of f32 per block for N rows.
pub(crate) fn block_cols(n_rows: usize) -> usize {
    (64 << 20) / n_rows.max(1)
}

/// One term of one scale: columns `cols` of `store`.
pub(crate) struct TermColumns<'a> {
    pub store: &'a Store,
    pub cols: Vec<Range<usize>>,
    pub whiten: bool,
    pub norm: Normalization,
    /// Asked before every block read: a cancelled run stops within one
    /// block (~256 MB of columns), not at the end of a kernel or an SVM pass.
    pub progress: &'a dyn Progress,
}

/// The kernel of a term over the training rows of `rows` (train rows first,
/// `n_train` of them), and what its test rows need.
pub(crate) struct TermKernel {
    /// (n_train, n_train) $x_i^\top x_j$ over the training rows.
    pub gram: Array2<f32>,
    /// (all rows) the scale $1/\|p_i\|$ (1 where the norm is below the floor or without L2).
    pub inv_norm: Array1<f64>,
    /// The whitening's Fisher-information estimate (length = the term's width), if whitened.
    pub fim: Option<Array1<f32>>,
}

impl TermColumns<'_> {
    /// Width of the term.
    pub(crate) fn width(&self) -> usize {
        self.cols.iter().map(|c| c.len()).sum()
    }

    /// Blocks of at most `w` columns, as (store range, offset in the term).
    pub(crate) fn blocks(&self, w: usize) -> Vec<(Range<usize>, usize)> {
        let mut v = Vec::new();
        let mut off = 0;
        for c in &self.cols {
            let mut s = c.start;
            while s < c.end {
                let e = (s + w).min(c.end);
                v.push((s..e, off + s - c.start));
                s = e;
            }
            off += c.len();
        }
        v
    }

    /// Reads columns `cols` of `rows` (parallel over rows) as an (N, |cols|) matrix.
    pub(crate) fn read(
        &self,
        rows: &[usize],
        cols: Range<usize>,
    ) -> Result<Array2<f32>, PipelineError> {
        stop_if_cancelled(self.progress)?;
        let w = cols.len();
        let mut out = Array2::<f32>::zeros((rows.len(), w));
        out.as_slice_mut()
            .expect("contiguous")
            .par_chunks_mut(w * 64)
            .zip(rows.par_chunks(64))
            .try_for_each(|(o, r)| self.store.read_block(r, cols.clone(), o))?;
        Ok(out)
    }

    /// The Fisher-information estimate of the whitening: the variance of each
    /// column over the training rows, $F_j = \frac1B\sum_b (g_{bj}-\bar g_j)^2$.
    pub(crate) fn fisher_information(&self, train: &[usize]) -> Result<Array1<f32>, PipelineError> {
        let mut f = Array1::<f32>::zeros(self.width());
        for (cols, off) in self.blocks(block_cols(train.len())) {
            let x = self.read(train, cols.clone())?;
            let n = x.nrows() as f64;
            for (j, c) in x.columns().into_iter().enumerate() {
                let mean = c.iter().map(|&v| v as f64).sum::<f64>() / n;
                let var = c.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
                f[off + j] = var as f32;
            }
        }
        Ok(f)
    }

    /// The per-column scale of the whitening (see [`crate::classifier::white_scale`]).
    pub(crate) fn white_scale(fim: &Array1<f32>) -> Array1<f32> {
        crate::classifier::white_scale(fim)
    }

    /// Whitening and signed power of a block in place (row by row, as
    /// [`crate::classifier::whiten_and_power`]).
    pub(crate) fn transform(&self, x: &mut Array2<f32>, scale: Option<&[f32]>) {
        let p = self.norm.power;
        x.rows_mut().into_iter().for_each(|mut row| {
            let row = row.as_slice_mut().expect("standard layout");
            crate::classifier::whiten_and_power(row, scale, p);
        });
    }

    /// The term's kernel over the training rows of `rows` (the first
    /// `n_train`), with the norms of all of `rows`: one pass over the
    /// columns, reading every row (the test rows for their norms only).
    pub(crate) fn kernel(
        &self,
        rows: &[usize],
        n_train: usize,
    ) -> Result<TermKernel, PipelineError> {
        let n = rows.len();
        let fim = if self.whiten {
            Some(self.fisher_information(&rows[..n_train])?)
        } else {
            None
        };
        let scale = fim.as_ref().map(Self::white_scale);
        // the run's largest buffer: 1.6 GB at SUN397's 19 850 training images
        let mut gram = crate::error::zeros_checked::<f32>(
            n_train,
            n_train,
            "kernel",
            "training kernel",
            "--classifier primal trains without it",
        )?;
        let mut sq = vec![0.0f64; n];
        for (cols, off) in self.blocks(block_cols(n)) {
            let mut x = self.read(rows, cols.clone())?;
            let s = scale
                .as_ref()
                .map(|s| &s.as_slice().expect("contiguous")[off..off + cols.len()]);
            self.transform(&mut x, s);
            add_squared_norms(x.view(), &mut sq);
            gram_accumulate_lower(&mut gram, x.slice(ndarray::s![..n_train, ..]));
        }
        mirror_lower(&mut gram);
        let inv_norm = Array1::from_shape_fn(n, |i| {
            crate::classifier::inv_norm(sq[i].max(0.0), self.norm.l2)
        });
        gram.axis_iter_mut(ndarray::Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut row)| {
                for (j, g) in row.iter_mut().enumerate() {
                    *g = (*g as f64 * inv_norm[i] * inv_norm[j]) as f32;
                }
            });
        Ok(TermKernel {
            gram,
            inv_norm,
            fim,
        })
    }

    /// Adds the term's part of the test rows' decision values: with the
    /// dual coefficients `dual` (K, n_train) of an SVM trained on a kernel
    /// that includes this term, `f` (M, K) += $X_{te} W^\top$ with the term's
    /// weights $W = A X_{tr}$ (K, width), block by block over the columns.
    /// `rows` as for [`TermColumns::kernel`], M = `rows.len()` − `n_train`.
    /// With `weights` (K, width), $W$ is also kept there (the weights of a
    /// saved classifier: the same ones that scored the run's test images, and
    /// no second pass over the training rows).
    pub(crate) fn add_decisions(
        &self,
        rows: &[usize],
        n_train: usize,
        k: &TermKernel,
        dual: ArrayView2<'_, f32>,
        f: &mut Array2<f32>,
        mut weights: Option<ndarray::ArrayViewMut2<'_, f32>>,
    ) -> Result<(), PipelineError> {
        let n_classes = dual.nrows();
        let mut off = 0;
        self.for_each_block(rows, k, k.inv_norm.as_slice().expect("contiguous"), |x| {
            let (xtr, xte) = x.split_at(ndarray::Axis(0), n_train);
            let mut w = Array2::<f32>::zeros((n_classes, x.ncols()));
            gemm(w.view_mut(), false, dual, xtr, 1.0, par_all());
            gemm(f.view_mut(), true, xte, w.t(), 1.0, par_all());
            if let Some(out) = weights.as_mut() {
                out.slice_mut(ndarray::s![.., off..off + x.ncols()])
                    .assign(&w);
            }
            off += x.ncols();
            Ok(())
        })
    }

    /// Adds the term's test × train kernel $X_{te} X_{tr}^\top$ to `cross`
    /// (M, n_train): only for the compact variant's kernel PCA.
    pub(crate) fn add_cross(
        &self,
        rows: &[usize],
        n_train: usize,
        k: &TermKernel,
        cross: &mut Array2<f64>,
    ) -> Result<(), PipelineError> {
        let mut acc = Array2::<f32>::zeros(cross.dim());
        self.for_each_block(rows, k, k.inv_norm.as_slice().expect("contiguous"), |x| {
            let (xtr, xte) = x.split_at(ndarray::Axis(0), n_train);
            gemm(acc.view_mut(), true, xte, xtr.t(), 1.0, par_all());
            Ok(())
        })?;
        cross.zip_mut_with(&acc, |c, &a| *c += a as f64);
        Ok(())
    }

    /// Calls `f` with consecutive column blocks (rows × block) of the term's
    /// final encodings of `rows` (whitened, powered, scaled by `inv_norm`),
    /// in column order: for the SVM weights and the saved encodings.
    pub(crate) fn for_each_block(
        &self,
        rows: &[usize],
        k: &TermKernel,
        inv_norm: &[f64],
        mut f: impl FnMut(ArrayView2<'_, f32>) -> Result<(), PipelineError>,
    ) -> Result<(), PipelineError> {
        let scale = k.fim.as_ref().map(Self::white_scale);
        for (cols, off) in self.blocks(block_cols(rows.len())) {
            let mut x = self.read(rows, cols.clone())?;
            let s = scale
                .as_ref()
                .map(|s| &s.as_slice().expect("contiguous")[off..off + cols.len()]);
            self.transform(&mut x, s);
            for (mut row, &inv) in x.rows_mut().into_iter().zip(inv_norm) {
                let inv = inv as f32;
                row.mapv_inplace(|v| v * inv);
            }
            f(x.view())?;
        }
        Ok(())
    }
}

/// $\sum_j x_{ij}^2$ of each row of `x` (rows, B) added to `sq` (rows), in `f64`.
fn add_squared_norms(x: ArrayView2<'_, f32>, sq: &mut [f64]) {
    sq.par_iter_mut()
        .zip(x.axis_iter(ndarray::Axis(0)).into_par_iter())
        .for_each(|(s, row)| *s += row.iter().map(|&v| v as f64 * v as f64).sum::<f64>());
}

/// The kernel files of `name` in `dir`: the training kernel (`f32`), the
/// inverse norms and the whitening.
fn kernel_files(dir: &std::path::Path, name: &str) -> [std::path::PathBuf; 3] {
    ["gram32", "inv-norm", "fim"].map(|w| dir.join(format!("{name}.{w}.npy")))
}

/// A kernel saved by [`save_kernel`], if complete, over `n` rows of which
/// the first `n_train` are the kernel's: its norms and whitening, read; its
/// Gram checked from the file's header only (an `f32` (n_train, n_train)
/// array) and left in the run folder for [`load_gram`] (the returned
/// `gram` is empty).
pub(crate) fn load_kernel(
    dir: &std::path::Path,
    name: &str,
    n: usize,
    n_train: usize,
    whiten: bool,
) -> Option<TermKernel> {
    let [g, i, f] = kernel_files(dir, name);
    let info = fisherkit_io::NpyInfo::open(&g).ok()?;
    let inv = fisherkit_io::read_npy_as::<f64>(&i).ok()?;
    let square = (info.n_rows, info.dim) == (n_train, n_train);
    if !square || info.dtype != fisherkit_io::Dtype::F32 || inv.len() != n {
        return None;
    }
    let fim = if whiten {
        // saved as one (1, width) row
        let f = fisherkit_io::read_npy_as::<f32>(&f).ok()?;
        let width = f.len();
        Some(f.into_shape_with_order(width).ok()?)
    } else {
        None
    };
    Some(TermKernel {
        gram: ndarray::Array2::zeros((0, 0)),
        inv_norm: Array1::from_iter(inv.iter().copied()),
        fim,
    })
}

/// The training kernel (n_train, n_train) `f32` saved by [`save_kernel`]
/// under `name` in `dir`, alone (a row's kernel is summed from these, one
/// part at a time, so that only the sum and one part are in memory).
///
/// # Errors
/// The file missing, unreadable or of another shape.
pub(crate) fn load_gram(
    dir: &std::path::Path,
    name: &str,
    n_train: usize,
) -> Result<ndarray::Array2<f32>, PipelineError> {
    let [g, _, _] = kernel_files(dir, name);
    let io = |message: String| PipelineError::Io {
        path: g.display().to_string(),
        message,
    };
    let gram = fisherkit_io::read_npy_as::<f32>(&g).map_err(|e| io(e.to_string()))?;
    if gram.dim() != (n_train, n_train) {
        return Err(io(format!(
            "a kernel of shape {:?} where ({n_train}, {n_train}) was saved",
            gram.dim()
        )));
    }
    Ok(gram)
}

/// Removes the kernel files of `name` in `dir` (those present; a file that
/// cannot be removed is left: it costs disk, not results).
pub(crate) fn remove_kernel(dir: &std::path::Path, name: &str) {
    for f in kernel_files(dir, name) {
        let _ = std::fs::remove_file(f);
    }
}

/// The kernel files a run reads, step by step (each report encoder, then
/// each sweep point): after a step, the files no later step reads are
/// removed, so that the run folder holds the encoding stores and the
/// kernels of one step (at SUN397's size 1.6 GB per part) rather than all of them.
pub(crate) struct KernelUses {
    dir: std::path::PathBuf,
    steps: Vec<Vec<String>>,
    next: std::cell::Cell<usize>,
}

impl KernelUses {
    /// The steps' kernel names, in the order the run takes them.
    pub(crate) fn new(dir: std::path::PathBuf, steps: Vec<Vec<String>>) -> Self {
        Self {
            dir,
            steps,
            next: std::cell::Cell::new(0),
        }
    }

    /// Ends the current step: removes its kernels that no later step reads.
    pub(crate) fn step_done(&self) {
        let i = self.next.get();
        self.next.set(i + 1);
        let Some(now) = self.steps.get(i) else {
            return;
        };
        for name in now {
            if !self.steps[i + 1..].iter().any(|later| later.contains(name)) {
                remove_kernel(&self.dir, name);
            }
        }
    }
}

/// Whether the kernel `name` is saved in `dir` (its kernel file, written last, is there).
pub(crate) fn kernel_saved(dir: &std::path::Path, name: &str) -> bool {
    kernel_files(dir, name)[0].is_file()
}

/// Saves a term's kernel (atomically, the kernel file last) for a resumed or repeated run.
pub(crate) fn save_kernel(
    dir: &std::path::Path,
    name: &str,
    k: &TermKernel,
) -> Result<(), PipelineError> {
    let [g, i, f] = kernel_files(dir, name);
    let err = |p: &std::path::Path, e: fisherkit_io::IoError| PipelineError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    if let Some(fim) = &k.fim {
        fisherkit_io::write_npy(&f, fim.view().insert_axis(ndarray::Axis(0)))
            .map_err(|e| err(&f, e))?;
    }
    fisherkit_io::write_npy(&i, k.inv_norm.view().insert_axis(ndarray::Axis(0)))
        .map_err(|e| err(&i, e))?;
    fisherkit_io::write_npy(&g, k.gram.view()).map_err(|e| err(&g, e))
}

/// Kernel PCA to `dim` components (the paper's compact "+ PCA" variant):
/// with the training kernel $G$ (n, n) centred, $G_c = HGH = U\Lambda U^\top$,
/// the training projections are $Z = U_d\Lambda_d^{1/2}$ and a test vector's
/// $z = \Lambda_d^{-1/2}U_d^\top k_c$ ($k_c$ its centred kernel row). Returns
/// the linear kernels of the projections: (train (n, n), test × train (m, n)).
///
/// # Errors
/// The eigensolver failing.
pub(crate) fn kernel_pca(
    train: ArrayView2<'_, f64>,
    cross: ArrayView2<'_, f64>,
    dim: usize,
) -> Result<(Array2<f64>, Array2<f64>, usize), PipelineError> {
    let n = train.nrows();
    let col_mean = train.mean_axis(ndarray::Axis(0)).expect("rows");
    let all_mean = col_mean.mean().unwrap_or(0.0);
    let mut gc = train.to_owned();
    for ((i, j), g) in gc.indexed_iter_mut() {
        *g += all_mean - col_mean[i] - col_mean[j];
    }
    let (s, u) = symmetric_eigen(gc.view())
        .ok_or_else(|| PipelineError::at("compact PCA", "the eigensolver did not converge"))?;
    // the largest `dim` positive eigenvalues (ascending order from faer)
    let kept: Vec<usize> = (0..n)
        .rev()
        .filter(|&j| s[j] > 1e-10 * s[n - 1].abs().max(1e-300))
        .take(dim)
        .collect();
    let d = kept.len();
    let mut z_train = Array2::<f64>::zeros((n, d));
    let mut proj = Array2::<f64>::zeros((n, d)); // U_d Λ^{-1/2}
    for (c, &j) in kept.iter().enumerate() {
        let l = s[j];
        for i in 0..n {
            z_train[[i, c]] = u[[i, j]] * l.sqrt();
            proj[[i, c]] = u[[i, j]] / l.sqrt();
        }
    }
    let m = cross.nrows();
    let mut kc = cross.to_owned();
    for i in 0..m {
        let row_mean = cross.row(i).mean().unwrap_or(0.0);
        for j in 0..n {
            kc[[i, j]] += all_mean - row_mean - col_mean[j];
        }
    }
    let z_test = kc.dot(&proj);
    Ok((z_train.dot(&z_train.t()), z_test.dot(&z_train.t()), d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreFormat;

    /// A store of `n` rows of width `d` with planted values, and its rows
    /// powered and L2-normalised by hand (the independent truth).
    fn planted(dir: &std::path::Path, n: usize, d: usize) -> (Store, Array2<f64>) {
        let mut store = Store::open(dir, n, d, StoreFormat::F32).unwrap();
        let mut x = Array2::<f64>::zeros((n, d));
        for i in 0..n {
            let row: Vec<f32> = (0..d)
                .map(|j| (((i * 7 + j * 13) % 17) as f32 - 8.0) * 0.1 + (i % 3) as f32 * 0.05)
                .collect();
            store.write_row(i, &row).unwrap();
            let p: Vec<f64> = row
                .iter()
                .map(|&v| (v as f64).signum() * (v as f64).abs().sqrt())
                .collect();
            let norm = p.iter().map(|v| v * v).sum::<f64>().sqrt();
            for j in 0..d {
                x[[i, j]] = p[j] / norm;
            }
        }
        store.commit(&(0..n).collect::<Vec<_>>()).unwrap();
        (store, x)
    }

    #[test]
    fn the_training_kernel_and_the_streamed_test_scores_match_the_direct_products() {
        let t = tempfile::tempdir().unwrap();
        let (n, d, nt, k) = (23, 40, 15, 3);
        let (store, x) = planted(&t.path().join("s"), n, d);
        // rows in a permuted order, train rows first
        let rows: Vec<usize> = (0..n).map(|i| (i * 5) % n).collect();
        let cols = TermColumns {
            store: &store,
            cols: vec![0..12, 20..40],
            whiten: false,
            norm: Normalization::default(),
            progress: &crate::NoProgress,
        };
        // the term's own columns, renormalised over them
        let sub = |i: usize| -> Vec<f64> {
            let raw: Vec<f64> = (0..12).chain(20..40).map(|j| x[[i, j]]).collect();
            let norm = raw.iter().map(|v| v * v).sum::<f64>().sqrt();
            raw.iter().map(|v| v / norm).collect()
        };
        let xs: Vec<Vec<f64>> = rows.iter().map(|&i| sub(i)).collect();
        let dotp = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
        let kern = cols.kernel(&rows, nt).unwrap();
        assert_eq!(kern.gram.dim(), (nt, nt));
        assert_eq!(kern.inv_norm.len(), n);
        for i in 0..nt {
            for j in 0..nt {
                let want = dotp(&xs[i], &xs[j]);
                assert!(
                    (kern.gram[[i, j]] as f64 - want).abs() < 1e-5,
                    "[{i},{j}]: {} vs {want}",
                    kern.gram[[i, j]]
                );
            }
        }
        // F = X_te (A X_tr)^T, and the cross kernel X_te X_tr^T
        let dual = Array2::from_shape_fn((k, nt), |(c, j)| ((c * 3 + j) % 5) as f32 - 2.0);
        let mut f = Array2::<f32>::zeros((n - nt, k));
        let mut w = Array2::<f32>::zeros((k, 32));
        cols.add_decisions(&rows, nt, &kern, dual.view(), &mut f, Some(w.view_mut()))
            .unwrap();
        // the weights W = A X_tr over the term's 32 columns (two column ranges)
        for c in 0..k {
            for col in 0..32 {
                let want: f64 = (0..nt).map(|j| dual[[c, j]] as f64 * xs[j][col]).sum();
                assert!(
                    (w[[c, col]] as f64 - want).abs() < 1e-4,
                    "weight [{c},{col}]: {} vs {want}",
                    w[[c, col]]
                );
            }
        }
        let mut cross = Array2::<f64>::zeros((n - nt, nt));
        cols.add_cross(&rows, nt, &kern, &mut cross).unwrap();
        for m in 0..n - nt {
            for j in 0..nt {
                let want = dotp(&xs[nt + m], &xs[j]);
                assert!((cross[[m, j]] - want).abs() < 1e-5);
            }
            for c in 0..k {
                let want: f64 = (0..nt)
                    .map(|j| dual[[c, j]] as f64 * dotp(&xs[nt + m], &xs[j]))
                    .sum();
                assert!(
                    (f[[m, c]] as f64 - want).abs() < 1e-4,
                    "test row {m}, class {c}: {} vs {want}",
                    f[[m, c]]
                );
            }
        }
    }
}
