//! Ctrl-C during long calls. Python runs its signal handlers (raising
//! `KeyboardInterrupt` for SIGINT) only on the main thread and only while
//! that thread runs Python code, so a call that computes for minutes without
//! the GIL would ignore Ctrl-C until it returns. [`interruptible`] runs such
//! a computation on a worker thread while the calling thread checks for
//! signals every [`SIGNAL_POLL`]; the computation looks at a flag between its
//! steps (batches of images, EM iterations) and stops at the next one.

use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How often the calling thread checks Python's signal handlers.
pub(crate) const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// The flag [`interruptible`] hands its computation: set once a signal
/// handler has raised (Ctrl-C), after which the computation should stop at
/// its next step.
pub(crate) struct Cancel(AtomicBool);

impl Cancel {
    /// Whether the computation should stop now.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once the flag is set: the check a computation's
    /// step callback makes (`cancel.checked()?`).
    pub(crate) fn checked(&self) -> Result<(), Cancelled> {
        if self.is_set() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// The error a computation returns when it stops at [`Cancel`]; never seen
/// by Python, which gets the signal handler's exception instead.
#[derive(Debug)]
pub(crate) struct Cancelled;

/// Runs `work` on a worker thread, without the GIL, while the calling thread
/// runs Python's signal handlers (`Python::check_signals`) every
/// [`SIGNAL_POLL`]. When a handler raises (`KeyboardInterrupt` on Ctrl-C) the
/// flag `work` receives is set, `work` is waited for (it stops at its next
/// step) and the handler's exception is returned; otherwise `work`'s result.
/// A panic of `work` resumes on the calling thread (pyo3 turns it into a
/// `PanicException`, as for any panic of a call).
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&Cancel) -> T + Send,
) -> PyResult<T> {
    let cancel = Cancel(AtomicBool::new(false));
    let cancel = &cancel;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    // a Receiver is Send but not Sync; the closures given to `detach` borrow it
    let done_rx = std::sync::Mutex::new(done_rx);
    let wait = |timeout: Option<Duration>| {
        let rx = done_rx.lock().unwrap_or_else(|p| p.into_inner());
        match timeout {
            Some(t) => !matches!(rx.recv_timeout(t), Err(mpsc::RecvTimeoutError::Timeout)),
            None => {
                let _ = rx.recv();
                true
            }
        }
    };
    std::thread::scope(|s| {
        let worker = s.spawn(move || {
            let out = work(cancel);
            let _ = done_tx.send(());
            out
        });
        let mut raised = None;
        loop {
            let finished = py.detach(|| wait(Some(SIGNAL_POLL)));
            if finished {
                break;
            }
            if let Err(e) = py.check_signals() {
                cancel.0.store(true, Ordering::Relaxed);
                raised = Some(e);
                py.detach(|| wait(None));
                break;
            }
        }
        let out = match py.detach(|| worker.join()) {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        match raised {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}
