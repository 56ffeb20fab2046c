//! The floating-point element types the library computes in.
//!
//! Everything numeric is generic over [`Float`], implemented for `f32` and `f64`.
//! Data and model parameters live in `F`; sums that EM accumulates over many
//! rows (sufficient statistics, log-likelihoods) are always kept in `f64`.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

/// $\ln 2\pi$, the constant of every Gaussian log-density (equals
/// `(2.0 * std::f64::consts::PI).ln()` to the bit; tested).
pub(crate) const LN_2PI: f64 = 1.837_877_066_409_345_3;

/// `f32` or `f64`: what the GEMM kernels, ndarray and the numerics need.
pub trait Float:
    num_traits::Float
    + num_traits::FromPrimitive
    + num_traits::ToPrimitive
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + faer::traits::ComplexField
    + faer::traits::RealField
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + Debug
    + Display
    + Default
    + Send
    + Sync
    + 'static
{
    /// Short name of the type, as it appears in error messages and file formats (`"f32"`).
    const NAME: &'static str;
    /// Machine epsilon of the type.
    const EPS: Self;
    /// Converts from `f64`, rounding to nearest.
    fn from_f64_lossy(v: f64) -> Self;
    /// Widens to `f64`.
    fn as_f64(self) -> f64;
    /// $e^t$ for $t$ between the softmax's flush cutoff and 0 (`self` ≤ 0), to
    /// about 1 ulp of the type, branch-free so that loops over it vectorise
    /// (`kernels::exp`): the posteriors' exponentials.
    fn exp_nonpositive(self) -> Self;
}

impl Float for f32 {
    const NAME: &'static str = "f32";
    const EPS: Self = f32::EPSILON;
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn exp_nonpositive(self) -> Self {
        crate::kernels::exp::exp_nonpositive_f32(self)
    }
}

impl Float for f64 {
    const NAME: &'static str = "f64";
    const EPS: Self = f64::EPSILON;
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn exp_nonpositive(self) -> Self {
        crate::kernels::exp::exp_nonpositive(self)
    }
}

#[cfg(test)]
mod ln_2pi_tests {
    #[test]
    fn ln_2pi_is_the_computed_value_to_the_bit() {
        assert_eq!(super::LN_2PI, (2.0 * std::f64::consts::PI).ln());
    }
}
