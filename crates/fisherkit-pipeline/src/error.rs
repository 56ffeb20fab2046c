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

/// A (rows, cols) matrix of zeros allocated fallibly, for a buffer whose
/// size the data set decides (the kernel path's training kernel, the SVM
/// weights): a machine without that memory gets one error line naming the
/// stage, the buffer, its size and `hint` (what lowers it), not an abort.
pub(crate) fn zeros_checked<T: Clone + Default>(
    rows: usize,
    cols: usize,
    stage: &'static str,
    what: &str,
    hint: &str,
) -> Result<ndarray::Array2<T>, PipelineError> {
    let n = rows.saturating_mul(cols);
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        PipelineError::at(
            stage,
            format!(
                "cannot allocate the {rows} × {cols} {what} ({:.1} GB); {hint}",
                n as f64 * std::mem::size_of::<T>() as f64 / 1e9
            ),
        )
    })?;
    v.resize(n, T::default()); // 0.0 for the floats it holds
    Ok(ndarray::Array2::from_shape_vec((rows, cols), v).expect("rows × cols values"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_the_machine_cannot_make_is_one_error_line() {
        let e = zeros_checked::<f32>(1 << 40, 1 << 30, "kernel", "training kernel", "try less")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("kernel: cannot allocate the 1099511627776 × 1073741824 training kernel")
                && e.ends_with("; try less"),
            "{e}"
        );
        let z = zeros_checked::<f64>(2, 3, "SVM", "weights", "").unwrap();
        assert_eq!(z, ndarray::Array2::<f64>::zeros((2, 3)));
    }
}
