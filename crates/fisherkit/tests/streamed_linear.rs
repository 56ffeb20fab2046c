//! The block-wise forms of the linear stages used by the streaming pipeline
//! equal the in-memory ones: a PCA from merged moments equals the PCA of the
//! whole matrix, and the SVM trained on a precomputed kernel equals the Gram
//! solver on the feature matrix (same C table, same decision values).

use fisherkit::pca::{PcaMoments, PcaParams};
use fisherkit::svm::{DualSolver, LinearSvcParams};
use ndarray::{s, Array1, Array2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn data(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // far from the origin and anisotropic: the shifted sums must not cancel
    Array2::from_shape_fn((n, d), |(_, j)| {
        100.0 + j as f64 + (1.0 + j as f64) * (rng.random::<f64>() - 0.5)
    })
}

#[test]
fn pca_from_merged_moments_equals_the_matrix_pca() {
    let x = data(300, 12, 1);
    for center in [true, false] {
        let p = PcaParams::new(5).center(center);
        let whole = p.fit::<f64>(x.view()).unwrap();
        // Two blocks summed about different references (as two machines would).
        let shift = x.slice(s![..10, ..]).mean_axis(Axis(0)).unwrap();
        let mut a = PcaMoments::new(shift.clone());
        let mut b = PcaMoments::new(shift.mapv(|v| v * 1.01 + 3.0));
        a.add(x.slice(s![..170, ..])).unwrap();
        b.add(x.slice(s![170.., ..])).unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.n_samples(), 300);
        let streamed = p.fit_moments::<f64>(&a).unwrap();
        let dm = (&whole.mean().to_owned() - &streamed.mean())
            .mapv(f64::abs)
            .fold(0.0f64, |m, &v| m.max(v));
        assert!(dm < 1e-9, "mean differs by {dm}");
        let (cw, cs) = (whole.components(), streamed.components());
        for j in 0..5 {
            let cos = cw.row(j).dot(&cs.row(j)).abs();
            assert!((cos - 1.0).abs() < 1e-9, "component {j}: |cos| = {cos}");
            let (l1, l2) = (
                whole.explained_variance()[j],
                streamed.explained_variance()[j],
            );
            assert!((l1 - l2).abs() <= 1e-9 * l1, "variance {j}: {l1} vs {l2}");
        }
    }
}

#[test]
fn moments_refuse_other_widths() {
    let mut a = PcaMoments::new(Array1::zeros(3));
    assert!(a.add(Array2::<f32>::zeros((4, 2)).view()).is_err());
    assert!(a.merge(&PcaMoments::new(Array1::ones(4))).is_err());
    assert!(
        PcaParams::new(2).fit_moments::<f32>(&a).is_err(),
        "no sample"
    );
}

#[test]
fn kernel_svm_equals_the_gram_solver_on_features() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (n, d, k) = (90, 40, 3);
    let y: Vec<usize> = (0..n).map(|i| i % k).collect();
    let x = Array2::from_shape_fn((n, d), |(i, j)| {
        let signal = if j % k == y[i] { 0.8 } else { 0.0 };
        signal + rng.random::<f32>() - 0.5
    });
    let (xtr, xte) = (x.slice(s![..60, ..]), x.slice(s![60.., ..]));
    let p = LinearSvcParams {
        solver: DualSolver::Gram,
        seed: 3,
        ..Default::default()
    };
    let grid = [0.01, 0.1, 1.0];
    let (svm, c, table) = p.fit_with_cv(xtr, &y[..60], &grid, 3, 5).unwrap();
    let x64 = xtr.mapv(|v| v as f64);
    let gram = x64.dot(&x64.t());
    let (ksvm, kc, ktable) = p
        .fit_gram_with_cv(gram.view(), &y[..60], &grid, 3, 5)
        .unwrap();
    assert_eq!(c, kc);
    for ((c1, s1), (c2, s2)) in table.iter().zip(&ktable) {
        assert_eq!(c1, c2);
        assert!((s1 - s2).abs() < 1e-9, "C = {c1}: {s1} vs {s2}");
    }
    let cross = xte.mapv(|v| v as f64).dot(&x64.t());
    let f_kernel = ksvm.decision_function(cross.view()).unwrap();
    let f_feat = svm.decision_function(xte).unwrap();
    let err = (&f_kernel - &f_feat.mapv(|v| v as f64))
        .mapv(f64::abs)
        .fold(0.0f64, |m, &v| m.max(v));
    assert!(err < 1e-4, "decision values differ by {err}");
    assert_eq!(
        ksvm.predict(cross.view()).unwrap(),
        svm.predict(xte).unwrap()
    );
    // the same kernel in f32, borrowed (the bias added as entries are read):
    // the same C and predictions, decision values to f32 rounding
    let gram32 = gram.mapv(|v| v as f32);
    let (k32, c32, table32) = p
        .fit_gram_with_cv(gram32.view(), &y[..60], &grid, 3, 5)
        .unwrap();
    assert_eq!(c32, kc);
    for ((_, s1), (_, s2)) in table32.iter().zip(&ktable) {
        assert!((s1 - s2).abs() < 1e-9, "{s1} vs {s2}");
    }
    let f32k = k32.decision_function(cross.view()).unwrap();
    let err32 = (&f32k - &f_kernel)
        .mapv(f64::abs)
        .fold(0.0f64, |m, &v| m.max(v));
    assert!(
        err32 < 1e-4,
        "f32 kernel: decision values differ by {err32}"
    );
    assert_eq!(
        k32.predict(cross.view()).unwrap(),
        ksvm.predict(cross.view()).unwrap()
    );
    // weights assembled block by block = the feature solver's weights
    let w = ndarray::concatenate(
        Axis(1),
        &[
            ksvm.weights_block(xtr.slice(s![.., ..25])).unwrap().view(),
            ksvm.weights_block(xtr.slice(s![.., 25..])).unwrap().view(),
        ],
    )
    .unwrap();
    let dw = (&w - &svm.coef().mapv(|v| v as f64))
        .mapv(f64::abs)
        .fold(0.0f64, |m, &v| m.max(v));
    assert!(dw < 1e-4, "weights differ by {dw}");
    // a kernel of the wrong shape is refused, naming it
    let bad = Array2::<f64>::zeros((60, 59));
    let e = p
        .fit_gram_with_cv(bad.view(), &y[..60], &grid, 3, 5)
        .unwrap_err();
    assert!(e.to_string().contains("kernel"), "{e}");
    assert!(ksvm
        .decision_function(Array2::zeros((2, 7)).view())
        .is_err());
}

/// The stop hook of a kernel SVM's cross-validation: never asked to stop,
/// the same fit as without it; asked to stop after a few checks (mid-way
/// through the first fold's classes), [`SvmError::Stopped`] — and the hook
/// is asked more than once per fold (so Ctrl-C is not left to the fold's end).
#[test]
fn a_kernel_svm_cross_validation_stops_when_its_hook_says_so() {
    use fisherkit::svm::SvmError;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let (n, d, k) = (60, 30, 4);
    let y: Vec<usize> = (0..n).map(|i| i % k).collect();
    let x = Array2::from_shape_fn((n, d), |(i, j)| {
        (if j % k == y[i] { 0.8 } else { 0.0 }) + rng.random::<f64>() - 0.5
    });
    let gram = x.dot(&x.t());
    let p = LinearSvcParams::default().check().unwrap();
    let grid = [0.1, 1.0];
    let (a, ca, ta) = p.fit_gram_with_cv(gram.view(), &y, &grid, 3, 1).unwrap();
    let asked = AtomicUsize::new(0);
    let (b, cb, tb) = p
        .fit_gram_with_cv_until(gram.view(), &y, &grid, 3, 1, &|| {
            asked.fetch_add(1, Ordering::Relaxed);
            false
        })
        .unwrap();
    assert_eq!((ca, ta), (cb, tb));
    assert_eq!(a.dual_coef(), b.dual_coef());
    let checks = asked.load(Ordering::Relaxed);
    assert!(checks >= 3 * (k + 1), "asked {checks} times");
    let asked = AtomicUsize::new(0);
    let e = p
        .fit_gram_with_cv_until(gram.view(), &y, &grid, 3, 1, &|| {
            asked.fetch_add(1, Ordering::Relaxed) >= 2
        })
        .unwrap_err();
    assert_eq!(e, SvmError::Stopped);
    assert!(e.to_string().contains("stopped"), "{e}");
}

#[test]
fn moments_sent_as_parts_come_back_equal_and_bad_parts_are_refused() {
    let x = data(50, 4, 2);
    let mut a = PcaMoments::new(Array1::zeros(4));
    a.add(x.view()).unwrap();
    let (s, n, sum, scatter) = a.parts();
    let b = PcaMoments::from_parts(s.clone(), n, sum.clone(), scatter.clone()).unwrap();
    assert_eq!(a, b);
    assert!(PcaMoments::from_parts(s.clone(), n, sum.clone(), Array2::zeros((3, 4))).is_err());
    let mut bad = sum.clone();
    bad[1] = f64::NAN;
    assert!(PcaMoments::from_parts(s.clone(), n, bad, scatter.clone()).is_err());
}
