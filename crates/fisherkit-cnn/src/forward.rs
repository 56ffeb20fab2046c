//! The forward pass of the built-in networks, written once for all of them: the input
//! checked, then the pass with all rayon threads ([`forward`]), or a batch of inputs
//! ([`forward_batch`]).

use crate::error::CnnError;
use fisherkit::linalg::{par_all, Par};
use ndarray::{Array3, ArrayView3};
use rayon::prelude::*;

/// A built-in network as [`forward`] and [`forward_batch`] run it.
pub(crate) trait Network: Sync {
    /// Checks a network input (3, H, W): its shape, and that every value is finite.
    fn check_input(input: &ArrayView3<'_, f32>) -> Result<(), CnnError>;
    /// The class-score map of a checked input, the work split by `par`.
    fn forward_unchecked(&self, input: ArrayView3<'_, f32>, par: Par) -> Array3<f32>;
}

/// The class-score map of `input` after [`Network::check_input`], all rayon threads.
pub(crate) fn forward<N: Network>(
    net: &N,
    input: ArrayView3<'_, f32>,
) -> Result<Array3<f32>, CnnError> {
    N::check_input(&input)?;
    Ok(net.forward_unchecked(input, par_all()))
}

/// [`forward`] on many images: every input checked first, then rayon over the images and
/// over bands of rows inside each (see [`crate::descriptors::extract_batch`]), so a batch
/// smaller than the pool still keeps every thread busy.
pub(crate) fn forward_batch<N: Network>(
    net: &N,
    inputs: &[ArrayView3<'_, f32>],
) -> Result<Vec<Array3<f32>>, CnnError> {
    inputs.iter().try_for_each(N::check_input)?;
    Ok(inputs
        .par_iter()
        .map(|x| net.forward_unchecked(x.view(), par_all()))
        .collect())
}
