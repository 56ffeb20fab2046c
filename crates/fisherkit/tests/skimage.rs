//! The Fisher vector against scikit-image's `skimage.feature.fisher_vector`
//! (exact posteriors from scikit-learn's `GaussianMixture.predict_proba`),
//! on the same diagonal GMM, in f64.
//!
//! Needs `python3` with numpy, scikit-learn and scikit-image. When they are
//! missing the test is skipped with a message, unless `FISHERKIT_REQUIRE_PEERS=1`.

use fisherkit::encode::{FisherVector, FisherVectorParams, FvPart};
use fisherkit::gmm::DiagGmm;
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;
use std::process::{Command, Stdio};

/// Reads models and their bags from stdin until the end, prints for every
/// bag the plain and the improved scikit-image Fisher vector, one line each.
const SCRIPT: &str = r#"
import sys
import numpy as np
from sklearn.mixture import GaussianMixture
from skimage.feature import fisher_vector

tok = sys.stdin.read().split()
pos = 0
def take(n):
    global pos
    v = np.array(tok[pos:pos + n], dtype=np.float64)
    pos += n
    return v
out = []
while pos < len(tok):
    k, d, nbags = (int(v) for v in take(3))
    gmm = GaussianMixture(n_components=k, covariance_type="diag")
    gmm.weights_ = take(k)
    gmm.means_ = take(k * d).reshape(k, d)
    gmm.covariances_ = take(k * d).reshape(k, d)
    gmm.precisions_cholesky_ = 1.0 / np.sqrt(gmm.covariances_)
    gmm.precisions_ = 1.0 / gmm.covariances_
    gmm.converged_ = True
    gmm.n_iter_ = 1
    gmm.lower_bound_ = 0.0
    gmm.n_features_in_ = d
    for _ in range(nbags):
        n = int(take(1)[0])
        x = take(n * d).reshape(n, d)
        for improved in (False, True):
            fv = fisher_vector(x, gmm, improved=improved, alpha=0.5)
            out.append(" ".join(repr(float(v)) for v in fv))
print("\n".join(out))
"#;

fn peers_required() -> bool {
    std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

type Case = (DiagGmm<f64>, Vec<Array2<f64>>);
/// scikit-image's (plain, improved) vectors of one bag.
type SkFv = (Vec<f64>, Vec<f64>);

/// scikit-image's (plain, improved) Fisher vectors of every bag of every case,
/// in one python3 run; `None` (after printing why) if python3, numpy,
/// scikit-learn or scikit-image is missing — a panic instead with
/// `FISHERKIT_REQUIRE_PEERS=1`.
fn skimage_fv(cases: &[Case]) -> Option<Vec<Vec<SkFv>>> {
    let mut input = String::new();
    let mut push = |v: &mut dyn Iterator<Item = f64>| {
        for x in v {
            input += &format!("{x:e} ");
        }
        input.push('\n');
    };
    for (g, bags) in cases {
        let head = [g.n_components(), g.dim(), bags.len()];
        push(&mut head.iter().map(|&v| v as f64));
        push(&mut g.weights().iter().copied());
        push(&mut g.means().iter().copied());
        push(&mut g.variances().iter().copied());
        for b in bags {
            push(&mut std::iter::once(b.nrows() as f64));
            push(&mut b.iter().copied());
        }
    }
    let missing = |why: String| {
        assert!(!peers_required(), "FISHERKIT_REQUIRE_PEERS=1 but {why}");
        eprintln!("skipping the scikit-image comparison: {why}");
        None
    };
    let child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return missing(format!("python3 cannot be run ({e})")),
    };
    // A script that fails at import closes its stdin early: ignore that error.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stderr.contains("ModuleNotFoundError") || stderr.contains("ImportError") {
            return missing(format!(
                "numpy, scikit-learn or scikit-image is not importable: {}",
                stderr.lines().last().unwrap_or("")
            ));
        }
        panic!("scikit-image script failed: {stderr}");
    }
    let mut lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect::<Vec<f64>>()
        })
        .collect::<Vec<_>>()
        .into_iter();
    let res = cases
        .iter()
        .map(|(_, bags)| {
            bags.iter()
                .map(|_| (lines.next().unwrap(), lines.next().unwrap()))
                .collect()
        })
        .collect();
    assert!(lines.next().is_none(), "scikit-image printed extra lines");
    Some(res)
}

fn random_case(
    seed: u64,
    k: usize,
    d: usize,
    n: usize,
    spread: f64,
) -> (DiagGmm<f64>, Vec<Array2<f64>>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
    let s: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= s);
    let mu = Array2::from_shape_fn((k, d), |_| rng.random_range(-spread..spread));
    let var = Array2::from_shape_fn((k, d), |_| rng.random_range(0.3..2.0));
    let g = DiagGmm::new(Array1::from(w), mu, var).unwrap();
    let bags = (0..3)
        .map(|b| {
            let rows = n + 7 * b;
            Array2::from_shape_fn((rows, d), |_| rng.random_range(-spread - 1.0..spread + 1.0))
        })
        .collect();
    (g, bags)
}

/// Our [prior, mean, var] with the var block negated (scikit-image's sign).
fn ours(g: &DiagGmm<f64>, bag: &Array2<f64>, norm: Normalization) -> Vec<f64> {
    let fv = FisherVector::new(
        g,
        FisherVectorParams {
            parts: FvPart::ALL.to_vec(),
            normalization: norm,
            fast: false,
            vlfeat_skips: false,
        },
    )
    .unwrap();
    let mut v = fv.encode(bag.view()).unwrap().to_vec();
    let kd = g.n_components() * g.dim();
    let k = g.n_components();
    v[k + kd..].iter_mut().for_each(|x| *x = -*x);
    v
}

/// Checks every block entry-wise, relative to the block's largest entry.
fn assert_blocks_close(got: &[f64], want: &[f64], k: usize, kd: usize, tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (name, r) in [
        ("prior", 0..k),
        ("mean", k..k + kd),
        ("var", k + kd..k + 2 * kd),
    ] {
        let scale = want[r.clone()].iter().fold(0f64, |m, v| m.max(v.abs()));
        assert!(
            scale > 0.0,
            "{what}: scikit-image's {name} block is all zero"
        );
        for i in r {
            assert!(
                (got[i] - want[i]).abs() <= tol * scale,
                "{what}, {name} block, entry {i}: ours {} vs scikit-image {}",
                got[i],
                want[i]
            );
        }
    }
}

#[test]
fn fisher_vector_matches_scikit_image() {
    // Small and overlapping, larger and sparse posteriors, far-off data.
    let cases: Vec<Case> = [
        (1, 4, 3, 50, 1.5),
        (2, 16, 64, 300, 2.0),
        (3, 8, 20, 100, 8.0),
    ]
    .iter()
    .map(|&(seed, k, d, n, spread)| random_case(seed, k, d, n, spread))
    .collect();
    let Some(sk_all) = skimage_fv(&cases) else {
        return;
    };
    for ((g, bags), sk) in cases.iter().zip(&sk_all) {
        let (k, d) = (g.n_components(), g.dim());
        let kd = k * d;
        for (b, (plain, improved)) in bags.iter().zip(sk) {
            let what = format!("K={k}, D={d}, N={}", b.nrows());
            let got = ours(g, b, Normalization::NONE);
            assert_blocks_close(&got, plain, k, kd, 1e-8, &what);
            let got = ours(g, b, Normalization::default());
            assert_blocks_close(&got, improved, k, kd, 1e-8, &format!("{what}, improved"));
        }
    }
}
