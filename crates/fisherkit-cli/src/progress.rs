//! Progress bars and summary lines on stderr (silenced by `--quiet`).
//!
//! indicatif draws only when stderr is a terminal; summary lines are plain
//! `eprintln!` so logs of non-interactive runs still say what happened.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::{Cell, RefCell};
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

/// The EM progress bar shared by `gmm fit` and `mfa fit`: position = iteration,
/// message = restart, log-likelihood and its change (of the `--tol` rule), plus how far the
/// current pass over the data has got; reset at each restart. Methods take
/// `&self` so that the data pass and the per-iteration callback can share it.
pub struct EmBar {
    bar: ProgressBar,
    restart: Cell<usize>,
    n_init: usize,
    last: RefCell<String>,
}

impl EmBar {
    pub fn new(ui: &Ui, max_iter: usize, n_init: usize, prefix: &str) -> Self {
        Self {
            bar: ui.bar(max_iter as u64, prefix),
            restart: Cell::new(usize::MAX),
            n_init: n_init.max(1),
            last: RefCell::new(String::new()),
        }
    }

    /// Shows iteration `iter` (0-based) of restart `restart`.
    pub fn update(&self, restart: usize, iter: usize, log_likelihood: f64, change: f64) {
        if restart != self.restart.get() {
            self.restart.set(restart);
            self.bar.reset();
        }
        self.bar.set_position(iter as u64 + 1);
        let change = if change.is_finite() {
            format!("{change:.2e}")
        } else {
            "-".into()
        };
        let msg = format!(
            "restart {}/{}, log-lik {log_likelihood:.6}, change {change}",
            restart + 1,
            self.n_init
        );
        self.bar.set_message(msg.clone());
        *self.last.borrow_mut() = msg;
    }

    /// Shows that the current pass over the data has read `done` of `total` rows.
    pub fn rows(&self, done: usize, total: usize) {
        let pct = 100.0 * done as f64 / total.max(1) as f64;
        let last = self.last.borrow();
        let sep = if last.is_empty() { "" } else { "; " };
        self.bar
            .set_message(format!("{last}{sep}pass {pct:.0}% of {total} rows"));
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
