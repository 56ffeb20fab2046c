//! The channel-last (HWC) `f32` tensor the layers pass along ([`Hwc`]), and 2-D views of
//! slices for the GEMMs.

use ndarray::{ArrayView2, ArrayViewMut2};

/// A channel-last tensor: `data[(i * w + j) * c + ch]`.
#[derive(Debug, Clone)]
pub(crate) struct Hwc {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub data: Vec<f32>,
}

pub(crate) fn view(s: &[f32], m: usize, n: usize) -> ArrayView2<'_, f32> {
    ArrayView2::from_shape((m, n), s).expect("m*n floats")
}

pub(crate) fn view_mut(s: &mut [f32], m: usize, n: usize) -> ArrayViewMut2<'_, f32> {
    ArrayViewMut2::from_shape((m, n), s).expect("m*n floats")
}
