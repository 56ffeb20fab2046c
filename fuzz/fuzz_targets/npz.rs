//! `.npz` reader on arbitrary bytes: never panics; bags read are backed by
//! the archive's (possibly deflated) data, never by what a header claims.
//! The properties are in `fuzz/checks.rs`, shared with the corpus replay of
//! `crates/fisherkit-io/tests/fuzz_corpus.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::npz(data, "fuzz.npz");
});
