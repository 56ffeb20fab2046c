//! Progress bars and summary lines on stderr (silenced by `--quiet`).
//!
//! indicatif draws only when stderr is a terminal; summary lines are plain
//! `eprintln!` so logs of non-interactive runs still say what happened.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// What the user sees while a command runs.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    quiet: bool,
}

impl Ui {
    pub fn new(quiet: bool) -> Self {
        Self { quiet }
    }

    fn target(&self) -> ProgressDrawTarget {
        if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        }
    }

    /// A bar of `len` steps with a message, e.g. EM iterations or bags.
    pub fn bar(&self, len: u64, prefix: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(Some(len), self.target());
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>10} [{bar:24}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(prefix.to_string());
        bar
    }

    /// A spinner for work of unknown length.
    pub fn spinner(&self, msg: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, self.target());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("valid template"),
        );
        bar.set_message(msg.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    /// A summary line on stderr.
    pub fn info(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("{}", msg.as_ref());
        }
    }
}
