//! The Fisher vector of a diagonal GMM (docs/math.md §3), VLFeat's
//! `vl_fisher_encode` layout, with scikit-image's optional prior block.

mod bag;
mod encoder;
mod params;

pub use encoder::{Accumulation, FisherVector};
pub use params::{
    parse_fv_parts, FisherVectorParams, FvPart, ValidFisherVectorParams, VLFEAT_SKIP,
};

#[cfg(test)]
mod tests;
