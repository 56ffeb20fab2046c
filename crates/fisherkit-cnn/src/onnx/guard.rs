//! Running tract with its panics turned into errors ([`guarded`]), quietly.

use std::panic::{catch_unwind, AssertUnwindSafe};
use tract_onnx::prelude::TractResult;

thread_local! {
    /// Set while this thread runs tract under [`guarded`]: its panics are reported as errors,
    /// so the panic hook stays quiet for them.
    static IN_TRACT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the process's panic hook once so that it says nothing for a panic caught by
/// [`guarded`] on the same thread; other panics are reported as before.
fn quiet_hook_for_guarded_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_TRACT.with(|f| f.get()) {
                previous(info)
            }
        }));
    });
}

/// Runs `f`, turning a panic inside tract into an error (malformed models and inputs too
/// small for the graph must not abort; tract panics on, e.g., a max-pool input smaller than
/// its kernel, which the probe of the smallest input side runs into).
pub(super) fn guarded<T>(what: &str, f: impl FnOnce() -> TractResult<T>) -> Result<T, String> {
    quiet_hook_for_guarded_panics();
    let was = IN_TRACT.with(|flag| flag.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    IN_TRACT.with(|flag| flag.set(was));
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e:#}")),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what}: tract panicked: {msg}"))
        }
    }
}
