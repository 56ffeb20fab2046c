//! Normalisations applied to encodings: signed power and L2.

use crate::float::Float;
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
        if self.power != 1.0 {
            if self.power == 0.5 {
                v.mapv_inplace(|x| x.signum() * x.abs().sqrt());
            } else {
                let p = F::from_f64_lossy(self.power);
                v.mapv_inplace(|x| x.signum() * x.abs().powf(p));
            }
            // sign(0)·0^p = 0: zeros stay zero.
        }
        if self.l2 {
            let norm = v
                .iter()
                .map(|x| x.as_f64() * x.as_f64())
                .sum::<f64>()
                .sqrt();
            if norm > L2_FLOOR {
                let inv = F::from_f64_lossy(1.0 / norm);
                v.mapv_inplace(|x| x * inv);
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
}
