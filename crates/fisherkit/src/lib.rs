//! # fisherkit
//!
//! Fisher-score image representations of bags of local descriptors:
//! diagonal Gaussian mixtures learned by EM and their Fisher vectors
//! (VLFeat-compatible), mixtures of factor analysers and their Fisher scores
//! (Dixit & Vasconcelos, NIPS 2016), and the pieces of a scene-classification
//! pipeline. The library computes; it never reads files or prints.
//!
//! Shapes follow one convention throughout: a bag or data matrix is (N, D),
//! one descriptor per row; K is the number of mixture components, R the number
//! of factors of an MFA component.

pub mod data;
pub mod encode;
pub mod float;
pub mod gmm;
mod kernels;
pub mod kmeans;
pub mod linalg;
pub mod metrics;
pub mod mfa;
pub mod normalize;
pub mod pca;
pub mod stream;
pub mod svm;

pub use encode::{EncodeError, Encoder};
pub use float::Float;
pub use normalize::Normalization;
