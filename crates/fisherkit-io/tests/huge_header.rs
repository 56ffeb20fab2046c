//! Headers that claim 10^12 elements (4–8 TB) over a few bytes of data are
//! refused without allocating: this test binary counts the largest single
//! allocation request while each reader runs and asserts it stays small.
//! (One `#[test]`: the counter is global, so nothing else may run beside it.)

use fisherkit_io::ModelFile;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Passes every request to the system allocator and records the largest size.
struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards its arguments unchanged to `System`, which
// upholds the `GlobalAlloc` contract; the only extra work is an atomic
// `fetch_max`, which neither allocates nor touches the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`, returns its result and the largest allocation it requested.
fn largest_alloc<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.store(0, Ordering::SeqCst);
    let r = f();
    (r, LARGEST.load(Ordering::SeqCst))
}

/// An `.npy` v1.0 file whose header claims `shape` of `descr`, followed by `data`.
fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

fn zip_of(name: &str, bytes: &[u8], method: zip::CompressionMethod) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    z.start_file(
        name,
        zip::write::SimpleFileOptions::default().compression_method(method),
    )
    .unwrap();
    z.write_all(bytes).unwrap();
    z.finish().unwrap().into_inner()
}

/// Limit on any single allocation while refusing a lying header: far above
/// what the few-hundred-byte inputs need, far below the claimed terabytes.
const LIMIT: usize = 8 << 20;

#[test]
fn headers_claiming_1e12_elements_are_refused_without_allocating() {
    let dir = tempfile::tempdir().unwrap();
    for descr in ["<f4", "<f8"] {
        let bytes = npy(descr, "(1000000, 1000000)", &[0u8; 64]);
        // From bytes.
        let (r, big) = largest_alloc(|| fisherkit_io::read_npy_bytes(&bytes, "huge.npy"));
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("file is truncated: header says 1000000×1000000"),
            "{e}"
        );
        assert!(
            big < LIMIT,
            "{descr}: reading allocated {big} bytes at once"
        );
        // From a file (the file-length comparison).
        let p = dir.path().join("huge.npy");
        std::fs::write(&p, &bytes).unwrap();
        let (r, big) = largest_alloc(|| fisherkit_io::read_npy(&p));
        assert!(r.unwrap_err().to_string().contains("file is truncated"));
        assert!(
            big < LIMIT,
            "{descr}: read_npy allocated {big} bytes at once"
        );
        // Inside an .npz archive, stored and deflated.
        for method in [
            zip::CompressionMethod::Stored,
            zip::CompressionMethod::Deflated,
        ] {
            let z = zip_of("a.npy", &bytes, method);
            let (r, big) = largest_alloc(|| fisherkit_io::read_npz_bytes(&z, "huge.npz"));
            let e = r.unwrap_err().to_string();
            assert!(e.contains("array `a`: file is truncated"), "{e}");
            assert!(
                big < LIMIT,
                "{descr} {method:?}: read_npz allocated {big} bytes at once"
            );
        }
    }
    // Descriptor files (typed entries) go through the same archive walker:
    // the header's size is checked against the zip directory before any data
    // are read, so neither a lying header over a few bytes nor one over 16 MiB
    // of real data (which a reader of whole entries would load) allocates.
    for (descr, shape, need) in [
        ("<f4", "(1000000, 1000000)", "4000000000000"),
        ("<i8", "(1000000000000,)", "8000000000000"),
        ("<U9", "(1000000000000,)", "36000000000000"),
    ] {
        for (data_len, method) in [
            (64, zip::CompressionMethod::Stored),
            (64, zip::CompressionMethod::Deflated),
            (16 << 20, zip::CompressionMethod::Stored),
        ] {
            let z = zip_of("a.npy", &npy(descr, shape, &vec![0u8; data_len]), method);
            let p = dir.path().join("huge-desc.npz");
            std::fs::write(&p, &z).unwrap();
            drop(z);
            let (r, big) =
                largest_alloc(|| fisherkit_io::descriptor_file::read_descriptor_file(&p));
            let e = r.unwrap_err().to_string();
            let want = format!("array `a`: holds {data_len} data bytes but its shape");
            assert!(e.contains(&want) && e.contains(need), "{e}");
            assert!(
                big < LIMIT,
                "{descr} {method:?} {data_len}: read_descriptor_file allocated {big} bytes at once"
            );
        }
    }

    // A shape whose byte size overflows usize.
    let bytes = npy("<f8", "(100000000000, 100000000000)", &[]);
    let (r, big) = largest_alloc(|| fisherkit_io::read_npy_bytes(&bytes, "huge.npy"));
    assert!(r.unwrap_err().to_string().contains("too large to address"));
    assert!(big < LIMIT);

    // Safetensors: a tensor shape of 10^12 elements over 8 bytes of data …
    let header = r#"{"__metadata__":{"kind":"gmm","format_version":"1"},"weights":{"dtype":"F64","shape":[1000000000000],"data_offsets":[0,8]},"means":{"dtype":"F64","shape":[1,1],"data_offsets":[8,16]},"variances":{"dtype":"F64","shape":[1,1],"data_offsets":[16,24]}}"#;
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header.as_bytes());
    st.extend_from_slice(&[0u8; 24]);
    let (r, big) = largest_alloc(|| fisherkit_io::Model::read_bytes(&st, "huge.safetensors"));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("not a valid safetensors file"), "{e}");
    assert!(big < LIMIT, "safetensors: allocated {big} bytes at once");
    // … and a header length of 10^12 bytes.
    let mut st = 1_000_000_000_000u64.to_le_bytes().to_vec();
    st.extend_from_slice(b"{}      ");
    let (r, big) = largest_alloc(|| fisherkit_io::Model::read_bytes(&st, "huge.safetensors"));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("header length of 1000000000000 bytes"), "{e}");
    assert!(big < LIMIT);
}
