//! Integration tests of the `fisherkit` binary: every subcommand on planted
//! data (checked against formulas computed here, independently of the
//! library), and every error path (exit status, one `error:` line naming the
//! problem, no panic text, no output file).

use assert_cmd::Command;
use fisherkit_io::{read_npy, write_npy, write_npz, GmmModel, Matrix, Model, ModelFile};
use ndarray::{s, Array1, Array2, ArrayView2};
use safetensors::tensor::TensorView;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod common;
use common::{fk, read64, s, Rng};

// ---------------------------------------------------------------------------
// Helpers

/// Planted centres (3, 4), far apart.
fn centres() -> Array2<f64> {
    ndarray::array![
        [0.0, 0.0, 0.0, 0.0],
        [10.0, 10.0, 0.0, 0.0],
        [0.0, -10.0, 10.0, 5.0]
    ]
}

/// `n` points per planted centre, unit noise, rows interleaved.
fn planted(n: usize, seed: u64) -> Array2<f64> {
    let c = centres();
    let mut rng = Rng(seed);
    Array2::from_shape_fn((3 * n, 4), |(i, j)| c[[i % 3, j]] + rng.normal())
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn write64(dir: &Path, name: &str, a: &Array2<f64>) -> PathBuf {
    let p = dir.join(name);
    write_npy(&p, a.view()).unwrap();
    p
}

/// Runs `cmd` expecting failure with `code` (see [`common::assert_error`]),
/// and `output` not written.
fn assert_error(cmd: &mut Command, code: i32, needles: &[&str], output: &Path) {
    common::assert_error(&cmd.output().unwrap(), code, needles, &[output]);
}

/// `fisherkit [--quiet] encode -m <model> -i <input> -o <output> <extra…>`.
fn encode_with(quiet: bool, model: &Path, input: &Path, output: &Path, extra: &[&str]) -> Command {
    let mut c = fk();
    if quiet {
        c.arg("--quiet");
    }
    c.args(["encode", "-m", s(model), "-i", s(input), "-o", s(output)])
        .args(extra);
    c
}

fn encode_cmd(model: &Path, input: &Path, output: &Path, extra: &[&str]) -> Command {
    encode_with(false, model, input, output, extra)
}

/// Runs `fisherkit --quiet encode …` (as [`encode_cmd`]), which must succeed.
fn encode_ok(model: &Path, input: &Path, output: &Path, extra: &[&str]) {
    encode_with(true, model, input, output, extra)
        .assert()
        .success();
}

/// `fisherkit <what> fit -i <input> -k <k> -o <output>` (`gmm` or `kmeans`).
fn fit_cmd(what: &str, input: &Path, k: &str, output: &Path) -> Command {
    let mut c = fk();
    c.args([what, "fit", "-i", s(input), "-k", k, "-o", s(output)]);
    c
}

/// [`assert_error`] for `encode` (exit status 1).
fn encode_fails(model: &Path, input: &Path, output: &Path, needles: &[&str]) {
    assert_error(
        &mut encode_cmd(model, input, output, &[]),
        1,
        needles,
        output,
    );
}

/// [`assert_error`] for [`fit_cmd`].
fn fit_fails(what: &str, input: &Path, k: &str, output: &Path, code: i32, needles: &[&str]) {
    assert_error(&mut fit_cmd(what, input, k, output), code, needles, output);
}

/// A hand-made safetensors file (bypassing our writer's validation).
fn raw_model(path: &Path, kind: Option<&str>, tensors: &[(&str, &[usize], &[f64])]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, sh, v)| {
            (
                n.to_string(),
                sh.to_vec(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(n, sh, b)| {
            (
                n.clone(),
                TensorView::new(safetensors::Dtype::F64, sh.clone(), b).unwrap(),
            )
        })
        .collect();
    let meta = kind.map(|k| HashMap::from([("kind".to_string(), k.to_string())]));
    std::fs::write(path, safetensors::serialize(views, meta).unwrap()).unwrap();
}

/// A valid K=2, D=2 GMM written by hand.
fn good_model(path: &Path) {
    raw_model(
        path,
        Some("gmm"),
        &[
            ("weights", &[2], &[0.4, 0.6]),
            ("means", &[2, 2], &[0.0, 0.0, 3.0, 3.0]),
            ("variances", &[2, 2], &[1.0, 1.0, 0.5, 2.0]),
        ],
    );
}

/// A temporary folder with [`good_model`] at `m.safetensors`; returns it,
/// the model path and an output path `o.npy` (not created).
fn with_good_model() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tmp();
    let m = dir.path().join("m.safetensors");
    good_model(&m);
    let out = dir.path().join("o.npy");
    (dir, m, out)
}

/// Fits a K=3 GMM on planted f64 data; returns (data, model path).
fn fitted(dir: &Path) -> (Array2<f64>, PathBuf) {
    let x = planted(100, 1);
    let xp = write64(dir, "X.npy", &x);
    let model = dir.join("gmm.safetensors");
    fk().args([
        "--quiet",
        "gmm",
        "fit",
        "--input",
        s(&xp),
        "--components",
        "3",
    ])
    .args(["--seed", "0", "--output", s(&model)])
    .assert()
    .success();
    (x, model)
}

/// The Fisher vector computed here from the formulas (docs/math.md §3.2), in f64,
/// blocks prior, mean, var, no normalisation.
fn fv_reference(
    x: ArrayView2<'_, f64>,
    w: &Array1<f64>,
    mu: &Array2<f64>,
    var: &Array2<f64>,
) -> Vec<f64> {
    let (n, d) = x.dim();
    let k = w.len();
    let mut q = Array2::<f64>::zeros((n, k));
    for i in 0..n {
        let mut lp = vec![0.0; k];
        for c in 0..k {
            let mut acc = w[c].ln();
            for j in 0..d {
                let z = x[[i, j]] - mu[[c, j]];
                acc -=
                    0.5 * ((2.0 * std::f64::consts::PI * var[[c, j]]).ln() + z * z / var[[c, j]]);
            }
            lp[c] = acc;
        }
        let m = lp.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = lp.iter().map(|l| (l - m).exp()).sum();
        for c in 0..k {
            q[[i, c]] = (lp[c] - m).exp() / sum;
        }
    }
    let nf = n as f64;
    let mut prior = vec![0.0; k];
    let mut mean = vec![0.0; k * d];
    let mut vv = vec![0.0; k * d];
    for c in 0..k {
        let qs: f64 = q.column(c).sum();
        prior[c] = (qs / nf - w[c]) / w[c].sqrt();
        for j in 0..d {
            let sd = var[[c, j]].sqrt();
            let (mut a, mut b) = (0.0, 0.0);
            for i in 0..n {
                let z = (x[[i, j]] - mu[[c, j]]) / sd;
                a += q[[i, c]] * z;
                b += q[[i, c]] * (z * z - 1.0);
            }
            mean[c * d + j] = a / (nf * w[c].sqrt());
            vv[c * d + j] = b / (nf * (2.0 * w[c]).sqrt());
        }
    }
    [prior, mean, vv].concat()
}

fn improved(v: &[f64]) -> Vec<f64> {
    let p: Vec<f64> = v.iter().map(|x| x.signum() * x.abs().sqrt()).collect();
    let norm = p.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    p.iter().map(|x| x / norm).collect()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * scale,
            "entry {i}: got {g}, want {w} (tol {tol} × {scale})"
        );
    }
}

fn gmm_f64(p: &Path) -> (Array1<f64>, Array2<f64>, Array2<f64>) {
    let g = match GmmModel::read(p).unwrap() {
        GmmModel::F64(g) => g,
        GmmModel::F32(g) => g.cast(),
    };
    (
        g.weights().to_owned(),
        g.means().to_owned(),
        g.variances().to_owned(),
    )
}

// ---------------------------------------------------------------------------
// gmm fit

#[test]
fn gmm_fit_recovers_planted_centres() {
    let dir = tmp();
    let (_, model) = fitted(dir.path());
    let (meta_model, meta) = Model::read_with_metadata(&model).unwrap();
    assert_eq!(meta_model.kind(), "gmm");
    assert_eq!(meta["kind"], "gmm");
    assert_eq!(meta["seed"], "0");
    let (w, mu, var) = gmm_f64(&model);
    let c = centres();
    for k in 0..3 {
        // Each planted centre is matched by one fitted mean.
        let best = (0..3)
            .map(|j| {
                (0..4)
                    .map(|d| (mu[[j, d]] - c[[k, d]]).powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(f64::INFINITY, f64::min);
        assert!(best < 0.4, "centre {k} missed by {best}: {mu}");
    }
    for k in 0..3 {
        assert!((w[k] - 1.0 / 3.0).abs() < 0.02, "{w}");
        for d in 0..4 {
            assert!((var[[k, d]] - 1.0).abs() < 0.4, "{var}");
        }
    }
}

#[test]
fn gmm_fit_is_reproducible_and_thread_count_independent() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(60, 2));
    let run = |threads: &str, out: &str| {
        let p = dir.path().join(out);
        fk().args([
            "--quiet",
            "--threads",
            threads,
            "gmm",
            "fit",
            "--input",
            s(&xp),
        ])
        .args([
            "--components",
            "4",
            "--seed",
            "7",
            "--n-init",
            "2",
            "--output",
            s(&p),
        ])
        .assert()
        .success();
        std::fs::read(p).unwrap()
    };
    let a = run("1", "a.safetensors");
    assert_eq!(a, run("1", "b.safetensors"));
    assert_eq!(a, run("2", "c.safetensors"));
}

#[test]
fn gmm_fit_keeps_float32_and_reports_progress() {
    let dir = tmp();
    let x = planted(50, 3).mapv(|v| v as f32);
    let xp = dir.path().join("X32.npy");
    write_npy(&xp, x.view()).unwrap();
    let model = dir.path().join("g.safetensors");
    let out = fk()
        .args([
            "gmm",
            "fit",
            "--input",
            s(&xp),
            "-k",
            "3",
            "--init",
            "random",
        ])
        .args([
            "--variance-floor-absolute",
            "1e-4",
            "--max-iter",
            "50",
            "--output",
            s(&model),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("g.safetensors"),
        "summary line expected: {stderr}"
    );
    assert!(matches!(GmmModel::read(&model).unwrap(), GmmModel::F32(_)));
}

#[test]
fn quiet_prints_nothing() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(20, 4));
    let out = fk()
        .args([
            "--quiet",
            "kmeans",
            "fit",
            "--input",
            s(&xp),
            "--clusters",
            "3",
        ])
        .args(["--output", s(&dir.path().join("c.npy"))])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

// ---------------------------------------------------------------------------
// kmeans fit

#[test]
fn kmeans_fit_recovers_planted_centres() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(100, 5));
    let cp = dir.path().join("centroids.npy");
    fk().args([
        "--quiet",
        "kmeans",
        "fit",
        "--input",
        s(&xp),
        "--clusters",
        "3",
    ])
    .args(["--seed", "1", "--output", s(&cp)])
    .assert()
    .success();
    let c = read64(&cp);
    assert_eq!(c.dim(), (3, 4));
    let want = centres();
    for k in 0..3 {
        let best = (0..3)
            .map(|j| (&c.row(j) - &want.row(k)).mapv(|v| v * v).sum().sqrt())
            .fold(f64::INFINITY, f64::min);
        assert!(best < 0.4, "centre {k} missed by {best}: {c}");
    }
}

// ---------------------------------------------------------------------------
// encode

#[test]
fn encode_matches_the_fisher_vector_formula() {
    let dir = tmp();
    let (x, model) = fitted(dir.path());
    let (w, mu, var) = gmm_f64(&model);
    let bag = x.slice(s![..37, ..]).to_owned();
    let bp = write64(dir.path(), "bag.npy", &bag);
    let want = fv_reference(bag.view(), &w, &mu, &var);
    let (k, d) = (3, 4);

    let out = dir.path().join("raw.npy");
    let raw = ["--parts", "prior,mean,var", "--power", "1", "--no-l2"];
    encode_ok(&model, &bp, &out, &raw);
    let got = read64(&out);
    assert_eq!(got.dim(), (1, k + 2 * k * d));
    assert_close(got.row(0).as_slice().unwrap(), &want, 1e-9);

    // Default: mean,var blocks, signed square root, L2.
    let out2 = dir.path().join("fv.npy");
    encode_ok(&model, &bp, &out2, &[]);
    let got = read64(&out2);
    assert_eq!(got.dim(), (1, 2 * k * d));
    assert_close(got.row(0).as_slice().unwrap(), &improved(&want[k..]), 1e-9);

    // One block only.
    let out3 = dir.path().join("mean.npy");
    encode_ok(
        &model,
        &bp,
        &out3,
        &["--parts", "mean", "--power", "1", "--no-l2"],
    );
    assert_close(
        read64(&out3).row(0).as_slice().unwrap(),
        &want[k..k + k * d],
        1e-9,
    );
}

#[test]
fn encode_npz_gives_one_row_per_bag_in_archive_order() {
    let dir = tmp();
    let (x, model) = fitted(dir.path());
    let (w, mu, var) = gmm_f64(&model);
    let bags = [
        ("zz", x.slice(s![0..10, ..]).to_owned()),
        ("aa", x.slice(s![10..50, ..]).to_owned()),
        ("mm", x.slice(s![50..53, ..]).to_owned()),
    ];
    let np = dir.path().join("bags.npz");
    let views: Vec<_> = bags.iter().map(|(n, b)| (*n, b.view())).collect();
    write_npz(&np, &views, true).unwrap();
    let out = dir.path().join("out.npy");
    fk().args([
        "--quiet",
        "--threads",
        "2",
        "encode",
        "--model",
        s(&model),
        "--input",
        s(&np),
    ])
    .args(["--output", s(&out)])
    .assert()
    .success();
    let got = read64(&out);
    assert_eq!(got.nrows(), 3);
    for (r, (_, b)) in bags.iter().enumerate() {
        let want = improved(&fv_reference(b.view(), &w, &mu, &var)[3..]);
        assert_close(got.row(r).as_slice().unwrap(), &want, 1e-9);
    }
}

#[test]
fn encode_float32_bags_with_a_float64_model_gives_float32() {
    let dir = tmp();
    let (x, model) = fitted(dir.path());
    let bag = x.slice(s![..20, ..]).mapv(|v| v as f32);
    let bp = dir.path().join("bag32.npy");
    write_npy(&bp, bag.view()).unwrap();
    let out = dir.path().join("o.npy");
    encode_ok(&model, &bp, &out, &[]);
    let Matrix::F32(got) = read_npy(&out).unwrap() else {
        panic!("float32 output expected")
    };
    let (w, mu, var) = gmm_f64(&model);
    let want = improved(&fv_reference(bag.mapv(|v| v as f64).view(), &w, &mu, &var)[3..]);
    let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
    assert_close(&got, &want, 1e-4);
}

#[test]
fn encode_fast_uses_hard_assignments() {
    let dir = tmp();
    let (x, model) = fitted(dir.path());
    let (w, mu, var) = gmm_f64(&model);
    let bag = x.slice(s![..30, ..]).to_owned();
    let bp = write64(dir.path(), "bag.npy", &bag);
    let out = dir.path().join("o.npy");
    let fast = ["--fast", "--power", "1", "--no-l2", "--parts", "mean"];
    encode_ok(&model, &bp, &out, &fast);
    // Reference: q = 1 for the arg-max posterior component.
    let (n, d) = bag.dim();
    let mut want = vec![0.0; 3 * d];
    for i in 0..n {
        let lp: Vec<f64> = (0..3)
            .map(|c| {
                w[c].ln()
                    - 0.5
                        * (0..d)
                            .map(|j| {
                                (2.0 * std::f64::consts::PI * var[[c, j]]).ln()
                                    + (bag[[i, j]] - mu[[c, j]]).powi(2) / var[[c, j]]
                            })
                            .sum::<f64>()
            })
            .collect();
        let c = (0..3).max_by(|&a, &b| lp[a].total_cmp(&lp[b])).unwrap();
        for j in 0..d {
            want[c * d + j] +=
                (bag[[i, j]] - mu[[c, j]]) / var[[c, j]].sqrt() / (n as f64 * w[c].sqrt());
        }
    }
    assert_close(read64(&out).row(0).as_slice().unwrap(), &want, 1e-9);
}

#[test]
fn encode_vlad_with_kmeans_centroids() {
    let dir = tmp();
    let x = planted(40, 6);
    let xp = write64(dir.path(), "X.npy", &x);
    let cp = dir.path().join("c.npy");
    fk().args([
        "--quiet",
        "kmeans",
        "fit",
        "-i",
        s(&xp),
        "-k",
        "3",
        "-o",
        s(&cp),
    ])
    .assert()
    .success();
    let c = read64(&cp);
    let bag = x.slice(s![5..25, ..]).to_owned();
    let bp = write64(dir.path(), "bag.npy", &bag);
    let out = dir.path().join("v.npy");
    encode_ok(&cp, &bp, &out, &["--encoder", "vlad"]);
    // Reference: nearest centroid, residual sums, global L2.
    let mut v = [0.0; 12];
    for r in bag.rows() {
        let k = (0..3)
            .min_by(|&a, &b| {
                let da = (&r - &c.row(a)).mapv(|t| t * t).sum();
                let db = (&r - &c.row(b)).mapv(|t| t * t).sum();
                da.total_cmp(&db)
            })
            .unwrap();
        for j in 0..4 {
            v[k * 4 + j] += r[j] - c[[k, j]];
        }
    }
    let norm = v.iter().map(|t| t * t).sum::<f64>().sqrt();
    let want: Vec<f64> = v.iter().map(|t| t / norm).collect();
    assert_close(read64(&out).row(0).as_slice().unwrap(), &want, 1e-9);
}

#[test]
fn a_failed_run_leaves_an_existing_output_untouched() {
    let (dir, m, out) = with_good_model();
    let bp = write64(dir.path(), "bag.npy", &Array2::from_elem((2, 3), 1.0));
    std::fs::write(&out, b"previous").unwrap();
    let o = encode_cmd(&m, &bp, &out, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
}

// ---------------------------------------------------------------------------
// Error paths: data

#[test]
fn non_finite_training_data_names_the_row() {
    let dir = tmp();
    let mut x = planted(10, 7);
    x[[5, 1]] = f64::NAN;
    let xp = write64(dir.path(), "X.npy", &x);
    let out = dir.path().join("g.safetensors");
    fit_fails(
        "gmm",
        &xp,
        "2",
        &out,
        1,
        &["X.npy", "non-finite value (NaN) at row 5, column 1"],
    );
    x[[5, 1]] = 0.0;
    x[[8, 3]] = f64::INFINITY;
    let xp = write64(dir.path(), "X.npy", &x);
    let out = dir.path().join("c.npy");
    fit_fails(
        "kmeans",
        &xp,
        "2",
        &out,
        1,
        &["X.npy", "(inf) at row 8, column 3"],
    );
}

#[test]
fn non_finite_bags_name_the_array_and_row() {
    let (dir, m, out) = with_good_model();
    let ok = Array2::from_elem((3, 2), 0.5);
    let mut bad = ok.clone();
    bad[[2, 0]] = f64::NEG_INFINITY;
    let np = dir.path().join("B.npz");
    write_npz(&np, &[("good", ok.view()), ("broken", bad.view())], false).unwrap();
    encode_fails(
        &m,
        &np,
        &out,
        &["B.npz: array `broken`", "(-inf) at row 2, column 0"],
    );
}

#[test]
fn unusable_arrays_are_refused() {
    let dir = tmp();
    let out = dir.path().join("g.safetensors");
    let npy = |name: &str, descr: &str, shape: &str, nbytes: usize| {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        h.push_str(&" ".repeat(63 - (10 + h.len()) % 64));
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend(std::iter::repeat_n(0u8, nbytes));
        let p = dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    let cases = [
        (
            npy("ints.npy", "<i8", "(10, 2)", 160),
            "dtype int64 not supported; expected float32 or float64",
        ),
        (
            npy("flat.npy", "<f4", "(10,)", 40),
            "expected a 2-D (N, D) array, got shape (10,)",
        ),
        (
            npy("cube.npy", "<f8", "(2, 2, 2)", 64),
            "got shape (2, 2, 2)",
        ),
        (
            npy("short.npy", "<f4", "(1000, 128)", 1024),
            "file is truncated: header says 1000×128 float32 (512000 bytes) but 1024 bytes follow",
        ),
        (
            npy("huge.npy", "<f4", "(1000000, 1000000)", 16),
            "file is truncated",
        ),
    ];
    for (p, want) in &cases {
        let name = p.file_name().unwrap().to_str().unwrap();
        fit_fails("gmm", p, "2", &out, 1, &[name, want]);
    }
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "1,2,3\n4,5,6\n").unwrap();
    fit_fails(
        "kmeans",
        &txt,
        "2",
        &out,
        1,
        &["notes.txt: not an .npy file"],
    );
    let missing = dir.path().join("missing.npy");
    fit_fails("gmm", &missing, "2", &out, 1, &["missing.npy"]);
}

#[test]
fn bad_component_counts_are_refused() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(2, 8)); // 6 rows
    let out = dir.path().join("g.safetensors");
    fit_fails("gmm", &xp, "0", &out, 2, &["n_components", "at least 1"]);
    fit_fails(
        "gmm",
        &xp,
        "7",
        &out,
        1,
        &["X.npy", "7 components", "6 rows"],
    );
    let out = dir.path().join("c.npy");
    fit_fails("kmeans", &xp, "0", &out, 2, &["n_clusters", "at least 1"]);
    fit_fails(
        "kmeans",
        &xp,
        "9",
        &out,
        1,
        &["X.npy", "9 clusters", "6 rows"],
    );
    fit_fails("gmm", &xp, "-3", &out, 2, &["-3"]);
}

#[test]
fn bad_hyper_parameters_are_usage_errors() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(5, 9));
    let out = dir.path().join("g.safetensors");
    for (flag, value, needle) in [
        ("--tol", "-1", "tol"),
        ("--max-iter", "0", "max_iter"),
        ("--n-init", "0", "n_init"),
        ("--variance-floor-relative", "0", "variance_floor"),
        ("--init", "magic", "magic"),
    ] {
        assert_error(
            fk().args([
                "gmm",
                "fit",
                "-i",
                s(&xp),
                "-k",
                "2",
                flag,
                value,
                "-o",
                s(&out),
            ]),
            2,
            &[needle],
            &out,
        );
    }
    assert_error(
        fk().args(["gmm", "fit", "-i", s(&xp), "-k", "2", "-o", s(&out)])
            .args([
                "--variance-floor-relative",
                "1e-3",
                "--variance-floor-absolute",
                "1e-4",
            ]),
        2,
        &["--variance-floor-absolute"],
        &out,
    );
    assert_error(
        fk().args([
            "--threads",
            "0",
            "gmm",
            "fit",
            "-i",
            s(&xp),
            "-k",
            "2",
            "-o",
            s(&out),
        ]),
        2,
        &["--threads"],
        &out,
    );
    assert_error(
        fk().args(["gmm", "fit", "-i", s(&xp), "-o", s(&out)]),
        2,
        &["--components"],
        &out,
    );
    assert_error(
        fk().args(["gmm", "fit", "-i", s(&xp), "-k", "2"]),
        2,
        &["--output"],
        &out,
    );
    assert_error(fk().args(["frobnicate"]), 2, &["frobnicate"], &out);
}

#[test]
fn output_into_a_missing_directory_fails_before_fitting() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted(5, 10));
    let out = dir.path().join("nope").join("g.safetensors");
    fit_fails(
        "gmm",
        &xp,
        "2",
        &out,
        1,
        &["g.safetensors", "does not exist"],
    );
}

// ---------------------------------------------------------------------------
// Error paths: encode

#[test]
fn empty_bags_and_archives_are_refused() {
    let (dir, m, out) = with_good_model();
    let ok = Array2::from_elem((3, 2), 0.5);
    let empty = Array2::<f64>::zeros((0, 2));
    let np = dir.path().join("B.npz");
    write_npz(
        &np,
        &[("first", ok.view()), ("hollow", empty.view())],
        false,
    )
    .unwrap();
    encode_fails(&m, &np, &out, &["B.npz: array `hollow`", "empty (0 rows)"]);
    let bp = write64(dir.path(), "E.npy", &empty);
    encode_fails(&m, &bp, &out, &["E.npy", "empty (0 rows)"]);
    let zp = dir.path().join("none.npz");
    write_npz::<f64>(&zp, &[], false).unwrap();
    encode_fails(&m, &zp, &out, &["none.npz", "holds no arrays"]);
}

#[test]
fn dimension_mismatches_are_named() {
    let (dir, m, out) = with_good_model();
    let bp = write64(dir.path(), "wide.npy", &Array2::from_elem((4, 5), 0.1));
    encode_fails(
        &m,
        &bp,
        &out,
        &["wide.npy", "5 columns", "m.safetensors", "dimension 2"],
    );
    let a = Array2::from_elem((2, 2), 0.1);
    let b = Array2::from_elem((2, 3), 0.1);
    let np = dir.path().join("mixed.npz");
    // Written by hand: our writer accepts any shapes, the reader refuses.
    write_npz(&np, &[("a", a.view()), ("b", b.view())], false).unwrap();
    encode_fails(
        &m,
        &np,
        &out,
        &["mixed.npz: array `b`", "3 columns", "first array `a` has 2"],
    );
}

#[test]
fn broken_model_files_are_named() {
    let dir = tmp();
    let bp = write64(dir.path(), "bag.npy", &Array2::from_elem((3, 2), 0.5));
    let out = dir.path().join("o.npy");
    let b = BrokenModels {
        dir: dir.path(),
        bag: &bp,
        out: &out,
    };
    b.missing_parts_are_named();
    b.bad_shapes_are_named();
    b.bad_values_are_named();
    b.unknown_kind_is_named();
    let good = b.foreign_and_truncated_files_are_named();
    b.bag_of_unknown_format_is_named(&good);
}

/// `fisherkit encode` on broken model files in `dir`, with the bag `bag`
/// and the output `out`: each fails with an error naming the file and the
/// problem.
struct BrokenModels<'a> {
    dir: &'a Path,
    bag: &'a Path,
    out: &'a Path,
}

impl BrokenModels<'_> {
    /// The weights, means and variances of a valid two-component GMM in 2-D.
    const W: &'static [f64] = &[0.4, 0.6];
    const MU: &'static [f64] = &[0.0, 0.0, 3.0, 3.0];
    const VAR: &'static [f64] = &[1.0, 1.0, 0.5, 2.0];

    /// Writes the model `name` (metadata `kind`, `tensors`) and checks that
    /// encoding with it fails with an error holding `name` and `needles`.
    fn case(
        &self,
        name: &str,
        kind: Option<&str>,
        tensors: &[(&str, &[usize], &[f64])],
        needles: &[&str],
    ) {
        let m = self.dir.join(name);
        raw_model(&m, kind, tensors);
        let mut all = vec![name];
        all.extend_from_slice(needles);
        encode_fails(&m, self.bag, self.out, &all);
    }

    /// A missing tensor; a missing `kind`.
    fn missing_parts_are_named(&self) {
        let (w, mu, var) = (Self::W, Self::MU, Self::VAR);
        self.case(
            "missing.safetensors",
            Some("gmm"),
            &[("weights", &[2], w), ("means", &[2, 2], mu)],
            &["missing tensor `variances`"],
        );
        self.case(
            "nokind.safetensors",
            None,
            &[
                ("weights", &[2], w),
                ("means", &[2, 2], mu),
                ("variances", &[2, 2], var),
            ],
            &["missing metadata key `kind`"],
        );
    }

    /// A tensor of the wrong rank; tensors that disagree on K.
    fn bad_shapes_are_named(&self) {
        let (w, mu, var) = (Self::W, Self::MU, Self::VAR);
        self.case(
            "shape.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], w),
                ("means", &[2, 2], mu),
                ("variances", &[4], var),
            ],
            &["tensor `variances` must have shape (K, D), got (4,)"],
        );
        self.case(
            "rows.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], w),
                ("means", &[1, 4], mu),
                ("variances", &[2, 2], var),
            ],
            &["tensor `means` has shape (1, 4) but `weights` has K = 2 entries"],
        );
    }

    /// A negative or zero variance, weights that do not sum to 1, a NaN mean.
    fn bad_values_are_named(&self) {
        let (w, mu, var) = (Self::W, Self::MU, Self::VAR);
        self.case(
            "negvar.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], w),
                ("means", &[2, 2], mu),
                ("variances", &[2, 2], &[1.0, 1.0, -0.5, 2.0]),
            ],
            &["variance [1, 0] is -0.5", "> 0"],
        );
        self.case(
            "zerovar.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], w),
                ("means", &[2, 2], mu),
                ("variances", &[2, 2], &[1.0, 0.0, 0.5, 2.0]),
            ],
            &["variance [0, 1] is 0"],
        );
        self.case(
            "wsum.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], &[0.4, 0.4]),
                ("means", &[2, 2], mu),
                ("variances", &[2, 2], var),
            ],
            &["weights sum to 0.8", "not 1"],
        );
        self.case(
            "nanmean.safetensors",
            Some("gmm"),
            &[
                ("weights", &[2], w),
                ("means", &[2, 2], &[0.0, f64::NAN, 3.0, 3.0]),
                ("variances", &[2, 2], var),
            ],
            &["tensor `means` has a non-finite value (NaN) at [0, 1]"],
        );
    }

    /// A `kind` no model has.
    fn unknown_kind_is_named(&self) {
        self.case(
            "kind.safetensors",
            Some("hmm"),
            &[("weights", &[2], Self::W)],
            &["unknown model kind \"hmm\""],
        );
    }

    /// Foreign and truncated files. Returns the good model the truncated
    /// one was cut from.
    fn foreign_and_truncated_files_are_named(&self) -> PathBuf {
        let junk = self.dir.join("junk.safetensors");
        std::fs::write(&junk, "definitely not a model").unwrap();
        encode_fails(
            &junk,
            self.bag,
            self.out,
            &["junk.safetensors", "not a safetensors model file"],
        );
        let good = self.dir.join("good.safetensors");
        good_model(&good);
        let bytes = std::fs::read(&good).unwrap();
        let cut = self.dir.join("cut.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 8]).unwrap();
        encode_fails(
            &cut,
            self.bag,
            self.out,
            &["cut.safetensors", "not a valid safetensors file"],
        );
        good
    }

    /// A bag file that is neither .npy nor .npz, with the good model `good`.
    fn bag_of_unknown_format_is_named(&self, good: &Path) {
        let txt = self.dir.join("bag.txt");
        std::fs::write(&txt, "0.5 0.5\n").unwrap();
        encode_fails(
            good,
            &txt,
            self.out,
            &["bag.txt", "neither an .npy array nor an .npz archive"],
        );
    }
}

#[test]
fn bad_encoder_options_are_usage_errors() {
    let (dir, m, out) = with_good_model();
    let bp = write64(dir.path(), "bag.npy", &Array2::from_elem((3, 2), 0.5));
    let run = |extra: &[&str], needles: &[&str]| {
        assert_error(&mut encode_cmd(&m, &bp, &out, extra), 2, needles, &out);
    };
    run(
        &["--parts", "mean,sigma"],
        &["unknown Fisher vector part `sigma`", "prior, mean, var"],
    );
    run(&["--parts", "mean,mean"], &["`mean` is given twice"]);
    run(&["--parts", ""], &["part"]);
    run(&["--power", "0"], &["--power", "got 0"]);
    run(&["--power", "-1"], &["--power"]);
    run(&["--power", "nan"], &["--power"]);
    run(
        &["--encoder", "vlad", "--parts", "mean"],
        &["--parts applies to the Fisher vector only"],
    );
    run(&["--encoder", "vlad", "--power", "0.3"], &["0.5", "0.3"]);
    run(&["--encoder", "tfidf"], &["tfidf"]);
}

#[test]
fn centroids_are_not_a_fisher_vector_model() {
    let dir = tmp();
    let cp = write64(dir.path(), "centroids.npy", &Array2::from_elem((2, 2), 0.5));
    let bp = write64(dir.path(), "bag.npy", &Array2::from_elem((3, 2), 0.5));
    let out = dir.path().join("o.npy");
    encode_fails(&cp, &bp, &out, &["centroids.npy", "--encoder vlad"]);
}

// ---------------------------------------------------------------------------
// mfa fit and MFA encoding

/// Two planted factor-analyser components in D = 5 with R = 2 factors.
fn planted_mfa(n: usize, seed: u64) -> Array2<f64> {
    let mut rng = Rng(seed);
    let mu = [[0.0, 0.0, 0.0, 0.0, 0.0], [8.0, -6.0, 4.0, 0.0, 5.0]];
    let lam = [
        [[2.0, 0.0], [1.0, 1.0], [0.0, 2.0], [0.5, -1.0], [0.0, 0.0]],
        [[0.0, 1.5], [2.0, 0.0], [1.0, -1.0], [0.0, 0.5], [1.0, 1.0]],
    ];
    let mut x = Array2::zeros((2 * n, 5));
    for i in 0..2 * n {
        let k = i % 2;
        let z = [rng.normal(), rng.normal()];
        for d in 0..5 {
            x[[i, d]] = mu[k][d] + lam[k][d][0] * z[0] + lam[k][d][1] * z[1] + 0.3 * rng.normal();
        }
    }
    x
}

/// Inverse and log-determinant of a small SPD matrix (Gauss–Jordan).
fn inv_logdet(a: &Array2<f64>) -> (Array2<f64>, f64) {
    let n = a.nrows();
    let mut m = a.clone();
    let mut inv = Array2::<f64>::eye(n);
    let mut logdet = 0.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| m[[i, c]].abs().total_cmp(&m[[j, c]].abs()))
            .unwrap();
        for j in 0..n {
            m.swap([c, j], [p, j]);
            inv.swap([c, j], [p, j]);
        }
        let piv = m[[c, c]];
        logdet += piv.abs().ln();
        for j in 0..n {
            m[[c, j]] /= piv;
            inv[[c, j]] /= piv;
        }
        for i in 0..n {
            if i != c {
                let f = m[[i, c]];
                for j in 0..n {
                    m[[i, j]] -= f * m[[c, j]];
                    inv[[i, j]] -= f * inv[[c, j]];
                }
            }
        }
    }
    (inv, logdet)
}

/// The MFA Fisher score blocks (mean, loading), Σ_i of the paper's equations
/// 14 and 15 divided by N, from dense covariances $S_k = Λ_kΛ_k^T + Ψ_k$:
/// G_μk = Σ h S⁻¹d, G_Λk = Σ h (S⁻¹d)(Λᵀ S⁻¹ d)ᵀ − n_k S⁻¹Λ_k.
fn mfa_reference(x: ArrayView2<'_, f64>, m: &fisherkit_io::MfaArrays<f64>) -> (Vec<f64>, Vec<f64>) {
    let (n, d) = x.dim();
    let (k, r) = (m.weights.len(), m.loadings.dim().2);
    let mut sinv = Vec::new();
    let mut logdet = Vec::new();
    for c in 0..k {
        let l = m.loadings.slice(s![c, .., ..]);
        let mut cov = l.dot(&l.t());
        let prow = if m.psi.nrows() == 1 { 0 } else { c };
        for j in 0..d {
            cov[[j, j]] += m.psi[[prow, j]];
        }
        let (i, ld) = inv_logdet(&cov);
        sinv.push(i);
        logdet.push(ld);
    }
    let mut gm = vec![0.0; k * d];
    let mut gl = vec![0.0; k * d * r];
    for i in 0..n {
        let lp: Vec<f64> = (0..k)
            .map(|c| {
                let dv = &x.row(i) - &m.means.row(c);
                let q = dv.dot(&sinv[c].dot(&dv));
                m.weights[c].ln()
                    - 0.5 * (d as f64 * (2.0 * std::f64::consts::PI).ln() + logdet[c] + q)
            })
            .collect();
        let mx = lp.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = lp.iter().map(|l| (l - mx).exp()).sum();
        for c in 0..k {
            let h = (lp[c] - mx).exp() / sum;
            let dv = &x.row(i) - &m.means.row(c);
            let rv = sinv[c].dot(&dv);
            let l = m.loadings.slice(s![c, .., ..]);
            let e = l.t().dot(&rv);
            let bt = sinv[c].dot(&l); // (D, R) = βᵀ
            for j in 0..d {
                gm[c * d + j] += h * rv[j];
                for f in 0..r {
                    gl[(c * d + j) * r + f] += h * (rv[j] * e[f] - bt[[j, f]]);
                }
            }
        }
    }
    let nf = n as f64;
    (
        gm.iter().map(|v| v / nf).collect(),
        gl.iter().map(|v| v / nf).collect(),
    )
}

fn fitted_mfa(dir: &Path, psi: &str) -> (Array2<f64>, PathBuf) {
    let x = planted_mfa(150, 11);
    let xp = write64(dir, "Xm.npy", &x);
    let model = dir.join(format!("mfa-{psi}.safetensors"));
    fk().args([
        "--quiet",
        "mfa",
        "fit",
        "-i",
        s(&xp),
        "--components",
        "2",
        "--factors",
        "2",
    ])
    .args([
        "--psi",
        psi,
        "--max-iter",
        "30",
        "--seed",
        "3",
        "-o",
        s(&model),
    ])
    .assert()
    .success();
    (x, model)
}

fn mfa_arrays(p: &Path) -> fisherkit_io::MfaArrays<f64> {
    match fisherkit_io::MfaModel::read(p).unwrap() {
        fisherkit_io::MfaModel::F64(m) => m,
        fisherkit_io::MfaModel::F32(m) => m.cast(),
    }
}

#[test]
fn mfa_fit_writes_the_contract_layout_reproducibly() {
    let dir = tmp();
    let (_, shared) = fitted_mfa(dir.path(), "shared");
    let (_, per) = fitted_mfa(dir.path(), "per-component");
    let a = mfa_arrays(&shared);
    assert_eq!(a.loadings.dim(), (2, 5, 2));
    assert_eq!(a.psi.dim(), (1, 5));
    assert_eq!(mfa_arrays(&per).psi.dim(), (2, 5));
    let (_, meta) = Model::read_with_metadata(&shared).unwrap();
    assert_eq!(meta["kind"], "mfa");
    assert_eq!(meta["psi"], "shared");
    // The planted means are recovered (in some order).
    let m0 = a.means.row(0).to_owned();
    let near = |v: &Array1<f64>, w: [f64; 5]| {
        v.iter()
            .zip(w)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt()
            < 0.6
    };
    let (z, o) = ([0.0; 5], [8.0, -6.0, 4.0, 0.0, 5.0]);
    let m1 = a.means.row(1).to_owned();
    assert!(
        (near(&m0, z) && near(&m1, o)) || (near(&m0, o) && near(&m1, z)),
        "{}",
        a.means
    );
    // Same seed, same bytes.
    let again = dir.path().join("again.safetensors");
    let xp = dir.path().join("Xm.npy");
    fk().args([
        "--quiet",
        "--threads",
        "2",
        "mfa",
        "fit",
        "-i",
        s(&xp),
        "-k",
        "2",
        "-r",
        "2",
    ])
    .args(["--max-iter", "30", "--seed", "3", "-o", s(&again)])
    .assert()
    .success();
    assert_eq!(
        std::fs::read(&shared).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
fn encode_mfa_matches_equations_14_and_15() {
    let dir = tmp();
    for psi in ["shared", "per-component"] {
        let (x, model) = fitted_mfa(dir.path(), psi);
        let m = mfa_arrays(&model);
        let bag = x.slice(s![..41, ..]).to_owned();
        let bp = write64(dir.path(), "bag.npy", &bag);
        let (gm, gl) = mfa_reference(bag.view(), &m);
        let out = dir.path().join("raw.npy");
        let raw = ["--parts", "mean,loading", "--power", "1", "--no-l2"];
        encode_ok(&model, &bp, &out, &raw);
        let got = read64(&out);
        assert_eq!(got.dim(), (1, 2 * 5 + 2 * 5 * 2));
        let want = [gm.clone(), gl.clone()].concat();
        assert_close(got.row(0).as_slice().unwrap(), &want, 1e-7);
        // Default: the loading block, signed square root and L2.
        let out2 = dir.path().join("fs.npy");
        encode_ok(&model, &bp, &out2, &[]);
        assert_close(
            read64(&out2).row(0).as_slice().unwrap(),
            &improved(&gl),
            1e-7,
        );
    }
}

#[test]
fn mfa_errors() {
    let dir = tmp();
    let xp = write64(dir.path(), "X.npy", &planted_mfa(10, 12)); // 20 rows, D = 5
    let out = dir.path().join("m.safetensors");
    let fit = |k: &str, r: &str| {
        let mut c = fk();
        c.args(["mfa", "fit", "-i", s(&xp), "-k", k, "-r", r, "-o", s(&out)]);
        c
    };
    assert_error(
        &mut fit("2", "5"),
        1,
        &["X.npy", "0 < R < D = 5", "R = 5"],
        &out,
    );
    assert_error(
        &mut fit("21", "2"),
        1,
        &["X.npy", "21 components", "20"],
        &out,
    );
    assert_error(&mut fit("0", "2"), 2, &["n_components"], &out);
    assert_error(&mut fit("2", "0"), 2, &["n_factors"], &out);
    assert_error(
        fk().args([
            "mfa",
            "fit",
            "-i",
            s(&xp),
            "-k",
            "2",
            "-r",
            "1",
            "--psi",
            "diag",
            "-o",
            s(&out),
        ]),
        2,
        &["diag"],
        &out,
    );
    // Encoder options that do not apply to an MFA model.
    let (_, model) = fitted_mfa(dir.path(), "shared");
    let bp = write64(dir.path(), "bag.npy", &planted_mfa(3, 13));
    let o = dir.path().join("o.npy");
    let enc = |extra: &[&str], code: i32, needles: &[&str]| {
        assert_error(&mut encode_cmd(&model, &bp, &o, extra), code, needles, &o);
    };
    enc(
        &["--parts", "mean,var"],
        2,
        &["--parts", "unknown MFA Fisher score part `var`"],
    );
    enc(&["--fast"], 2, &["--fast", "MFA"]);
    enc(&["--vlfeat-skips"], 2, &["--vlfeat-skips"]);
    enc(&["--encoder", "vlad"], 2, &["is an MFA model"]);
    let wide = write64(dir.path(), "wide.npy", &Array2::from_elem((3, 4), 0.5));
    encode_fails(&model, &wide, &o, &["wide.npy", "4 columns", "dimension 5"]);
}

#[test]
fn help_shows_examples() {
    let o = fk().arg("--help").output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Examples:") && text.contains("fisherkit gmm fit"),
        "{text}"
    );
    for sub in [
        &["gmm", "fit"][..],
        &["kmeans", "fit"],
        &["mfa", "fit"],
        &["encode"],
    ] {
        let o = fk().args(sub).arg("--help").output().unwrap();
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Example"), "{sub:?}: {text}");
    }
}
