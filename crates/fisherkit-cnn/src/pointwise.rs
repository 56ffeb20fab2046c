//! A 1×1 convolution (pointwise) kernel for EfficientNet's expand, project and head layers:
//! $C_{i,:} = \mathrm{act}(b + \sum_{q<k} A_{i,q} W_{q,:}) \,[+\, R_{i,:}]$ for the rows (pixels)
//! i < m of a row-major A (m, k), the weights W (k, n) packed once at load time ([`Packed`]),
//! the bias, activation and residual applied in registers before the single store of each
//! output row, which may go anywhere in the destination (e.g. inside a zero-padded row).
//!
//! faer's GEMM packs the weights again on every call and returns the raw product, so each
//! band of pixels paid a weight copy plus a separate bias/activation pass; here the weights
//! stay packed, and each output element is written once. The sum over q runs from zero in
//! order q = 0, 1, …, k − 1 (fused multiply-adds) whatever m, the blocking or the thread count.
//!
//! Two builds exist, chosen at run time ([`pointwise`] returns `false` on CPUs with neither and
//! the caller uses faer):
//! - AVX-512F: 12 rows × 32 columns (two panels) of sums in 24 of the 32 `zmm` registers,
//!   broadcasting A and streaming the two packed panels: 24 FMAs per 2 panel loads and 12
//!   broadcasts. AMD Zen 4 executes a 512-bit FMA as two 256-bit halves, so the peak is the
//!   AVX2 one; the gain is in the larger register block (half the loads per FMA, 4× the sums
//!   per epilogue) and half the instructions;
//! - AVX2 + FMA: 6 rows × 16 columns of sums in 12 registers (the classic Haswell shape).
//!
//! Both add the same terms in the same order (fused multiply-adds from zero over q, then the
//! bias, the activation, the residual), so they give bitwise the same output.

use ndarray::ArrayView2;

/// The activation applied in a layer's epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    /// Linear (EfficientNet's projection convolutions).
    None,
    /// $\min(\max(x, 0), 6)$ (EfficientNet-Lite).
    Relu6,
}

impl Act {
    #[inline(always)]
    pub(crate) fn apply(self, v: f32) -> f32 {
        match self {
            Act::None => v,
            Act::Relu6 => v.clamp(0.0, 6.0),
        }
    }
}

/// Columns per packed panel (two 8-float vectors).
const NR: usize = 16;
/// Rows (pixels) per register block.
const MR: usize = 6;

/// W (k, n) in panels of [`NR`] columns: panel p holds columns 16p .. 16p + 16 as k rows of 16
/// floats (`data[(p·k + q)·16 + t]` = $W_{q, 16p + t}$, zero beyond column n).
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    pub k: usize,
    pub n: usize,
    data: Vec<f32>,
}

impl Packed {
    /// Packs `w` (k, n) (a 1×1 convolution's `wt`).
    pub fn new(w: ArrayView2<'_, f32>) -> Self {
        let (k, n) = w.dim();
        let panels = n.div_ceil(NR);
        let mut data = vec![0.0f32; panels * k * NR];
        for p in 0..panels {
            for q in 0..k {
                for t in 0..NR.min(n - p * NR) {
                    data[(p * k + q) * NR + t] = w[[q, p * NR + t]];
                }
            }
        }
        Self { k, n, data }
    }
}

/// The instruction sets the kernels are built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F (x86-64-v4).
    V4,
    /// AVX2 + FMA (x86-64-v3).
    V3,
}

impl Isa {
    /// Whether this CPU runs the kernel.
    fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::V4 => std::arch::is_x86_feature_detected!("avx512f"),
                Isa::V3 => {
                    std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            false
        }
    }

    /// The widest kernel this CPU runs, if any.
    fn best() -> Option<Isa> {
        [Isa::V4, Isa::V3].into_iter().find(|i| i.available())
    }
}

/// Whether [`pointwise`] runs on this CPU (AVX-512F, or AVX2 + FMA). Its row i depends only
/// on row i of A (the sums start from zero and run over q in order, whatever the register
/// block the row falls in), so callers may then cut the rows into any calls they like
/// without changing a bit of the output.
pub(crate) fn available() -> bool {
    Isa::best().is_some()
}

/// Rows i < m of $C = \mathrm{act}(A W + b) [+ R]$ (see the module docs), row i written to
/// `out[dst(i) .. dst(i) + n]`; A is `a` (m, k) row-major, `resid` (m, n) row-major.
/// Returns `false`, writing nothing, when the CPU has neither AVX-512F nor AVX2 + FMA (the
/// caller then uses faer).
/// Panics if a slice is too short for these shapes or a destination row falls outside `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise(
    a: &[f32],
    m: usize,
    w: &Packed,
    bias: &[f32],
    act: Act,
    resid: Option<&[f32]>,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    match Isa::best() {
        Some(isa) => pointwise_isa(isa, a, m, w, bias, act, resid, out, dst),
        None => false,
    }
}

/// [`pointwise`] with the kernel for `isa`; `false`, writing nothing, if this CPU lacks it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise_isa(
    isa: Isa,
    a: &[f32],
    m: usize,
    w: &Packed,
    bias: &[f32],
    act: Act,
    resid: Option<&[f32]>,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    if !isa.available() {
        return false;
    }
    assert!(
        a.len() >= m * w.k && bias.len() == w.n && resid.is_none_or(|r| r.len() >= m * w.n),
        "pointwise: shapes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has the instructions of `isa` (checked above); the slice bounds the
        // kernels rely on are asserted above (a, bias, resid) and, per row, inside them (out).
        unsafe {
            match isa {
                Isa::V4 => x86v4::pointwise_v4(a, m, None, w, bias, act, resid, out, &dst),
                Isa::V3 => x86::pointwise_v3(a, m, w, bias, act, resid, out, &dst),
            }
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, m, w, bias, act, resid, out, dst);
        false
    }
}

/// The row strides [`pointwise_gather`] has a kernel for.
const GATHER_STRIDES: [usize; 2] = [1, 2];

/// Whether [`pointwise_gather`] runs on this CPU (AVX-512F) with row stride `rs`.
pub(crate) fn gather_available(rs: usize) -> bool {
    Isa::V4.available() && GATHER_STRIDES.contains(&rs)
}

/// Rows i < m of $C = \mathrm{act}(A W + b)$ like [`pointwise`], but with A read in place from
/// a larger array instead of packed rows: $A_{i,q}$ = `a[i·rs + offs[q]]` (`offs.len()` = k).
/// A k×k convolution of stride s on a zero-padded channel-first image then needs no im2col
/// copy: for the pixels of one output row, `rs` = s and `offs` lists the k·k·C taps
/// (channel·H·W + u·W + v) in the weights' row order. The sums are the same operations in
/// the same order as [`pointwise`]'s on the gathered rows, so the output is bitwise the same.
/// AVX-512F and `rs` ∈ {1, 2} only: returns `false`, writing nothing, otherwise (the caller
/// then gathers the rows itself and calls [`pointwise`]).
/// Panics if a slice is too short for these shapes or a destination row falls outside `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pointwise_gather(
    a: &[f32],
    m: usize,
    rs: usize,
    offs: &[usize],
    w: &Packed,
    bias: &[f32],
    act: Act,
    out: &mut [f32],
    dst: impl Fn(usize) -> usize,
) -> bool {
    if !gather_available(rs) {
        return false;
    }
    if m == 0 {
        return true;
    }
    let last = offs.iter().max().map_or(0, |&o| (m - 1) * rs + o);
    assert!(
        offs.len() == w.k && last < a.len() && bias.len() == w.n,
        "pointwise_gather: shapes"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX-512F (checked above); every A index i·rs + offs[q] (i < m)
        // is at most `last` < a.len() (asserted above), the output rows are checked per row.
        unsafe { x86v4::pointwise_v4(a, m, Some((rs, offs)), w, bias, act, None, out, &dst) };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, rs, offs, w, bias, act, out, dst);
        false
    }
}

/// Weights up to this size (bytes) are swept once per block of rows.
const ROW_OUTER_BYTES: usize = 512 * 1024;

/// `dst(i)` for every row i < m, each checked to leave room for n floats in an `out_len`-float
/// output (once per call, not once per panel).
fn row_offsets(m: usize, n: usize, out_len: usize, dst: &impl Fn(usize) -> usize) -> Vec<usize> {
    (0..m)
        .map(|i| {
            let o = dst(i);
            assert!(o + n <= out_len, "pointwise: destination row out of bounds");
            o
        })
        .collect()
}

/// Rows split evenly into ⌈m/mr⌉ blocks `(first row, rows)` (e.g. 8 rows at mr = 6 → 4 + 4, not
/// 6 + 2): a block of 1–2 rows has too few independent sums to hide the FMA latency.
fn row_blocks(m: usize, mr: usize) -> Vec<(usize, usize)> {
    let nb = m.div_ceil(mr);
    (0..nb)
        .scan(0, |i0, bi| {
            let rows = m / nb + usize::from(bi < m % nb);
            let b = (*i0, rows);
            *i0 += rows;
            Some(b)
        })
        .collect()
}

/// Calls `tile(panel, block)` for every (panel group, row block) of a k × n weight matrix, in
/// the order that keeps the reused operand in cache: small weights (they stay in L2) are swept
/// once per block of rows, which stays in L1; large ones panel by panel, each staying in cache
/// while the row blocks stream past it.
fn for_each_tile<P: Copy>(
    k: usize,
    n: usize,
    blocks: &[(usize, usize)],
    panels: &[P],
    mut tile: impl FnMut(P, (usize, usize)),
) {
    if k * n * 4 <= ROW_OUTER_BYTES {
        for &b in blocks {
            for &p in panels {
                tile(p, b);
            }
        }
    } else {
        for &p in panels {
            for &b in blocks {
                tile(p, b);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86v4 {
    //! The AVX-512F kernel: 12 rows × two 16-column panels per register block.
    use super::{for_each_tile, row_blocks, row_offsets, Act, Packed, NR};
    use std::arch::x86_64::*;

    /// Rows (pixels) per register block: 12 × 2 accumulators + 2 panel vectors + 1 broadcast
    /// = 27 of the 32 registers.
    const MR4: usize = 12;

    /// `gather`: `None` for packed rows (A row i at `a[i·k ..]`), or `Some((rs, offs))` for
    /// $A_{i,q}$ = `a[i·rs + offs[q]]` ([`super::pointwise_gather`]).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a.len() ≥ m·k` (packed rows) or `a.len() > (m − 1)·rs + offs[q]`
    /// for every q and `offs.len() = k` (gathered), `bias.len() = n`, `resid` (if any) ≥ m·n
    /// floats.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn pointwise_v4<F: Fn(usize) -> usize>(
        a: &[f32],
        m: usize,
        gather: Option<(usize, &[usize])>,
        w: &Packed,
        bias: &[f32],
        act: Act,
        resid: Option<&[f32]>,
        out: &mut [f32],
        dst: &F,
    ) {
        let (k, n) = (w.k, w.n);
        let panels = n.div_ceil(NR);
        let offsets = row_offsets(m, n, out.len(), dst);
        let blocks = row_blocks(m, MR4);
        // Panels in pairs (p, count, half), the last one alone when their number is odd;
        // `half`: the group's last panel is the matrix's last and has at most 8 columns.
        let last_half = n - (panels - 1) * NR <= NR / 2;
        let pairs: Vec<(usize, usize, bool)> = (0..panels)
            .step_by(2)
            .map(|p| {
                let np = (panels - p).min(2);
                (p, np, last_half && p + np == panels)
            })
            .collect();
        let job = Job {
            a,
            gather,
            w,
            bias,
            act,
            resid,
            offsets: &offsets,
        };
        for_each_tile(k, n, &blocks, &pairs, |(p, np, half), (i0, rows)| {
            // SAFETY: as for this function; p + np ≤ panels, i0 + rows ≤ m, offsets checked.
            unsafe { run(&job, p, np, half, i0, rows, out) }
        });
    }

    /// What every register block of one [`pointwise_v4`] call shares.
    struct Job<'a> {
        a: &'a [f32],
        /// `Some((rs, offs))`: $A_{i,q}$ = `a[i·rs + offs[q]]`; `None`: `a[i·k + q]`.
        gather: Option<(usize, &'a [usize])>,
        w: &'a Packed,
        bias: &'a [f32],
        act: Act,
        resid: Option<&'a [f32]>,
        offsets: &'a [usize],
    }

    /// Rows `i0 .. i0 + rows` (1 ≤ rows ≤ 12) × panels `p .. p + np` (np ∈ {1, 2}); `half`:
    /// the last of them has at most 8 columns (its sums then take 8-lane instructions).
    ///
    /// # Safety
    /// As for [`pointwise_v4`]; p + np ≤ panels, i0 + rows ≤ m, every offset checked.
    #[target_feature(enable = "avx512f")]
    unsafe fn run(
        j: &Job<'_>,
        p: usize,
        np: usize,
        half: bool,
        i0: usize,
        rows: usize,
        out: &mut [f32],
    ) {
        macro_rules! dispatch {
            ($h:literal, $half:literal) => {
                match rows {
                    12 => block::<12, $h, $half>(j, p, i0, out),
                    11 => block::<11, $h, $half>(j, p, i0, out),
                    10 => block::<10, $h, $half>(j, p, i0, out),
                    9 => block::<9, $h, $half>(j, p, i0, out),
                    8 => block::<8, $h, $half>(j, p, i0, out),
                    7 => block::<7, $h, $half>(j, p, i0, out),
                    6 => block::<6, $h, $half>(j, p, i0, out),
                    5 => block::<5, $h, $half>(j, p, i0, out),
                    4 => block::<4, $h, $half>(j, p, i0, out),
                    3 => block::<3, $h, $half>(j, p, i0, out),
                    2 => block::<2, $h, $half>(j, p, i0, out),
                    _ => block::<1, $h, $half>(j, p, i0, out),
                }
            };
        }
        // SAFETY: forwarded from the caller.
        unsafe {
            match (np, half) {
                (2, false) => dispatch!(2, false),
                (2, true) => dispatch!(2, true),
                (_, false) => dispatch!(1, false),
                (_, true) => dispatch!(1, true),
            }
        }
    }

    /// The R × H register block of sums $\sum_{q<k} A_{r,q} W_{q, 16h + t}$ from zero in order
    /// of q, for R rows of A from `ap` and H consecutive packed panels at `pp`. `G` = 0: packed
    /// rows, $A_{r,q}$ = `ap[r·k + q]` (`offs` unused); `G` ∈ {1, 2}: gathered,
    /// $A_{r,q}$ = `ap[r·G + offs[q]]` ([`super::pointwise_gather`]). The gathered row stride
    /// is a constant so that each row's load is one instruction with a fixed displacement
    /// (with a run-time stride LLVM kept the row addresses in registers and spilled sums to
    /// the stack). Not inlined: in a function of its own the block provably stays in
    /// registers for the whole loop (inlined, LLVM kept a copy of every sum on the stack,
    /// storing it after each multiply-add).
    ///
    /// Prefetch: it asks for the weights of the next register block while it multiplies: with
    /// each 64-byte row of its H panels it prefetches the same row of the next H panels, so
    /// the next block (the next panels of a row block's sweep, or of the first row block's
    /// sweep when the panels are outermost) finds them in L1. A pass touches ~19 MB of
    /// weights once each, more than this VM's share of L3 keeps between passes, so each
    /// layer's weights arrive from memory, and the hardware prefetcher, which stops at every
    /// 4 KB page, left the multiply-adds waiting: the 8×8 blocks ran 25 % slower than the
    /// same block with its weights in L3. In-process A/B (pass by pass), 227 px: no prefetch
    /// / 64 rows ahead in the stream / the next block's rows: one thread 6.92 / 6.58 / 6.39
    /// ms, two threads 5.32 / 4.92 / 4.66 ms (a slow phase of the VM); the next block's rows
    /// against 64 rows ahead: 0.7–2.4 % faster at 227–454 px, −1.0 / +1.8 % at 907 px with
    /// one / two threads (docs/evidence/cnn-small-maps-2026-12-06.md).
    ///
    /// `HALF`: only lanes t < 8 of the last panel's sums are wanted (a last panel of at most 8
    /// columns, e.g. 24 = 16 + 8 or 40 = 32 + 8 outputs): they are computed by 8-lane fused
    /// multiply-adds on the low halves, lane by lane the same operations as the 16-lane ones
    /// (so the same bits), at half the cost on a CPU that runs a 16-lane FMA as two 8-lane
    /// halves (AMD Zen 4); lanes 8–15 of that panel are then unspecified.
    ///
    /// # Safety
    /// AVX-512F; `pp .. pp + H·k·16` lies inside a live `f32` slice, and so do
    /// `ap .. ap + R·k` (G = 0) or, with `offs` holding k offsets, every `ap + r·G + offs[q]`
    /// for r < R, q < k (G > 0).
    #[target_feature(enable = "avx512f")]
    #[inline(never)]
    #[allow(clippy::needless_range_loop)] // h also enters the address arithmetic
    unsafe fn sums<const R: usize, const H: usize, const HALF: bool, const G: usize>(
        ap: *const f32,
        offs: *const usize,
        pp: *const f32,
        k: usize,
    ) -> [[__m512; H]; R] {
        let zero = _mm512_setzero_ps();
        let mut acc = [[zero; H]; R];
        let rs = if G == 0 { k } else { G };
        // SAFETY: q < k, r < R, h < H: the A and panel offsets are bounded by the contract.
        unsafe {
            for q in 0..k {
                let mut wv = [zero; H];
                for h in 0..H {
                    wv[h] = _mm512_loadu_ps(pp.add((h * k + q) * NR));
                    // The same row of the next register block's panels (the next H panels
                    // of the stream); `wrapping_add`, as the hint may point past the
                    // weights' end (a prefetch never faults).
                    let ahead = pp.wrapping_add(((H + h) * k + q) * NR);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                }
                let base = if G == 0 {
                    ap.add(q)
                } else {
                    ap.add(*offs.add(q))
                };
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*base.add(r * rs));
                    for h in 0..H {
                        acc_r[h] = if HALF && h == H - 1 {
                            _mm512_castps256_ps512(_mm256_fmadd_ps(
                                _mm512_castps512_ps256(x),
                                _mm512_castps512_ps256(wv[h]),
                                _mm512_castps512_ps256(acc_r[h]),
                            ))
                        } else {
                            _mm512_fmadd_ps(x, wv[h], acc_r[h])
                        };
                    }
                }
            }
        }
        acc
    }

    /// R rows from `i0` × H panels from `p`: the sums over q, then bias, activation, residual
    /// and one (masked where the panel is partial) store per row and panel. `HALF`: the last
    /// panel has at most 8 columns (see [`sums`]; its masked store writes only those lanes).
    ///
    /// # Safety
    /// AVX-512F; p + H ≤ panels, i0 + R ≤ m, `j.offsets[i0 + r] + n ≤ out.len()` for r < R,
    /// `j.a.len() ≥ m·k`, `j.resid` (if any) ≥ m·n floats, `j.bias.len() = n`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::needless_range_loop)] // h and r also enter the address arithmetic
    unsafe fn block<const R: usize, const H: usize, const HALF: bool>(
        j: &Job<'_>,
        p: usize,
        i0: usize,
        out: &mut [f32],
    ) {
        let (k, n) = (j.w.k, j.w.n);
        let zero = _mm512_setzero_ps();
        // SAFETY: A rows i0 .. i0 + R hold R·k floats from (i0·k), or (gathered) every
        // i·rs + offs[q] with i < m is inside `a`; panels p .. p + H hold H·k·16 floats from
        // p·k·16 (the caller's contract).
        let acc = unsafe {
            let pp = j.w.data.as_ptr().add(p * k * NR);
            match j.gather {
                None => sums::<R, H, HALF, 0>(j.a.as_ptr().add(i0 * k), std::ptr::null(), pp, k),
                Some((rs, offs)) => {
                    let ap = j.a.as_ptr().add(i0 * rs);
                    match rs {
                        1 => sums::<R, H, HALF, 1>(ap, offs.as_ptr(), pp, k),
                        _ => sums::<R, H, HALF, 2>(ap, offs.as_ptr(), pp, k),
                    }
                }
            }
        };
        let six = _mm512_set1_ps(6.0);
        let op = out.as_mut_ptr();
        for h in 0..H {
            let c = (p + h) * NR;
            let lanes = (n - c).min(NR);
            let full = lanes == NR;
            let mask: __mmask16 = if full { !0 } else { (1u16 << lanes) - 1 };
            // SAFETY: only lanes t < n − c are accessed (masked-off lanes are not): bias index
            // c + t < n, residual index (i0 + r)·n + c + t < m·n, output index
            // offsets[i0 + r] + c + t < offsets[i0 + r] + n ≤ out.len().
            unsafe {
                let b = _mm512_maskz_loadu_ps(mask, j.bias.as_ptr().add(c));
                for r in 0..R {
                    let mut v = _mm512_add_ps(acc[r][h], b);
                    if j.act == Act::Relu6 {
                        v = _mm512_min_ps(_mm512_max_ps(v, zero), six);
                    }
                    if let Some(res) = j.resid {
                        let rp = res.as_ptr().add((i0 + r) * n + c);
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, rp));
                    }
                    let o = op.add(j.offsets[i0 + r] + c);
                    if full {
                        _mm512_storeu_ps(o, v);
                    } else {
                        _mm512_mask_storeu_ps(o, mask, v);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{for_each_tile, row_blocks, row_offsets, Act, Packed, MR, NR};
    use std::arch::x86_64::*;

    /// Lane mask (all ones in lanes < `lanes`) for AVX2's masked loads and stores.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lane_mask(lanes: usize) -> __m256i {
        let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), idx)
    }

    /// # Safety
    /// The CPU has AVX2 and FMA; `a.len() ≥ m·k`, `bias.len() = n`, `resid` (if any) ≥ m·n
    /// floats.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn pointwise_v3<F: Fn(usize) -> usize>(
        a: &[f32],
        m: usize,
        w: &Packed,
        bias: &[f32],
        act: Act,
        resid: Option<&[f32]>,
        out: &mut [f32],
        dst: &F,
    ) {
        let (k, n) = (w.k, w.n);
        let panels = n.div_ceil(NR);
        let offsets = row_offsets(m, n, out.len(), dst);
        // Per panel: lane masks and bias vectors.
        let heads: Vec<([__m256i; 2], [__m256; 2])> = (0..panels)
            .map(|p| {
                let col = p * NR;
                let lanes = |h: usize| (n - col).saturating_sub(8 * h).min(8);
                // SAFETY: AVX2 (this function's contract); the masked loads read only lanes
                // below n − col of the n-float bias (masked-off lanes are not accessed).
                unsafe {
                    let masks = [lane_mask(lanes(0)), lane_mask(lanes(1))];
                    let second = if lanes(1) > 0 {
                        _mm256_maskload_ps(bias.as_ptr().add(col + 8), masks[1])
                    } else {
                        _mm256_setzero_ps()
                    };
                    (
                        masks,
                        [_mm256_maskload_ps(bias.as_ptr().add(col), masks[0]), second],
                    )
                }
            })
            .collect();
        let blocks = row_blocks(m, MR);
        let job = Job {
            a,
            w,
            act,
            resid,
            heads: &heads,
            offsets: &offsets,
        };
        let panel_list: Vec<usize> = (0..panels).collect();
        for_each_tile(k, n, &blocks, &panel_list, |p, (i0, rows)| {
            // SAFETY: as for this function; `run` gets in-range panels and blocks.
            unsafe { run(&job, p, i0, rows, out) }
        });
    }

    /// What every register block of one [`pointwise_v3`] call shares.
    struct Job<'a> {
        a: &'a [f32],
        w: &'a Packed,
        act: Act,
        resid: Option<&'a [f32]>,
        heads: &'a [([__m256i; 2], [__m256; 2])],
        offsets: &'a [usize],
    }

    /// Rows `i0 .. i0 + rows` (≤ 6) × panel `p`.
    ///
    /// # Safety
    /// As for [`pointwise_v3`]; p < panels, i0 + rows ≤ m, every offset checked.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(j: &Job<'_>, p: usize, i0: usize, rows: usize, out: &mut [f32]) {
        let (k, n) = (j.w.k, j.w.n);
        let col = p * NR;
        let mut offs = [0usize; MR];
        offs[..rows].copy_from_slice(&j.offsets[i0..i0 + rows]);
        let (masks, bias) = j.heads[p];
        let blk = Blk {
            a: &j.a[i0 * k..(i0 + rows) * k],
            k,
            panel: &j.w.data[p * k * NR..(p + 1) * k * NR],
            col,
            masks,
            bias,
            act: j.act,
            resid: j.resid.map(|r| &r[i0 * n..(i0 + rows) * n]),
            n,
        };
        // SAFETY: as for this function; `blk`'s slices have the lengths `block` needs
        // (rows·k, k·NR, rows·n) and the `rows` offsets were checked by the caller.
        unsafe {
            if n - col > 8 {
                block_rows::<2>(rows, &blk, out, &offs)
            } else {
                // At most 8 columns left: one vector (the second is all padding).
                block_rows::<1>(rows, &blk, out, &offs)
            }
        }
    }

    /// One register block's inputs: `a` (R, k) rows, the panel (k, 16), the epilogue.
    struct Blk<'a> {
        a: &'a [f32],
        k: usize,
        panel: &'a [f32],
        col: usize,
        masks: [__m256i; 2],
        bias: [__m256; 2],
        act: Act,
        resid: Option<&'a [f32]>,
        n: usize,
    }

    /// [`block`] for `rows` ≤ 6 rows.
    ///
    /// # Safety
    /// As for [`block`] with R = `rows`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_rows<const H: usize>(
        rows: usize,
        b: &Blk<'_>,
        out: &mut [f32],
        offs: &[usize; MR],
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match rows {
                6 => block::<6, H>(b, out, offs),
                5 => block::<5, H>(b, out, offs),
                4 => block::<4, H>(b, out, offs),
                3 => block::<3, H>(b, out, offs),
                2 => block::<2, H>(b, out, offs),
                _ => block::<1, H>(b, out, offs),
            }
        }
    }

    /// R rows × the panel's first H vectors (H = 1 when the panel has ≤ 8 columns).
    ///
    /// # Safety
    /// AVX2 + FMA; `b.a.len() ≥ R·k`, `b.panel.len() ≥ k·NR`, `b.resid` ≥ R·n floats,
    /// `offs[r] + n ≤ out.len()` for r < R, `b.col < n`, `b.masks` cover only lanes below
    /// n − col (and n − col − 8).
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::needless_range_loop)] // h also enters the column arithmetic
    unsafe fn block<const R: usize, const H: usize>(
        b: &Blk<'_>,
        out: &mut [f32],
        offs: &[usize; MR],
    ) {
        let k = b.k;
        let zero = _mm256_setzero_ps();
        let mut acc = [[zero; H]; R];
        let (ap, pp) = (b.a.as_ptr(), b.panel.as_ptr());
        // SAFETY: q < k, r < R, h < H ≤ 2: A index r·k + q < R·k; panel index
        // q·16 + 8h + 7 < k·NR.
        unsafe {
            for q in 0..k {
                let mut w = [zero; H];
                for (h, wh) in w.iter_mut().enumerate() {
                    *wh = _mm256_loadu_ps(pp.add(q * NR + 8 * h));
                }
                // As in the AVX-512F kernel (`x86v4::sums`): with each 64-byte row of this
                // panel, the same row of the next panel (past the end: a mere hint). Forced
                // onto this kernel on an AVX-512 machine: 2–7 % faster than no prefetch at
                // 227–256 px (64 rows ahead), level with 64 rows ahead (−0.9 to +0.6 %).
                // Computed with `wrapping_add`: the hint may point past the weights' end.
                _mm_prefetch::<_MM_HINT_T0>(pp.wrapping_add((k + q) * NR).cast());
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*ap.add(r * k + q));
                    for h in 0..H {
                        acc_r[h] = _mm256_fmadd_ps(x, w[h], acc_r[h]);
                    }
                }
            }
        }
        let six = _mm256_set1_ps(6.0);
        let op = out.as_mut_ptr();
        for (r, acc_r) in acc.iter().enumerate() {
            for h in 0..H {
                let c = b.col + 8 * h;
                if c >= b.n {
                    continue;
                }
                let mut v = _mm256_add_ps(acc_r[h], b.bias[h]);
                if b.act == Act::Relu6 {
                    v = _mm256_min_ps(_mm256_max_ps(v, zero), six);
                }
                // SAFETY: the lanes accessed (all 8 when c + 8 ≤ n, else the masked ones) are
                // below n − c: residual index r·n + c + t < R·n, output index
                // offs[r] + c + t < offs[r] + n ≤ out.len(); masked-off lanes are not accessed.
                // Full vectors use plain loads and stores (AMD runs the masked ones slowly).
                let full = c + 8 <= b.n;
                unsafe {
                    if let Some(res) = b.resid {
                        let rp = res.as_ptr().add(r * b.n + c);
                        let rv = if full {
                            _mm256_loadu_ps(rp)
                        } else {
                            _mm256_maskload_ps(rp, b.masks[h])
                        };
                        v = _mm256_add_ps(v, rv);
                    }
                    if full {
                        _mm256_storeu_ps(op.add(offs[r] + c), v);
                    } else {
                        _mm256_maskstore_ps(op.add(offs[r] + c), b.masks[h], v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn pointwise_matches_naive_loops() {
        // Column counts with full and partial panels and half-panels, row counts hitting every
        // register-block height, scattered destination rows, residual on and off, weights
        // small (row blocks outer) and over 512 KB (panels outer).
        for (seed, &(m, k, n)) in [
            (1, 1, 1),
            (7, 16, 96),
            (13, 24, 40),
            (17, 96, 24),
            (9, 5, 33),
            (7, 300, 500),
            (29, 40, 80),
            (23, 1280, 1000),
            (12, 7, 48),
        ]
        .iter()
        .enumerate()
        {
            let mut rng = ChaCha8Rng::seed_from_u64(900 + seed as u64);
            let mut r = |len: usize| -> Vec<f32> {
                (0..len).map(|_| rng.random_range(-2.0f32..2.0)).collect()
            };
            let (a, wv, bias, res) = (r(m * k), r(k * n), r(n), r(m * n));
            let wt = ndarray::Array2::from_shape_vec((k, n), wv.clone()).unwrap();
            let packed = Packed::new(wt.view());
            for (act, resid) in [(Act::Relu6, None), (Act::None, Some(&res[..]))] {
                // Row i at offset (2i + 1)·(n + 3): gaps stay untouched.
                let stride = n + 3;
                let mut out = vec![-7.0f32; (2 * m + 2) * stride];
                let dst = |i: usize| (2 * i + 1) * stride;
                if !pointwise(&a, m, &packed, &bias, act, resid, &mut out, dst) {
                    return; // no AVX2 + FMA here: the faer path is tested by the mbconv tests
                }
                // Every kernel this CPU runs gives bitwise the same output.
                for isa in [Isa::V4, Isa::V3] {
                    let mut other = vec![-7.0f32; out.len()];
                    if pointwise_isa(isa, &a, m, &packed, &bias, act, resid, &mut other, dst) {
                        let same = out
                            .iter()
                            .zip(&other)
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(same, "{m}x{k}x{n}: {isa:?} differs from {:?}", Isa::best());
                    }
                }
                for i in 0..m {
                    for j in 0..n {
                        let mut s = 0.0f64;
                        for q in 0..k {
                            s += a[i * k + q] as f64 * wv[q * n + j] as f64;
                        }
                        s += bias[j] as f64;
                        if act == Act::Relu6 {
                            s = s.clamp(0.0, 6.0);
                        }
                        if let Some(rr) = resid {
                            s += rr[i * n + j] as f64;
                        }
                        let g = out[dst(i) + j] as f64;
                        assert!(
                            (g - s).abs() <= 1e-4 * (1.0 + s.abs()),
                            "{m}x{k}x{n} [{i},{j}]"
                        );
                    }
                }
                for (idx, &v) in out.iter().enumerate() {
                    let (row, colm) = (idx / stride, idx % stride);
                    if row % 2 == 0 || colm >= n || row > 2 * m {
                        assert_eq!(v, -7.0, "{m}x{k}x{n}: wrote outside the rows at {idx}");
                    }
                }
            }
        }
    }
}
