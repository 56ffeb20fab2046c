//! `.npy` reader on arbitrary bytes: never panics, never allocates more than
//! the input justifies (a header claiming 10^12 elements is refused by the
//! length check before any allocation; libFuzzer's -rss_limit_mb and
//! -malloc_limit_mb catch a regression). The properties are in `fuzz/checks.rs`,
//! shared with the corpus replay of `crates/fisherkit-io/tests/fuzz_corpus.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::npy(data, "fuzz.npy");
});
