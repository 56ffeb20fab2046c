//! Normalisations applied to encodings: signed power and L2.

use crate::float::Float;
use crate::kernels::reduce::sum_of_squares;
use ndarray::ArrayViewMut1;

/// Smallest L2 norm divided by; a smaller norm (an all-zero encoding) is left as is.
pub const L2_FLOOR: f64 = 1e-12;

/// Post-processing of an encoding: signed power $\operatorname{sign}(v)|v|^\alpha$,
/// then optional L2 normalisation. The "improved" Fisher vector is
/// `power = 0.5, l2 = true` (the default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalization {
    /// Exponent $\alpha \in (0, 1]$; 1 disables the power step.
    pub power: f64,
    /// Divide by the L2 norm (floored at [`L2_FLOOR`]).
    pub l2: bool,
}

impl Default for Normalization {
    fn default() -> Self {
        Self {
            power: 0.5,
            l2: true,
        }
    }
}

impl Normalization {
    /// No power, no L2: the raw gradient.
    pub const NONE: Self = Self {
        power: 1.0,
        l2: false,
    };

    /// Checks the exponent: any finite $\alpha > 0$.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.power.is_finite() && self.power > 0.0) {
            return Err(format!(
                "power must be a finite number > 0 (1 disables it), got {}",
                self.power
            ));
        }
        Ok(())
    }

    /// Applies the signed power then L2 normalisation in place. `v`: (dim).
    pub fn apply<F: Float>(&self, mut v: ArrayViewMut1<'_, F>) {
        match v.as_slice_mut() {
            Some(s) => self.apply_slice(s),
            None => {
                let mut owned = v.to_vec();
                self.apply_slice(&mut owned);
                v.iter_mut().zip(owned).for_each(|(o, x)| *o = x);
            }
        }
    }

    /// [`Normalization::apply`] on a contiguous encoding. Loops written to
    /// vectorise: the sign is restored with `copysign` (the same bits as
    /// `signum(x)·|x|^α`, −0 included) and the squared norm is summed in
    /// `f64` in the 8 fixed lanes of `kernels::reduce::sum_of_squares`.
    fn apply_slice<F: Float>(&self, v: &mut [F]) {
        if self.power != 1.0 {
            if self.power == 0.5 {
                v.iter_mut().for_each(|x| *x = x.abs().sqrt().copysign(*x));
            } else {
                let p = F::from_f64_lossy(self.power);
                v.iter_mut().for_each(|x| *x = x.abs().powf(p).copysign(*x));
            }
            // sign(0)·0^p = 0: zeros stay zero.
        }
        if self.l2 {
            let norm = sum_of_squares(v).sqrt();
            if norm > L2_FLOOR {
                let inv = F::from_f64_lossy(1.0 / norm);
                v.iter_mut().for_each(|x| *x *= inv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn signed_sqrt_then_l2() {
        let mut v = array![4.0f64, -9.0, 0.0];
        Normalization::default().apply(v.view_mut());
        let n = (4.0f64 + 9.0).sqrt();
        assert!((v[0] - 2.0 / n).abs() < 1e-15);
        assert!((v[1] + 3.0 / n).abs() < 1e-15);
        assert_eq!(v[2], 0.0);
    }

    #[test]
    fn zero_vector_stays_zero_and_power_one_is_identity() {
        let mut v = array![0.0f32, 0.0];
        Normalization::default().apply(v.view_mut());
        assert_eq!(v, array![0.0, 0.0]);
        let mut w = array![3.0f64, -4.0];
        Normalization::NONE.apply(w.view_mut());
        assert_eq!(w, array![3.0, -4.0]);
        assert!(Normalization {
            power: 0.0,
            l2: true
        }
        .validate()
        .is_err());
    }

    #[test]
    fn strided_views_get_the_same_bits_as_contiguous_ones() {
        let data: Vec<f32> = (0..2 * 1001)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let mut strided = ndarray::Array2::from_shape_vec((1001, 2), data).unwrap();
        let mut contiguous = strided.column(0).to_owned();
        for norm in [
            Normalization::default(),
            Normalization {
                power: 0.3,
                l2: true,
            },
        ] {
            norm.apply(contiguous.view_mut());
            norm.apply(strided.column_mut(0));
            assert_eq!(contiguous, strided.column(0));
            let n2: f64 = contiguous.iter().map(|&v| (v as f64).powi(2)).sum();
            assert!((n2 - 1.0).abs() < 1e-6, "{n2}");
            assert!(contiguous[0].is_sign_negative()); // (0 - 50) / 7 keeps its sign
        }
    }
}
