//! Encoders: map a bag of local descriptors (N, D) to one fixed-length vector.
//!
//! Every encoder (Fisher vector, VLAD, MFA Fisher score) implements
//! [`Encoder`]; batches of bags are encoded in parallel with rayon.

mod fisher;
mod posterior;
mod vlad;

pub use fisher::{
    parse_fv_parts, Accumulation, FisherVector, FisherVectorParams, FvPart,
    ValidFisherVectorParams, VLFEAT_SKIP,
};
pub use vlad::{ValidVladParams, Vlad, VladParams};
mod mfa_fs;
pub use mfa_fs::{
    parse_mfa_parts, MfaFisherScore, MfaFisherScoreParams, MfaPart, ValidMfaFisherScoreParams,
};

use crate::data::DataError;
use crate::float::Float;
use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut1, Axis};
use rayon::prelude::*;

/// Errors of the [`crate::encode`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// An encoder option out of range or inconsistent with the model.
    #[error("invalid encoder option: {0}")]
    InvalidOption(String),
    /// A bag that cannot be encoded (empty, wrong width, NaN…).
    #[error("bag {index}: {source}")]
    Bag {
        /// Position of the bag in the batch (0 for a single bag).
        index: usize,
        /// What is wrong with it.
        source: DataError,
    },
    /// The encoding of a finite bag overflowed (descriptors or model values
    /// too large for the float type): an error rather than NaN or ∞ in the output.
    #[error(
        "bag {index}: its encoding is not finite: the descriptors or the model's values are too large for {dtype} (rescale the data, or use float64)"
    )]
    NonFiniteOutput {
        /// Position of the bag in the batch (0 for a single bag).
        index: usize,
        /// `f32` or `f64`.
        dtype: &'static str,
    },
}

/// Checks that every row of `out` (n_bags, dim) is finite; the first row that
/// is not becomes [`EncodeError::NonFiniteOutput`].
pub(crate) fn check_output<F: Float>(out: ArrayView2<'_, F>) -> Result<(), EncodeError> {
    match out
        .rows()
        .into_iter()
        .position(|r| !r.iter().fold(true, |a, v| a & v.is_finite()))
    {
        Some(index) => Err(EncodeError::NonFiniteOutput {
            index,
            dtype: F::NAME,
        }),
        None => Ok(()),
    }
}

/// A map from a bag of descriptors to a fixed-length vector.
pub trait Encoder<F: Float>: Send + Sync {
    /// Dimension D of the descriptors the encoder accepts.
    fn input_dim(&self) -> usize;

    /// Length of the encoding.
    fn output_dim(&self) -> usize;

    /// Encodes `bag` (N, D), N ≥ 1, into `out` (`output_dim()`), overwriting it.
    /// The bag is assumed validated (see [`Encoder::encode`]).
    fn encode_unchecked(&self, bag: ArrayView2<'_, F>, out: ArrayViewMut1<'_, F>);

    /// Encodes one bag (N, D) after checking it is non-empty, D wide and finite.
    fn encode(&self, bag: ArrayView2<'_, F>) -> Result<Array1<F>, EncodeError> {
        crate::data::check_matrix(bag, Some(self.input_dim()), "bag")
            .map_err(|source| EncodeError::Bag { index: 0, source })?;
        let mut out = Array1::zeros(self.output_dim());
        self.encode_unchecked(bag, out.view_mut());
        check_output(out.view().insert_axis(Axis(0)))?;
        Ok(out)
    }

    /// Encodes many bags in parallel; row `i` of the result (n_bags, `output_dim()`)
    /// is the encoding of `bags[i]`. Every bag is validated first, so an error
    /// names the first bad bag and nothing is computed.
    fn encode_batch(&self, bags: &[ArrayView2<'_, F>]) -> Result<Array2<F>, EncodeError> {
        for (index, bag) in bags.iter().enumerate() {
            crate::data::check_matrix(*bag, Some(self.input_dim()), "bag")
                .map_err(|source| EncodeError::Bag { index, source })?;
        }
        let mut out = Array2::zeros((bags.len(), self.output_dim()));
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(bags.par_iter())
            .for_each(|(row, bag)| self.encode_unchecked(*bag, row));
        check_output(out.view())?;
        Ok(out)
    }
}
