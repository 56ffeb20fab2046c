//! [`PipelineError`]: the one error type of the pipeline.

/// Errors of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A file or folder that cannot be read or written.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// A fisherkit file (descriptor file, model, array) that cannot be read or
    /// written; `fisherkit-io`'s error names the file.
    #[error(transparent)]
    File(#[from] fisherkit_io::IoError),
    /// A data set that cannot be used (empty class, unknown test class…).
    #[error("{0}")]
    Dataset(String),
    /// A bad `--encoders` specification.
    #[error("invalid encoder specification: {0}")]
    Spec(String),
    /// A bad pipeline option.
    #[error("invalid option: {0}")]
    Config(String),
    /// The run was stopped by [`Progress::cancelled`]; a run started again
    /// with the same settings continues from the finished work.
    #[error("the run was cancelled; started again with the same settings it continues from its run folder")]
    Cancelled,
    /// A failure of one of the computing stages, with the stage named.
    #[error("{stage}: {message}")]
    Stage {
        stage: &'static str,
        message: String,
    },
}

impl PipelineError {
    /// A `map_err` adaptor naming the stage that failed.
    pub(crate) fn stage<E: std::fmt::Display>(stage: &'static str) -> impl Fn(E) -> Self {
        move |e| Self::at(stage, e)
    }

    /// The error `e` of the named stage.
    pub(crate) fn at(stage: &'static str, e: impl std::fmt::Display) -> Self {
        PipelineError::Stage {
            stage,
            message: e.to_string(),
        }
    }
}
