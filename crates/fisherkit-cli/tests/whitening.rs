//! `fisherkit mfa whiten` and `fisherkit encode` with a whitened MFA model:
//! the stored estimate equals the library's `fit_whitening` on the same
//! bags, the encoding equals the library encoder's with `set_whitening`, and
//! the raw whitened block is the raw unwhitened one divided by
//! $\sqrt{\max(F, 10^{-12}\bar F)}$ computed here from the file's tensor, read
//! with the safetensors crate. Every error path exits non-zero with one line
//! and leaves no output file.

use assert_cmd::Command;
use fisherkit::encode::{MfaFisherScore, MfaFisherScoreParams, MfaPart};
use fisherkit::gmm::DiagGmm;
use fisherkit::{Encoder, Normalization};
use fisherkit_io::{read_npy, write_npz, Matrix, MfaArrays, MfaModel, ModelFile, Whitened};
use ndarray::{Array1, Array2, Array3, ArrayView2};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::{fk, read64, s, Rng};

const K: usize = 2;
const D: usize = 4;
const R: usize = 2;

/// A fixed K = 2, D = 4, R = 2 MFA with shared psi.
fn arrays() -> MfaArrays<f64> {
    MfaArrays {
        weights: Array1::from_vec(vec![0.4, 0.6]),
        means: Array2::from_shape_fn((K, D), |(k, j)| if k == 0 { 0.0 } else { 3.0 + j as f64 }),
        loadings: Array3::from_shape_fn((K, D, R), |(k, j, r)| {
            ((k * 31 + j * 7 + r * 3) as f64).sin()
        }),
        psi: Array2::from_shape_fn((1, D), |(_, j)| 0.5 + 0.1 * j as f64),
    }
}

/// `n` bags of 10..20 rows drawn around the two means.
fn bags(n: usize, d: usize, seed: u64) -> Vec<Array2<f64>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|b| {
            let rows = 10 + (b * 7) % 11;
            Array2::from_shape_fn((rows, d), |(i, j)| {
                let c = if (i + b) % 3 == 0 {
                    3.0 + j as f64
                } else {
                    0.0
                };
                c + rng.normal()
            })
        })
        .collect()
}

fn write_bags(path: &Path, bags: &[Array2<f64>]) {
    let names: Vec<String> = (0..bags.len()).map(|i| format!("bag{i:02}")).collect();
    let v: Vec<(&str, ArrayView2<'_, f64>)> = names
        .iter()
        .zip(bags)
        .map(|(n, b)| (n.as_str(), b.view()))
        .collect();
    write_npz(path, &v, false).unwrap();
}

/// A model file, training bags and a whitened model for `parts` in `dir`.
struct Setup {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    model: PathBuf,
    bags: PathBuf,
    bag_data: Vec<Array2<f64>>,
    whitened: PathBuf,
}

fn setup(parts: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let model = dir.join("mfa.safetensors");
    let mut extra = BTreeMap::new();
    extra.insert("seed".to_string(), "5".to_string());
    arrays().write(&model, &extra).unwrap();
    let bag_data = bags(9, D, 1);
    let bags = dir.join("bags.npz");
    write_bags(&bags, &bag_data);
    let whitened = dir.join("mfa-w.safetensors");
    let out = fk()
        .args([
            "-q",
            "mfa",
            "whiten",
            "--model",
            s(&model),
            "--input",
            s(&bags),
        ])
        .args(["--parts", parts, "--output", s(&whitened)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Setup {
        _dir: tmp,
        dir,
        model,
        bags,
        bag_data,
        whitened,
    }
}

fn library(parts: &[MfaPart], power: f64, l2: bool) -> MfaFisherScore<f64> {
    let params = MfaFisherScoreParams {
        parts: parts.to_vec(),
        normalization: Normalization { power, l2 },
        whitening: None,
    };
    MfaFisherScore::new(arrays().to_mfa::<f64>().unwrap(), params).unwrap()
}

fn encode(model: &Path, input: &Path, out: &Path, extra: &[&str]) -> Array2<f64> {
    let o = fk()
        .args(["-q", "encode", "--model", s(model), "--input", s(input)])
        .args(["--output", s(out)])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read64(out)
}

/// The `fisher_information` tensor and `whitening_parts` key, read with the
/// safetensors crate (not fisherkit-io).
fn raw_block(path: &Path) -> (Vec<f64>, String) {
    let bytes = std::fs::read(path).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let parts = meta.metadata().as_ref().unwrap()["whitening_parts"].clone();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("fisher_information").unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::F64);
    let v = t
        .data()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (v, parts)
}

#[test]
fn whiten_stores_the_library_estimate_and_encode_applies_it() {
    let both = [MfaPart::Mean, MfaPart::Loading];
    let su = setup("loading,mean"); // any order in, canonical order stored
    let views: Vec<_> = su.bag_data.iter().map(|b| b.view()).collect();
    let lib = library(&both, 0.5, true);
    let fim = lib.fit_whitening(&views).unwrap();
    assert_eq!(fim.len(), K * D + K * D * R);

    // stored bit for bit, with the canonical parts and the model unchanged
    let (stored, parts) = raw_block(&su.whitened);
    assert_eq!(parts, "mean,loading");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&stored), bits(fim.as_slice().unwrap()));
    let Whitened {
        model: m,
        whitening: w,
    } = Whitened::<MfaModel>::read(&su.whitened).unwrap();
    assert_eq!(m, fisherkit_io::MfaModel::F64(arrays()));
    assert_eq!(w.unwrap().parts, both.to_vec());
    let (_, meta) = fisherkit_io::Model::read_with_metadata(&su.whitened).unwrap();
    assert_eq!(meta["seed"], "5", "the model's metadata is kept");
    assert_eq!(meta["whitening_bags"], "9");

    // encode (default parts = the whitening's) = the library with set_whitening
    let mut lib_w = library(&both, 0.5, true);
    lib_w.set_whitening(fim.clone()).unwrap();
    let want = lib_w.encode_batch(&views).unwrap();
    for extra in [&[][..], &["--parts", "mean,loading"]] {
        let got = encode(&su.whitened, &su.bags, &su.dir.join("fs.npy"), extra);
        assert_eq!(got.dim(), want.dim());
        let err = (&got - &want).iter().fold(0f64, |a, v| a.max(v.abs()));
        assert!(err <= 1e-12, "max difference {err}");
    }
    // and differs from the unwhitened encoding
    let plain = library(&both, 0.5, true).encode_batch(&views).unwrap();
    let diff = (&want - &plain).iter().fold(0f64, |a, v| a.max(v.abs()));
    assert!(diff > 1e-3, "whitening changed nothing ({diff})");
}

#[test]
fn raw_whitened_block_is_the_raw_score_over_root_f() {
    for parts in ["mean", "loading", "mean,loading"] {
        let su = setup(parts);
        let raw = ["--parts", parts, "--power", "1", "--no-l2"];
        let white = encode(&su.whitened, &su.bags, &su.dir.join("w.npy"), &raw);
        let off: Vec<&str> = raw.iter().copied().chain(["--no-whitening"]).collect();
        let plain = encode(&su.whitened, &su.bags, &su.dir.join("p.npy"), &off);
        // --no-whitening = the model without the block
        let orig = encode(&su.model, &su.bags, &su.dir.join("o.npy"), &raw);
        assert_eq!(plain, orig, "{parts}");
        let (f, _) = raw_block(&su.whitened);
        assert_eq!(f.len(), plain.ncols());
        let mean = f.iter().sum::<f64>() / f.len() as f64;
        for ((b, j), &p) in plain.indexed_iter() {
            let want = p / f[j].max(1e-12 * mean).sqrt();
            let got = white[[b, j]];
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{parts} bag {b} entry {j}: {got} vs {want}"
            );
        }
        // the estimate is the variance over bags of those raw scores
        let n = plain.nrows() as f64;
        for (j, col) in plain.columns().into_iter().enumerate() {
            let m = col.sum() / n;
            let var = col.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
            assert!(
                (var - f[j]).abs() <= 1e-10 * var.max(1e-300),
                "{parts} entry {j}: {var} vs {}",
                f[j]
            );
        }
    }
}

/// Runs `cmd` expecting failure with `code` (see [`common::assert_error`]),
/// and `output` not written.
fn assert_error(cmd: &mut Command, code: i32, needles: &[&str], output: &Path) {
    common::assert_error(&cmd.output().unwrap(), code, needles, &[output]);
}

#[test]
fn encode_refuses_other_parts_than_the_whitening() {
    let su = setup("mean,loading");
    let out = su.dir.join("fs.npy");
    for parts in ["mean", "loading"] {
        assert_error(
            fk().args([
                "encode",
                "-m",
                s(&su.whitened),
                "-i",
                s(&su.bags),
                "-o",
                s(&out),
            ])
            .args(["--parts", parts]),
            2,
            &[
                &format!("--parts {parts} differs from the parts the whitening stored in"),
                "estimated for (mean,loading)",
                "--no-whitening",
            ],
            &out,
        );
        // --no-whitening: the plain encoding of those parts
        let got = encode(
            &su.whitened,
            &su.bags,
            &out,
            &["--parts", parts, "--no-whitening"],
        );
        let want = encode(
            &su.model,
            &su.bags,
            &su.dir.join("o.npy"),
            &["--parts", parts],
        );
        assert_eq!(got, want);
        std::fs::remove_file(&out).unwrap();
    }
    // --no-whitening with a GMM is a usage error
    let gmm = su.dir.join("gmm.safetensors");
    let g = DiagGmm::new(
        Array1::from_vec(vec![0.5, 0.5]),
        Array2::zeros((2, D)),
        Array2::ones((2, D)),
    )
    .unwrap();
    g.write(&gmm, &BTreeMap::new()).unwrap();
    assert_error(
        fk().args(["encode", "-m", s(&gmm), "-i", s(&su.bags), "-o", s(&out)])
            .arg("--no-whitening"),
        2,
        &["--no-whitening applies to MFA models"],
        &out,
    );
}

#[test]
fn whiten_errors() {
    let su = setup("loading");
    let out = su.dir.join("new.safetensors");
    let whiten = |input: &Path, model: &Path, parts: &str| {
        let mut c = fk();
        c.args([
            "mfa",
            "whiten",
            "-m",
            s(model),
            "-i",
            s(input),
            "-o",
            s(&out),
        ])
        .args(["--parts", parts]);
        c
    };
    let one = su.dir.join("one.npz");
    write_bags(&one, &bags(1, D, 2));
    assert_error(
        &mut whiten(&one, &su.model, "loading"),
        1,
        &["one.npz: has 1 bag", "needs at least 2"],
        &out,
    );
    let wide = su.dir.join("wide.npz");
    write_bags(&wide, &bags(3, D + 1, 3));
    assert_error(
        &mut whiten(&wide, &su.model, "loading"),
        1,
        &["array `bag00`", "bag has 5 columns", "has dimension 4"],
        &out,
    );
    let mut nan = bags(3, D, 4);
    nan[1][[2, 3]] = f64::NAN;
    let nanp = su.dir.join("nan.npz");
    write_bags(&nanp, &nan);
    assert_error(
        &mut whiten(&nanp, &su.model, "loading"),
        1,
        &["array `bag01`", "row 2", "NaN"],
        &out,
    );
    assert_error(
        &mut whiten(&su.bags, &su.model, "mean,scale"),
        2,
        &["--parts", "unknown MFA Fisher score part `scale`"],
        &out,
    );
    let gmm = su.dir.join("gmm.safetensors");
    let g = DiagGmm::new(
        Array1::from_vec(vec![1.0]),
        Array2::zeros((1, D)),
        Array2::ones((1, D)),
    )
    .unwrap();
    g.write(&gmm, &BTreeMap::new()).unwrap();
    assert_error(
        &mut whiten(&su.bags, &gmm, "loading"),
        1,
        &["is a GMM model", "needs an MFA model"],
        &out,
    );
}

/// Overwrites, in place, bytes of a model file's JSON header (same length).
fn patch_header(path: &Path, from: &str, to: &str) -> PathBuf {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(path).unwrap();
    let pos = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("`{from}` not in the header"));
    bytes[pos..pos + from.len()].copy_from_slice(to.as_bytes());
    let p = path.with_file_name("patched.safetensors");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn encode_refuses_a_broken_stored_whitening() {
    let su = setup("mean,loading");
    let out = su.dir.join("fs.npy");
    let run = |model: &Path| {
        let mut c = fk();
        c.args(["encode", "-m", s(model), "-i", s(&su.bags), "-o", s(&out)]);
        c
    };
    // parts that do not match the tensor's length (JSON whitespace keeps the size)
    let p = patch_header(
        &su.whitened,
        "\"whitening_parts\":\"mean,loading\"",
        "\"whitening_parts\":\"loading\"     ",
    );
    assert_error(
        &mut run(&p),
        1,
        &[
            "patched.safetensors: tensor `fisher_information` has shape (24,)",
            "the parts \"loading\"",
            "have 16 values",
        ],
        &out,
    );
    let p = patch_header(
        &su.whitened,
        "\"whitening_parts\":\"mean,loading\"",
        "\"whitening_parts\":\"mean,lambda!\"",
    );
    assert_error(
        &mut run(&p),
        1,
        &["metadata `whitening_parts` is \"mean,lambda!\""],
        &out,
    );
    // a NaN in the tensor
    let mut bytes = std::fs::read(&su.whitened).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("fisher_information").unwrap();
    let start = t.data().as_ptr() as usize - bytes.as_ptr() as usize;
    assert!(start >= 8 + n);
    bytes[start + 8 * 3..start + 8 * 4].copy_from_slice(&f64::NAN.to_le_bytes());
    let p = su.dir.join("nan.safetensors");
    std::fs::write(&p, bytes).unwrap();
    assert_error(
        &mut run(&p),
        1,
        &["nan.safetensors: tensor `fisher_information` has a non-finite value (NaN) at [3]"],
        &out,
    );
}

#[test]
fn float32_bags_estimate_in_float32_and_store_in_the_models_dtype() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = dir.join("mfa.safetensors");
    arrays().write(&model, &BTreeMap::new()).unwrap();
    let b32: Vec<Array2<f32>> = bags(6, D, 9).iter().map(|b| b.mapv(|v| v as f32)).collect();
    let names: Vec<String> = (0..b32.len()).map(|i| format!("b{i}")).collect();
    let v: Vec<(&str, ArrayView2<'_, f32>)> = names
        .iter()
        .zip(&b32)
        .map(|(n, b)| (n.as_str(), b.view()))
        .collect();
    let input = dir.join("bags32.npz");
    write_npz(&input, &v, false).unwrap();
    let whitened = dir.join("w.safetensors");
    let o = fk()
        .args([
            "-q",
            "mfa",
            "whiten",
            "-m",
            s(&model),
            "-i",
            s(&input),
            "-o",
            s(&whitened),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // the library in f32 on the same bags, default part (loading)
    let params = MfaFisherScoreParams::<f32>::default();
    let mut lib = MfaFisherScore::new(arrays().to_mfa::<f32>().unwrap(), params).unwrap();
    let views: Vec<_> = b32.iter().map(|b| b.view()).collect();
    let fim = lib.fit_whitening(&views).unwrap();
    let (stored, parts) = raw_block(&whitened); // F64 tensor: the model's dtype
    assert_eq!(parts, "loading");
    let widened: Vec<f64> = fim.iter().map(|&x| x as f64).collect();
    assert_eq!(stored, widened, "f32 estimate widened exactly");
    lib.set_whitening(fim).unwrap();
    let want = lib.encode_batch(&views).unwrap();
    let out = dir.join("fs.npy");
    let o = fk()
        .args([
            "-q",
            "encode",
            "-m",
            s(&whitened),
            "-i",
            s(&input),
            "-o",
            s(&out),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let Matrix::F32(got) = read_npy(&out).unwrap() else {
        panic!("float32 bags give a float32 encoding")
    };
    assert_eq!(got, want);
}
