//! The errors of the SVM fits and models.

use crate::data::DataError;

/// Errors of the [`crate::svm`] module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SvmError {
    /// Bad feature matrix (empty, wrong width, NaN or infinite values).
    #[error(transparent)]
    Data(#[from] DataError),
    /// A hyper-parameter out of range.
    #[error("invalid SVM hyper-parameter `{name}`: {reason}")]
    InvalidHyperParameter { name: &'static str, reason: String },
    /// Labels and rows differ in number.
    #[error("X has {n_rows} rows but y has {n_labels} labels")]
    LabelLengthMismatch { n_rows: usize, n_labels: usize },
    /// Fewer than two classes.
    #[error("need at least 2 classes, got {0}")]
    TooFewClasses(usize),
    /// A class index in `0..n_classes` with no sample.
    #[error(
        "class {class} has no training sample; labels must be 0..{n_classes} with every class present"
    )]
    MissingClass { class: usize, n_classes: usize },
    /// A label ≥ `n_classes`.
    #[error(
        "label y[{index}] = {label} is out of range: labels must be < n_classes = {n_classes}"
    )]
    LabelOutOfRange {
        index: usize,
        label: usize,
        n_classes: usize,
    },
    /// Bad cross-validation grid or fold count.
    #[error("invalid cross-validation setting: {0}")]
    InvalidCrossValidation(String),
    /// A buffer sized by the data that cannot be allocated.
    #[error(
        "the SVM's {what} need {bytes} bytes, more than can be allocated: fewer classes or a shorter encoding"
    )]
    TooLarge { what: &'static str, bytes: usize },
    /// The caller's stop hook asked the fit to give up ([`super::Stop`]).
    #[error("the SVM fit was stopped by its caller")]
    Stopped,
    /// The rows of an out-of-core fit could not be read (the source's message).
    #[error("reading the SVM's rows: {0}")]
    Source(String),
}
