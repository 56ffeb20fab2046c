//! Safetensors model loader (kind gmm and mfa) on arbitrary bytes: never
//! panics; a model that loads is valid, and converts to the library types in
//! both precisions without panicking. The properties are in `fuzz/checks.rs`,
//! shared with the corpus replay of `crates/fisherkit-io/tests/fuzz_corpus.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::model(data, "fuzz.safetensors");
});
