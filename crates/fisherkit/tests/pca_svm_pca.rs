//! PCA against numpy's SVD, planted low-rank structure and direct formulas.

#[path = "pca_svm_common/mod.rs"]
mod common;

use fisherkit::pca::{PcaError, PcaParams};
use ndarray::{s, Array1, Array2, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

fn gaussian(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_simple_fn((n, d), || StandardNormal.sample(&mut rng))
}

/// Correlated data with distinct variances and a mean far from 0.
fn correlated(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let z = gaussian(n, d, seed);
    let mix = gaussian(d, d, seed + 1);
    let scales = Array1::from_shape_fn(d, |j| 3.0 * 0.8f64.powi(j as i32));
    let mut x = (z * &scales).dot(&mix);
    x += &Array1::from_shape_fn(d, |j| 10.0 + j as f64);
    x
}

#[test]
fn matches_numpy_svd() {
    let (n, d, k) = (300, 20, 12);
    let x = correlated(n, d, 7);
    let pca = PcaParams::new(k).fit(x.view()).unwrap();
    let mut input = String::new();
    common::write_matrix(&mut input, "x", x.view());
    let body = format!(
        r#"
x = read("x")
xc = x - x.mean(axis=0)
u, s, vt = np.linalg.svd(xc, full_matrices=False)
vt = vt[:{k}]
# the crate's convention: largest-|value| entry of each component positive
idx = np.argmax(np.abs(vt), axis=1)
vt *= np.sign(vt[np.arange(vt.shape[0]), idx])[:, None]
emit("components", vt)
emit("variance", s[:{k}] ** 2 / (x.shape[0] - 1))
emit("ratio", (s ** 2 / (s ** 2).sum())[:{k}])
emit("mean", x.mean(axis=0))
emit("proj", xc @ vt.T)
"#
    );
    let Some(peer) = common::run_python("", &body, &input) else {
        return;
    };
    let var = pca.explained_variance();
    for (j, (a, b)) in var.iter().zip(peer["variance"].iter()).enumerate() {
        assert!((a - b).abs() <= 1e-8 * b, "variance {j}: {a} vs numpy {b}");
    }
    for (a, b) in pca
        .explained_variance_ratio()
        .iter()
        .zip(peer["ratio"].iter())
    {
        assert!((a - b).abs() <= 1e-8 * b);
    }
    let diff = (&pca.components() - &peer["components"]).mapv(f64::abs);
    let max = diff.iter().cloned().fold(0.0, f64::max);
    assert!(max < 1e-8, "components differ from numpy by {max}");
    let dm = (&pca.mean() - &peer["mean"].row(0)).mapv(f64::abs);
    assert!(dm.iter().all(|v| *v < 1e-12));
    let z = pca.transform(x.view()).unwrap();
    let dz = (&z - &peer["proj"]).mapv(f64::abs);
    let maxz = dz.iter().cloned().fold(0.0, f64::max);
    assert!(maxz < 1e-8, "projections differ from numpy by {maxz}");
}

#[test]
fn planted_low_rank_is_recovered() {
    // X = Z B + m exactly, rank r: r components carry all the variance and
    // reconstruct X; they span the row space of B.
    let (n, d, r) = (500, 30, 4);
    let z = gaussian(n, r, 1);
    let b = gaussian(r, d, 2);
    let m = Array1::from_shape_fn(d, |j| j as f64 - 5.0);
    let x = z.dot(&b) + &m;
    let pca = PcaParams::new(r + 2).fit(x.view()).unwrap();
    let ratio = pca.explained_variance_ratio();
    assert!((ratio.slice(s![..r]).sum() - 1.0).abs() < 1e-10);
    assert!(ratio.slice(s![r..]).iter().all(|v| v.abs() < 1e-10));
    let w = pca.components().slice(s![..r, ..]).to_owned();
    // orthonormal rows
    let gram = w.dot(&w.t());
    for i in 0..r {
        for j in 0..r {
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((gram[[i, j]] - want).abs() < 1e-12);
        }
    }
    // B's rows lie in the span: ||B - B W^T W|| ≈ 0
    let resid = &b - &b.dot(&w.t()).dot(&w);
    assert!(resid.iter().all(|v| v.abs() < 1e-9), "B not in the span");
    // reconstruction
    let zt = PcaParams::new(r).fit(x.view()).unwrap();
    let proj = zt.transform(x.view()).unwrap();
    let rec = proj.dot(&zt.components()) + zt.mean();
    assert!((&rec - &x).iter().all(|v| v.abs() < 1e-9));
    // projected data have the explained variances and are uncorrelated
    let pc = &proj - &proj.mean_axis(Axis(0)).unwrap();
    let cov = pc.t().dot(&pc) / (n - 1) as f64;
    for i in 0..r {
        for j in 0..r {
            let want = if i == j {
                zt.explained_variance()[i]
            } else {
                0.0
            };
            assert!((cov[[i, j]] - want).abs() < 1e-9 * zt.explained_variance()[0]);
        }
    }
}

#[test]
fn covariance_across_chunks_and_threads_matches_direct_formula() {
    // 9000 rows cross both the 1024-row chunks and the 8-chunk rounds.
    let x = correlated(9000, 6, 3);
    let n = x.nrows() as f64;
    let mean = x.mean_axis(Axis(0)).unwrap();
    let xc = &x - &mean;
    let cov = xc.t().dot(&xc) / (n - 1.0);
    let total: f64 = cov.diag().sum();
    let fit = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| PcaParams::new(6).fit(x.view()).unwrap())
    };
    let p1 = fit(1);
    let p2 = fit(2);
    assert_eq!(p1, p2, "result depends on the number of threads");
    // λ_j = w_j^T S w_j and S w_j = λ_j w_j
    for (j, w) in p1.components().outer_iter().enumerate() {
        let sw = cov.dot(&w);
        let lam = p1.explained_variance()[j];
        assert!((w.dot(&sw) - lam).abs() < 1e-10 * total);
        assert!((&sw - &(&w * lam)).iter().all(|v| v.abs() < 1e-10 * total));
    }
    assert!((p1.explained_variance().sum() - total).abs() < 1e-10 * total);
}

#[test]
fn whitening_gives_unit_variance() {
    let x = correlated(400, 10, 5);
    let pca = PcaParams::new(5).whiten(true).fit(x.view()).unwrap();
    let z = pca.transform(x.view()).unwrap();
    let zc = &z - &z.mean_axis(Axis(0)).unwrap();
    let cov = zc.t().dot(&zc) / 399.0;
    for i in 0..5 {
        for j in 0..5 {
            let want = if i == j { 1.0 } else { 0.0 };
            assert!(
                (cov[[i, j]] - want).abs() < 1e-9,
                "cov[{i},{j}] = {}",
                cov[[i, j]]
            );
        }
    }
    // constant data: zero variance, whitened output 0, never NaN
    let c = Array2::<f64>::from_elem((10, 3), 2.5);
    let pc = PcaParams::new(2).whiten(true).fit(c.view()).unwrap();
    assert!(pc.transform(c.view()).unwrap().iter().all(|v| *v == 0.0));
}

#[test]
fn from_parts_round_trips() {
    let x = correlated(100, 6, 12);
    for whiten in [false, true] {
        let pca = PcaParams::new(3).whiten(whiten).fit(x.view()).unwrap();
        let back = fisherkit::pca::Pca::from_parts(
            pca.mean().to_owned(),
            pca.components().to_owned(),
            pca.explained_variance().to_owned(),
            whiten,
        )
        .unwrap();
        assert_eq!(
            back.transform(x.view()).unwrap(),
            pca.transform(x.view()).unwrap()
        );
    }
    let bad = fisherkit::pca::Pca::from_parts(
        Array1::<f64>::zeros(6),
        Array2::zeros((2, 6)),
        Array1::from(vec![1.0, -1.0]),
        false,
    );
    assert!(matches!(
        bad,
        Err(PcaError::InvalidVariance { index: 1, .. })
    ));
    let bad = fisherkit::pca::Pca::from_parts(
        Array1::<f64>::zeros(5),
        Array2::zeros((2, 6)),
        Array1::from(vec![1.0, 1.0]),
        false,
    );
    assert!(bad.is_err());
}

#[test]
fn uncentred_uses_second_moment() {
    let x = correlated(200, 5, 9);
    let pca = PcaParams::new(1).center(false).fit(x.view()).unwrap();
    assert!(pca.mean().iter().all(|v| *v == 0.0));
    let m = x.t().dot(&x) / 200.0;
    let w = pca.components().row(0).to_owned();
    let lam = pca.explained_variance()[0];
    assert!((&m.dot(&w) - &(&w * lam))
        .iter()
        .all(|v| v.abs() < 1e-9 * lam));
}

#[test]
fn f32_agrees_with_f64() {
    let x = correlated(1000, 16, 11);
    let xf = x.mapv(|v| v as f32);
    let p64 = PcaParams::new(4).fit(x.view()).unwrap();
    let p32 = PcaParams::new(4).fit(xf.view()).unwrap();
    for (a, b) in p32
        .explained_variance()
        .iter()
        .zip(p64.explained_variance())
    {
        assert!((a - b).abs() < 1e-5 * b);
    }
    let z64 = p64.transform(x.view()).unwrap();
    let z32 = p32.transform(xf.view()).unwrap();
    let scale = z64.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (a, b) in z32.iter().zip(&z64) {
        assert!((*a as f64 - b).abs() < 1e-3 * scale);
    }
}

#[test]
fn errors_name_the_problem() {
    let x = gaussian(10, 4, 0);
    let e = PcaParams::new(5).fit(x.view()).unwrap_err();
    assert_eq!(
        e,
        PcaError::TooManyComponents {
            requested: 5,
            max: 4
        }
    );
    assert!(e.to_string().contains("min(n_samples, dim) = 4"));
    assert_eq!(PcaParams::new(500).n_components_clamped(10, 4), 4);
    assert_eq!(PcaParams::new(500).n_components_clamped(10_000, 1000), 500);
    let mut bad = x.clone();
    bad[[3, 2]] = f64::NAN;
    let e = PcaParams::new(2).fit(bad.view()).unwrap_err();
    assert!(e.to_string().contains("row 3, column 2"), "{e}");
    let empty = Array2::<f64>::zeros((0, 4));
    assert!(matches!(
        PcaParams::new(1).fit(empty.view()),
        Err(PcaError::Data(_))
    ));
    let pca = PcaParams::new(2).fit(x.view()).unwrap();
    let e = pca.transform(gaussian(3, 5, 1).view()).unwrap_err();
    assert!(e.to_string().contains("5 columns"), "{e}");
    assert!(pca.transform(bad.view()).is_err());
}

#[test]
fn wide_data_across_column_blocks() {
    // D = 600 spans three 256-column blocks of the triangular scatter product.
    let (n, d) = (1500, 600);
    let x = gaussian(n, d, 17) * Array1::from_shape_fn(d, |j| 1.0 + (j % 7) as f64);
    let mean = x.mean_axis(Axis(0)).unwrap();
    let xc = &x - &mean;
    let cov = xc.t().dot(&xc) / (n - 1) as f64;
    let total: f64 = cov.diag().sum();
    let pca = PcaParams::new(20).fit(x.view()).unwrap();
    for (j, w) in pca.components().outer_iter().enumerate() {
        let sw = cov.dot(&w);
        let lam = pca.explained_variance()[j];
        let r = (&sw - &(&w * lam))
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(r < 1e-10 * total, "component {j}: residual {r}");
    }
    // the top eigenvalue is the Rayleigh-quotient maximum: no better direction
    let top = pca.explained_variance()[0];
    for t in 0..d {
        assert!(cov[[t, t]] <= top * (1.0 + 1e-12));
    }
    // and the 20 kept pairs are the 20 largest of all 600: numpy's symmetric
    // eigensolver (LAPACK) on the covariance computed from the same rows
    let mut input = String::new();
    common::write_matrix(&mut input, "x", x.view());
    let body = r#"
x = read("x")
xc = x - x.mean(axis=0)
ev = np.linalg.eigvalsh(xc.T @ xc / (x.shape[0] - 1))[::-1]
emit("top", ev[:20]); emit("next", ev[20:21])
"#;
    let Some(peer) = common::run_python("", body, &input) else {
        return;
    };
    for (j, (a, b)) in pca
        .explained_variance()
        .iter()
        .zip(peer["top"].iter())
        .enumerate()
    {
        assert!(
            (a - b).abs() <= 1e-9 * top,
            "eigenvalue {j}: {a} vs LAPACK {b}"
        );
    }
    let last = pca.explained_variance()[19];
    assert!(
        last >= peer["next"][[0, 0]],
        "a larger eigenvalue was left out"
    );
}
