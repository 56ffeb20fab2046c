//! Dense linear-algebra kernels: the matrix products every hot loop is written in.
//!
//! All products go through faer's GEMM on views of ndarray storage (no copies
//! when the operands are contiguous in row- or column-major order), so the
//! E-steps and encoders run at the machine's GEMM rate without a system BLAS.

mod blas1;
mod cholesky;
pub use blas1::dots;
pub(crate) use blas1::{axpy, dot, dot_ff};
pub use cholesky::{Cholesky, CholeskyError};

use crate::float::Float;
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef};
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

pub use faer::Par;

/// Degree of parallelism for one product: [`Par::Seq`] inside code that is
/// already parallel over chunks (rayon), [`par_all`] for one large product.
pub fn par_all() -> Par {
    let n = rayon::current_num_threads();
    if n <= 1 {
        Par::Seq
    } else {
        Par::rayon(n)
    }
}

/// Rows per chunk of [`gram_add_lower_chunks`]'s output.
const GRAM_CHUNK: usize = 256;

/// Adds the lower triangle of $X_b X_b^\top$ to `acc` (N, N), `f64`, for a
/// block of columns `xb` (N, B): one triangular product in `F` (faer's
/// lower-triangular matmul over all of this machine's threads: only the
/// N(N+1)/2 products of the lower triangle are formed, in square tiles of full
/// GEMM speed), then added to the `f64` sum. Summing blocks of columns in a fixed
/// order gives $X X^\top$ for an X that never has to be held whole;
/// [`mirror_lower`] completes it. Extra memory: one (N, N) `F` buffer.
pub fn gram_add_lower<F: Float>(acc: &mut Array2<f64>, xb: ArrayView2<'_, F>) {
    use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
    use rayon::prelude::*;
    let xb = xb.as_standard_layout();
    let (n, b) = xb.dim();
    assert_eq!(acc.dim(), (n, n), "gram: shape mismatch");
    let mut g = Array2::<F>::zeros((n, n));
    let x = MatRef::from_row_major_slice(xb.as_slice().expect("standard layout"), n, b);
    tri_matmul(
        MatMut::from_row_major_slice_mut(g.as_slice_mut().expect("contiguous"), n, n),
        BlockStructure::TriangularLower,
        Accum::Replace,
        x,
        BlockStructure::Rectangular,
        x.transpose(),
        BlockStructure::Rectangular,
        F::one(),
        par_all(),
    );
    acc.axis_iter_mut(ndarray::Axis(0))
        .into_par_iter()
        .zip(g.axis_iter(ndarray::Axis(0)).into_par_iter())
        .enumerate()
        .for_each(|(i, (mut a, g))| {
            for j in 0..=i {
                a[j] += g[j].as_f64();
            }
        });
}

/// Adds the lower triangle of $X_b X_b^\top$ to `acc` (N, N) in place, in
/// `F` (faer's lower-triangular product accumulating into `acc`, over all of
/// this machine's threads): [`gram_add_lower`] without its `f64` sum and its
/// (N, N) buffer, for kernels too large to hold twice (an `f32` kernel of
/// SUN397's 19 850 training images is 1.6 GB). Summed over B-column blocks in
/// `f32`, an entry carries a relative error of about
/// $\sqrt{D}\,\epsilon_{32}$ (D the total width). `acc` must be row-major.
pub fn gram_accumulate_lower<F: Float>(acc: &mut Array2<F>, xb: ArrayView2<'_, F>) {
    use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
    let xb = xb.as_standard_layout();
    let (n, b) = xb.dim();
    assert_eq!(acc.dim(), (n, n), "gram: shape mismatch");
    let x = MatRef::from_row_major_slice(xb.as_slice().expect("standard layout"), n, b);
    tri_matmul(
        MatMut::from_row_major_slice_mut(acc.as_slice_mut().expect("row-major kernel"), n, n),
        BlockStructure::TriangularLower,
        Accum::Add,
        x,
        BlockStructure::Rectangular,
        x.transpose(),
        BlockStructure::Rectangular,
        F::one(),
        par_all(),
    );
}

/// [`gram_add_lower`] by one GEMM per chunk of [`GRAM_CHUNK`] output rows
/// (chunks in parallel, each added to its own rows of the `f64` sum). The
/// diagonal chunks are computed in full (their upper parts are overwritten by
/// the mirror). Extra memory: a (256, N) buffer per thread. Kept for the
/// `gram_timing` example's comparison.
#[doc(hidden)]
pub fn gram_add_lower_chunks<F: Float>(acc: &mut Array2<f64>, xb: ArrayView2<'_, F>) {
    use rayon::prelude::*;
    let xb = xb.as_standard_layout();
    assert_eq!(acc.dim(), (xb.nrows(), xb.nrows()), "gram: shape mismatch");
    acc.axis_chunks_iter_mut(ndarray::Axis(0), GRAM_CHUNK)
        .into_par_iter()
        .enumerate()
        .for_each(|(c, mut a)| {
            let end = c * GRAM_CHUNK + a.nrows();
            let xi = xb.slice(ndarray::s![c * GRAM_CHUNK..end, ..]);
            let xj = xb.slice(ndarray::s![..end, ..]);
            let mut g = Array2::<F>::zeros((a.nrows(), end));
            gemm(g.view_mut(), false, xi, xj.t(), F::one(), Par::Seq);
            a.slice_mut(ndarray::s![.., ..end])
                .zip_mut_with(&g, |s, v| *s += v.as_f64());
        });
}

/// Eigen-decomposition of the symmetric `a` (N, N, lower triangle read):
/// returns the eigenvalues in ascending order (N) and the eigenvectors as the
/// columns of (N, N); `None` if the solver does not converge.
pub fn symmetric_eigen(a: ArrayView2<'_, f64>) -> Option<(ndarray::Array1<f64>, Array2<f64>)> {
    let n = a.nrows();
    assert_eq!(a.ncols(), n, "symmetric_eigen: the matrix must be square");
    let a = a.as_standard_layout();
    let m = MatRef::from_row_major_slice(a.as_slice().expect("standard layout"), n, n);
    let evd = m.self_adjoint_eigen(faer::Side::Lower).ok()?;
    let (u, s) = (evd.U(), evd.S().column_vector());
    let values = ndarray::Array1::from_shape_fn(n, |i| s[i]);
    let vectors = Array2::from_shape_fn((n, n), |(i, j)| u[(i, j)]);
    Some((values, vectors))
}

/// Copies the lower triangle of the square `a` onto its upper triangle.
pub fn mirror_lower<T: Copy>(a: &mut Array2<T>) {
    for i in 0..a.nrows() {
        for j in 0..i {
            a[[j, i]] = a[[i, j]];
        }
    }
}

/// Applies `f` to `a` seen as a faer matrix, with `a`'s own strides: a
/// strided view (a column block of a wider matrix) is read in place, not
/// copied.
fn with_faer_ref<F: Float, R>(a: ArrayView2<'_, F>, f: impl FnOnce(MatRef<'_, F>) -> R) -> R {
    let (m, n) = a.dim();
    let (rs, cs) = (a.strides()[0], a.strides()[1]);
    // SAFETY: `from_raw_parts` needs (1) every element (i, j), i < m, j < n,
    // at `ptr + i·rs + j·cs` inside one allocation reachable from `ptr`,
    // (2) `ptr` aligned, (3) those elements initialised, (4) none of them
    // written through another path while the `MatRef` lives. An
    // `ArrayView2<'_, F>` guarantees exactly this for the elements it
    // addresses with these strides: they are initialised elements of the one
    // buffer the view borrows (its pointer derives from that buffer's, also
    // when the view is empty, where ndarray keeps it aligned and non-null),
    // and the shared borrow forbids writes to them for its lifetime, which
    // outlives `f`'s use of the `MatRef`. faer reads only elements (i, j)
    // with i < m, j < n.
    let mat = unsafe { MatRef::from_raw_parts(a.as_ptr(), m, n, rs, cs) };
    f(mat)
}

/// Runs `f` compiled for the best instruction set of this CPU (AVX2 + FMA on
/// x86-64 when available, else the baseline build), chosen at run time.
///
/// A default x86-64 build vectorises element-wise loops with 128-bit SSE2 only;
/// the closure body — and what it inlines — is compiled again with the wider
/// instructions (pulp's dispatch, the mechanism faer uses for its own kernels),
/// so a loop such as the posteriors' `exp` runs on 4 `f64` lanes with FMA.
/// The result is the same up to floating-point contraction (FMA) rounding.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

/// Clears the upper halves of this thread's vector registers (`vzeroupper`) if the CPU has AVX.
///
/// faer's AVX/AVX-512 GEMM micro-kernels return with those upper halves dirty;
/// afterwards every legacy-SSE instruction of the thread (all scalar f32/f64 code of
/// a default x86-64 build) pays a state-transition penalty: measured here, scalar
/// loops ran 30–50× slower after a GEMM until this was called. [`gemm`] calls it.
#[inline]
pub fn clear_upper_simd_state() {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: `vzeroupper` requires only AVX, checked just above. It zeroes bits
            // 128 and up of the vector registers, which this function (compiled without
            // the AVX target feature) and its callers cannot hold live: they only use
            // 128-bit SSE registers, and LLVM models the intrinsic as clobbering them.
            unsafe { std::arch::x86_64::_mm256_zeroupper() }
        }
    }
}

/// $C \leftarrow \beta C + \alpha A B$, with $\beta \in \{0, 1\}$ given by `accumulate`.
///
/// Shapes: `a` is (m, k), `b` is (k, n), `c` is (m, n); views may be transposed
/// (`x.t()`). `c` must be contiguous in row- or column-major order.
///
/// # Panics
/// On inconsistent shapes or a non-contiguous `c`: callers inside the library
/// validate shapes first, so this is a programming error, never a user error.
pub fn gemm<F: Float>(
    mut c: ArrayViewMut2<'_, F>,
    accumulate: bool,
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    alpha: F,
    par: Par,
) {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    assert_eq!(k, k2, "gemm: inner dimensions differ ({k} vs {k2})");
    assert_eq!(c.dim(), (m, n), "gemm: output shape mismatch");
    let beta = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    with_faer_ref(a, |fa| {
        with_faer_ref(b, |fb| {
            if c.is_standard_layout() {
                let s = c.as_slice_mut().expect("contiguous");
                matmul(
                    MatMut::from_row_major_slice_mut(s, m, n),
                    beta,
                    fa,
                    fb,
                    alpha,
                    par,
                );
            } else {
                let mut ct = c.view_mut().reversed_axes();
                let s = ct
                    .as_slice_mut()
                    .expect("gemm: output must be contiguous (row- or column-major)");
                let cm = MatMut::from_column_major_slice_mut(s, m, n);
                matmul(cm, beta, fa, fb, alpha, par);
            }
        })
    });
    clear_upper_simd_state();
    if !matches!(par, Par::Seq) {
        // faer ran kernels on the pool's other threads too.
        rayon::broadcast(|_| clear_upper_simd_state());
    }
}

/// Returns $A B$ as a new row-major array. Shapes: `a` (m, k), `b` (k, n).
pub fn matmul_new<F: Float>(a: ArrayView2<'_, F>, b: ArrayView2<'_, F>, par: Par) -> Array2<F> {
    let mut c = Array2::<F>::zeros((a.nrows(), b.ncols()));
    gemm(c.view_mut(), false, a, b, F::one(), par);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// `dots` gives each (feature, class) the bits of `dot_ff`, whatever
    /// the batch, across column blocks and a ragged tail.
    #[test]
    fn batched_dots_are_the_single_dots_bit_for_bit() {
        let d = 2 * 2048 + 805;
        let w = Array2::from_shape_fn((5, d), |(c, j)| ((c * 31 + j * 7) % 23) as f32 / 7.0 - 1.5);
        let xs: Vec<Vec<f32>> = (0..3)
            .map(|i| {
                (0..d)
                    .map(|j| ((i * 13 + j * 5) % 17) as f32 / 3.0 - 2.5)
                    .collect()
            })
            .collect();
        let rows: Vec<&[f32]> = xs.iter().map(Vec::as_slice).collect();
        let s = dots(w.view(), &rows);
        for (i, x) in xs.iter().enumerate() {
            let alone = dots(w.view(), &[x.as_slice()]);
            for c in 0..5 {
                let want = dot_ff(w.row(c).as_slice().unwrap(), x);
                assert_eq!(s[[i, c]].to_bits(), want.to_bits(), "[{i},{c}]");
                assert_eq!(alone[[0, c]].to_bits(), want.to_bits());
            }
        }
    }

    fn naive(a: ArrayView2<f64>, b: ArrayView2<f64>) -> Array2<f64> {
        let mut c = Array2::zeros((a.nrows(), b.ncols()));
        for i in 0..a.nrows() {
            for j in 0..b.ncols() {
                c[[i, j]] = (0..a.ncols()).map(|l| a[[i, l]] * b[[l, j]]).sum();
            }
        }
        c
    }

    #[test]
    fn gemm_matches_naive_for_all_layouts() {
        let a = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let b = array![[1.0, -1.0], [0.5, 2.0], [3.0, 0.0]];
        let want = naive(a.view(), b.view());
        assert_eq!(matmul_new(a.view(), b.view(), Par::Seq), want);
        // transposed operands
        let at = a.t().to_owned();
        let bt = b.t().to_owned();
        assert_eq!(matmul_new(at.t(), bt.t(), Par::Seq), want);
        // strided (non-contiguous) operands are read in place, on either side
        let wide = array![[1.0, 9.0, 2.0, 9.0, 3.0], [4.0, 9.0, 5.0, 9.0, 6.0]];
        let strided = wide.slice(ndarray::s![.., ..;2]);
        assert_eq!(matmul_new(strided, b.view(), Par::Seq), want);
        let big = Array2::from_shape_fn((6, 4), |(i, j)| {
            if i % 2 == 0 && j % 2 == 0 {
                b[[i / 2, j / 2]]
            } else {
                7.0
            }
        });
        let b_strided = big.slice(ndarray::s![..;2, ..;2]); // both strides 2
        assert_eq!(matmul_new(a.view(), b_strided, Par::Seq), want);
        let block = big.slice(ndarray::s![.., 2..]); // a column block: row stride 4
        let ones = Array2::<f64>::ones((1, 6));
        assert_eq!(
            matmul_new(ones.view(), block, Par::Seq),
            array![[-1.0 + 2.0 + 0.0 + 21.0, 42.0]]
        );
        // negative strides (reversed axes) and empty operands
        let rev = a.slice(ndarray::s![..;-1, ..;-1]).to_owned();
        assert_eq!(
            matmul_new(rev.slice(ndarray::s![..;-1, ..;-1]), b.view(), Par::Seq),
            want
        );
        let empty = Array2::<f64>::zeros((2, 0));
        assert_eq!(
            matmul_new(empty.view(), Array2::<f64>::zeros((0, 3)).view(), Par::Seq),
            Array2::<f64>::zeros((2, 3))
        );
        // column-major output, accumulate
        let mut c = Array2::<f64>::ones((2, 2)).reversed_axes();
        gemm(c.view_mut(), true, a.view(), b.view(), 2.0, Par::Seq);
        assert_eq!(c, want.mapv(|v| 2.0 * v + 1.0));
    }

    #[test]
    fn gram_is_the_lower_triangle_of_x_xt_for_any_thread_count() {
        // Sizes around faer's tiles (odd, below and above a few hundred rows).
        for &(n, b) in &[(1, 3), (7, 5), (130, 17), (301, 64), (517, 40)] {
            let x = Array2::from_shape_fn((n, b), |(i, j)| {
                ((i * 31 + j * 17) % 23) as f32 / 23.0 - 0.4
            });
            let x64 = x.mapv(|v| v as f64);
            let want = naive(x64.view(), x64.t());
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let mut acc = Array2::<f64>::zeros((n, n));
                    gram_add_lower(&mut acc, x.view());
                    gram_add_lower(&mut acc, x.view()); // accumulates
                    acc
                })
            };
            let one = run(1);
            for i in 0..n {
                for j in 0..=i {
                    let w = 2.0 * want[[i, j]];
                    assert!(
                        (one[[i, j]] - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{n}x{b} [{i},{j}]: {} vs {w}",
                        one[[i, j]]
                    );
                }
            }
            for threads in [2, 3] {
                let other = run(threads);
                let same = (0..n)
                    .all(|i| (0..=i).all(|j| one[[i, j]].to_bits() == other[[i, j]].to_bits()));
                assert!(same, "{n}x{b}: {threads} threads differ from 1");
            }
        }
    }

    #[test]
    fn the_f32_accumulated_gram_is_x_xt_and_leaves_the_upper_triangle() {
        for &(n, b) in &[(1, 3), (7, 5), (130, 17), (517, 40)] {
            let x = Array2::from_shape_fn((n, b), |(i, j)| {
                ((i * 31 + j * 17) % 23) as f32 / 23.0 - 0.4
            });
            let x64 = x.mapv(|v| v as f64);
            let want = naive(x64.view(), x64.t());
            let mut acc = Array2::<f32>::from_elem((n, n), 7.0);
            for i in 0..n {
                for j in 0..=i {
                    acc[[i, j]] = 0.0;
                }
            }
            gram_accumulate_lower(&mut acc, x.slice(ndarray::s![.., ..b / 2]));
            gram_accumulate_lower(&mut acc, x.slice(ndarray::s![.., b / 2..]));
            for i in 0..n {
                for j in 0..n {
                    let got = acc[[i, j]] as f64;
                    if j > i {
                        assert_eq!(got, 7.0, "upper triangle written at [{i},{j}]");
                    } else {
                        let w = want[[i, j]];
                        assert!(
                            (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "[{i},{j}]: {got} vs {w}"
                        );
                    }
                }
            }
            mirror_lower(&mut acc);
            assert_eq!(acc, acc.t());
        }
    }
}
