//! A branch-free, vectorisable $e^t$ for $t \le 0$ (the exponentials of the
//! softmax kernels), accurate to about 1 ulp in `f64`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
