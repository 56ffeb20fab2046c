//! The activations of the layers' epilogues ([`Act`], ReLU) applied with the bias.

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

/// `dst = max(src + bias, 0)` element-wise (all three the same length).
#[inline(always)]
pub(crate) fn bias_relu(dst: &mut [f32], src: &[f32], bias: &[f32]) {
    for ((d, &s), &b) in dst.iter_mut().zip(src).zip(bias) {
        *d = (s + b).max(0.0);
    }
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
