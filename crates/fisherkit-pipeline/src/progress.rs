//! [`Progress`]: how a run reports its stages, warns and is asked to stop.

use crate::PipelineError;

/// Receives progress, results and warnings (the CLI draws bars; tests ignore them).
pub trait Progress: Sync {
    /// A stage with `len` steps starts.
    fn start(&self, stage: &str, len: u64);
    /// `n` more steps of the current stage are done.
    fn inc(&self, n: u64);
    /// The current stage ends, with a short summary.
    fn finish(&self, summary: &str);
    /// Something the user should know that may need action (a skipped
    /// image, a model stopped at its iteration cap…).
    fn warn(&self, message: &str);
    /// A result as it is ready (a report row read back from the run folder,
    /// a sweep point, the saved classifier): information, not a warning.
    /// Default: ignored.
    fn note(&self, message: &str) {
        let _ = message;
    }
    /// Whether the run should stop now (Ctrl-C in Python): checked between
    /// batches of images, EM iterations and encoders; the run then returns
    /// [`PipelineError::Cancelled`] and its run folder keeps the finished
    /// work. Default: never.
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`Progress`] that ignores everything.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, _: u64) {}
    fn finish(&self, _: &str) {}
    fn warn(&self, _: &str) {}
}

/// [`PipelineError::Cancelled`] once `progress` asks the run to stop.
pub(crate) fn stop_if_cancelled(progress: &dyn Progress) -> Result<(), PipelineError> {
    if progress.cancelled() {
        Err(PipelineError::Cancelled)
    } else {
        Ok(())
    }
}
