//! The PCA stage: the PCA of every scale from the sample, and the model
//! sample projected by it.

use super::sample::Sample;
use crate::PipelineError;
use fisherkit::pca::{Pca, PcaParams};
use ndarray::Array2;

/// The PCA of every scale from the sample's moments.
pub(crate) fn fit_pca(sample: &Sample, pca_dim: usize) -> Result<Vec<Pca<f32>>, PipelineError> {
    sample
        .moments
        .iter()
        .map(|m| {
            let m = m
                .as_ref()
                .ok_or_else(|| PipelineError::Dataset("no sample image could be read".into()))?;
            PcaParams::new(pca_dim)
                .clamp_components(true)
                .fit_moments(m)
                .map_err(PipelineError::stage("PCA"))
        })
        .collect()
}

/// Projects the raw model-sample rows of every scale.
pub(crate) fn project_sample(
    sample: &Sample,
    pcas: &[Pca<f32>],
) -> Result<Vec<Array2<f32>>, PipelineError> {
    sample
        .rows
        .iter()
        .zip(pcas)
        .map(|(rows, pca)| {
            let x = Array2::from_shape_vec((rows.len() / sample.dim, sample.dim), rows.clone())
                .expect("whole rows");
            pca.transform(x.view()).map_err(PipelineError::stage("PCA"))
        })
        .collect()
}
