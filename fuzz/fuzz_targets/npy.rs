//! `.npy` reader on arbitrary bytes: never panics, never allocates more than
//! the input justifies (a header claiming 10^12 elements is refused by the
//! length check before any allocation; libFuzzer's -rss_limit_mb and
//! -malloc_limit_mb catch a regression).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = fisherkit_io::read_npy_bytes(data, "fuzz.npy") {
        let (n, d) = m.dim();
        let size = match m.dtype() {
            fisherkit_io::Dtype::F32 => 4,
            fisherkit_io::Dtype::F64 => 8,
        };
        // What was read is backed by the input's bytes.
        assert!(n * d * size <= data.len());
    }
});
