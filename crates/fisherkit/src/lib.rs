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
//!
//! The design documents are in the repository's `docs/`: the mathematics
//! (`docs/math.md`), the layout and data flow (`docs/architecture.md`) and
//! the file formats (`docs/formats.md`).
//!
//! # Example: the two encodings of the paper
//!
//! ```
//! use fisherkit::encode::{FisherVector, FisherVectorParams, MfaFisherScore, MfaFisherScoreParams};
//! use fisherkit::gmm::GmmParams;
//! use fisherkit::mfa::MfaParams;
//! use fisherkit::Encoder;
//! use ndarray::Array2;
//!
//! // descriptors (N, D) = (400, 6) to learn the background models from
//! let x = Array2::from_shape_fn((400, 6), |(i, j)| ((i * 7 + j * 3) % 11) as f64 + (i % 2) as f64 * 5.0);
//! let gmm = GmmParams::new(4).seed(1).fit(x.view())?.model;
//! let fv = FisherVector::new(&gmm, FisherVectorParams::default())?;
//! let mfa = MfaParams::new(4, 2).seed(1).fit(x.view())?.model;
//! let fs = MfaFisherScore::new(mfa, MfaFisherScoreParams::default())?;
//!
//! // one image = one bag of descriptors (n_i, D)
//! let bag = x.slice(ndarray::s![..50, ..]);
//! let v = fv.encode(bag)?; // [u (K·D), v (K·D)], power 0.5 + L2
//! assert_eq!(v.len(), 2 * 4 * 6);
//! assert!((v.dot(&v) - 1.0).abs() < 1e-9);
//! let s = fs.encode(bag)?; // gradients w.r.t. the loadings (K·D·R)
//! assert_eq!(s.len(), 4 * 6 * 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
