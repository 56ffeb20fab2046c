//! Determinism (issue #6, item 4): the same seed gives the same bits — GMM
//! fit, MFA fit, Fisher vectors and MFA Fisher scores of a batch — and the
//! results do not depend on the number of rayon threads.
//!
//! Across thread counts the library is designed to be bit-identical, not
//! merely close: row reductions split the rows into a fixed set of leaves
//! whatever the pool size and merge them in a fixed tree
//! (`gmm::reduce`), and every encoding is computed by one task. These tests
//! assert that strongest property (bit equality) for 1, 2 and 3 threads; the
//! 1e-6 relative agreement the issue asks for follows.

use fisherkit::encode::{
    FisherVector, FisherVectorParams, MfaFisherScore, MfaFisherScoreParams, MfaPart,
};
use fisherkit::gmm::{DiagGmm, GmmParams};
use fisherkit::mfa::{Mfa, MfaParams, PsiMode};
use fisherkit::{Encoder, Float};
use ndarray::{Array2, ArrayView2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Four clusters in D = 6, `n` rows; enough rows for several reduction leaves.
fn data<F: Float>(n: usize, seed: u64) -> Array2<F> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((n, 6), |(i, j)| {
        let z: f64 = StandardNormal.sample(&mut rng);
        let c = ((i % 4) as f64 - 1.5) * 3.0 * (1.0 + 0.2 * j as f64);
        F::from_f64_lossy(c + z)
    })
}

fn bits<F: Float>(a: impl IntoIterator<Item = F>) -> Vec<u64> {
    a.into_iter().map(|v| v.as_f64().to_bits()).collect()
}

fn gmm_bits<F: Float>(g: &DiagGmm<F>) -> Vec<u64> {
    let mut b = bits(g.weights().iter().copied());
    b.extend(bits(g.means().iter().copied()));
    b.extend(bits(g.variances().iter().copied()));
    b
}

fn mfa_bits<F: Float>(m: &Mfa<F>) -> Vec<u64> {
    let mut b = bits(m.weights().iter().copied());
    b.extend(bits(m.means().iter().copied()));
    b.extend(bits(m.loadings().iter().copied()));
    b.extend(bits(m.psi().iter().copied()));
    b
}

/// Everything a run produces, as bits: the two fits, their log-likelihood
/// traces, and the FV and MFA-FS encodings of a batch of bags.
fn run<F: Float>(seed: u64) -> Vec<Vec<u64>> {
    let x = data::<F>(6000, 1);
    let gfit = GmmParams::<F>::new(4)
        .seed(seed)
        .max_iter(15)
        .fit(x.view())
        .unwrap();
    let mfit = MfaParams::new(6, 2)
        .psi_mode(PsiMode::PerComponent)
        .seed(seed)
        .max_iter(10)
        .fit(x.view())
        .unwrap();
    let bags: Vec<Array2<F>> = (0..5)
        .map(|b| data::<F>(300 + 200 * b, 10 + b as u64))
        .collect();
    let views: Vec<ArrayView2<'_, F>> = bags.iter().map(|b| b.view()).collect();
    let fv = FisherVector::new(&gfit.model, FisherVectorParams::default())
        .unwrap()
        .encode_batch(&views)
        .unwrap();
    let fs = MfaFisherScore::new(
        mfit.model.clone(),
        MfaFisherScoreParams {
            parts: vec![MfaPart::Mean, MfaPart::Loading],
            ..Default::default()
        },
    )
    .unwrap()
    .encode_batch(&views)
    .unwrap();
    vec![
        gmm_bits(&gfit.model),
        bits(gfit.log_likelihood.iter().copied()),
        mfa_bits(&mfit.model),
        bits(mfit.log_likelihood.iter().copied()),
        bits(fv.iter().copied()),
        bits(fs.iter().copied()),
    ]
}

fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

const WHAT: [&str; 6] = [
    "GMM parameters",
    "GMM log-likelihood trace",
    "MFA parameters",
    "MFA log-likelihood trace",
    "Fisher vectors",
    "MFA Fisher scores",
];

fn assert_same(a: &[Vec<u64>], b: &[Vec<u64>], context: &str) {
    for ((x, y), what) in a.iter().zip(b).zip(WHAT) {
        assert_eq!(x.len(), y.len(), "{context}: {what}: lengths differ");
        let diff = x.iter().zip(y).filter(|(p, q)| p != q).count();
        assert_eq!(
            diff,
            0,
            "{context}: {what}: {diff} of {} values differ",
            x.len()
        );
    }
}

#[test]
fn same_seed_same_bits_f64_and_f32() {
    let a = in_pool(2, || run::<f64>(7));
    let b = in_pool(2, || run::<f64>(7));
    assert_same(&a, &b, "f64, seed 7 twice");
    let a32 = in_pool(2, || run::<f32>(7));
    let b32 = in_pool(2, || run::<f32>(7));
    assert_same(&a32, &b32, "f32, seed 7 twice");
    // A different seed changes the fits (so the comparison above can fail).
    let c = in_pool(2, || run::<f64>(8));
    assert_ne!(a[0], c[0], "seed 8 gave the same GMM as seed 7");
    assert_ne!(a[2], c[2], "seed 8 gave the same MFA as seed 7");
}

#[test]
fn thread_count_does_not_change_the_bits() {
    let one = in_pool(1, || run::<f64>(5));
    for t in [2, 3] {
        let many = in_pool(t, || run::<f64>(5));
        assert_same(&one, &many, &format!("f64, 1 vs {t} threads"));
    }
    let one = in_pool(1, || run::<f32>(5));
    let two = in_pool(2, || run::<f32>(5));
    assert_same(&one, &two, "f32, 1 vs 2 threads");
}
