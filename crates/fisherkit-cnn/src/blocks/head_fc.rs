//! EfficientNet's head (1×1 + ReLU6) and classifier fused per band of pixels, the score map
//! written channel-first ([`head_fc_chw`]).

use crate::exec::scratch::with_scratch;
use crate::exec::team::Team;
use crate::ops::activation::Act;
use crate::ops::conv::Conv;
use crate::ops::pointwise::{available, pointwise};
use crate::ops::tensor::Hwc;
use ndarray::Array2;

/// EfficientNet's head then classifier, per pixel, output channel-first:
/// $Y = \big(\mathrm{relu6}(X W_h^\top + b_h)\, W_f^\top + b_f\big)^\top$, (fc out, h·w), for
/// `x` (h, w, head in). The pixels in bands ([`head_fc_band`]) in parallel, both layers by
/// [`crate::ops::pointwise`] with the head's activations kept in the band's scratch, then its
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
    if !available() {
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
            let done = pointwise(a, m, hp, hb, Act::Relu6, None, hid, |i| i * ch)
                && pointwise(hid, m, fp, fb, Act::None, None, rows, |i| i * n);
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
pub(crate) const HEAD_FC_BAND: usize = 256;

/// Pixels per band of [`head_fc_chw`] for `p` pixels and `threads` threads: as few bands as
/// fit [`HEAD_FC_BAND`], their number a multiple of the thread count. Each band sweeps the
/// classifier's 5.1 MB of weights once, so small maps take one band per thread: at 227 px
/// (64 pixels) one thread's two bands of 32 took 1 317 µs, one band of 64 took 1 160 µs
/// (docs/evidence/cnn-small-maps-2026-12-06.md).
pub(crate) fn head_fc_band(p: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let bands = p.div_ceil(HEAD_FC_BAND).div_ceil(threads) * threads;
    p.div_ceil(bands).max(1)
}
