//! The E-step of one reduction leaf: its chunks through the screened kernel
//! or the GEMM kernel, summed into [`GmmStats`] in `f64` (docs/math.md
//! §2.3, §2.7, §2.8).

use super::stats::{DiagMixture, GmmStats};
use crate::float::{Float, LN_2PI};
use crate::kernels::reduce::{add_column_sums, CHUNK_ROWS};
use crate::kernels::screen::{ScreenScratch, SparseRows, REFINE_MIN};
use crate::kernels::softmax::{flush_cutoff, log_joint_to_posteriors_flushed};
use crate::linalg::{gemm, Par};
use ndarray::{s, Array1, Array2, ArrayView2, Axis, Zip};

/// A chunk whose posterior matrix has at most 1/`SPARSE_DENSITY_INV` non-zero
/// entries is accumulated entry by entry (exactly, in `f64`) instead of by
/// the dense GEMM $Q^\top [y^2, y]$: at D = 500 most posteriors underflow.
const SPARSE_DENSITY_INV: usize = 10;

/// Dense chunks whose GEMM sums $Q^\top [y^2, y]$ are added up in `F` before
/// they are added into the `f64` totals: 4 · [`CHUNK_ROWS`] = 1024 rows, few
/// enough that `f32` keeps about 6 significant digits of the partial sums, and
/// the conversion pass (K·2D per flush) is a small fraction of the GEMM.
const FLUSH_CHUNKS: usize = 4;

/// Adds $\sum_i q_{ik} y_i^2$ and $\sum_i q_{ik} y_i$ over the non-zero
/// entries of `q` (n, K), with `yy` = $[y^2, y]$ (n, 2D), into `st` in `f64`.
fn accumulate_sparse<F: Float>(st: &mut GmmStats, q: ArrayView2<'_, F>, yy: ArrayView2<'_, F>) {
    let d = st.dim();
    for (qr, yr) in q.rows().into_iter().zip(yy.rows()) {
        let (y2, y1) = yr.split_at(Axis(0), d);
        for (k, &qv) in qr.iter().enumerate() {
            if qv == F::zero() {
                continue;
            }
            let w = qv.as_f64();
            Zip::from(st.sum_y2.row_mut(k))
                .and(&y2)
                .for_each(|a, &v| *a += w * v.as_f64());
            Zip::from(st.sum_y.row_mut(k))
                .and(&y1)
                .for_each(|a, &v| *a += w * v.as_f64());
        }
    }
}

/// The E-step of one reduction leaf (its chunks, sequentially): the
/// statistics so far and the buffers reused across chunks (and, through a
/// [`Pool`](crate::kernels::reduce::Pool), across the leaves of one E-step).
pub(super) struct EStepLeaf<F: Float> {
    st: GmmStats,
    /// Dense chunks' GEMM sums $Q^\top [y^2, y]$ (K, 2D) in `F` since the last flush.
    acc: Array2<F>,
    pending: usize,
    /// (CHUNK_ROWS, K) log-joints, then posteriors, of a dense chunk.
    q: Array2<F>,
    /// (n, 2D) $[y^2, y]$ of a dense chunk.
    scratch: Array2<F>,
    /// (CHUNK_ROWS) row log-likelihoods.
    ll: Vec<f64>,
    screen: ScreenScratch<F>,
    rows: SparseRows,
    /// (D) one row's $y = x - c$ in `f64`.
    y64: Vec<f64>,
}

impl<F: Float> EStepLeaf<F> {
    /// Buffers for `g`; [`Self::start`] gives them statistics to add to.
    pub(super) fn new(g: &impl DiagMixture<F>) -> Self {
        let (k, d) = (g.n_components(), g.dim());
        Self {
            st: GmmStats::zeros(0, Array1::zeros(0)),
            acc: Array2::zeros((k, 2 * d)),
            pending: 0,
            q: Array2::zeros((CHUNK_ROWS, k)),
            scratch: Array2::zeros((0, 0)),
            ll: vec![0.0; CHUNK_ROWS],
            screen: ScreenScratch::default(),
            rows: SparseRows::default(),
            y64: vec![0.0; d],
        }
    }

    /// Starts a leaf on the statistics `st` (cleared here): nothing pending and
    /// no screening skip carried over from the leaf these buffers served before,
    /// so that a leaf's result depends only on its rows.
    pub(super) fn start(&mut self, mut st: GmmStats) {
        st.clear();
        self.st = st;
        self.pending = 0;
        self.screen.reset();
    }

    /// The chunk `xc` (n, D) through the screened kernel (docs/math.md §2.7):
    /// exact posteriors of the survivors, sums in `f64`. False (nothing
    /// added) when the chunk is dense.
    pub(super) fn screened_chunk(
        &mut self,
        g: &impl DiagMixture<F>,
        xc: ArrayView2<'_, F>,
    ) -> bool {
        if !g
            .screen()
            .survivors(xc, None, &mut self.screen, &mut self.rows)
        {
            return false;
        }
        self.add_rows(g, xc);
        true
    }

    /// Adds the rows of `xc` (n, D) whose exact log-joints are in `self.rows` (per row, the
    /// components that matter): their softmax, the sums in `f64` and the log-likelihood.
    fn add_rows(&mut self, g: &impl DiagMixture<F>, xc: ArrayView2<'_, F>) {
        let n = xc.nrows();
        self.rows.softmax(flush_cutoff::<F>(), &mut self.ll[..n]);
        let st = &mut self.st;
        let c = st.center.as_slice().expect("standard layout");
        for (i, xr) in xc.rows().into_iter().enumerate() {
            self.y64
                .iter_mut()
                .zip(xr.iter())
                .zip(c)
                .for_each(|((y, &x), &c)| *y = x.as_f64() - c);
            for j in self.rows.start[i]..self.rows.start[i + 1] {
                let (k, w) = (self.rows.comp[j] as usize, self.rows.val[j]);
                st.resp_sums[k] += w;
                let s1 = st.sum_y.row_mut(k).into_slice().expect("standard layout");
                let s2 = st.sum_y2.row_mut(k).into_slice().expect("standard layout");
                for ((a1, a2), &y) in s1.iter_mut().zip(s2.iter_mut()).zip(&self.y64) {
                    let wy = w * y;
                    *a1 += wy;
                    *a2 += wy * y;
                }
            }
        }
        // The kernel's log-joints leave out −D/2·log 2π.
        let norm = -0.5 * g.dim() as f64 * LN_2PI;
        st.log_likelihood += self.ll[..n].iter().map(|l| l + norm).sum::<f64>();
        st.n_rows += n as f64;
    }

    /// `f32` only (docs/math.md §2.8): the posteriors of the GEMM in the first n rows of
    /// `self.q` that carry the mass ($q \ge$ [`REFINE_MIN`]) get their log-joints again in
    /// the centred direct form in `f64`, the others being dropped; then [`Self::add_rows`].
    fn add_refined(&mut self, g: &impl DiagMixture<F>, xc: ArrayView2<'_, F>) {
        let n = xc.nrows();
        self.rows
            .set_from_dense(self.q.slice(s![..n, ..]), REFINE_MIN);
        g.screen().exact_log_joints(xc, &mut self.rows);
        self.add_rows(g, xc);
    }

    /// The chunk `xc` (n, D) through the GEMM kernel: log-space posteriors
    /// $Q$ (n, K), then the sparse sums in `f64` when at most
    /// 1/[`SPARSE_DENSITY_INV`] of $Q$ is non-zero, else the GEMM
    /// $Q^\top [y^2, y]$ in `F` (flushed into `f64` every [`FLUSH_CHUNKS`]).
    pub(super) fn dense_chunk(&mut self, g: &impl DiagMixture<F>, xc: ArrayView2<'_, F>) {
        let (n, k, d) = (xc.nrows(), g.n_components(), g.dim());
        let mut qc = self.q.slice_mut(s![..n, ..]);
        g.log_joint_into(xc, qc.view_mut(), &mut self.scratch, Par::Seq);
        let nnz = log_joint_to_posteriors_flushed(qc.view_mut(), &mut self.ll[..n]);
        // `log_joint_into` leaves [y², y], y = x − c, in `scratch` (n, 2D)
        debug_assert_eq!(self.scratch.dim(), (n, 2 * d));
        if nnz * SPARSE_DENSITY_INV <= n * k && F::EPS.as_f64() > 1e-12 {
            self.add_refined(g, xc);
            return;
        }
        if nnz * SPARSE_DENSITY_INV <= n * k {
            accumulate_sparse(&mut self.st, qc.view(), self.scratch.view());
        } else {
            gemm(
                self.acc.view_mut(),
                self.pending > 0,
                qc.t(),
                self.scratch.view(),
                F::one(),
                Par::Seq,
            );
            self.pending += 1;
            if self.pending == FLUSH_CHUNKS {
                flush_dense(&mut self.st, &self.acc);
                self.pending = 0;
            }
        }
        add_column_sums(
            self.st.resp_sums.as_slice_mut().expect("standard layout"),
            qc.view(),
        );
        self.st.log_likelihood += self.ll[..n].iter().sum::<f64>();
        self.st.n_rows += n as f64;
    }

    /// The leaf's statistics; the buffers stay for [`Self::start`].
    pub(super) fn finish(&mut self) -> GmmStats {
        if self.pending > 0 {
            flush_dense(&mut self.st, &self.acc);
            self.pending = 0;
        }
        std::mem::replace(&mut self.st, GmmStats::zeros(0, Array1::zeros(0)))
    }
}

/// Adds dense GEMM sums `acc` = $Q^\top [y^2, y]$ (K, 2D) into the `f64` statistics.
fn flush_dense<F: Float>(st: &mut GmmStats, acc: &Array2<F>) {
    let d = st.dim();
    Zip::from(&mut st.sum_y2)
        .and(acc.slice(s![.., ..d]))
        .for_each(|a, &v| *a += v.as_f64());
    Zip::from(&mut st.sum_y)
        .and(acc.slice(s![.., d..]))
        .for_each(|a, &v| *a += v.as_f64());
}

/// The screened E-step (docs/math.md §2.7) against the GEMM one.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::gmm::DiagGmm;
    use crate::kernels::reduce::reduce_rows;
    use ndarray::Array1;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Separated components (sparse posteriors) around `offset`, decaying
    /// per-dimension scale; n rows drawn near them.
    fn planted(
        seed: u64,
        k: usize,
        d: usize,
        n: usize,
        spread: f64,
        offset: f64,
    ) -> (DiagGmm<f64>, Array2<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let w = Array1::from_elem(k, 1.0 / k as f64);
        let scale: Vec<f64> = (0..d).map(|j| (-(j as f64) / 8.0).exp() + 0.1).collect();
        let mu = Array2::from_shape_fn((k, d), |(_, j)| {
            offset + spread * scale[j] * rng.random_range(-1.0..1.0)
        });
        let var = Array2::from_shape_fn((k, d), |(_, j)| {
            scale[j] * scale[j] * rng.random_range(0.1..0.4)
        });
        let x = Array2::from_shape_fn((n, d), |(i, j)| {
            let (a, b) = (i % k, (i * 7 + 3) % k);
            let t = if i % 5 == 0 { 0.5 } else { 0.0 };
            (1.0 - t) * mu[[a, j]]
                + t * mu[[b, j]]
                + var[[a, j]].sqrt() * rng.random_range(-1.5..1.5)
        });
        (DiagGmm::new(w, mu, var).unwrap(), x)
    }

    fn rel(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        (num / b.iter().map(|y| y * y).sum::<f64>()).sqrt()
    }

    /// Blocks of [`CHUNK_ROWS`] rows: every third block near a group of nine almost equal
    /// components (nine live posteriors per row: a dense chunk, which sends the leaf to the
    /// GEMM path and makes its next chunks skip the screening), the others near a lone
    /// component far away (screened chunks). 60 000 rows are 235 chunks in 59 leaves of 4
    /// (the last of 3), so leaves share pooled buffers (`Pool`) whose pending dense sums and
    /// screening skips must not leak from one leaf into the next.
    fn mixed_chunks(seed: u64) -> (DiagGmm<f64>, Array2<f64>) {
        let (k, d, n) = (10, 8, 60_000);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mu = Array2::from_shape_fn((k, d), |(kk, j)| {
            if kk == 0 {
                0.0
            } else {
                30.0 + 0.01 * ((kk * 3 + j) % 5) as f64
            }
        });
        let var = Array2::from_shape_fn((k, d), |_| rng.random_range(0.9..1.1));
        let x = Array2::from_shape_fn((n, d), |(i, _)| {
            let near = if (i / CHUNK_ROWS).is_multiple_of(3) {
                30.0
            } else {
                0.0
            };
            near + rng.random_range(-1.0..1.0)
        });
        (
            DiagGmm::new(Array1::from_elem(k, 1.0 / k as f64), mu, var).unwrap(),
            x,
        )
    }

    fn stats_bits(st: &GmmStats) -> Vec<u64> {
        let mut b = vec![st.n_rows().to_bits(), st.log_likelihood().to_bits()];
        for a in [
            st.resp_sums().to_owned().into_dyn(),
            st.sum_y().to_owned().into_dyn(),
            st.sum_y2().to_owned().into_dyn(),
        ] {
            b.extend(a.iter().map(|v| v.to_bits()));
        }
        b
    }

    #[test]
    fn pooled_leaves_give_the_same_bits_for_any_thread_count() {
        let (g, x) = mixed_chunks(5);
        let (g32, x32): (DiagGmm<f32>, _) = (g.cast(), x.mapv(|v| v as f32));
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    (
                        stats_bits(&g.statistics_unchecked(x.view())),
                        stats_bits(&g32.statistics_unchecked(x32.view())),
                    )
                })
        };
        // the reference: every leaf on fresh buffers, reduced along the same tree
        let fresh = |g: &DiagGmm<f64>, x: ArrayView2<'_, f64>| {
            let c = g.center().to_owned();
            reduce_rows(
                x.nrows(),
                &|r| {
                    let st = GmmStats::zeros(g.n_components(), c.clone());
                    g.leaf_statistics(&mut EStepLeaf::new(g), st, x.slice(s![r, ..]), true)
                },
                &|mut a, b| {
                    a.add_same_center(&b);
                    a
                },
            )
        };
        let reference = stats_bits(&fresh(&g, x.view()));
        let one_thread_f32 = run(1).1;
        for t in [1, 2, 3] {
            let (b64, b32) = run(t);
            assert!(
                b64 == reference,
                "{t} thread(s): pooled leaves differ from fresh ones"
            );
            assert!(b32 == one_thread_f32, "f32, {t} threads differ from one");
        }
        // each leaf starts from zero: the pooled result is the reduction of fresh leaves,
        // whose sums match the direct formulas
        let st = g.statistics_unchecked(x.view());
        let q = g.predict_proba(x.view()).unwrap();
        let nk = q.sum_axis(Axis(0));
        for (a, b) in st.resp_sums().iter().zip(&nk) {
            assert!((a - b).abs() <= 1e-9 * b.max(1.0), "n_k {a} vs {b}");
        }
        assert_eq!(st.n_rows(), 60_000.0);
        // and the data do mix both kinds of chunks
        let mut rows = SparseRows::default();
        let mut ws = ScreenScratch::default();
        let kinds: Vec<bool> = x
            .axis_chunks_iter(Axis(0), CHUNK_ROWS)
            .take(6)
            .map(|c| {
                ws.reset();
                g.screen().survivors(c, None, &mut ws, &mut rows)
            })
            .collect();
        assert_eq!(kinds, [false, true, true, false, true, true]);
    }

    #[test]
    fn screened_statistics_equal_the_gemm_ones() {
        for spread in [12.0, 0.3] {
            let (g, x) = planted(21, 40, 36, 1500, spread, 2.0);
            let on = g.statistics_with(x.view(), true);
            let off = g.statistics_with(x.view(), false);
            let r = |a: &GmmStats, b: &GmmStats| {
                let n: f64 = a
                    .resp_sums()
                    .iter()
                    .zip(b.resp_sums())
                    .map(|(x, y)| (x - y).abs())
                    .sum();
                (
                    n / b.n_rows(),
                    rel(&a.sum_y().to_owned(), &b.sum_y().to_owned()),
                    rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned()),
                    (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs(),
                )
            };
            let (dn, d1, d2, dl) = r(&on, &off);
            assert!(
                dn < 1e-12 && d1 < 1e-12 && d2 < 1e-12 && dl < 1e-12,
                "spread {spread}: {dn:e} {d1:e} {d2:e} {dl:e}"
            );
        }
    }

    #[test]
    fn f32_statistics_are_within_1e_6_of_f64_far_from_the_origin() {
        let (g, x) = planted(22, 24, 64, 2000, 10.0, 1000.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        let g64: DiagGmm<f64> = g32.cast();
        let x64 = x32.mapv(|v| v as f64);
        let a = g32.statistics_with(x32.view(), true);
        let mut b = g64.statistics_with(x64.view(), true);
        // the f32 model's centre is its mixture mean rounded to f32
        b.recenter(a.center()).unwrap();
        let dl = (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs();
        let d1 = rel(&a.sum_y().to_owned(), &b.sum_y().to_owned());
        let d2 = rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned());
        assert!(dl < 1e-6 && d1 < 1e-6 && d2 < 1e-6, "{dl:e} {d1:e} {d2:e}");
    }

    #[test]
    fn gemm_path_f32_statistics_are_within_1e_6_of_f64_far_from_the_origin() {
        // Every chunk through the GEMM (as on real descriptors, where the bound prunes
        // nothing): the sparse posteriors are refined in f64 (docs/math.md §2.8).
        for (seed, sep) in [(23, 10.0), (24, 3.0)] {
            let (g, x) = planted(seed, 24, 64, 2000, sep, 1000.0);
            let g32: DiagGmm<f32> = g.cast();
            let x32 = x.mapv(|v| v as f32);
            let g64: DiagGmm<f64> = g32.cast();
            let x64 = x32.mapv(|v| v as f64);
            let a = g32.statistics_with(x32.view(), false);
            let mut b = g64.statistics_with(x64.view(), false);
            b.recenter(a.center()).unwrap();
            let dl = (a.log_likelihood() - b.log_likelihood()).abs() / b.log_likelihood().abs();
            let d0 = (&a.resp_sums() - &b.resp_sums()).mapv(f64::abs).sum() / a.n_rows();
            let d1 = rel(&a.sum_y().to_owned(), &b.sum_y().to_owned());
            let d2 = rel(&a.sum_y2().to_owned(), &b.sum_y2().to_owned());
            assert!(
                dl < 1e-6 && d0 < 1e-6 && d1 < 1e-6 && d2 < 1e-6,
                "separation {sep}: {dl:e} {d0:e} {d1:e} {d2:e}"
            );
        }
    }
}
