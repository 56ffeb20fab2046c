//! A convolution layer's weights ([`Conv`]) and TensorFlow "same" padding geometry
//! ([`same_geometry`], [`SamePad`]).

use ndarray::{Array1, Array2};

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
    /// `wt` packed for [`crate::ops::pointwise`] (layers that asked for it with [`Conv::packed`]:
    /// EfficientNet's); they then skip faer where the CPU has AVX2 + FMA.
    pub packed: Option<crate::simd::tiles::Packed>,
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

    /// This convolution with `wt` also packed for [`crate::ops::pointwise`] (a 1×1 layer, or the
    /// GEMM of an im2col'ed k×k one).
    pub fn packed(mut self) -> Self {
        self.packed = Some(crate::simd::tiles::Packed::new(self.wt.view()));
        self
    }

    pub fn out_ch(&self) -> usize {
        self.bias.len()
    }
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
