//! Scene-classifier reader (`read_classifier_bytes`, kind `scene-classifier`)
//! on arbitrary bytes: never panics; a classifier that loads validates, has an
//! SVM of one row per class and the parts' total width, holds only finite
//! arrays, and survives a `write_classifier` / `read_classifier` round trip
//! unchanged. The properties are in `fuzz/checks.rs`, shared with the corpus
//! replay of `crates/fisherkit-io/tests/fuzz_corpus.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::classifier(data, "fuzz.safetensors");
});
