//! The `fisherkit` command line as a library: its argument definitions and
//! commands, for the binary (`src/main.rs`) and for the Python module, whose
//! `fisherkit.pipeline.run(**options)` parses its options with these same
//! definitions (same names, defaults, checks and messages as `fisherkit run`).

pub mod args;
pub mod commands;
pub mod error;
pub mod progress;

pub use commands::pipeline::{run_argv, RunInvocation};
