//! 1×1 convolutions on channel-last tensors: channel-last output with activation and
//! residual ([`conv1x1`], the packed kernel where the layer has one, else faer), and
//! channel-first output ([`conv1x1_chw`], a score map).

use crate::exec::bands::{band_rows, for_bands};
use crate::exec::scratch::zeroed;
use crate::exec::team::Team;
use crate::ops::activation::{bias_act_inplace, Act};
use crate::ops::conv::Conv;
use crate::ops::pointwise::pointwise;
use crate::ops::tensor::{view, view_mut, Hwc};
use fisherkit::linalg::{gemm, vectorized};
use ndarray::Array2;

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
            if pointwise(a, m, pk, bias, act, res, band, |i| i * n) {
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
