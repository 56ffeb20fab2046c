//! Bands of output rows: how many rows a band of a layer takes (from its scratch per pixel
//! and the thread count), the even cut of a map into parts, and [`for_bands`], which runs
//! the bands over a [`Team`] or in order.

use crate::exec::team::Team;
use fisherkit::linalg::Par;

/// Floats of scratch a band may use (im2col + GEMM outputs): 96 K floats (384 KB), so a
/// band's working set stays in a 512 KB L2 cache next to the packed weights' current block.
const BAND_FLOATS: usize = 96 * 1024;

/// Fewest pixels per band (below this, per-GEMM overhead and weight packing dominate).
const MIN_BAND_PIXELS: usize = 96;

/// Bands per thread a parallel layer aims for (slack for unequal cores).
const BANDS_PER_THREAD: usize = 4;

/// Rows per band that give each of `threads` threads about [`BANDS_PER_THREAD`] bands of an
/// `h`-row output; all `h` rows in one band with one thread.
pub(crate) fn rows_per_thread_band(h: usize, threads: usize) -> usize {
    if threads > 1 {
        h.div_ceil(BANDS_PER_THREAD * threads).max(1)
    } else {
        h.max(1)
    }
}

/// Rows per band for an image `w` pixels wide needing `floats_per_px` scratch floats per
/// pixel; with `threads` > 1, small enough to give each thread about four bands.
pub(crate) fn band_rows(h: usize, w: usize, floats_per_px: usize, threads: usize) -> usize {
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
pub(crate) fn for_bands<F>(out: &mut [f32], row_len: usize, rows_per: usize, team: &Team<'_>, f: F)
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
