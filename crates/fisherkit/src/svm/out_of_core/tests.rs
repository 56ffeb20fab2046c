use super::blocks::State;
use super::*;
use crate::svm::{DualSolver, LinearSvcParams, SvmLoss};
use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// Planted classes: K Gaussian blobs in D dimensions with overlap.
fn blobs(n: usize, d: usize, k: usize, seed: u64) -> (Array2<f32>, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nd = Normal::new(0.0f32, 1.0).unwrap();
    let centres = Array2::from_shape_fn((k, d), |_| nd.sample(&mut rng) * 0.6);
    let y: Vec<usize> = (0..n).map(|i| i % k).collect();
    let x = Array2::from_shape_fn((n, d), |(i, j)| centres[[y[i], j]] + nd.sample(&mut rng));
    (x, y)
}

#[test]
fn equals_the_in_memory_solver_at_the_same_c() {
    let (x, y) = blobs(300, 40, 4, 3);
    for loss in [SvmLoss::SquaredHinge, SvmLoss::Hinge] {
        let mut base = LinearSvcParams::with_c(0.5);
        base.loss = loss;
        base.tol = 1e-5;
        base.max_iter = 5000;
        base.solver = DualSolver::Direct;
        let mem = base.fit(x.view(), &y).unwrap();
        // blocks of 16 rows (the smallest): many blocks, many outer passes
        for inner in [InnerSolver::Direct, InnerSolver::Gram] {
            let p = OutOfCoreSvmParams {
                svm: base,
                block_bytes: 1,
                inner_passes: 3,
                inner,
            }
            .check()
            .unwrap();
            let rows: Vec<usize> = (0..300).collect();
            let ooc = p.fit(&x.view(), &rows, &y, 4).unwrap();
            assert!(ooc.converged().iter().all(|&c| c), "{loss:?}");
            let scale = mem.coef().iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for (a, b) in mem.coef().iter().zip(ooc.coef().iter()) {
                assert!((a - b).abs() < 2e-3 * scale, "{loss:?}: {a} vs {b}");
            }
            for (a, b) in mem.intercept().iter().zip(ooc.intercept().iter()) {
                assert!(
                    (a - b).abs() < 2e-3 * scale.max(1.0),
                    "{loss:?}: {a} vs {b}"
                );
            }
            assert_eq!(
                mem.predict(x.view()).unwrap(),
                ooc.predict(x.view()).unwrap()
            );
            assert_eq!(
                predict_rows(&ooc, &x.view(), &rows, 1 << 20).unwrap(),
                ooc.predict(x.view()).unwrap()
            );
        }
    }
}

#[test]
fn cross_validation_picks_a_grid_value_and_is_reproducible() {
    let (x, y) = blobs(240, 30, 3, 5);
    let rows: Vec<usize> = (0..240).collect();
    let p = OutOfCoreSvmParams {
        block_bytes: 4 * 30 * 50,
        ..OutOfCoreSvmParams::with_c(1.0)
    }
    .check()
    .unwrap();
    let grid = [10.0, 0.01, 0.1];
    let (m, c, table) = p.fit_with_cv(&x.view(), &rows, &y, 3, &grid, 3, 7).unwrap();
    assert_eq!(table.iter().map(|t| t.0).collect::<Vec<_>>(), grid);
    assert!(grid.contains(&c));
    let best = table.iter().map(|t| t.1).fold(0.0, f64::max);
    assert_eq!(table.iter().find(|t| t.0 == c).unwrap().1, best);
    assert!(best > 0.6, "planted classes are learnable: {best}");
    let (m2, c2, t2) = p.fit_with_cv(&x.view(), &rows, &y, 3, &grid, 3, 7).unwrap();
    assert_eq!((c, &table), (c2, &t2));
    assert_eq!(m.coef(), m2.coef());
    // the final model is the fit at the chosen C (warm-started path, same optimum)
    let direct = OutOfCoreSvmParams {
        svm: LinearSvcParams {
            c,
            max_iter: 100,
            ..*p.svm
        },
        block_bytes: 4 * 30 * 50,
        inner_passes: 10,
        inner: InnerSolver::Auto,
    }
    .check()
    .unwrap()
    .fit(&x.view(), &rows, &y, 3)
    .unwrap();
    let agree = m
        .predict(x.view())
        .unwrap()
        .iter()
        .zip(direct.predict(x.view()).unwrap())
        .filter(|(a, b)| **a == *b)
        .count();
    assert!(agree >= 235, "{agree} of 240 agree");
}

#[test]
fn the_same_bits_with_one_or_two_threads() {
    let (x, y) = blobs(200, 64, 5, 9);
    let rows: Vec<usize> = (0..200).collect();
    for inner in [InnerSolver::Direct, InnerSolver::Gram] {
        let p = OutOfCoreSvmParams {
            block_bytes: 4 * 64 * 40,
            inner,
            ..OutOfCoreSvmParams::with_c(1.0)
        }
        .check()
        .unwrap();
        let run = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| p.fit(&x.view(), &rows, &y, 5).unwrap())
        };
        assert_eq!(run(1), run(2));
    }
}

#[test]
fn bad_inputs_are_named() {
    let (x, y) = blobs(20, 4, 2, 1);
    let p = OutOfCoreSvmParams::with_c(1.0).check().unwrap();
    let e = p.fit(&x.view(), &[0, 99], &[0, 1], 2).unwrap_err();
    assert!(e.to_string().contains("row 99"), "{e}");
    let rows: Vec<usize> = (0..20).collect();
    let e = p.fit(&x.view(), &rows, &y[..19], 2).unwrap_err();
    assert!(matches!(e, SvmError::LabelLengthMismatch { .. }));
    let e = p.fit(&x.view(), &rows, &[0; 20], 2).unwrap_err();
    assert!(matches!(e, SvmError::MissingClass { class: 1, .. }));
    let e = p
        .fit_with_cv(&x.view(), &rows, &y, 2, &[], 2, 0)
        .unwrap_err();
    assert!(e.to_string().contains("grid"));
    // weights no machine can hold: one clear error, no allocation abort
    let e = State::new(2, 10, usize::MAX / 4, 0).err().unwrap();
    assert!(e.to_string().contains("weights"), "{e}");
}
