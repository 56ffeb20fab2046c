//! Cross-check with numpy: numpy writes .npy/.npz files we read, we write
//! files numpy reads, and Python parses our safetensors files from the format
//! description alone (JSON header + raw little-endian data; the `safetensors`
//! Python package is not needed) and writes one by hand that we read.
//!
//! Skips with a message when python3 or numpy is missing, unless
//! `FISHERKIT_REQUIRE_PEERS=1`, in which case it fails.

use fisherkit::gmm::DiagGmm;
use fisherkit_io::{
    read_bags, read_npy, write_npy, write_npz, Bags, GmmModel, Matrix, MfaArrays, Model, ModelFile,
};
use ndarray::{Array1, Array2, Array3};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn python_with_numpy() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("FISHERKIT_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("python3 with numpy is required (FISHERKIT_REQUIRE_PEERS=1) but missing");
        }
        eprintln!("SKIPPED: python3 with numpy not found; set FISHERKIT_REQUIRE_PEERS=1 to fail");
    }
    ok
}

fn run_python(dir: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The values both sides compute independently, exactly representable (so
/// no libm differences): a[i, j] = (((i·D + j + 7·seed) mod 17) − 8) / 8.
fn pattern(n: usize, d: usize, seed: f64) -> Array2<f64> {
    let s = seed as usize;
    Array2::from_shape_fn((n, d), |(i, j)| {
        ((i * d + j + 7 * s) % 17) as f64 / 8.0 - 1.0
    })
}

const PY_PATTERN: &str = r#"
import numpy as np, json, struct, sys
def pattern(n, d, seed):
    return ((np.arange(n * d) + 7 * int(seed)) % 17).reshape(n, d).astype(np.float64) / 8.0 - 1.0
"#;

#[test]
fn numpy_files_are_read_exactly() {
    if !python_with_numpy() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_python(
        dir.path(),
        &format!(
            "{PY_PATTERN}
np.save('a32.npy', pattern(5, 3, 0.0).astype(np.float32))
np.save('a64.npy', pattern(4, 6, 1.0))
np.save('i64.npy', np.arange(6).reshape(2, 3))
np.save('flat.npy', np.zeros(5, dtype=np.float32))
np.save('fort.npy', np.asfortranarray(pattern(3, 2, 0.0)))
np.save('big.npy', pattern(2, 2, 0.0).astype('>f4'))
np.savez('plain.npz', zeta=pattern(2, 3, 0.0), alpha=pattern(5, 3, 2.0), mid=pattern(1, 3, 4.0))
np.savez_compressed('comp.npz', b2=pattern(3, 4, 0.0).astype(np.float32), b1=pattern(2, 4, 1.0).astype(np.float32))
np.savez('mixed.npz', a=pattern(2, 3, 0.0), b=np.ones((2, 3), dtype=np.int32))
"
        ),
    );
    let p = |n: &str| dir.path().join(n);
    assert_eq!(
        read_npy(p("a32.npy")).unwrap(),
        Matrix::F32(pattern(5, 3, 0.0).mapv(|v| v as f32))
    );
    assert_eq!(
        read_npy(p("a64.npy")).unwrap(),
        Matrix::F64(pattern(4, 6, 1.0))
    );
    let msg = |n: &str| read_npy(p(n)).unwrap_err().to_string();
    assert!(msg("i64.npy").ends_with("dtype int64 not supported; expected float32 or float64"));
    assert!(msg("flat.npy").ends_with("expected a 2-D (N, D) array, got shape (5,)"));
    assert!(msg("fort.npy").contains("Fortran-order"));
    assert!(msg("big.npy").contains("big-endian float32"));

    let Bags::F64(b) = read_bags(p("plain.npz")).unwrap() else {
        panic!("float64 bags expected")
    };
    assert_eq!(b.names, ["zeta", "alpha", "mid"]);
    assert_eq!(b.bags[0], pattern(2, 3, 0.0));
    assert_eq!(b.bags[1], pattern(5, 3, 2.0));
    assert_eq!(b.bags[2], pattern(1, 3, 4.0));
    let Bags::F32(b) = read_bags(p("comp.npz")).unwrap() else {
        panic!("float32 bags expected")
    };
    assert_eq!(b.names, ["b2", "b1"]);
    assert_eq!(b.bags[0], pattern(3, 4, 0.0).mapv(|v| v as f32));
    assert_eq!(b.bags[1], pattern(2, 4, 1.0).mapv(|v| v as f32));
    let m = read_bags(p("mixed.npz")).unwrap_err().to_string();
    assert!(m.contains("array `b`: dtype int32 not supported"), "{m}");
}

#[test]
fn numpy_reads_our_files_exactly() {
    if !python_with_numpy() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    write_npy(p("o32.npy"), pattern(6, 2, 5.0).mapv(|v| v as f32).view()).unwrap();
    write_npy(p("o64.npy"), pattern(3, 7, 3.0).view()).unwrap();
    let (b1, b2) = (pattern(4, 3, 0.0), pattern(2, 3, 9.0));
    write_npz(
        p("o.npz"),
        &[("second", b2.view()), ("first", b1.view())],
        false,
    )
    .unwrap();
    write_npz(p("oc.npz"), &[("x", b1.view())], true).unwrap();
    let out = run_python(
        dir.path(),
        &format!(
            "{PY_PATTERN}
a = np.load('o32.npy'); assert a.dtype == np.float32 and a.flags.c_contiguous
assert np.array_equal(a, pattern(6, 2, 5.0).astype(np.float32))
b = np.load('o64.npy'); assert b.dtype == np.float64
assert np.array_equal(b, pattern(3, 7, 3.0))
z = np.load('o.npz'); assert list(z.keys()) == ['second', 'first'], list(z.keys())
assert np.array_equal(z['first'], pattern(4, 3, 0.0)) and np.array_equal(z['second'], pattern(2, 3, 9.0))
assert np.array_equal(np.load('oc.npz')['x'], pattern(4, 3, 0.0))
print('OK')
"
        ),
    );
    assert_eq!(out.trim(), "OK");
}

/// Python's independent reading of a safetensors file: returns the metadata
/// and each tensor as a numpy array.
const PY_SAFETENSORS: &str = r#"
def load_st(path):
    raw = open(path, 'rb').read()
    (n,) = struct.unpack('<Q', raw[:8])
    header = json.loads(raw[8:8 + n].decode('utf-8'))
    meta = header.pop('__metadata__', {})
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        dt = {'F32': '<f4', 'F64': '<f8'}[info['dtype']]
        a, b = info['data_offsets']
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(info['shape'])
    return meta, out
"#;

#[test]
fn python_parses_our_model_files_from_the_format_alone() {
    if !python_with_numpy() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let w = Array1::from(vec![0.2, 0.3, 0.5]);
    let means = pattern(3, 4, 0.0);
    let var = pattern(3, 4, 1.0).mapv(|v| v * v + 0.1);
    let g = DiagGmm::new(w.clone(), means.clone(), var.clone()).unwrap();
    let mut extra = BTreeMap::new();
    extra.insert("seed".to_string(), "7".to_string());
    g.write(p("g64.safetensors"), &extra).unwrap();
    g.cast::<f32>().write(p("g32.safetensors"), &extra).unwrap();
    let mfa = MfaArrays {
        weights: Array1::from(vec![0.5, 0.5]),
        means: pattern(2, 3, 0.0),
        loadings: Array3::from_shape_fn((2, 3, 2), |(k, d, r)| {
            ((k * 6 + d * 2 + r) % 5) as f64 * 0.25 - 0.5
        }),
        psi: pattern(1, 3, 0.0).mapv(|v| v * v + 0.5),
    };
    mfa.write(p("m.safetensors"), &BTreeMap::new()).unwrap();
    let mut per = mfa.clone();
    per.psi = pattern(2, 3, 0.0).mapv(|v| v * v + 0.5);
    per.cast::<f32>()
        .write(p("mk.safetensors"), &BTreeMap::new())
        .unwrap();
    let out = run_python(
        dir.path(),
        &format!(
            "{PY_PATTERN}{PY_SAFETENSORS}
w = np.array([0.2, 0.3, 0.5]); mu = pattern(3, 4, 0.0); var = pattern(3, 4, 1.0) ** 2 + 0.1
for f, dt in [('g64.safetensors', np.float64), ('g32.safetensors', np.float32)]:
    meta, t = load_st(f)
    assert meta['kind'] == 'gmm' and meta['format_version'] == '1' and meta['seed'] == '7', meta
    assert sorted(t) == ['means', 'variances', 'weights'], sorted(t)
    assert t['weights'].shape == (3,) and t['means'].shape == (3, 4) and t['variances'].shape == (3, 4)
    for name, want in [('weights', w / w.sum()), ('means', mu), ('variances', var)]:
        assert t[name].dtype == dt, (name, t[name].dtype)
        assert np.array_equal(t[name], want.astype(dt)), name
meta, t = load_st('m.safetensors')
assert meta['kind'] == 'mfa'
assert t['loadings'].shape == (2, 3, 2) and t['psi'].shape == (3,)
L = (np.arange(12) % 5).reshape(2, 3, 2) * 0.25 - 0.5
assert np.array_equal(t['loadings'], L)
assert np.array_equal(t['psi'], pattern(1, 3, 0.0)[0] ** 2 + 0.5)
meta, t = load_st('mk.safetensors')
assert t['psi'].shape == (2, 3) and t['psi'].dtype == np.float32
assert np.array_equal(t['psi'], (pattern(2, 3, 0.0) ** 2 + 0.5).astype(np.float32))
print('OK')
"
        ),
    );
    assert_eq!(out.trim(), "OK");
}

#[test]
fn we_read_a_model_python_wrote_by_hand() {
    if !python_with_numpy() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_python(
        dir.path(),
        &format!(
            "{PY_PATTERN}
def save_st(path, tensors, meta):
    header, blobs, off = {{}}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tobytes()
        header[name] = {{'dtype': {{'float32': 'F32', 'float64': 'F64'}}[a.dtype.name],
                        'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}}
        blobs.append(b); off += len(b)
    header['__metadata__'] = meta
    h = json.dumps(header).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
w = np.array([0.1, 0.6, 0.3], dtype=np.float32)
save_st('py.safetensors', {{'variances': (pattern(3, 2, 1.0) ** 2 + 0.1).astype(np.float32),
    'means': pattern(3, 2, 0.0).astype(np.float32), 'weights': w}}, {{'kind': 'gmm'}})
"
        ),
    );
    let Model::Gmm(GmmModel::F32(g)) = Model::read(dir.path().join("py.safetensors")).unwrap()
    else {
        panic!("f32 GMM expected")
    };
    assert_eq!(g.means(), pattern(3, 2, 0.0).mapv(|v| v as f32));
    assert_eq!(
        g.variances(),
        pattern(3, 2, 1.0).mapv(|v| (v * v + 0.1) as f32)
    );
    let w: Vec<f64> = g.weights().iter().map(|&v| v as f64).collect();
    for (a, b) in w.iter().zip([0.1, 0.6, 0.3]) {
        assert!((a - b).abs() < 1e-6, "{w:?}");
    }
}
