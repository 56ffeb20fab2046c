//! The `fisherkit` command line as a library: its argument definitions and
//! commands, for the binary (`src/main.rs`) and its tests. The pipeline's
//! settings are `fisherkit_pipeline::PipelineConfig`, which the flags of
//! `fisherkit run` set and Python's `fisherkit.pipeline.run` builds too.

pub mod args;
pub mod commands;
pub mod error;
pub mod progress;
