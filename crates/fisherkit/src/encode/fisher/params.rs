//! The Fisher vector's settings: its parts ([`FvPart`]) and
//! [`FisherVectorParams`] → [`FisherVectorParams::check`] →
//! [`ValidFisherVectorParams`].

use crate::encode::EncodeError;
use crate::normalize::Normalization;
use std::fmt;

/// VLFeat's thresholds: components with $w_k < 10^{-6}$ and posteriors
/// $q_{ik} < 10^{-6}$ are skipped when [`FisherVectorParams::vlfeat_skips`] is set.
pub const VLFEAT_SKIP: f64 = 1e-6;

/// One block of the Fisher vector. Blocks are always laid out in the order
/// prior, mean, var, whatever the order they are requested in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FvPart {
    /// $d_{\pi,k} = (\frac1N\sum_i q_{ik} - w_k)/\sqrt{w_k}$, length K.
    Prior,
    /// $u_{kd}$, length K·D (component-major).
    Mean,
    /// $v_{kd}$, length K·D (component-major).
    Var,
}

impl FvPart {
    /// All parts, in layout order.
    pub const ALL: [FvPart; 3] = [FvPart::Prior, FvPart::Mean, FvPart::Var];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            FvPart::Prior => "prior",
            FvPart::Mean => "mean",
            FvPart::Var => "var",
        }
    }
}

impl fmt::Display for FvPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a comma-separated list of parts (`"prior,mean,var"`, case- and
/// space-insensitive). Unknown, empty or repeated parts are errors.
pub fn parse_fv_parts(s: &str) -> Result<Vec<FvPart>, EncodeError> {
    let mut parts = Vec::new();
    for tok in s.split(',') {
        let t = tok.trim().to_ascii_lowercase();
        let part = FvPart::ALL
            .iter()
            .copied()
            .find(|p| p.name() == t)
            .ok_or_else(|| {
                EncodeError::InvalidOption(format!(
                    "unknown Fisher vector part `{}`; valid parts are prior, mean, var",
                    tok.trim()
                ))
            })?;
        parts.push(part);
    }
    check_parts(&parts)?;
    Ok(parts)
}

fn check_parts(parts: &[FvPart]) -> Result<(), EncodeError> {
    if parts.is_empty() {
        return Err(EncodeError::InvalidOption(
            "no Fisher vector part selected; choose among prior, mean, var".into(),
        ));
    }
    for (i, p) in parts.iter().enumerate() {
        if parts[..i].contains(p) {
            return Err(EncodeError::InvalidOption(format!(
                "Fisher vector part `{p}` is given twice"
            )));
        }
    }
    Ok(())
}

/// Options of [`FisherVector`](super::FisherVector).
#[derive(Debug, Clone, PartialEq)]
pub struct FisherVectorParams {
    /// Blocks to output (non-empty, no duplicates); default `[Mean, Var]`.
    pub parts: Vec<FvPart>,
    /// Post-processing; default signed square root then L2 (the improved FV).
    pub normalization: Normalization,
    /// Hard assignment: $q_{ik} = 1$ for the arg-max component (VLFeat's `FAST`).
    pub fast: bool,
    /// VLFeat 0.9.21's skips: components with $w_k < 10^{-6}$ leave the
    /// mixture (log-weight $-\infty$: zero blocks, excluded from the other
    /// posteriors' normalisation) and posteriors $q_{ik} < 10^{-6}$ are dropped
    /// without renormalising. Default `false`: exact posteriors, as scikit-image.
    pub vlfeat_skips: bool,
}

impl Default for FisherVectorParams {
    fn default() -> Self {
        Self {
            parts: vec![FvPart::Mean, FvPart::Var],
            normalization: Normalization::default(),
            fast: false,
            vlfeat_skips: false,
        }
    }
}

impl FisherVectorParams {
    /// Checks every setting that does not depend on the model (parts
    /// non-empty and distinct, power finite and > 0) and returns the checked
    /// parameters, which [`FisherVector`](super::FisherVector) is built from.
    ///
    /// ```
    /// use fisherkit::encode::{FisherVectorParams, FvPart};
    /// assert!(FisherVectorParams::default().check().is_ok());
    /// let twice = FisherVectorParams { parts: vec![FvPart::Mean, FvPart::Mean], ..Default::default() };
    /// assert!(twice.check().unwrap_err().to_string().contains("twice"));
    /// ```
    pub fn check(&self) -> Result<ValidFisherVectorParams, EncodeError> {
        check_parts(&self.parts)?;
        self.normalization
            .validate()
            .map_err(EncodeError::InvalidOption)?;
        Ok(ValidFisherVectorParams(self.clone()))
    }
}

/// [`FisherVectorParams`] that passed [`FisherVectorParams::check`]; only
/// `check` makes one (params → checked params → encoder). Reads as the
/// parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidFisherVectorParams(FisherVectorParams);

impl std::ops::Deref for ValidFisherVectorParams {
    type Target = FisherVectorParams;
    fn deref(&self) -> &FisherVectorParams {
        &self.0
    }
}

impl ValidFisherVectorParams {
    /// The checked settings, for the encoder built from them.
    pub(super) fn into_inner(self) -> FisherVectorParams {
        self.0
    }
}
