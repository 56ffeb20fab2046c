//! The background models of a run: what each is ([`ModelSpec`]), the
//! settings they share, a fitted model and its raw encoder ([`Fitted`]), and
//! what the learning stages hand on ([`Learned`]).

use crate::PipelineError;
use fisherkit::encode::{
    FisherVector, FisherVectorParams, FvPart, MfaFisherScore, MfaFisherScoreParams, MfaPart,
};
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::pca::Pca;
use fisherkit::{Encoder, Normalization};
use std::collections::BTreeMap;

/// A background model of the run: its kind and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ModelKind {
    /// Diagonal GMM with K components.
    Gmm { k: usize },
    /// MFA with K components and R factors.
    Mfa { k: usize, r: usize },
}

/// One model to fit: kind and scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ModelSpec {
    pub scale: usize,
    pub kind: ModelKind,
}

/// The settings every model of a run shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FitSettings {
    pub gmm_max_iter: usize,
    pub mfa_max_iter: usize,
    pub model_sample: usize,
    pub seed: u64,
}

impl ModelSpec {
    /// The file stem of the model in the run folder: every setting it
    /// depends on (`gmm-K50-it100-abstol0.001-ms100000-s1`). The EM rule
    /// ([`crate::defaults::EM_TOL`]) is named when it is not the one the
    /// run folders before 2026-12-06 were made with (relative 1e-6), so
    /// models of two rules are never mixed (`gmm-K50-it100-ms100000-s1`:
    /// relative 1e-6).
    pub(crate) fn stem(&self, scale_name: &str, s: &FitSettings) -> String {
        let tol = crate::defaults::EM_TOL;
        let rule = if tol == fisherkit::stream::EmTol::Relative(1e-6) {
            String::new()
        } else {
            format!("{}tol{}-", &tol.mode()[..3], tol.value())
        };
        match self.kind {
            ModelKind::Gmm { k } => format!(
                "gmm-K{k}-it{}-{rule}ms{}-{scale_name}",
                s.gmm_max_iter, s.model_sample
            ),
            ModelKind::Mfa { k, r } => format!(
                "mfa-K{k}-R{r}-it{}-{rule}ms{}-{scale_name}",
                s.mfa_max_iter, s.model_sample
            ),
        }
    }
}

/// A fitted background model.
#[derive(Debug, Clone)]
pub(crate) enum Fitted {
    Gmm(Box<DiagGmm<f32>>),
    Mfa(Box<Mfa<f32>>),
}

impl Fitted {
    /// The raw (un-normalised) encoder of every part: GMM-FV `prior, mean,
    /// var` (K + 2KD), MFA-FS `mean, loading` (KD + KDR). Terms select their
    /// parts and normalise at kernel time ([`crate::kernel`]).
    pub(crate) fn raw_encoder(&self) -> Result<Box<dyn Encoder<f32>>, PipelineError> {
        match self {
            Fitted::Gmm(g) => raw_gmm_encoder(g),
            Fitted::Mfa(m) => raw_mfa_encoder((**m).clone()),
        }
        .map_err(PipelineError::stage("encoding"))
    }
}

/// No normalisation: the stores keep raw encodings.
const RAW: Normalization = Normalization {
    power: 1.0,
    l2: false,
};

/// The raw GMM Fisher vector of every part (prior, mean, var: K + 2KD values).
pub(crate) fn raw_gmm_encoder(
    g: &DiagGmm<f32>,
) -> Result<Box<dyn Encoder<f32>>, fisherkit::EncodeError> {
    let params = FisherVectorParams {
        parts: vec![FvPart::Prior, FvPart::Mean, FvPart::Var],
        normalization: RAW,
        ..Default::default()
    };
    Ok(Box::new(FisherVector::new(g, params)?))
}

/// The raw MFA Fisher score of every part (mean, loading: KD + KDR values).
pub(crate) fn raw_mfa_encoder(
    m: Mfa<f32>,
) -> Result<Box<dyn Encoder<f32>>, fisherkit::EncodeError> {
    let params = MfaFisherScoreParams {
        parts: vec![MfaPart::Mean, MfaPart::Loading],
        normalization: RAW,
        whitening: None,
    };
    Ok(Box::new(MfaFisherScore::new(m, params)?))
}

/// The PCA of every scale and every planned model, learned or read from the run folder.
pub(crate) struct Learned {
    pub pcas: Vec<Pca<f32>>,
    pub models: BTreeMap<ModelSpec, Fitted>,
}
