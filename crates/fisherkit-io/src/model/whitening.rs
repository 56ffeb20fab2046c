//! The optional whitening block of an MFA file (tensor `fisher_information`,
//! metadata `whitening_parts`): [`MfaWhitening`].

use super::framing::{check_finite, dims, get_tensor};
use crate::error::{IoError, Result};
use crate::npy::Dtype;
use fisherkit::encode::MfaPart;
use fisherkit::Float;
use ndarray::Array1;
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::path::Path;

/// Name of the optional whitening tensor of an MFA file.
pub const WHITENING_TENSOR: &str = "fisher_information";
/// Metadata key naming the parts the whitening tensor was estimated for.
pub const WHITENING_PARTS_KEY: &str = "whitening_parts";

/// The optional whitening block of an MFA file: a diagonal estimate
/// $\hat F$ of the Fisher information of the MFA Fisher score restricted to
/// `parts`.
///
/// * `parts`: the score parts, canonical order (mean, then loading), not empty;
/// * `fisher_information`: (P) with P = K·D (mean) + K·D·R (loading) for the
///   parts present, finite, ≥ 0. Held as `f64`: a file's `F32` values widen
///   exactly, so writing an `f32` model back gives the same bits.
#[derive(Debug, Clone, PartialEq)]
pub struct MfaWhitening {
    /// The MFA Fisher score parts, in canonical order.
    pub parts: Vec<MfaPart>,
    /// The diagonal Fisher-information estimate (P).
    pub fisher_information: Array1<f64>,
}

impl MfaWhitening {
    /// A whitening block from the estimate `fisher_information` (any float
    /// type, stored exactly as `f64`) for `parts` (sorted to canonical order,
    /// duplicates dropped). Not validated: see [`MfaWhitening::validate`].
    pub fn new<F: Float>(parts: &[MfaPart], fisher_information: &Array1<F>) -> Self {
        let mut p = Vec::new();
        for want in [MfaPart::Mean, MfaPart::Loading] {
            if parts.contains(&want) {
                p.push(want);
            }
        }
        MfaWhitening {
            parts: p,
            fisher_information: fisher_information.mapv(|v| v.as_f64()),
        }
    }

    /// The `whitening_parts` metadata value, e.g. `"mean,loading"`.
    pub fn parts_string(&self) -> String {
        mfa_parts_string(&self.parts)
    }

    /// The estimate in element type `F` (rounded to nearest).
    pub fn fisher_information_as<F: Float>(&self) -> Array1<F> {
        self.fisher_information.mapv(F::from_f64_lossy)
    }

    /// Checks the block against a model of K components, dimension D and R
    /// factors: parts non-empty and in canonical order, length
    /// `expected_len(k, d, r)`, values finite and ≥ 0. The message names the
    /// tensor or key.
    pub fn validate(&self, k: usize, d: usize, r: usize) -> Result<(), String> {
        let canonical = [
            &[MfaPart::Mean][..],
            &[MfaPart::Loading],
            &[MfaPart::Mean, MfaPart::Loading],
        ];
        if !canonical.contains(&self.parts.as_slice()) {
            return Err(format!(
                "metadata `{WHITENING_PARTS_KEY}` must name the parts mean and/or loading, in that order, once each"
            ));
        }
        let want = mfa_parts_len(&self.parts, k, d, r);
        let n = self.fisher_information.len();
        if n != want {
            return Err(format!(
                "tensor `{WHITENING_TENSOR}` has shape ({n},) but the parts \"{}\" of an MFA with \
                 (K, D, R) = ({k}, {d}, {r}) have {want} values",
                self.parts_string()
            ));
        }
        check_finite(WHITENING_TENSOR, self.fisher_information.iter(), &[n])?;
        if let Some((i, v)) = self
            .fisher_information
            .iter()
            .enumerate()
            .find(|(_, v)| **v < 0.0)
        {
            return Err(format!(
                "tensor `{WHITENING_TENSOR}` [{i}] is {v}; a Fisher-information estimate must be >= 0"
            ));
        }
        Ok(())
    }
}

/// Number of MFA Fisher score values of `parts`: K·D for mean, K·D·R for loading.
pub fn mfa_parts_len(parts: &[MfaPart], k: usize, d: usize, r: usize) -> usize {
    parts.iter().map(|p| p.n_values(k, d, r)).sum()
}

/// The canonical spelling of a list of parts (`"mean"`, `"loading"`, `"mean,loading"`).
pub fn mfa_parts_string(parts: &[MfaPart]) -> String {
    parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(",")
}

/// Parses a `whitening_parts` metadata value: exactly `mean`, `loading` or
/// `mean,loading` (the canonical spellings the writer uses).
fn parse_whitening_parts(s: &str) -> Result<Vec<MfaPart>, String> {
    let canonical: [&[MfaPart]; 3] = [&[MfaPart::Mean], &[MfaPart::Loading], &MfaPart::ALL];
    canonical
        .into_iter()
        .find(|parts| mfa_parts_string(parts) == s)
        .map(<[MfaPart]>::to_vec)
        .ok_or_else(|| {
            format!(
                "metadata `{WHITENING_PARTS_KEY}` is \"{s}\"; expected \"mean\", \"loading\" or \"mean,loading\""
            )
        })
}

/// The optional whitening block of an MFA file (see [`MfaWhitening`]),
/// validated against (K, D, R); `dtype` is the model tensors' dtype.
pub(super) fn read_whitening(
    path: &Path,
    st: &SafeTensors<'_>,
    meta: &BTreeMap<String, String>,
    dtype: &mut Option<(Dtype, &'static str)>,
    (k, d, r): (usize, usize, usize),
) -> Result<Option<MfaWhitening>> {
    let has_tensor = st.tensor(WHITENING_TENSOR).is_ok();
    let parts = match (has_tensor, meta.get(WHITENING_PARTS_KEY)) {
        (false, None) => return Ok(None),
        (true, None) => {
            return Err(IoError::model(
                path,
                format!(
                    "tensor `{WHITENING_TENSOR}` without metadata key `{WHITENING_PARTS_KEY}` \
                     (the MFA Fisher score parts it was estimated for)"
                ),
            ))
        }
        (false, Some(p)) => {
            return Err(IoError::model(
                path,
                format!(
                    "metadata key `{WHITENING_PARTS_KEY}` (\"{p}\") without tensor \
                     `{WHITENING_TENSOR}`"
                ),
            ))
        }
        (true, Some(p)) => parse_whitening_parts(p).map_err(|e| IoError::model(path, e))?,
    };
    let t = get_tensor(path, st, "mfa", WHITENING_TENSOR, "", dtype)?;
    t.expect_rank(path, 1, "(P)")?;
    let values: Array1<f64> = match dtype.map(|x| x.0) {
        Some(Dtype::F32) => dims::<1, f32>(t.to_array(path)?).mapv(f64::from),
        _ => dims(t.to_array(path)?),
    };
    let w = MfaWhitening {
        parts,
        fisher_information: values,
    };
    w.validate(k, d, r).map_err(|e| IoError::model(path, e))?;
    Ok(Some(w))
}
