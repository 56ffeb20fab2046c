//! Branch-free, vectorisable $e^t$ for $t \le 0$ (the exponentials of the
//! softmax kernels): [`exp_nonpositive`] accurate to about 1 ulp in `f64`,
//! [`exp_nonpositive_f32`] to about 1 ulp in `f32` at twice the lanes and half
//! the polynomial (the `f32` E-step's and encoders' posteriors, which are
//! stored in `f32`).

/// $e^t$ for $-708 \le t \le 0$, accurate to about 1 ulp in `f64`, written
/// without branches or calls so that loops over it vectorise:
/// $t = n \ln 2 + r$, $|r| \le \tfrac12 \ln 2$ (Cody–Waite), a degree-13
/// Taylor polynomial for $e^r$ (truncation < $10^{-17}$), and $2^n$ built from
/// its bits. Inputs below −708 give garbage: callers clamp first.
#[inline(always)]
pub(crate) fn exp_nonpositive(t: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    // fdlibm's split of ln 2: LN2_HI has 32 significant bits, so n·LN2_HI is exact
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    // 1.5·2^52: adding it rounds to an integer held in the low mantissa bits
    const MAGIC: f64 = 6_755_399_441_055_744.0;
    let kf = t * LOG2E + MAGIC;
    let n = kf - MAGIC;
    let r = (t - n * LN2_HI) - n * LN2_LO;
    const C: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362880.0,
        1.0 / 3628800.0,
        1.0 / 39916800.0,
        1.0 / 479001600.0,
        1.0 / 6227020800.0,
    ];
    let mut p = C[13];
    for c in C[..13].iter().rev() {
        p = p * r + c;
    }
    // low 12 bits of the mantissa of kf are n mod 4096; n + 1023 ∈ [1, 2046]
    let two_n = f64::from_bits(kf.to_bits().wrapping_add(1023) << 52);
    p * two_n
}

/// $e^t$ for $-87 \le t \le 0$ in `f32`, within 2 ulp of the correctly rounded
/// value (tested), branch-free so that loops over it vectorise on 8 `f32`
/// lanes (AVX2): $t = n \ln 2 + r$, $|r| \le \tfrac12 \ln 2$ (Cody–Waite
/// with Cephes' split of $\ln 2$), a degree-7 Taylor polynomial for $e^r$
/// (truncation $< 6\cdot 10^{-9}$ relative) and $2^n$ built from its bits.
/// Inputs below −87 give garbage: callers clamp first (the softmax clamps at
/// its flush cutoff, −43.7 in `f32`).
#[inline(always)]
pub(crate) fn exp_nonpositive_f32(t: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // Cephes' split: LN2_HI has 9 significant bits, so n·LN2_HI is exact for |n| < 2^15
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2^23: adding it rounds to an integer held in the low mantissa bits
    const MAGIC: f32 = 12_582_912.0;
    let kf = t * LOG2E + MAGIC;
    let n = kf - MAGIC;
    let r = (t - n * LN2_HI) - n * LN2_LO;
    const C: [f32; 8] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
    ];
    let mut p = C[7];
    for c in C[..7].iter().rev() {
        p = p * r + c;
    }
    // low 9 bits of the mantissa of kf are n mod 512; n + 127 ∈ [1, 127], and
    // the shift drops everything above them (bit 31, the sign, stays 0)
    let two_n = f32::from_bits(kf.to_bits().wrapping_add(127) << 23);
    p * two_n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two positive finite `f32`.
    fn ulps(a: f32, b: f32) -> u32 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn fast_exp_f32_is_within_2_ulp() {
        let mut worst = 0;
        let mut t = -87.0f64;
        while t <= 0.0 {
            let tf = t as f32;
            let exact = (tf as f64).exp() as f32;
            worst = worst.max(ulps(exp_nonpositive_f32(tf), exact));
            t += 0.000_731;
        }
        for tf in [
            0.0f32,
            -1e-30,
            -0.5 * std::f32::consts::LN_2,
            -43.668,
            -86.9,
            -1.0,
        ] {
            let exact = (tf as f64).exp() as f32;
            worst = worst.max(ulps(exp_nonpositive_f32(tf), exact));
        }
        assert!(worst <= 2, "worst error {worst} ulp");
        assert_eq!(exp_nonpositive_f32(0.0), 1.0);
    }

    #[test]
    fn fast_exp_matches_std() {
        let mut worst = 0.0f64;
        let mut t = -708.0;
        while t <= 0.0 {
            let (a, b) = (exp_nonpositive(t), t.exp());
            worst = worst.max((a - b).abs() / b);
            t += 0.001_37;
        }
        for t in [0.0, -1e-300, -0.5 * std::f64::consts::LN_2, -354.0, -707.9] {
            let (a, b) = (exp_nonpositive(t), t.exp());
            worst = worst.max((a - b).abs() / b);
        }
        assert!(worst < 4.0 * f64::EPSILON, "worst relative error {worst:e}");
    }
}
