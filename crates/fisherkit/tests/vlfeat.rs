//! The Fisher vector and VLAD encoders against VLFeat 0.9.21 itself
//! (`vl_fisher_encode`, `vl_vlad_encode` from `libvl`), f32 data, same model.
//!
//! Links `-lvl`, so it is compiled only with the `vlfeat-tests` feature:
//! `cargo test -p fisherkit --features vlfeat-tests --test vlfeat`.
#![cfg(feature = "vlfeat-tests")]

use fisherkit::encode::{FisherVector, FisherVectorParams, FvPart, Vlad, VladParams};
use fisherkit::gmm::DiagGmm;
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use std::os::raw::{c_int, c_void};

/// `vl_type` value of `float` (vl/generic.h).
const VL_TYPE_FLOAT: u32 = 1;
// vl/fisher.h
const VL_FISHER_FLAG_SQUARE_ROOT: c_int = 1;
const VL_FISHER_FLAG_NORMALIZED: c_int = 2;
const VL_FISHER_FLAG_IMPROVED: c_int = VL_FISHER_FLAG_SQUARE_ROOT | VL_FISHER_FLAG_NORMALIZED;
const VL_FISHER_FLAG_FAST: c_int = 4;
// vl/vlad.h
const VL_VLAD_FLAG_NORMALIZE_COMPONENTS: c_int = 1;
const VL_VLAD_FLAG_SQUARE_ROOT: c_int = 2;
const VL_VLAD_FLAG_UNNORMALIZED: c_int = 4;
const VL_VLAD_FLAG_NORMALIZE_MASS: c_int = 8;

// `vl_size` is a 64-bit unsigned integer on LP64 hosts (vl/host.h).
#[link(name = "vl")]
extern "C" {
    fn vl_fisher_encode(
        enc: *mut c_void,
        data_type: u32,
        means: *const c_void,
        dimension: u64,
        num_clusters: u64,
        covariances: *const c_void,
        priors: *const c_void,
        data: *const c_void,
        num_data: u64,
        flags: c_int,
    ) -> u64;
    fn vl_vlad_encode(
        enc: *mut c_void,
        data_type: u32,
        means: *const c_void,
        dimension: u64,
        num_clusters: u64,
        data: *const c_void,
        num_data: u64,
        assignments: *const c_void,
        flags: c_int,
    );
    fn vl_set_num_threads(n: u64);
}

/// VLFeat's Fisher vector of `x` (N, D) under `g`: (2·K·D), blocks [u, v].
fn vl_fisher(g: &DiagGmm<f32>, x: &Array2<f32>, flags: c_int) -> Vec<f32> {
    let (k, d) = (g.n_components(), g.dim());
    let means = g.means().as_standard_layout().into_owned();
    let vars = g.variances().as_standard_layout().into_owned();
    let w = g.weights().to_owned();
    let x = x.as_standard_layout().into_owned();
    let mut enc = vec![0f32; 2 * k * d];
    // SAFETY: every pointer refers to a live, contiguous f32 buffer of the
    // size vl_fisher_encode reads (K·D means and variances, K priors, N·D
    // data) or writes (2·K·D), as documented in vl/fisher.h.
    unsafe {
        vl_set_num_threads(1);
        vl_fisher_encode(
            enc.as_mut_ptr().cast(),
            VL_TYPE_FLOAT,
            means.as_ptr().cast(),
            d as u64,
            k as u64,
            vars.as_ptr().cast(),
            w.as_ptr().cast(),
            x.as_ptr().cast(),
            x.nrows() as u64,
            flags,
        );
    }
    enc
}

/// VLFeat's VLAD of `x` (N, D) on `means` (K, D) with `assign` (N, K).
fn vl_vlad(means: &Array2<f32>, x: &Array2<f32>, assign: &Array2<f32>, flags: c_int) -> Vec<f32> {
    let (k, d) = means.dim();
    let (means, x, assign) = (
        means.as_standard_layout().into_owned(),
        x.as_standard_layout().into_owned(),
        assign.as_standard_layout().into_owned(),
    );
    assert_eq!(assign.dim(), (x.nrows(), k));
    let mut enc = vec![0f32; k * d];
    // SAFETY: contiguous f32 buffers of the sizes vl_vlad_encode reads (K·D
    // means, N·D data, N·K assignments) and writes (K·D), per vl/vlad.h.
    unsafe {
        vl_set_num_threads(1);
        vl_vlad_encode(
            enc.as_mut_ptr().cast(),
            VL_TYPE_FLOAT,
            means.as_ptr().cast(),
            d as u64,
            k as u64,
            x.as_ptr().cast(),
            x.nrows() as u64,
            assign.as_ptr().cast(),
            flags,
        );
    }
    enc
}

/// A random GMM (seeded): means N(0, s²), variances in [0.3, 1.5]·s², and
/// optionally one component with a prior below VLFeat's 1e-6.
fn random_gmm(seed: u64, k: usize, d: usize, s: f32, tiny_prior: bool) -> DiagGmm<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.5..1.5)).collect();
    if tiny_prior {
        w[k - 1] = 0.0;
    }
    let t: f64 = w.iter().sum();
    let mut w: Vec<f32> = w.iter().map(|v| (v / t) as f32).collect();
    if tiny_prior {
        w[k - 1] = 4e-7;
        w[0] -= 4e-7;
    }
    let means = Array2::from_shape_fn((k, d), |_| {
        let z: f32 = StandardNormal.sample(&mut rng);
        s * z
    });
    let vars = Array2::from_shape_fn((k, d), |_| s * s * rng.random_range(0.3f32..1.5));
    DiagGmm::new(Array1::from(w), means, vars).unwrap()
}

/// N rows sampled from `g` (its last component too), shifted by `offset`.
fn sample(seed: u64, g: &DiagGmm<f32>, n: usize, spread: f32) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (k, d) = (g.n_components(), g.dim());
    let mut x = Array2::zeros((n, d));
    for mut r in x.rows_mut() {
        let c = rng.random_range(0..k);
        for (j, v) in r.iter_mut().enumerate() {
            let z: f32 = StandardNormal.sample(&mut rng);
            *v = g.means()[[c, j]] + spread * g.variances()[[c, j]].sqrt() * z;
        }
    }
    x
}

/// Largest |a − b| over the largest |b|.
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
    let err = a
        .iter()
        .zip(b)
        .fold(0f64, |m, (x, y)| m.max((x - y).abs() as f64));
    err / scale.max(1e-30)
}

fn ours(
    g: &DiagGmm<f32>,
    x: &Array2<f32>,
    norm: Normalization,
    fast: bool,
    skips: bool,
) -> Vec<f32> {
    FisherVector::new(
        g,
        FisherVectorParams {
            parts: vec![FvPart::Mean, FvPart::Var],
            normalization: norm,
            fast,
            vlfeat_skips: skips,
        },
    )
    .unwrap()
    .encode(x.view())
    .unwrap()
    .to_vec()
}

const IMPROVED: Normalization = Normalization {
    power: 0.5,
    l2: true,
};

/// (D, K, N, scale of the data, spread of the samples, prior < 1e-6?)
const CASES: [(usize, usize, usize, f32, f32, bool); 5] = [
    (2, 3, 50, 1.0, 1.0, false),
    (16, 8, 300, 1.0, 1.5, false),
    (64, 32, 500, 3.0, 1.0, true),
    (128, 16, 200, 0.5, 2.0, false),
    (500, 12, 100, 1.0, 1.0, true),
];

#[test]
fn fisher_matches_vlfeat_with_its_skips() {
    for (ci, &(d, k, n, s, spread, tiny)) in CASES.iter().enumerate() {
        let g = random_gmm(ci as u64, k, d, s, tiny);
        let x = sample(100 + ci as u64, &g, n, spread);
        for (flags, norm) in [
            (0, Normalization::NONE),
            (VL_FISHER_FLAG_IMPROVED, IMPROVED),
            (
                VL_FISHER_FLAG_SQUARE_ROOT,
                Normalization {
                    power: 0.5,
                    l2: false,
                },
            ),
            (
                VL_FISHER_FLAG_NORMALIZED,
                Normalization {
                    power: 1.0,
                    l2: true,
                },
            ),
        ] {
            for fast in [false, true] {
                let f = flags | if fast { VL_FISHER_FLAG_FAST } else { 0 };
                let want = vl_fisher(&g, &x, f);
                let got = ours(&g, &x, norm, fast, true);
                let e = rel_err(&got, &want);
                // At D = 500 VLFeat's own f32 posteriors are off by ~1e-4
                // (measured against an f64 encoding: VLFeat 1.3e-4, ours 3e-6).
                let tol = if d >= 500 { 3e-4 } else { 3e-5 };
                assert!(
                    e < tol,
                    "case {ci} (D={d}, K={k}) flags {f}: relative error {e:e}"
                );
                if tiny {
                    // The tiny component's blocks are exactly zero in both.
                    let kd = k * d;
                    for blk in [(k - 1) * d..kd, kd + (k - 1) * d..2 * kd] {
                        assert!(got[blk.clone()].iter().all(|&v| v == 0.0));
                        assert!(want[blk].iter().all(|&v| v == 0.0));
                    }
                }
            }
        }
    }
}

#[test]
fn exact_fisher_is_close_to_vlfeat() {
    // Without the skips our posteriors are exact: the difference from VLFeat
    // is only the posteriors VLFeat drops (< 1e-6 each) and its tiny prior.
    for (ci, &(d, k, n, s, spread, tiny)) in CASES.iter().enumerate() {
        if tiny {
            continue;
        }
        let g = random_gmm(ci as u64, k, d, s, false);
        let x = sample(100 + ci as u64, &g, n, spread);
        let want = vl_fisher(&g, &x, 0);
        let got = ours(&g, &x, Normalization::NONE, false, false);
        let e = rel_err(&got, &want);
        assert!(e < 1e-4, "case {ci}: relative error {e:e}");
        let want = vl_fisher(&g, &x, VL_FISHER_FLAG_IMPROVED);
        let got = ours(&g, &x, IMPROVED, false, false);
        let e = rel_err(&got, &want);
        assert!(e < 1e-4, "case {ci} improved: relative error {e:e}");
    }
}

/// Nearest-centre assignments (N, K) by explicit distances in f64.
fn nearest_assign(means: &Array2<f32>, x: &Array2<f32>) -> Array2<f32> {
    let k = means.nrows();
    let mut a = Array2::zeros((x.nrows(), k));
    for (i, r) in x.outer_iter().enumerate() {
        let dist = |c: usize| {
            r.iter()
                .zip(means.row(c))
                .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                .sum::<f64>()
        };
        let best = (0..k).fold(0, |b, c| if dist(c) < dist(b) { c } else { b });
        a[[i, best]] = 1.0;
    }
    a
}

#[test]
fn vlad_matches_vlfeat_for_every_flag() {
    for (ci, &(d, k, n, s, spread, _)) in CASES.iter().enumerate() {
        let g = random_gmm(10 + ci as u64, k, d, s, false);
        let x = sample(200 + ci as u64, &g, n, spread);
        let means = g.means().to_owned();
        let hard = nearest_assign(&means, &x);
        let soft = g.predict_proba(x.view()).unwrap();
        for bits in 0..16 {
            let p = VladParams {
                normalize_components: bits & 1 != 0,
                square_root: bits & 2 != 0,
                unnormalized: bits & 4 != 0,
                normalize_mass: bits & 8 != 0,
                hard_assignment: true,
            };
            let flags = [
                VL_VLAD_FLAG_NORMALIZE_COMPONENTS,
                VL_VLAD_FLAG_SQUARE_ROOT,
                VL_VLAD_FLAG_UNNORMALIZED,
                VL_VLAD_FLAG_NORMALIZE_MASS,
            ]
            .iter()
            .enumerate()
            .filter(|(b, _)| bits & (1 << b) != 0)
            .fold(0, |f, (_, v)| f | v);
            let want = vl_vlad(&means, &x, &hard, flags);
            let got = Vlad::new(means.clone(), p.clone())
                .unwrap()
                .encode(x.view())
                .unwrap();
            let e = rel_err(got.as_slice().unwrap(), &want);
            assert!(
                e < 1e-4,
                "case {ci} hard flags {flags}: relative error {e:e}"
            );
            // Soft assignment by the GMM posteriors.
            let want = vl_vlad(&means, &x, &soft, flags);
            let p = VladParams {
                hard_assignment: false,
                ..p
            };
            let got = Vlad::from_gmm(&g, p).unwrap().encode(x.view()).unwrap();
            let e = rel_err(got.as_slice().unwrap(), &want);
            assert!(
                e < 1e-4,
                "case {ci} soft flags {flags}: relative error {e:e}"
            );
        }
    }
}
