//! The network's layers on channel-last (HWC) `f32` buffers: convolution as GEMM (faer)
//! over bands of image rows, with bias + ReLU applied while the band is in cache, and
//! 3×3 max-pooling. Shapes are checked by the caller ([`crate::net`]); a mismatch here is a
//! programming error and panics.
//!
//! # Layout and work split
//! A tensor is `(h, w, c)` row-major: pixel $(i, j)$'s channels are contiguous, so a 1×1
//! convolution of a band of rows is one GEMM (pixels × in) · (in × out) on the buffer as it
//! is, with no copy; a 3×3 one first gathers its band into an im2col matrix
//! (pixels × 9·in, three contiguous copies of 3·in floats per pixel) in a per-thread
//! scratch buffer. The GEMM writes into scratch; the epilogue adds the bias, applies ReLU and
//! stores the result where the next layer wants it (into its half of a fire module's
//! concatenated output, or into a zero-bordered buffer that is the next 3×3 layer's padding).
//! Bands are spread over the threads of the caller's [`Team`] when there are enough of them;
//! otherwise processed in order, each GEMM then parallel inside (faer) if the team lets a
//! piece use rayon ([`Team::inner_par`]).
//!
//! Layers whose [`Conv`] carries packed weights ([`Conv::packed`]: EfficientNet's stem, head
//! and classifier here, its blocks in [`crate::mbconv`]) run the AVX2 + FMA kernel of
//! [`crate::pointwise`] instead of faer where the CPU has it; SqueezeNet's stay on faer.

pub(crate) use crate::pointwise::Act;
use crate::team::Team;
use fisherkit::linalg::{gemm, vectorized, Par};
use ndarray::{Array1, Array2, ArrayView2, ArrayView3, ArrayViewMut2};
use std::cell::RefCell;

/// A 2-D convolution with TensorFlow "same" padding (what ndf's `Conv2D(padding="same")` does):
/// output side $\lceil n / s \rceil$, total padding $\max((\lceil n/s \rceil - 1)s + k - n, 0)$,
/// of which $\lfloor \cdot / 2 \rfloor$ goes before (top/left) and the rest after.
///
/// $y_{o,i,j} = b_o + \sum_{c, u, v} W_{o,c,u,v}\, x_{c,\, s i + u - p_t,\, s j + v - p_l}$
/// (zero outside the input). For a 1×1 stride-1 kernel "same" and "valid" coincide.
#[derive(Debug, Clone)]
pub(crate) struct Conv {
    /// (out, in·kh·kw), columns ordered (channel, ky, kx): the OIHW kernel flattened.
    pub weight: Array2<f32>,
    /// (kh·kw·in, out), rows ordered (ky, kx, channel): the GEMM right-hand side for
    /// channel-last inputs and the im2col matrices built here.
    pub wt: Array2<f32>,
    /// (out)
    pub bias: Array1<f32>,
    pub in_ch: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: usize,
    /// `wt` packed for [`crate::pointwise`] (layers that asked for it with [`Conv::packed`]:
    /// EfficientNet's); they then skip faer where the CPU has AVX2 + FMA.
    pub packed: Option<crate::pointwise::Packed>,
}

impl Conv {
    /// From an OIHW kernel (`out`·`in`·k·k values) and its bias.
    pub fn new(weight: Vec<f32>, bias: Vec<f32>, cin: usize, k: usize, stride: usize) -> Self {
        let cout = bias.len();
        let weight =
            Array2::from_shape_vec((cout, cin * k * k), weight).expect("weight of out*in*k*k");
        let wt = Array2::from_shape_fn((k * k * cin, cout), |(r, o)| {
            let (tap, c) = (r / cin, r % cin);
            weight[[o, c * k * k + tap]]
        });
        Self {
            weight,
            wt,
            bias: Array1::from(bias),
            in_ch: cin,
            kh: k,
            kw: k,
            stride,
            packed: None,
        }
    }

    /// This convolution with `wt` also packed for [`crate::pointwise`] (a 1×1 layer, or the
    /// GEMM of an im2col'ed k×k one).
    pub fn packed(mut self) -> Self {
        self.packed = Some(crate::pointwise::Packed::new(self.wt.view()));
        self
    }

    pub fn out_ch(&self) -> usize {
        self.bias.len()
    }
}

/// A channel-last tensor: `data[(i * w + j) * c + ch]`.
#[derive(Debug, Clone)]
pub(crate) struct Hwc {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub data: Vec<f32>,
}

/// Output side and padding before for "same" padding on one axis.
pub(crate) fn same_geometry(n: usize, k: usize, stride: usize) -> (usize, usize) {
    let out = n.div_ceil(stride);
    let pad = ((out - 1) * stride + k).saturating_sub(n);
    (out, pad / 2)
}

/// A k×k stride-s window with TF "same" padding on an h×w input: output sides
/// $h_o = \lceil h/s \rceil$, $w_o$, padding before (top $p_t$, left $p_l$, from
/// [`same_geometry`]) and the padded sides $h_p = (h_o - 1)s + k$, $w_p = (w_o - 1)s + k$
/// the window reads. Shared by the stem and the MBConv blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamePad {
    pub ho: usize,
    pub wo: usize,
    pub pt: usize,
    pub pl: usize,
    pub hp: usize,
    pub wp: usize,
}

impl SamePad {
    pub(crate) fn new(h: usize, w: usize, k: usize, s: usize) -> Self {
        let (ho, pt) = same_geometry(h, k, s);
        let (wo, pl) = same_geometry(w, k, s);
        Self {
            ho,
            wo,
            pt,
            pl,
            hp: (ho - 1) * s + k,
            wp: (wo - 1) * s + k,
        }
    }
}

/// Output side of a 3×3 stride-2 max-pool without padding (floor mode), `None` if `n < 3`.
pub(crate) fn pool_out(n: usize) -> Option<usize> {
    (n >= POOL_K).then(|| (n - POOL_K) / POOL_S + 1)
}

pub(crate) const POOL_K: usize = 3;
pub(crate) const POOL_S: usize = 2;

/// Floats of scratch a band may use (im2col + GEMM outputs): 96 K floats (384 KB), so a
/// band's working set stays in a 512 KB L2 cache next to the packed weights' current block.
const BAND_FLOATS: usize = 96 * 1024;
/// Fewest pixels per band (below this, per-GEMM overhead and weight packing dominate).
const MIN_BAND_PIXELS: usize = 96;

/// Bands per thread a parallel layer aims for (slack for unequal cores).
const BANDS_PER_THREAD: usize = 4;

/// Rows per band that give each of `threads` threads about [`BANDS_PER_THREAD`] bands of an
/// `h`-row output; all `h` rows in one band with one thread.
fn rows_per_thread_band(h: usize, threads: usize) -> usize {
    if threads > 1 {
        h.div_ceil(BANDS_PER_THREAD * threads).max(1)
    } else {
        h.max(1)
    }
}

/// Rows per band for an image `w` pixels wide needing `floats_per_px` scratch floats per
/// pixel; with `threads` > 1, small enough to give each thread about four bands.
fn band_rows(h: usize, w: usize, floats_per_px: usize, threads: usize) -> usize {
    let px = (BAND_FLOATS / floats_per_px.max(1)).max(MIN_BAND_PIXELS);
    let rows = px.div_ceil(w.max(1)).max(1);
    rows.min(rows_per_thread_band(h, threads))
}

/// Rows per part when `total` rows are cut into parts of at most `max_rows` rows, the
/// number of parts rounded up to an even one (two threads then get equal shares), the
/// rows spread evenly over them. Depends on the geometry alone, never on the thread count.
pub(crate) fn even_split(total: usize, max_rows: usize) -> usize {
    let mut parts = total.div_ceil(max_rows.max(1)).max(1);
    if parts > 1 && parts % 2 == 1 {
        parts += 1;
    }
    total.div_ceil(parts).max(1)
}

/// Calls `f(first_row, band, inner_par)` on consecutive bands of `rows_per` rows of `out`
/// (each row `row_len` floats; `out.len()` a multiple of it). Spread over `team` when it has
/// at least two bands per thread (GEMMs then sequential inside); else in order, passing the
/// team's [`Team::inner_par`] on to the GEMMs.
fn for_bands<F>(out: &mut [f32], row_len: usize, rows_per: usize, team: &Team<'_>, f: F)
where
    F: Fn(usize, &mut [f32], Par) + Sync,
{
    let rows = out.len() / row_len;
    let bands = rows.div_ceil(rows_per);
    let threads = team.threads();
    if threads > 1 && bands >= 2 * threads {
        team.for_each_chunk(out, rows_per * row_len, |b, band| {
            f(b * rows_per, band, Par::Seq)
        });
    } else {
        let ipar = team.inner_par();
        out.chunks_mut(rows_per * row_len)
            .enumerate()
            .for_each(|(b, band)| f(b * rows_per, band, ipar));
    }
}

thread_local! {
    /// Per-thread scratch for im2col matrices and GEMM outputs, reused across layers and calls.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` floats of this thread's scratch (contents unspecified). A nested call
/// on the same thread (rayon may run another band while `f` waits) gets a fresh buffer.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

thread_local! {
    /// Layer-output buffers this thread returned with [`recycle`], for [`zeroed`] to reuse:
    /// writing into memory the process already has avoids the page faults (and the kernel's
    /// zeroing) of fresh allocations, measured at about 12 % of a 907 px forward pass.
    static BUFFERS: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Most floats [`recycle`] keeps per thread (256 MB).
const MAX_POOLED_FLOATS: usize = 64 << 20;

/// The smallest buffer recycled on this thread whose capacity holds `len` floats, if any.
fn take_pooled(len: usize) -> Option<Vec<f32>> {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let best = (0..b.len())
            .filter(|&i| b[i].capacity() >= len)
            .min_by_key(|&i| b[i].capacity());
        best.map(|i| b.swap_remove(i))
    })
}

/// A vector of `len` zeros, reusing a recycled buffer of this thread when one is large enough.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    let reused = take_pooled(len);
    match reused {
        Some(mut v) => {
            v.clear();
            v.resize(len, 0.0);
            v
        }
        None => vec![0.0; len],
    }
}

/// A vector of `len` floats whose contents are unspecified (a recycled buffer's old values,
/// zeros beyond them), for an output the caller overwrites in full: like [`zeroed`] without
/// clearing what is reused.
pub(crate) fn overwritable(len: usize) -> Vec<f32> {
    let reused = take_pooled(len);
    match reused {
        Some(mut v) => {
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, 0.0);
            }
            v
        }
        None => vec![0.0; len],
    }
}

/// Gives `v` back for [`zeroed`] on this thread, dropping the smallest buffers beyond
/// [`MAX_POOLED_FLOATS`].
pub(crate) fn recycle(v: Vec<f32>) {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        b.push(v);
        b.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total = 0;
        b.retain(|v| {
            total += v.capacity();
            total <= MAX_POOLED_FLOATS
        });
    });
}

pub(crate) fn view(s: &[f32], m: usize, n: usize) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((m, n), s).expect("m*n floats")
}

pub(crate) fn view_mut(s: &mut [f32], m: usize, n: usize) -> ArrayViewMut2<'_, f32> {
    ArrayViewMut2::from_shape((m, n), s).expect("m*n floats")
}

/// `dst = max(src + bias, 0)` element-wise (all three the same length).
#[inline(always)]
fn bias_relu(dst: &mut [f32], src: &[f32], bias: &[f32]) {
    for ((d, &s), &b) in dst.iter_mut().zip(src).zip(bias) {
        *d = (s + b).max(0.0);
    }
}

/// `conv1` (3×3 stride 2, "same", 3 → 64 channels) + ReLU, then the 3×3/2 max-pool, on a CHW
/// input `x` (3, H, W); returns the pooled (h, w, 64) tensor. Bands of pooled rows are computed
/// from the conv rows they need (one shared conv row between neighbouring bands is computed
/// twice), so the full-resolution conv output never exists in memory.
pub(crate) fn conv1_pool(conv: &Conv, x: ArrayView3<'_, f32>, team: &Team<'_>) -> Hwc {
    let (c, h, w) = x.dim();
    assert_eq!(
        (c, conv.kh, conv.kw, conv.stride),
        (conv.in_ch, 3, 3, 2),
        "conv1 geometry"
    );
    let (ho, pt) = same_geometry(h, 3, 2);
    let (wo, pl) = same_geometry(w, 3, 2);
    let (hp, wp) = ((ho - 1) * 2 + 3, (wo - 1) * 2 + 3);
    // Zero-padded channel-last copy of the input.
    let mut xp = zeroed(hp * wp * c);
    for ch in 0..c {
        for (iy, row) in x.index_axis(ndarray::Axis(0), ch).outer_iter().enumerate() {
            let base = ((iy + pt) * wp + pl) * c + ch;
            for (ix, &v) in row.iter().enumerate() {
                xp[base + ix * c] = v;
            }
        }
    }
    let (ph, pw) = (
        pool_out(ho).expect("conv1 rows"),
        pool_out(wo).expect("conv1 cols"),
    );
    let n = conv.out_ch();
    let k = 9 * c;
    let mut out = zeroed(ph * pw * n);
    let rows_per = band_rows(ph, 2 * wo, k + n, team.threads());
    for_bands(&mut out, pw * n, rows_per, team, |q0, band, ipar| {
        let nq = band.len() / (pw * n);
        let nr = 2 * nq + 1; // conv rows 2 q0 .. 2 (q0 + nq) + 1
        let r0 = 2 * q0;
        let m = nr * wo;
        with_scratch(m * (k + n), |buf| {
            let (cols, acc) = buf.split_at_mut(m * k);
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..wo {
                            let dst = &mut cols[(r * wo + j) * k..(r * wo + j + 1) * k];
                            for u in 0..3 {
                                let src = ((2 * (r0 + r) + u) * wp + 2 * j) * c;
                                dst[u * 3 * c..(u + 1) * 3 * c]
                                    .copy_from_slice(&xp[src..src + 3 * c]);
                            }
                        }
                    }
                },
            );
            gemm(
                view_mut(acc, m, n),
                false,
                view(cols, m, k),
                conv.wt.view(),
                1.0,
                ipar,
            );
            let bias = conv.bias.as_slice().expect("contiguous bias");
            vectorized(
                #[inline(always)]
                || {
                    for px in acc.chunks_exact_mut(n) {
                        for (v, &b) in px.iter_mut().zip(bias) {
                            *v = (*v + b).max(0.0);
                        }
                    }
                    pool_rows(acc, wo, n, band, pw);
                },
            );
        });
    });
    recycle(xp);
    Hwc {
        h: ph,
        w: pw,
        c: n,
        data: out,
    }
}

/// 3×3/2 max-pool of the rows of `x` (rows of `w` pixels × `c` channels) into `out` (rows of
/// `pw` pixels; `out` has (rows(x) − 1) / 2 rows).
#[inline(always)]
fn pool_rows(x: &[f32], w: usize, c: usize, out: &mut [f32], pw: usize) {
    let row = w * c;
    let mut colmax = vec![0.0f32; row];
    for (q, orow) in out.chunks_exact_mut(pw * c).enumerate() {
        let r0 = &x[2 * q * row..(2 * q + 1) * row];
        let r1 = &x[(2 * q + 1) * row..(2 * q + 2) * row];
        let r2 = &x[(2 * q + 2) * row..(2 * q + 3) * row];
        for (((m, &a), &b), &d) in colmax.iter_mut().zip(r0).zip(r1).zip(r2) {
            *m = a.max(b).max(d);
        }
        for (t, o) in orow.chunks_exact_mut(c).enumerate() {
            let a = &colmax[2 * t * c..(2 * t + 1) * c];
            let b = &colmax[(2 * t + 1) * c..(2 * t + 2) * c];
            let d = &colmax[(2 * t + 2) * c..(2 * t + 3) * c];
            for (((o, &a), &b), &d) in o.iter_mut().zip(a).zip(b).zip(d) {
                *o = a.max(b).max(d);
            }
        }
    }
}

/// Max-pool 3×3, stride 2, no padding, floor mode (ndf's `MaxPooling2D((3, 3), (2, 2))`):
/// $y_{i,j,c} = \max_{0 \le u, v < 3} x_{2i+u, 2j+v, c}$. Input with h, w ≥ 3.
pub(crate) fn max_pool(x: &Hwc, team: &Team<'_>) -> Hwc {
    let ph = pool_out(x.h).expect("max_pool: height >= 3");
    let pw = pool_out(x.w).expect("max_pool: width >= 3");
    let c = x.c;
    let mut out = zeroed(ph * pw * c);
    let row = x.w * c;
    let rows_per = band_rows(ph, 2 * x.w, c, team.threads());
    for_bands(&mut out, pw * c, rows_per, team, |q0, band, _| {
        let nq = band.len() / (pw * c);
        let src = &x.data[2 * q0 * row..(2 * (q0 + nq) + 1) * row];
        vectorized(
            #[inline(always)]
            || pool_rows(src, x.w, c, band, pw),
        );
    });
    Hwc {
        h: ph,
        w: pw,
        c,
        data: out,
    }
}

/// A fire module: squeeze 1×1 + ReLU, then [expand1x1 + ReLU ‖ expand3x3 + ReLU]
/// concatenated along channels (expand1x1's first).
pub(crate) fn fire(
    squeeze: &Conv,
    expand1: &Conv,
    expand3: &Conv,
    x: &Hwc,
    team: &Team<'_>,
) -> Hwc {
    let (h, w, cin) = (x.h, x.w, x.c);
    let s = squeeze.out_ch();
    assert_eq!(cin, squeeze.in_ch, "fire: input channels");
    assert_eq!(
        (expand1.in_ch, expand3.in_ch),
        (s, s),
        "fire: squeeze channels"
    );
    assert_eq!(
        (expand1.kh, expand3.kh, expand3.kw, expand3.stride),
        (1, 3, 3, 1)
    );
    let threads = team.threads();
    // Squeeze into the interior of an (h + 2, w + 2, s) zero-bordered buffer: the border is
    // expand3x3's "same" padding.
    let wp = w + 2;
    let mut sq = zeroed((h + 2) * wp * s);
    let sb = squeeze.bias.as_slice().expect("contiguous bias");
    let rows_per = band_rows(h, w, s, threads);
    for_bands(
        &mut sq[wp * s..(h + 1) * wp * s],
        wp * s,
        rows_per,
        team,
        |r0, band, ipar| {
            let nr = band.len() / (wp * s);
            let m = nr * w;
            with_scratch(m * s, |acc| {
                gemm(
                    view_mut(acc, m, s),
                    false,
                    view(&x.data[r0 * w * cin..(r0 + nr) * w * cin], m, cin),
                    squeeze.wt.view(),
                    1.0,
                    ipar,
                );
                vectorized(
                    #[inline(always)]
                    || {
                        for (drow, arow) in
                            band.chunks_exact_mut(wp * s).zip(acc.chunks_exact(w * s))
                        {
                            for (d, a) in drow[s..(w + 1) * s]
                                .chunks_exact_mut(s)
                                .zip(arow.chunks_exact(s))
                            {
                                bias_relu(d, a, sb);
                            }
                        }
                    },
                );
            });
        },
    );
    let (e1, e3) = (expand1.out_ch(), expand3.out_ch());
    let e = e1 + e3;
    let k3 = 9 * s;
    let (b1, b3) = (
        expand1.bias.as_slice().expect("contiguous bias"),
        expand3.bias.as_slice().expect("contiguous bias"),
    );
    let mut out = zeroed(h * w * e);
    let rows_per = band_rows(h, w, k3 + e + 2 * e1 / w.max(1), threads);
    let sq_buf = &mut sq;
    let sq = &*sq_buf;
    for_bands(&mut out, w * e, rows_per, team, |r0, band, ipar| {
        let nr = band.len() / (w * e);
        let (m1, m3) = (nr * wp, nr * w);
        with_scratch(m1 * e1 + m3 * (k3 + e3), |buf| {
            let (acc1, rest) = buf.split_at_mut(m1 * e1);
            let (cols, acc3) = rest.split_at_mut(m3 * k3);
            // expand1x1 over whole padded rows (the two border pixels are computed and dropped:
            // the band is then one contiguous matrix).
            gemm(
                view_mut(acc1, m1, e1),
                false,
                view(&sq[(r0 + 1) * wp * s..(r0 + nr + 1) * wp * s], m1, s),
                expand1.wt.view(),
                1.0,
                ipar,
            );
            // im2col: pixel (i, j) takes padded rows i..i+3, columns j..j+3 (3·s floats each).
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..w {
                            let dst = &mut cols[(r * w + j) * k3..(r * w + j + 1) * k3];
                            for u in 0..3 {
                                let src = ((r0 + r + u) * wp + j) * s;
                                dst[u * 3 * s..(u + 1) * 3 * s]
                                    .copy_from_slice(&sq[src..src + 3 * s]);
                            }
                        }
                    }
                },
            );
            gemm(
                view_mut(acc3, m3, e3),
                false,
                view(cols, m3, k3),
                expand3.wt.view(),
                1.0,
                ipar,
            );
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..w {
                            let px = r * w + j;
                            let (d1, d3) = band[px * e..(px + 1) * e].split_at_mut(e1);
                            let a1 = &acc1[(r * wp + j + 1) * e1..(r * wp + j + 2) * e1];
                            bias_relu(d1, a1, b1);
                            bias_relu(d3, &acc3[px * e3..(px + 1) * e3], b3);
                        }
                    }
                },
            );
        });
    });
    recycle(std::mem::take(sq_buf));
    Hwc {
        h,
        w,
        c: e,
        data: out,
    }
}

/// EfficientNet's head then classifier, per pixel, output channel-first:
/// $Y = \big(\mathrm{relu6}(X W_h^\top + b_h)\, W_f^\top + b_f\big)^\top$, (fc out, h·w), for
/// `x` (h, w, head in). The pixels in bands ([`head_fc_band`]) in parallel, both layers by
/// [`crate::pointwise`] with the head's activations kept in the band's scratch, then its
/// scores transposed into its columns of the map. Each pixel's output depends on its own row
/// alone, so the cut (which follows the thread count) changes no bit of it. `None` (nothing
/// computed) when either layer has no packed weights or the CPU no AVX2 + FMA: the caller
/// then runs [`conv1x1`] and [`conv1x1_chw`].
pub(crate) fn head_fc_chw(head: &Conv, fc: &Conv, x: &Hwc, team: &Team<'_>) -> Option<Array2<f32>> {
    let (hp, fp) = (head.packed.as_ref()?, fc.packed.as_ref()?);
    assert_eq!(
        (x.c, fc.in_ch),
        (head.in_ch, head.out_ch()),
        "head_fc: channels"
    );
    let (p, cin, ch, n) = (x.h * x.w, x.c, head.out_ch(), fc.out_ch());
    let band = head_fc_band(p, team.threads());
    let hb = head.bias.as_slice().expect("contiguous bias");
    let fb = fc.bias.as_slice().expect("contiguous bias");
    if !crate::pointwise::available() {
        return None;
    }
    let mut map = Array2::<f32>::zeros((n, p));
    // Each band's map columns: its pixels' scores transposed while they are in its cache
    // (a transpose of the whole map after the bands read every row from the other core's
    // cache and did not speed up with a second thread).
    let bands: Vec<_> = map.axis_chunks_iter_mut(ndarray::Axis(1), band).collect();
    team.for_each_item(bands, |bi, mut cols| {
        let (m, p0) = (cols.ncols(), bi * band);
        with_scratch(m * (ch + n), |buf| {
            let (hid, rows) = buf.split_at_mut(m * ch);
            let a = &x.data[p0 * cin..(p0 + m) * cin];
            let done = crate::pointwise::pointwise(a, m, hp, hb, Act::Relu6, None, hid, |i| i * ch)
                && crate::pointwise::pointwise(hid, m, fp, fb, Act::None, None, rows, |i| i * n);
            assert!(
                done,
                "head_fc: the packed kernel was available a moment ago"
            );
            for (k, mut scores) in cols.outer_iter_mut().enumerate() {
                for (px, s) in scores.iter_mut().enumerate() {
                    *s = rows[px * n + k];
                }
            }
        });
    });
    Some(map)
}

/// Most pixels per band of [`head_fc_chw`] (its scratch: 1280 + 1000 floats a pixel, 2.3 MB
/// at 256).
const HEAD_FC_BAND: usize = 256;

/// Pixels per band of [`head_fc_chw`] for `p` pixels and `threads` threads: as few bands as
/// fit [`HEAD_FC_BAND`], their number a multiple of the thread count. Each band sweeps the
/// classifier's 5.1 MB of weights once, so small maps take one band per thread: at 227 px
/// (64 pixels) one thread's two bands of 32 took 1 317 µs, one band of 64 took 1 160 µs
/// (docs/evidence/cnn-small-maps-2026-12-06.md).
fn head_fc_band(p: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let bands = p.div_ceil(HEAD_FC_BAND).div_ceil(threads) * threads;
    p.div_ceil(bands).max(1)
}

/// A 1×1 convolution without ReLU whose output is channel-first: (out, h·w) row-major
/// $= W X^\top + b$, one GEMM (parallel inside with the team's [`Team::inner_par`]).
pub(crate) fn conv1x1_chw(conv: &Conv, x: &Hwc, team: &Team<'_>) -> Array2<f32> {
    assert_eq!((x.c, conv.kh), (conv.in_ch, 1), "conv1x1: input channels");
    let p = x.h * x.w;
    let mut out = Array2::<f32>::zeros((conv.out_ch(), p));
    for (mut row, &b) in out.outer_iter_mut().zip(conv.bias.iter()) {
        row.fill(b);
    }
    gemm(
        out.view_mut(),
        true,
        conv.weight.view(),
        view(&x.data, p, x.c).t(),
        1.0,
        team.inner_par(),
    );
    out
}

/// `dst = act(dst + bias)` per pixel of `c` channels (`dst.len()` a multiple of `c`).
#[inline(always)]
pub(crate) fn bias_act_inplace(dst: &mut [f32], bias: &[f32], act: Act) {
    for px in dst.chunks_exact_mut(bias.len()) {
        for (v, &b) in px.iter_mut().zip(bias) {
            *v = act.apply(*v + b);
        }
    }
}

/// A k×k convolution with TF "same" padding and stride `conv.stride` on a CHW input `x`
/// (C, H, W), bias + `act`, output channel-last (⌈H/s⌉, ⌈W/s⌉, out): EfficientNet's stem.
///
/// With packed weights on a CPU with AVX-512F and stride 1 or 2, [`stem_gathered`]: the input is copied once
/// into a zero-bordered channel-first buffer, and the kernel reads each output pixel's k·k·C
/// taps from it in place. Otherwise [`stem_im2col`]. Both give bitwise the same output (the
/// same sums in the same order).
pub(crate) fn conv_chw_input(
    conv: &Conv,
    x: ArrayView3<'_, f32>,
    act: Act,
    team: &Team<'_>,
) -> Hwc {
    assert_eq!(x.dim().0, conv.in_ch, "conv: input channels");
    match &conv.packed {
        Some(pk) if crate::pointwise::gather_available(conv.stride) => {
            stem_gathered(conv, pk, x, act, team)
        }
        _ => stem_im2col(conv, x, act, team),
    }
}

/// [`conv_chw_input`] without an im2col copy: `x` (C, H, W) copied into a zero-bordered
/// (C, h_p, w_p) buffer, then per output row i one [`crate::pointwise::pointwise_gather`]
/// over its w_o pixels, pixel j's tap (u, v, c) at `(c·h_p + s·i + u)·w_p + s·j + v` (the
/// order of `conv.wt`'s rows). Bands of output rows spread over `team`.
fn stem_gathered(
    conv: &Conv,
    pk: &crate::pointwise::Packed,
    x: ArrayView3<'_, f32>,
    act: Act,
    team: &Team<'_>,
) -> Hwc {
    let (c, h, w) = x.dim();
    let g = SamePad::new(h, w, conv.kh, conv.stride);
    let (k, st, n) = (conv.kh, conv.stride, conv.out_ch());
    let xp = pad_chw(x, &g, team);
    let offs: Vec<usize> = (0..k * k * c)
        .map(|q| {
            let (u, v, ch) = (q / (k * c), (q / c) % k, q % c);
            (ch * g.hp + u) * g.wp + v
        })
        .collect();
    let mut out = overwritable(g.ho * g.wo * n);
    let rows_per = rows_per_thread_band(g.ho, team.threads());
    let bias = conv.bias.as_slice().expect("contiguous bias");
    for_bands(&mut out, g.wo * n, rows_per, team, |r0, band, _| {
        for (i, orow) in band.chunks_exact_mut(g.wo * n).enumerate() {
            let a = &xp[(r0 + i) * st * g.wp..];
            let done =
                crate::pointwise::pointwise_gather(a, g.wo, st, &offs, pk, bias, act, orow, |j| {
                    j * n
                });
            assert!(
                done,
                "stem: the gathering kernel was available a moment ago"
            );
        }
    });
    recycle(xp);
    Hwc {
        h: g.ho,
        w: g.wo,
        c: n,
        data: out,
    }
}

/// `x` (C, H, W) in a (C, h_p, w_p) buffer: image row y at padded row y + p_t, column x at
/// x + p_l, zeros elsewhere (rows or columns beyond the padded sides are never read by a tap
/// and are left out). Bands of padded rows spread over `team`: done serially, the copy kept
/// the second thread idle; the stem took 183 → 173 µs (227 px) and 263 → 237 µs (256 px)
/// with two threads in an in-process A/B (docs/evidence/cnn-small-maps-2026-12-06.md).
fn pad_chw(x: ArrayView3<'_, f32>, g: &SamePad, team: &Team<'_>) -> Vec<f32> {
    let (c, h, w) = x.dim();
    let (hp, wp) = (g.hp, g.wp);
    let cols = w.min(wp - g.pl);
    let mut xp = overwritable(c * hp * wp);
    let rows_per = rows_per_thread_band(c * hp, team.threads());
    team.for_each_chunk(&mut xp, rows_per * wp, |bi, band| {
        for (i, dst) in band.chunks_exact_mut(wp).enumerate() {
            let pr = bi * rows_per + i;
            let (ch, y) = (pr / hp, (pr % hp).wrapping_sub(g.pt));
            if y >= h {
                dst.fill(0.0);
                continue;
            }
            dst[..g.pl].fill(0.0);
            dst[g.pl + cols..].fill(0.0);
            let src = x.slice(ndarray::s![ch, y, ..cols]);
            match src.as_slice() {
                Some(s) => dst[g.pl..g.pl + cols].copy_from_slice(s),
                None => dst[g.pl..g.pl + cols]
                    .iter_mut()
                    .zip(src.iter())
                    .for_each(|(d, &v)| *d = v),
            }
        }
    });
    xp
}

/// [`conv_chw_input`] by im2col: the input is copied once into a zero-bordered channel-last
/// buffer; bands of output rows are im2col'ed (k·k·C floats per pixel, k contiguous runs of
/// k·C) into scratch and multiplied by `conv.wt` in one GEMM (or packed-kernel call) each.
fn stem_im2col(conv: &Conv, x: ArrayView3<'_, f32>, act: Act, team: &Team<'_>) -> Hwc {
    let (c, h, w) = x.dim();
    let (k, st) = (conv.kh, conv.stride);
    let SamePad {
        ho,
        wo,
        pt,
        pl,
        hp,
        wp,
    } = SamePad::new(h, w, k, st);
    let mut xp = zeroed(hp * wp * c);
    for ch in 0..c {
        for (iy, row) in x.index_axis(ndarray::Axis(0), ch).outer_iter().enumerate() {
            let base = ((iy + pt) * wp + pl) * c + ch;
            for (ix, &v) in row.iter().enumerate() {
                xp[base + ix * c] = v;
            }
        }
    }
    let n = conv.out_ch();
    let kk = k * k * c;
    let mut out = zeroed(ho * wo * n);
    let rows_per = band_rows(ho, wo, kk, team.threads());
    let bias = conv.bias.as_slice().expect("contiguous bias");
    for_bands(&mut out, wo * n, rows_per, team, |r0, band, ipar| {
        let nr = band.len() / (wo * n);
        let m = nr * wo;
        with_scratch(m * kk, |cols| {
            vectorized(
                #[inline(always)]
                || {
                    for r in 0..nr {
                        for j in 0..wo {
                            let dst = &mut cols[(r * wo + j) * kk..(r * wo + j + 1) * kk];
                            for u in 0..k {
                                let src = (((r0 + r) * st + u) * wp + st * j) * c;
                                dst[u * k * c..(u + 1) * k * c]
                                    .copy_from_slice(&xp[src..src + k * c]);
                            }
                        }
                    }
                },
            );
            if let Some(pk) = &conv.packed {
                if crate::pointwise::pointwise(cols, m, pk, bias, act, None, band, |i| i * n) {
                    return;
                }
            }
            gemm(
                view_mut(band, m, n),
                false,
                view(cols, m, kk),
                conv.wt.view(),
                1.0,
                ipar,
            );
            vectorized(
                #[inline(always)]
                || bias_act_inplace(band, bias, act),
            );
        });
    });
    recycle(xp);
    Hwc {
        h: ho,
        w: wo,
        c: n,
        data: out,
    }
}

/// A 1×1 stride-1 convolution on a channel-last `x` (h, w, in) → (h, w, out):
/// $y = \mathrm{act}(x W^\top + b) [+ r]$, where the residual `r` (h, w, out) is added after the
/// activation (EfficientNet's identity skip follows the linear projection, `act` = None).
/// One GEMM per band of rows, written straight into the output; the epilogue runs on the band
/// while it is in cache.
pub(crate) fn conv1x1(
    conv: &Conv,
    x: &Hwc,
    act: Act,
    residual: Option<&Hwc>,
    team: &Team<'_>,
) -> Hwc {
    assert_eq!(
        (x.c, conv.kh, conv.kw, conv.stride),
        (conv.in_ch, 1, 1, 1),
        "conv1x1: geometry"
    );
    let (h, w, cin, n) = (x.h, x.w, x.c, conv.out_ch());
    if let Some(r) = residual {
        assert_eq!((r.h, r.w, r.c), (h, w, n), "conv1x1: residual shape");
    }
    let mut out = zeroed(h * w * n);
    let rows_per = band_rows(h, w, n, team.threads());
    let bias = conv.bias.as_slice().expect("contiguous bias");
    for_bands(&mut out, w * n, rows_per, team, |r0, band, ipar| {
        let m = band.len() / n;
        let p0 = r0 * w;
        if let Some(pk) = &conv.packed {
            let a = &x.data[p0 * cin..(p0 + m) * cin];
            let res = residual.map(|r| &r.data[p0 * n..(p0 + m) * n]);
            if crate::pointwise::pointwise(a, m, pk, bias, act, res, band, |i| i * n) {
                return;
            }
        }
        gemm(
            view_mut(band, m, n),
            false,
            view(&x.data[p0 * cin..(p0 + m) * cin], m, cin),
            conv.wt.view(),
            1.0,
            ipar,
        );
        vectorized(
            #[inline(always)]
            || {
                bias_act_inplace(band, bias, act);
                if let Some(r) = residual {
                    for (v, &s) in band.iter_mut().zip(&r.data[p0 * n..(p0 + m) * n]) {
                        *v += s;
                    }
                }
            },
        );
    });
    Hwc {
        h,
        w,
        c: n,
        data: out,
    }
}

/// A depthwise k×k convolution (one k×k filter per channel, `groups = channels`) with TF
/// "same" padding and stride `stride`:
/// $y_{i,j,c} = \mathrm{act}\big(b_c + \sum_{u,v} W_{c,u,v}\, x_{s i + u - p_t,\, s j + v - p_l,\, c}\big)$
/// (zero outside the input).
#[derive(Debug, Clone)]
pub(crate) struct Depthwise {
    /// (k·k, C) tap-major: `wt[(u * k + v) * C + c]` = $W_{c,u,v}$, so one tap's weights for
    /// all channels are contiguous like a channel-last pixel.
    pub wt: Vec<f32>,
    /// (C)
    pub bias: Vec<f32>,
    pub k: usize,
    pub stride: usize,
}

impl Depthwise {
    /// From a (C, 1, k, k) kernel (PyTorch's grouped-convolution layout) and its bias (C).
    pub fn new(weight: &[f32], bias: Vec<f32>, k: usize, stride: usize) -> Self {
        let c = bias.len();
        assert_eq!(weight.len(), c * k * k, "depthwise weight of C*k*k");
        let mut wt = vec![0.0; c * k * k];
        for ch in 0..c {
            for tap in 0..k * k {
                wt[tap * c + ch] = weight[ch * k * k + tap];
            }
        }
        Self {
            wt,
            bias,
            k,
            stride,
        }
    }

    pub fn channels(&self) -> usize {
        self.bias.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::team::with_team;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn max_pool_matches_naive_loops() {
        for (seed, &(c, h, w)) in [(2, 7, 7), (3, 8, 10), (1, 3, 4), (4, 13, 27), (5, 40, 9)]
            .iter()
            .enumerate()
        {
            let mut rng = ChaCha8Rng::seed_from_u64(7 + seed as u64);
            let x = Hwc {
                h,
                w,
                c,
                data: (0..h * w * c)
                    .map(|_| rng.random_range(-1.0f32..1.0))
                    .collect(),
            };
            let ho = (h - 3) / 2 + 1;
            let wo = (w - 3) / 2 + 1;
            let mut want = vec![0.0f32; ho * wo * c];
            for i in 0..ho {
                for j in 0..wo {
                    for cc in 0..c {
                        let mut m = f32::NEG_INFINITY;
                        for u in 0..3 {
                            for v in 0..3 {
                                m = m.max(x.data[((2 * i + u) * w + 2 * j + v) * c + cc]);
                            }
                        }
                        want[(i * wo + j) * c + cc] = m;
                    }
                }
            }
            for par in [Par::Seq, Par::rayon(2)] {
                let got = max_pool(&x, &Team::fork_join(par));
                assert_eq!((got.h, got.w, got.c), (ho, wo, c));
                assert_eq!(got.data, want);
            }
        }
    }

    fn rand_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    /// Naive "same"-padded convolution of a channel-last x (h, w, cin) by an OIHW kernel with
    /// `groups` groups (1 or cin), f64 accumulation, no bias.
    #[allow(clippy::too_many_arguments)]
    fn naive_conv(
        x: &[f32],
        (h, w, cin): (usize, usize, usize),
        wgt: &[f32],
        cout: usize,
        k: usize,
        s: usize,
        depthwise: bool,
    ) -> (usize, usize, Vec<f64>) {
        let (ho, pt) = same_geometry(h, k, s);
        let (wo, pl) = same_geometry(w, k, s);
        let cpg = if depthwise { 1 } else { cin };
        let mut out = vec![0.0f64; ho * wo * cout];
        for i in 0..ho {
            for j in 0..wo {
                for o in 0..cout {
                    let mut acc = 0.0f64;
                    for ci in 0..cpg {
                        let c = if depthwise { o } else { ci };
                        for u in 0..k {
                            for v in 0..k {
                                let (y, xx) = (
                                    (i * s + u) as isize - pt as isize,
                                    (j * s + v) as isize - pl as isize,
                                );
                                if y < 0 || xx < 0 || y >= h as isize || xx >= w as isize {
                                    continue;
                                }
                                let xv = x[((y as usize) * w + xx as usize) * cin + c] as f64;
                                acc += xv * wgt[((o * cpg + ci) * k + u) * k + v] as f64;
                            }
                        }
                    }
                    out[(i * wo + j) * cout + o] = acc;
                }
            }
        }
        (ho, wo, out)
    }

    fn assert_close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{what}[{i}]: {g} vs {w}"
            );
        }
    }

    #[test]
    fn conv1x1_with_residual_and_strided_input_conv_match_naive_loops() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (h, w, cin, cout) = (13, 17, 24, 40);
        let x = Hwc {
            h,
            w,
            c: cin,
            data: rand_vec(&mut rng, h * w * cin),
        };
        let r = Hwc {
            h,
            w,
            c: cout,
            data: rand_vec(&mut rng, h * w * cout),
        };
        let wgt = rand_vec(&mut rng, cout * cin);
        let bias = rand_vec(&mut rng, cout);
        let conv = Conv::new(wgt.clone(), bias.clone(), cin, 1, 1);
        let (_, _, lin) = naive_conv(&x.data, (h, w, cin), &wgt, cout, 1, 1, false);
        for par in [Par::Seq, Par::rayon(2)] {
            let want: Vec<f64> = lin
                .iter()
                .enumerate()
                .map(|(i, v)| v + bias[i % cout] as f64 + r.data[i] as f64)
                .collect();
            let got = conv1x1(&conv, &x, Act::None, Some(&r), &Team::fork_join(par));
            assert_close(&got.data, &want, "conv1x1 + residual");
            let want6: Vec<f64> = lin
                .iter()
                .enumerate()
                .map(|(i, v)| (v + bias[i % cout] as f64).clamp(0.0, 6.0))
                .collect();
            let got6 = conv1x1(&conv, &x, Act::Relu6, None, &Team::fork_join(par));
            assert_close(&got6.data, &want6, "conv1x1 relu6");
        }
        // The stem: 3×3 stride 2 from a CHW input, odd and even sides.
        for &(h, w) in &[(15, 16), (224, 225), (5, 2)] {
            let (c, n, k) = (3, 8, 3);
            let chw = ndarray::Array3::from_shape_fn((c, h, w), |_| rng.random_range(-2.0f32..2.0));
            let hwc: Vec<f32> = (0..h * w * c)
                .map(|i| chw[[i % c, i / c / w, (i / c) % w]])
                .collect();
            let wgt = rand_vec(&mut rng, n * c * k * k);
            let bias = rand_vec(&mut rng, n);
            let conv = Conv::new(wgt.clone(), bias.clone(), c, k, 2);
            let (ho, wo, lin) = naive_conv(&hwc, (h, w, c), &wgt, n, k, 2, false);
            let want: Vec<f64> = lin
                .iter()
                .enumerate()
                .map(|(i, v)| (v + bias[i % n] as f64).clamp(0.0, 6.0))
                .collect();
            // Unpacked (faer) and packed (the pointwise kernel where the CPU has AVX2 + FMA).
            for conv in [conv.clone(), conv.packed()] {
                for par in [Par::Seq, Par::rayon(2)] {
                    let got = with_team(par, |t| conv_chw_input(&conv, chw.view(), Act::Relu6, t));
                    assert_eq!((got.h, got.w, got.c), (ho, wo, n));
                    assert_close(&got.data, &want, &format!("stem {h}x{w}"));
                }
            }
        }
    }

    #[test]
    fn gathered_stem_is_bitwise_the_im2col_stem() {
        // EfficientNet's stem shape (3 → 32, 3×3 stride 2), odd and even sides, a side below
        // the kernel, and a non-contiguous (transposed) input view.
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let (c, n, k) = (3, 32, 3);
        let conv = Conv::new(
            rand_vec(&mut rng, n * c * k * k),
            rand_vec(&mut rng, n),
            c,
            k,
            2,
        )
        .packed();
        if !crate::pointwise::gather_available(2) {
            return; // no AVX-512F: conv_chw_input is stem_im2col, tested above
        }
        for &(h, w) in &[(227, 227), (40, 71), (2, 9)] {
            let chw = ndarray::Array3::from_shape_fn((c, h, w), |_| rng.random_range(-2.0f32..2.0));
            let wide = ndarray::Array3::from_shape_fn((c, w, h), |(ch, j, i)| chw[[ch, i, j]]);
            for par in [Par::Seq, Par::rayon(2)] {
                let want = stem_im2col(&conv, chw.view(), Act::Relu6, &Team::fork_join(par));
                let pk = conv.packed.as_ref().unwrap();
                for x in [chw.view(), wide.view().permuted_axes([0, 2, 1])] {
                    let got = with_team(par, |t| stem_gathered(&conv, pk, x, Act::Relu6, t));
                    assert_eq!((got.h, got.w, got.c), (want.h, want.w, want.c));
                    let same = got
                        .data
                        .iter()
                        .zip(&want.data)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "stem {h}x{w}: gathered differs from im2col");
                }
            }
        }
    }

    #[test]
    fn weight_reorder_is_a_permutation_of_the_oihw_kernel() {
        let (cout, cin, k) = (3, 4, 3);
        let w: Vec<f32> = (0..cout * cin * k * k).map(|v| v as f32).collect();
        let conv = Conv::new(w, vec![0.0; cout], cin, k, 1);
        for o in 0..cout {
            for c in 0..cin {
                for u in 0..k {
                    for v in 0..k {
                        let oihw = ((o * cin + c) * k + u) * k + v;
                        assert_eq!(conv.wt[[(u * k + v) * cin + c, o]], oihw as f32);
                    }
                }
            }
        }
    }

    #[test]
    fn head_fc_matches_the_two_convolutions_for_any_team() {
        // 300 pixels: two bands of 150 with one or two threads, three of 100 with three.
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        let (h, w, cin, ch, n) = (15, 20, 24, 40, 33);
        let x = Hwc {
            h,
            w,
            c: cin,
            data: rand_vec(&mut rng, h * w * cin),
        };
        let head = Conv::new(
            rand_vec(&mut rng, ch * cin),
            rand_vec(&mut rng, ch),
            cin,
            1,
            1,
        );
        let fc = Conv::new(rand_vec(&mut rng, n * ch), rand_vec(&mut rng, n), ch, 1, 1);
        let seq = Team::fork_join(Par::Seq);
        let f = conv1x1(&head, &x, Act::Relu6, None, &seq);
        let want = conv1x1_chw(&fc, &f, &seq);
        let (head, fc) = (head.packed(), fc.packed());
        let one = with_team(Par::Seq, |t| head_fc_chw(&head, &fc, &x, t));
        let Some(one) = one else {
            return; // no AVX2 + FMA here: the caller's fallback is what `want` ran
        };
        assert_eq!(one.dim(), (n, h * w));
        let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        assert_close(one.as_slice().unwrap(), &want, "head_fc");
        for t in [2, 3] {
            let got = with_team(Par::rayon(t), |tm| head_fc_chw(&head, &fc, &x, tm));
            assert_eq!(got.as_ref(), Some(&one), "{t} threads differ from one");
        }
    }

    #[test]
    fn head_fc_bands_are_one_per_thread_on_small_maps() {
        for p in [1, 20, 64, 100, 225, 256, 257, 841, 3600] {
            for t in 1..=4 {
                let band = head_fc_band(p, t);
                let bands = p.div_ceil(band);
                assert!(band <= HEAD_FC_BAND, "{p} px, {t} threads: band {band}");
                if p >= t * HEAD_FC_BAND / 2 {
                    // Enough pixels: the bands keep every thread busy, in equal shares.
                    assert_eq!(bands % t, 0, "{p} px, {t} threads: {bands} bands");
                }
                if p <= t * HEAD_FC_BAND && p >= t {
                    assert_eq!(bands, t, "{p} px, {t} threads: {bands} bands");
                }
            }
        }
    }

    #[test]
    fn same_padding_geometry() {
        // conv1 at 227 (odd): 114 outputs, one pixel of padding before.
        assert_eq!(same_geometry(227, 3, 2), (114, 1));
        // even side: 113 outputs, no padding before (one after).
        assert_eq!(same_geometry(226, 3, 2), (113, 0));
        assert_eq!(same_geometry(13, 3, 1), (13, 1));
        assert_eq!(pool_out(114), Some(56));
        assert_eq!(pool_out(2), None);
    }
}
