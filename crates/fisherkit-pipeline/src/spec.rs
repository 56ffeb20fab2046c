//! Encoder specifications of `fisherkit run --encoders`.
//!
//! Grammar: a comma-separated list of specs; a spec is one or more terms joined by
//! `&` (their encodings are concatenated, the paper's Table 5); a term is
//! `gmm-fv[:parts]` (parts of `prior`, `mean`, `var` joined by `+`, default
//! `mean+var`), `mfa-fs[:parts]` (parts of `mean`, `loading`, default `loading`)
//! or `cnn-global` (the CNN's image-level log-probabilities).
//! Example: `gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading&cnn-global`.

use crate::PipelineError;
use fisherkit::encode::{parse_fv_parts, parse_mfa_parts, FvPart, MfaPart};

/// The paper's Table 1 comparison, the default of `fisherkit run`.
pub const DEFAULT_ENCODERS: &str = "gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading";

/// One encoder of a spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// Fisher vector of the background GMM.
    GmmFv(Vec<FvPart>),
    /// Fisher score of the background MFA.
    MfaFs(Vec<MfaPart>),
    /// The CNN's own log-probabilities of the whole image.
    CnnGlobal,
}

impl Term {
    /// Family name as in the report (`gmm-fv`, `mfa-fs`, `cnn-global`).
    pub fn family(&self) -> &'static str {
        match self {
            Term::GmmFv(_) => "gmm-fv",
            Term::MfaFs(_) => "mfa-fs",
            Term::CnnGlobal => "cnn-global",
        }
    }

    /// Part names in output order.
    pub fn part_names(&self) -> Vec<String> {
        match self {
            Term::GmmFv(p) => p.iter().map(|p| p.name().to_string()).collect(),
            Term::MfaFs(p) => p.iter().map(|p| p.name().to_string()).collect(),
            Term::CnnGlobal => vec![],
        }
    }

    /// Canonical text of the term (`gmm-fv:mean+var`).
    pub fn name(&self) -> String {
        match self {
            Term::CnnGlobal => "cnn-global".into(),
            t => format!("{}:{}", t.family(), t.part_names().join("+")),
        }
    }
}

/// A concatenation of terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EncoderSpec {
    /// The terms, in output order.
    pub terms: Vec<Term>,
}

impl EncoderSpec {
    /// Canonical text of the spec (`mfa-fs:loading&cnn-global`).
    pub fn name(&self) -> String {
        self.terms
            .iter()
            .map(Term::name)
            .collect::<Vec<_>>()
            .join("&")
    }

    /// Whether any term is an MFA Fisher score.
    pub fn uses_mfa(&self) -> bool {
        self.terms.iter().any(|t| matches!(t, Term::MfaFs(_)))
    }
}

/// Parses a comma-separated list of encoder specs (see the module docs).
pub fn parse_encoders(s: &str) -> Result<Vec<EncoderSpec>, PipelineError> {
    let mut out = Vec::new();
    for spec in s.split(',').map(str::trim) {
        if spec.is_empty() {
            return Err(PipelineError::Spec(format!(
                "empty encoder in `{s}` (expected e.g. `{DEFAULT_ENCODERS}`)"
            )));
        }
        let mut terms = Vec::new();
        for term in spec.split('&').map(str::trim) {
            terms.push(parse_term(term)?);
        }
        out.push(EncoderSpec { terms });
    }
    Ok(out)
}

fn parse_term(t: &str) -> Result<Term, PipelineError> {
    let (family, parts) = match t.split_once(':') {
        Some((f, p)) => (f.trim(), Some(p.trim())),
        None => (t, None),
    };
    let bad_parts = |e: fisherkit::EncodeError| PipelineError::Spec(format!("`{t}`: {e}"));
    match family {
        "gmm-fv" => {
            let mut parts = match parts {
                Some(p) => parse_fv_parts(&p.replace('+', ",")).map_err(bad_parts)?,
                None => vec![FvPart::Mean, FvPart::Var],
            };
            // The encoder's output order (prior, mean, var), so names are canonical.
            parts.sort_by_key(|p| FvPart::ALL.iter().position(|q| q == p));
            Ok(Term::GmmFv(parts))
        }
        "mfa-fs" => Ok(Term::MfaFs(match parts {
            Some(p) => parse_mfa_parts(p).map_err(bad_parts)?,
            None => vec![MfaPart::Loading],
        })),
        "cnn-global" if parts.is_none() => Ok(Term::CnnGlobal),
        "cnn-global" => Err(PipelineError::Spec(format!(
            "`{t}`: cnn-global takes no parts"
        ))),
        other => Err(PipelineError::Spec(format!(
            "unknown encoder `{other}` in `{t}`; expected gmm-fv, mfa-fs or cnn-global"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_default_and_combinations() {
        let v = parse_encoders(DEFAULT_ENCODERS).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].name(), "gmm-fv:mean");
        assert_eq!(v[3].name(), "mfa-fs:loading");
        let v = parse_encoders("gmm-fv, mfa-fs:mean+loading&cnn-global,gmm-fv:var+prior").unwrap();
        assert_eq!(v[2].name(), "gmm-fv:prior+var");
        assert_eq!(v[0].name(), "gmm-fv:mean+var");
        assert_eq!(v[1].name(), "mfa-fs:mean+loading&cnn-global");
        assert!(v[1].uses_mfa() && !v[0].uses_mfa());
    }

    #[test]
    fn bad_specs_name_the_problem() {
        for (s, want) in [
            ("vlad", "unknown encoder `vlad`"),
            ("gmm-fv:weight", "weight"),
            ("mfa-fs:var", "var"),
            ("gmm-fv,", "empty encoder"),
            ("cnn-global:mean", "takes no parts"),
        ] {
            let e = parse_encoders(s).unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
