//! 3×3 stride-2 max-pooling without padding (floor mode) on channel-last tensors.

use crate::exec::bands::{band_rows, for_bands};
use crate::exec::scratch::zeroed;
use crate::exec::team::Team;
use crate::ops::tensor::Hwc;
use fisherkit::linalg::vectorized;

/// Output side of a 3×3 stride-2 max-pool without padding (floor mode), `None` if `n < 3`.
pub(crate) fn pool_out(n: usize) -> Option<usize> {
    (n >= POOL_K).then(|| (n - POOL_K) / POOL_S + 1)
}

pub(crate) const POOL_K: usize = 3;

pub(crate) const POOL_S: usize = 2;

/// 3×3/2 max-pool of the rows of `x` (rows of `w` pixels × `c` channels) into `out` (rows of
/// `pw` pixels; `out` has (rows(x) − 1) / 2 rows).
#[inline(always)]
pub(crate) fn pool_rows(x: &[f32], w: usize, c: usize, out: &mut [f32], pw: usize) {
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
