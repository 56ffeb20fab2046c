//! `.npz` reader on arbitrary bytes: never panics; bags read are backed by
//! the archive's (possibly deflated) data, never by what a header claims.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = fisherkit_io::read_npz_bytes(data, "fuzz.npz") {
        assert!(!b.is_empty());
        assert_eq!(b.names().len(), b.len());
    }
});
