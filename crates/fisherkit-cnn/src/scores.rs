//! From a class-score map to class scores: the spatial mean ([`pool_scores`]) and the stable
//! log-softmax ([`log_softmax`]).

use ndarray::{s, Array1, Array3};

/// Spatial mean of a score map (C, h, w) → (C), accumulated in f64.
pub(crate) fn pool_scores(map: &Array3<f32>) -> Array1<f32> {
    let (c, h, w) = map.dim();
    let n = (h * w) as f64;
    Array1::from_shape_fn(c, |k| {
        (map.slice(s![k, .., ..])
            .iter()
            .map(|&v| v as f64)
            .sum::<f64>()
            / n) as f32
    })
}

/// Log-softmax (natural parameters of the categorical distribution), computed stably:
/// $\ell_k = s_k - \log\sum_l e^{s_l} = (s_k - m) - \log\sum_l e^{s_l - m}$ with
/// $m = \max_l s_l$, the sum in f64. Never takes the log of a rounded probability, so
/// scores far apart give finite values. `s` has shape (C), C ≥ 1, finite entries.
pub fn log_softmax(s: ndarray::ArrayView1<'_, f32>) -> Array1<f32> {
    let mut out = s.to_owned();
    log_softmax_inplace(out.as_slice_mut().expect("owned 1-D array is contiguous"));
    out
}

/// [`log_softmax`] in place on a slice.
fn log_softmax_inplace(s: &mut [f32]) {
    let m = s.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    // Terms below e^-80 (relative to the largest term, 1) cannot change an f64 sum >= 1;
    // skipping them also avoids libm's slow underflow path.
    let sum: f64 = s
        .iter()
        .map(|&v| v - m)
        .filter(|&d| d > -80.0)
        .map(|d| d.exp() as f64)
        .sum();
    let lse = sum.ln();
    for v in s.iter_mut() {
        *v = ((*v - m) as f64 - lse) as f32;
    }
}
