//! EfficientNet's inverted-residual (MBConv) block, fused: expand 1×1 + ReLU6 → depthwise k×k
//! stride s + ReLU6 → project 1×1 (+ identity skip), on channel-last (HWC) `f32` buffers.
//!
//! # Math and shapes
//! Input $x$ (h, w, $C_{in}$); hidden $C = e \cdot C_{in}$ channels; output (⌈h/s⌉, ⌈w/s⌉,
//! $C_{out}$):
//! - expand: $e_{p,c} = \mathrm{relu6}(b^e_c + \sum_{c'} x_{p,c'} W^e_{c,c'})$ per pixel $p$
//!   (absent when $e = 1$: then $e = x$);
//! - depthwise ("same" padding $p_t, p_l$, see [`crate::ops::conv::same_geometry`]):
//!   $d_{i,j,c} = \mathrm{relu6}(b^d_c + \sum_{u,v<k} W^d_{c,u,v}\, e_{s i + u - p_t,\, s j + v - p_l,\, c})$,
//!   zero outside the image;
//! - project: $y_{p,o} = b^p_o + \sum_c d_{p,c} W^p_{o,c}$ [$+\, x_{p,o}$ when the block has
//!   the skip: stride 1 and $C_{in} = C_{out}$].
//!
//! # Schedule
//! The expanded tensor (6× the input's channels) is never materialised whole when it is large:
//! the output rows are split into chunks (in parallel), and each chunk walks its rows in
//! groups of a few rows, keeping the expanded rows the group's depthwise needs in a ring
//! buffer of $(G - 1)s + k$ zero-padded rows ("same" padding as zero columns and zero rows), so
//! each expanded row is computed once per chunk (the $k - s$ rows shared with the previous
//! chunk are computed twice) and read back from cache. Per group: one expand GEMM over the
//! new rows (faer), the depthwise into a scratch (G·w_o, C) matrix, one project GEMM straight
//! into the output rows, bias and skip added while they are in cache. When the map is so
//! small that chunks could not be long enough to keep that overlap small (enough chunks: one
//! per thread with the packed kernel, see `min_chunks`, else four), the block runs in
//! two parallel phases instead: expand every row into one zero-padded buffer, then depthwise +
//! project per band of output rows.
//!
//! With faer's GEMMs the chunk, group and band sizes depend only on the layer's geometry,
//! never on the thread count, so every GEMM has the same shape and the output is bitwise the
//! same for any number of threads; with the packed 1×1 kernel, whose row i depends only on
//! row i of its input, the rows are cut into one piece per thread (`pieces_for`), with the
//! same guarantee. The depthwise sums the taps in the order (u, v) from zero and adds the bias
//! last, the zero padding contributing exact zeros, i.e. the same values as the unpadded sum.

use crate::exec::bands::even_split;
use crate::exec::scratch::{overwritable, recycle, with_scratch};
use crate::exec::team::Team;
use crate::ops::activation::{bias_act_inplace, Act};
use crate::ops::conv::{Conv, SamePad};
use crate::ops::depthwise::{dw_row, Depthwise, MAX_K};
use crate::ops::pointwise::{available, pointwise};
use crate::ops::tensor::{view, view_mut, Hwc};
use fisherkit::linalg::{gemm, vectorized, Par};

/// Working-set target, in floats, of one group of the rolling schedule (ring + expand scratch
/// + depthwise output): 128 K floats (512 KB), about a core's L2 cache.
const TILE_FLOATS: usize = 128 * 1024;

/// Most chunks a rolling block is split into (parallel slack for a few threads).
const MAX_CHUNKS: usize = 16;

/// Fewest chunks for the rolling schedule when the geometry alone decides the cut; with fewer
/// the two-phase one is used (see [`min_chunks`]).
const MIN_CHUNKS: usize = 4;

/// A chunk of output rows spans at least this many times the k − s rows it shares with its
/// neighbour (so recomputed expand rows cost at most ~1/6 of the chunk's).
const OVERLAP_FACTOR: usize = 6;

/// Floats per band of the two-phase schedule (expand output or depthwise output).
const BAND_FLOATS: usize = 96 * 1024;

/// Fewest bands the two-phase schedule cuts a map into (when it has that many rows).
const MIN_BANDS: usize = 8;

/// The geometry of one block on one input (all sizes in pixels or channels).
#[derive(Debug, Clone, Copy)]
struct Geo {
    h: usize,
    w: usize,
    cin: usize,
    /// Hidden (expanded) channels: the depthwise's channels.
    c: usize,
    cout: usize,
    k: usize,
    s: usize,
    /// Output sides, padding before, padded input sides (read through `Deref`: `g.ho`).
    pad: SamePad,
}

impl std::ops::Deref for Geo {
    type Target = SamePad;
    fn deref(&self) -> &SamePad {
        &self.pad
    }
}

impl Geo {
    /// Floats of one zero-padded hidden row.
    fn row(&self) -> usize {
        self.wp * self.c
    }
}

/// One MBConv block (see the module docs) on `x` (h, w, C_in) → (⌈h/s⌉, ⌈w/s⌉, C_out).
/// `expand` is `None` for expansion ratio 1; `skip` adds `x` to the projection (stride 1,
/// C_in = C_out). Chunks or bands spread over `team`'s threads.
pub(crate) fn mbconv(
    expand: Option<&Conv>,
    dw: &Depthwise,
    project: &Conv,
    skip: bool,
    x: &Hwc,
    team: &Team<'_>,
) -> Hwc {
    let c = dw.channels();
    match expand {
        Some(e) => assert_eq!(
            (e.in_ch, e.out_ch(), e.kh, e.stride),
            (x.c, c, 1, 1),
            "mbconv: expand geometry"
        ),
        None => assert_eq!(x.c, c, "mbconv: depthwise channels"),
    }
    assert_eq!(
        (project.in_ch, project.kh, project.stride),
        (c, 1, 1),
        "mbconv: project geometry"
    );
    let (k, s) = (dw.k, dw.stride);
    let pad = SamePad::new(x.h, x.w, k, s);
    let SamePad { ho, wo, pt, pl, .. } = pad;
    let g = Geo {
        h: x.h,
        w: x.w,
        cin: x.c,
        c,
        cout: project.out_ch(),
        k,
        s,
        pad,
    };
    assert!(
        g.wp >= pl + g.w && g.hp >= pt + g.h,
        "mbconv: kernel >= stride"
    );
    assert!(k <= MAX_K, "mbconv: depthwise kernel side at most {MAX_K}");
    if skip {
        assert_eq!(
            (s, x.c),
            (1, g.cout),
            "mbconv: skip needs stride 1, C_in = C_out"
        );
    }
    let residual = skip.then_some(&x.data[..]);
    let out_row = wo * g.cout;
    let mut out = overwritable(ho * out_row);
    let chunks = rolling_chunks(&g);
    let pieces = pieces_for(team.threads(), expand, project);
    let min_bands = pieces.unwrap_or(MIN_BANDS);
    if chunks >= min_chunks(pieces) {
        let chunks = pieces.map_or(chunks, |p| chunks.min(p));
        let chunk_rows = even_split(ho, ho.div_ceil(chunks));
        let grp = group_rows(&g);
        team.for_each_chunk(&mut out, chunk_rows * out_row, |ci, oband| {
            let o0 = ci * chunk_rows;
            let o1 = o0 + oband.len() / out_row;
            roll_chunk(expand, dw, project, &g, x, residual, o0, o1, grp, oband);
        });
    } else {
        // Phase 1: the whole zero-padded hidden tensor, bands of padded rows in parallel.
        let row = g.row();
        // Every padded row is written by phase 1 (zeros outside the image and in the pads).
        let mut hidden = overwritable(g.hp * row);
        let band = even_split(
            g.hp,
            (BAND_FLOATS / (g.w * c).max(1)).clamp(1, g.hp.div_ceil(min_bands).max(1)),
        );
        team.for_each_chunk(&mut hidden, band * row, |bi, hb| {
            let pr0 = bi * band;
            let pr1 = pr0 + hb.len() / row;
            let sx = if expand.is_some() {
                (pr1 - pr0) * g.w * c
            } else {
                0
            };
            with_scratch(sx, |sx| {
                fill_rows(expand, x, &g, pr0, pr1, hb, pr0, pr1 - pr0, sx)
            });
        });
        // Phase 2: depthwise + project per band of output rows.
        let ob = even_split(
            ho,
            (BAND_FLOATS / (wo * c).max(1)).clamp(1, ho.div_ceil(min_bands).max(1)),
        );
        let hidden_ref = &hidden;
        team.for_each_chunk(&mut out, ob * out_row, |bi, oband| {
            let o0 = bi * ob;
            let o1 = o0 + oband.len() / out_row;
            with_scratch((o1 - o0) * wo * c, |d| {
                dw_project(
                    dw, project, &g, hidden_ref, 0, g.hp, o0, o1, oband, residual, d,
                )
            });
        });
        recycle(hidden);
    }
    Hwc {
        h: ho,
        w: wo,
        c: g.cout,
        data: out,
    }
}

/// How many pieces (chunks or bands) the block's rows are cut into for `threads`, when the cut
/// cannot change the output: every 1×1 layer of the block runs the pointwise kernel, whose
/// row i depends only on row i of its input however the rows are batched
/// ([`crate::ops::pointwise::available`]). Then one piece per thread: no expand row computed
/// twice at chunk borders, and each band of a small map sweeping the 1×1 weights once less
/// (two per thread, for slack between unequal cores, measured 1–3 % slower in a pass-long
/// team at 227–454 px; docs/evidence/cnn-threads-2026-12-05.md). `None`: the
/// geometry alone decides ([`MIN_BANDS`], [`rolling_chunks`]), as faer's sums may depend on
/// the shapes and the output must be the same bits for any thread count.
fn pieces_for(threads: usize, expand: Option<&Conv>, project: &Conv) -> Option<usize> {
    let packed = project.packed.is_some() && expand.is_none_or(|e| e.packed.is_some());
    (packed && available()).then_some(threads)
}

/// Fewest chunks ([`rolling_chunks`]) for which a block rolls: [`MIN_CHUNKS`], for parallel
/// slack, when the geometry alone decides the cut; with `Some(pieces)` (one piece per thread,
/// [`pieces_for`]) no more than `pieces`, since that is all the chunks the block is cut into.
/// A map that can take one chunk per thread, each ≥ [`OVERLAP_FACTOR`]·(k − s) input rows,
/// then rolls instead of materialising its expanded tensor: stage 3's first block at 227 px
/// (57 → 29 rows, k = 5, s = 2, a 2.1 MB padded hidden tensor, twice the L2 cache) went from
/// 433 to 277 µs with one thread, 233 to 146 µs with two
/// (docs/evidence/cnn-small-maps-2026-12-06.md).
fn min_chunks(pieces: Option<usize>) -> usize {
    pieces.map_or(MIN_CHUNKS, |p| p.min(MIN_CHUNKS))
}

/// Number of chunks of output rows for the rolling schedule: each spans at least
/// [`OVERLAP_FACTOR`]·(k − s) input rows, at most [`MAX_CHUNKS`] of them (0 when the map is
/// shorter than one such chunk).
fn rolling_chunks(g: &Geo) -> usize {
    let overlap = g.k.saturating_sub(g.s).max(1);
    (g.ho * g.s / (OVERLAP_FACTOR * overlap)).min(MAX_CHUNKS.min(g.ho))
}

/// Output rows per group of the rolling schedule: the most (≥ 1) whose ring of
/// (G − 1)s + k padded rows, expand scratch of as many image rows and depthwise output of G
/// rows fit in [`TILE_FLOATS`].
fn group_rows(g: &Geo) -> usize {
    let per_in_row = g.row() + g.w * g.c;
    let mut grp = 1;
    while grp < g.ho && (grp * g.s + g.k) * per_in_row + (grp + 1) * g.wo * g.c <= TILE_FLOATS {
        grp += 1;
    }
    grp
}

/// Output rows `o0 .. o1` (into `oband`) of the block by the rolling schedule: groups of `grp`
/// rows, the expanded rows in a ring buffer of (grp − 1)s + k slots (padded row `r` in slot
/// `r mod slots`).
#[allow(clippy::too_many_arguments)]
fn roll_chunk(
    expand: Option<&Conv>,
    dw: &Depthwise,
    project: &Conv,
    g: &Geo,
    x: &Hwc,
    residual: Option<&[f32]>,
    o0: usize,
    o1: usize,
    grp: usize,
    oband: &mut [f32],
) {
    let slots = (grp - 1) * g.s + g.k;
    let row = g.row();
    let sx_len = if expand.is_some() {
        slots * g.w * g.c
    } else {
        0
    };
    let out_row = g.wo * g.cout;
    with_scratch(slots * row + sx_len + grp * g.wo * g.c, |buf| {
        let (ring, rest) = buf.split_at_mut(slots * row);
        let (sx, d) = rest.split_at_mut(sx_len);
        // Padded rows [?, held) are in the ring.
        let mut held = o0 * g.s;
        let mut g0 = o0;
        while g0 < o1 {
            let g1 = (g0 + grp).min(o1);
            let need_lo = g0 * g.s;
            let need_hi = (g1 - 1) * g.s + g.k;
            fill_rows(expand, x, g, held.max(need_lo), need_hi, ring, 0, slots, sx);
            held = need_hi;
            dw_project(
                dw,
                project,
                g,
                ring,
                0,
                slots,
                g0,
                g1,
                &mut oband[(g0 - o0) * out_row..(g1 - o0) * out_row],
                residual,
                &mut d[..(g1 - g0) * g.wo * g.c],
            );
            g0 = g1;
        }
    });
}

/// Writes the zero-padded hidden rows `pr0 .. pr1` (padded row r = image row r − p_t; rows
/// outside the image all zeros, p_l zero pixels before each row and wp − p_l − w after) into
/// `buf`, padded row r at slot `(r − base) mod slots` of `g.row()` floats. The hidden row is
/// relu6(expand) of the input row, or the input row itself without `expand`. `sx`: scratch
/// for the expand GEMM, at least one row of w·C floats when `expand` is given (larger scratch
/// batches more rows per GEMM).
#[allow(clippy::too_many_arguments)]
fn fill_rows(
    expand: Option<&Conv>,
    x: &Hwc,
    g: &Geo,
    pr0: usize,
    pr1: usize,
    buf: &mut [f32],
    base: usize,
    slots: usize,
    sx: &mut [f32],
) {
    let row = g.row();
    let (w, c, cin) = (g.w, g.c, g.cin);
    let slot = |r: usize| (r - base) % slots;
    // Image rows are padded rows [pt, pt + h).
    let in0 = pr0.clamp(g.pt, g.pt + g.h);
    let in1 = pr1.clamp(in0, g.pt + g.h);
    for r in (pr0..pr1).filter(|&r| r < in0 || r >= in1) {
        let sl = slot(r);
        buf[sl * row..(sl + 1) * row].fill(0.0);
    }
    let interior = g.pl * c..(g.pl + w) * c;
    let batch = match expand {
        Some(_) => (sx.len() / (w * c)).max(1),
        None => in1 - in0,
    };
    let mut a = in0;
    while a < in1 {
        let b = (a + batch).min(in1);
        let (xa, xb) = (a - g.pt, b - g.pt);
        let src = &x.data[xa * w * cin..xb * w * cin];
        match expand {
            Some(conv)
                if conv.packed.as_ref().is_some_and(|pk| {
                    // Each pixel straight into its place in its padded row. The offsets are
                    // listed row by row: `slot(a + i / w)` per pixel cost three integer
                    // divisions, 9 % of the second block at 227 px (it is 3.5–4.6 % faster
                    // without, in-process A/B; docs/evidence/cnn-small-maps-2026-12-06.md).
                    let bias = conv.bias.as_slice().expect("contiguous bias");
                    let offsets: Vec<usize> = (a..b)
                        .flat_map(|r| {
                            let start = slot(r) * row + g.pl * c;
                            (0..w).map(move |j| start + j * c)
                        })
                        .collect();
                    pointwise(src, (b - a) * w, pk, bias, Act::Relu6, None, buf, |i| {
                        offsets[i]
                    })
                }) =>
            {
                for r in a..b {
                    let sl = slot(r);
                    let dst = &mut buf[sl * row..(sl + 1) * row];
                    dst[..interior.start].fill(0.0);
                    dst[interior.end..].fill(0.0);
                }
            }
            Some(conv) => {
                let m = (b - a) * w;
                let acc = &mut sx[..m * c];
                gemm(
                    view_mut(acc, m, c),
                    false,
                    view(src, m, cin),
                    conv.wt.view(),
                    1.0,
                    Par::Seq,
                );
                let bias = conv.bias.as_slice().expect("contiguous bias");
                vectorized(
                    #[inline(always)]
                    || {
                        for (r, arow) in (a..b).zip(acc.chunks_exact(w * c)) {
                            let sl = slot(r);
                            let dst = &mut buf[sl * row..(sl + 1) * row];
                            dst[..interior.start].fill(0.0);
                            dst[interior.end..].fill(0.0);
                            for (dp, ap) in dst[interior.clone()]
                                .chunks_exact_mut(c)
                                .zip(arow.chunks_exact(c))
                            {
                                for ((d, &v), &bb) in dp.iter_mut().zip(ap).zip(bias) {
                                    *d = Act::Relu6.apply(v + bb);
                                }
                            }
                        }
                    },
                );
            }
            None => {
                for (r, xrow) in (a..b).zip(src.chunks_exact(w * c)) {
                    let sl = slot(r);
                    let dst = &mut buf[sl * row..(sl + 1) * row];
                    dst[..interior.start].fill(0.0);
                    dst[interior.end..].fill(0.0);
                    dst[interior.clone()].copy_from_slice(xrow);
                }
            }
        }
        a = b;
    }
}

/// Output rows `o0 .. o1` of the block from the padded hidden rows in `buf` (padded row r at
/// slot `(r − base) mod slots`): the depthwise + bias + ReLU6 into `d` ((o1 − o0)·w_o, C),
/// then `out` ((o1 − o0)·w_o, C_out) = d · W_pᵀ + b_p (+ the same rows of `residual`).
#[allow(clippy::too_many_arguments)]
fn dw_project(
    dw: &Depthwise,
    project: &Conv,
    g: &Geo,
    buf: &[f32],
    base: usize,
    slots: usize,
    o0: usize,
    o1: usize,
    out: &mut [f32],
    residual: Option<&[f32]>,
    d: &mut [f32],
) {
    let row = g.row();
    let (c, wo, cout) = (g.c, g.wo, g.cout);
    let m = (o1 - o0) * wo;
    let d = &mut d[..m * c];
    for (i, drow) in (o0..o1).zip(d.chunks_exact_mut(wo * c)) {
        let mut rows: [&[f32]; MAX_K] = [&[]; MAX_K];
        for (u, r) in rows.iter_mut().enumerate().take(g.k) {
            let sl = (i * g.s + u - base) % slots;
            *r = &buf[sl * row..(sl + 1) * row];
        }
        dw_row(&rows[..g.k], dw, g.s, wo, drow);
    }
    let bias = project.bias.as_slice().expect("contiguous bias");
    let res = residual.map(|r| &r[o0 * wo * cout..o1 * wo * cout]);
    if let Some(pk) = &project.packed {
        if pointwise(d, m, pk, bias, Act::None, res, out, |i| i * cout) {
            return;
        }
    }
    gemm(
        view_mut(out, m, cout),
        false,
        view(d, m, c),
        project.wt.view(),
        1.0,
        Par::Seq,
    );
    vectorized(
        #[inline(always)]
        || {
            bias_act_inplace(out, bias, Act::None);
            if let Some(r) = res {
                for (v, &s) in out.iter_mut().zip(r) {
                    *v += s;
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::team::with_team;
    use crate::ops::conv::same_geometry;
    use crate::ops::depthwise::dw_row_ks;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn rand_vec(rng: &mut ChaCha8Rng, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-scale..scale)).collect()
    }

    /// The block by naive loops in f64: expand (OIHW weights `we` (C, C_in)), depthwise
    /// (`wd` (C, k, k)), project (`wp` (C_out, C)), as the module docs state.
    #[allow(clippy::too_many_arguments)]
    fn naive_block(
        x: &Hwc,
        ex: Option<(&[f32], &[f32])>,
        (wd, bd): (&[f32], &[f32]),
        (wp, bp): (&[f32], &[f32]),
        k: usize,
        s: usize,
        skip: bool,
    ) -> (usize, usize, Vec<f64>) {
        let (h, w, cin) = (x.h, x.w, x.c);
        let c = bd.len();
        let cout = bp.len();
        let hid: Vec<f64> = match ex {
            Some((we, be)) => (0..h * w * c)
                .map(|i| {
                    let (p, ch) = (i / c, i % c);
                    let mut a = be[ch] as f64;
                    for ci in 0..cin {
                        a += x.data[p * cin + ci] as f64 * we[ch * cin + ci] as f64;
                    }
                    a.clamp(0.0, 6.0)
                })
                .collect(),
            None => x.data.iter().map(|&v| v as f64).collect(),
        };
        let (ho, pt) = same_geometry(h, k, s);
        let (wo, pl) = same_geometry(w, k, s);
        let mut d = vec![0.0f64; ho * wo * c];
        for i in 0..ho {
            for j in 0..wo {
                for ch in 0..c {
                    let mut a = bd[ch] as f64;
                    for u in 0..k {
                        for v in 0..k {
                            let y = (i * s + u) as isize - pt as isize;
                            let xx = (j * s + v) as isize - pl as isize;
                            if y < 0 || xx < 0 || y >= h as isize || xx >= w as isize {
                                continue;
                            }
                            let p = y as usize * w + xx as usize;
                            a += hid[p * c + ch] * wd[(ch * k + u) * k + v] as f64;
                        }
                    }
                    d[(i * wo + j) * c + ch] = a.clamp(0.0, 6.0);
                }
            }
        }
        let mut y = vec![0.0f64; ho * wo * cout];
        for p in 0..ho * wo {
            for o in 0..cout {
                let mut a = bp[o] as f64;
                for ch in 0..c {
                    a += d[p * c + ch] * wp[o * c + ch] as f64;
                }
                if skip {
                    a += x.data[p * cout + o] as f64;
                }
                y[p * cout + o] = a;
            }
        }
        (ho, wo, y)
    }

    #[test]
    fn mbconv_matches_naive_loops_and_is_thread_count_invariant() {
        // (h, w, C_in, expansion, C_out, k, s): odd/even sides, strides 1 and 2, kernels 3
        // and 5, sides below the kernel, channel counts hitting the 16-, 8- and 1-channel
        // blocks, widths not multiples of the 4-pixel block, skip on and off, no expansion,
        // and maps large enough for the rolling schedule (several chunks and groups) as well
        // as small ones (two-phase).
        let cases = [
            (7, 9, 8, 6, 8, 3, 1),
            (8, 10, 4, 6, 5, 3, 2),
            (11, 6, 4, 6, 7, 5, 2),
            (9, 9, 5, 1, 5, 5, 1),
            (3, 2, 4, 1, 3, 5, 2),
            (2, 4, 3, 3, 3, 3, 1),
            (1, 1, 8, 6, 8, 5, 1),
            (61, 47, 16, 6, 16, 3, 1),
            (64, 70, 16, 6, 24, 3, 2),
            (80, 33, 8, 5, 16, 5, 2),
            (100, 37, 16, 6, 16, 5, 1),
            (100, 121, 8, 1, 4, 3, 1),
            (45, 30, 24, 6, 24, 5, 1),
        ];
        for (seed, &(h, w, cin, e, cout, k, s)) in cases.iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(300 + seed as u64);
            let c = cin * e;
            let x = Hwc {
                h,
                w,
                c: cin,
                data: rand_vec(&mut rng, h * w * cin, 2.0),
            };
            let (we, be) = (rand_vec(&mut rng, c * cin, 1.0), rand_vec(&mut rng, c, 1.0));
            let (wd, bd) = (
                rand_vec(&mut rng, c * k * k, 1.0),
                rand_vec(&mut rng, c, 1.0),
            );
            let (wp, bp) = (
                rand_vec(&mut rng, cout * c, 1.0),
                rand_vec(&mut rng, cout, 1.0),
            );
            let skip = s == 1 && cin == cout;
            let expand = (e > 1).then(|| Conv::new(we.clone(), be.clone(), cin, 1, 1));
            let dw = Depthwise::new(&wd, bd.clone(), k, s);
            let project = Conv::new(wp.clone(), bp.clone(), c, 1, 1);
            let ex = (e > 1).then_some((&we[..], &be[..]));
            let (ho, wo, want) = naive_block(&x, ex, (&wd, &bd), (&wp, &bp), k, s, skip);
            let what = format!("mbconv {h}x{w}x{cin} e{e} -> {cout} k{k} s{s}");
            let g1 = with_team(Par::Seq, |tm| {
                mbconv(expand.as_ref(), &dw, &project, skip, &x, tm)
            });
            // The same block with packed 1×1 weights (the AVX2 pointwise kernel where the
            // CPU has it): the same values up to rounding, the same for any thread count.
            let (pe, pp) = (expand.clone().map(Conv::packed), project.clone().packed());
            let gp = with_team(Par::Seq, |tm| mbconv(pe.as_ref(), &dw, &pp, skip, &x, tm));
            for t in [2, 3] {
                let got = with_team(Par::rayon(t), |tm| {
                    mbconv(pe.as_ref(), &dw, &pp, skip, &x, tm)
                });
                assert_eq!(
                    got.data, gp.data,
                    "{what}: packed, {t} threads differ from 1"
                );
            }
            for (i, (&g, &w)) in gp.data.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{what} packed [{i}]: {g} vs {w}"
                );
            }
            assert_eq!((g1.h, g1.w, g1.c), (ho, wo, cout), "{what}: shape");
            for (i, (&g, &w)) in g1.data.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{what}[{i}]: {g} vs {w}"
                );
            }
            for t in [2, 3] {
                let got = with_team(Par::rayon(t), |tm| {
                    mbconv(expand.as_ref(), &dw, &project, skip, &x, tm)
                });
                assert_eq!(got.data, g1.data, "{what}: {t} threads differ from 1");
            }
        }
    }

    #[test]
    fn depthwise_row_builds_agree() {
        // Every (k, s) specialisation and the generic one, channel counts hitting the 16-, 8-
        // and 1-channel blocks, widths hitting the 8-, 4- and 1-pixel blocks (and, in the
        // vector kernels, a last 8-pixel block overlapping the one before).
        for (seed, &(k, s, c, wo)) in [
            (3, 1, 40, 13),
            (3, 2, 16, 9),
            (5, 1, 27, 17),
            (5, 2, 8, 3),
            (5, 2, 48, 10),
            (7, 1, 5, 11),
            (1, 1, 33, 1),
        ]
        .iter()
        .enumerate()
        {
            let mut rng = ChaCha8Rng::seed_from_u64(500 + seed as u64);
            let wp = (wo - 1) * s + k;
            let data: Vec<Vec<f32>> = (0..k).map(|_| rand_vec(&mut rng, wp * c, 2.0)).collect();
            let rows: Vec<&[f32]> = data.iter().map(|r| &r[..]).collect();
            let wd = rand_vec(&mut rng, c * k * k, 1.0);
            let dw = Depthwise::new(&wd, rand_vec(&mut rng, c, 1.0), k, s);
            let mut want = vec![0.0f32; wo * c];
            for j in 0..wo {
                for ch in 0..c {
                    let mut a = 0.0f64;
                    for u in 0..k {
                        for v in 0..k {
                            a += rows[u][(s * j + v) * c + ch] as f64
                                * wd[(ch * k + u) * k + v] as f64;
                        }
                    }
                    want[j * c + ch] = (a + dw.bias[ch] as f64).clamp(0.0, 6.0) as f32;
                }
            }
            let mut got = vec![0.0f32; wo * c];
            dw_row(&rows, &dw, s, wo, &mut got);
            let mut plain = vec![0.0f32; wo * c];
            dw_row_ks::<false, 16, 4>(&rows, &dw, s, wo, &mut plain, 0);
            for (i, ((&g, &p), &w)) in got.iter().zip(&plain).zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "k{k} s{s} [{i}]: {g} vs {w}"
                );
                assert!(
                    (p - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "k{k} s{s} [{i}]: {p} vs {w}"
                );
            }
            // The vector kernel and the portable code with FMA: the same operations in the
            // same order, hence the same bits.
            let mut fused = vec![0.0f32; wo * c];
            dw_row_ks::<true, 16, 4>(&rows, &dw, s, wo, &mut fused, 0);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && matches!((k, s), (3 | 5, 1 | 2))
            {
                assert_eq!(
                    fused, got,
                    "k{k} s{s}: vector kernel and portable FMA differ"
                );
            }
        }
    }

    #[test]
    fn schedules_cover_both_paths() {
        // The test cases above reach both schedules: a 61-row k3 s1 map rolls in chunks, a
        // 9-row k5 s1 map runs in two phases.
        let geo = |h: usize, k: usize, s: usize| Geo {
            h,
            w: h,
            cin: 16,
            c: 96,
            cout: 16,
            k,
            s,
            pad: SamePad::new(h, h, k, s),
        };
        assert!(rolling_chunks(&geo(61, 3, 1)) >= MIN_CHUNKS);
        assert!(rolling_chunks(&geo(64, 3, 2)) >= MIN_CHUNKS);
        assert!(rolling_chunks(&geo(9, 5, 1)) < MIN_CHUNKS);
        // With one piece per thread a map that takes one long chunk per thread rolls
        // (57 → 29 rows, k5 s2: three chunks of ≥ 18 input rows), a smaller one does not.
        assert!(rolling_chunks(&geo(57, 5, 2)) >= min_chunks(Some(2)));
        assert!(rolling_chunks(&geo(57, 5, 2)) < min_chunks(None));
        assert!(rolling_chunks(&geo(15, 5, 1)) < min_chunks(Some(1)));
        assert!(group_rows(&geo(61, 3, 1)) >= 2);
    }
}
