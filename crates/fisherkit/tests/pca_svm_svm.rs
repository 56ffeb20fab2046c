//! One-vs-rest linear SVM: planted margins, duality and KKT conditions, and
//! scikit-learn's LinearSVC (LIBLINEAR) as a peer.

#[path = "pca_svm_common/mod.rs"]
mod common;

use fisherkit::metrics::{accuracy, confusion_matrix, mean_per_class_accuracy};
use fisherkit::svm::{DualSolver, LinearSvcParams, SvmError, SvmLoss};
use ndarray::{Array1, Array2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

fn gaussian(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_simple_fn((n, d), || StandardNormal.sample(&mut rng))
}

/// Points with $|w^{*\top} x + b^*| \ge$ `margin` (others rejected), labelled by the sign.
fn separable(n: usize, d: usize, margin: f64, seed: u64) -> (Array2<f64>, Vec<bool>) {
    let w = gaussian(1, d, seed + 100).row(0).to_owned();
    let w = &w / w.dot(&w).sqrt();
    let b = 0.3;
    let cand = gaussian(4 * n, d, seed);
    let mut rows = Vec::new();
    let mut pos = Vec::new();
    for r in cand.outer_iter() {
        let f = r.dot(&w) + b;
        if f.abs() >= margin {
            rows.extend(r.iter().copied());
            pos.push(f > 0.0);
            if pos.len() == n {
                break;
            }
        }
    }
    assert_eq!(pos.len(), n);
    (Array2::from_shape_vec((n, d), rows).unwrap(), pos)
}

/// K Gaussian blobs with well separated centres, labels 0..K.
fn blobs(n_per: usize, k: usize, d: usize, spread: f64, seed: u64) -> (Array2<f64>, Vec<usize>) {
    let centres = gaussian(k, d, seed + 1) * 3.0;
    let noise = gaussian(n_per * k, d, seed) * spread;
    let mut x = noise;
    let mut y = Vec::new();
    for i in 0..n_per * k {
        let c = i % k;
        let mut r = x.row_mut(i);
        r += &centres.row(c);
        y.push(c);
    }
    (x, y)
}

#[test]
fn separable_problem_is_separated_with_positive_margin() {
    let (x, pos) = separable(200, 10, 0.5, 1);
    for (loss, solver) in [
        (SvmLoss::Hinge, DualSolver::Direct),
        (SvmLoss::SquaredHinge, DualSolver::Direct),
        (SvmLoss::Hinge, DualSolver::Gram),
        (SvmLoss::SquaredHinge, DualSolver::Gram),
    ] {
        let p = LinearSvcParams {
            c: 100.0,
            loss,
            tol: 1e-6,
            max_iter: 100_000,
            solver,
            ..Default::default()
        };
        let m = p.fit_binary(x.view(), &pos).unwrap();
        assert!(m.converged);
        let f = m.decision_function(x.view());
        let margin = f
            .iter()
            .zip(&pos)
            .map(|(v, &p)| if p { *v } else { -*v })
            .fold(f64::INFINITY, f64::min);
        assert!(margin > 0.0, "{loss:?}: smallest signed margin {margin}");
        // hard-margin limit: functional margin about 1 on the support vectors
        assert!(margin > 0.9, "{loss:?}: margin {margin}");
        // w = Σ α_i y_i x_i
        let mut w = Array1::<f64>::zeros(10);
        let mut b = 0.0;
        for (i, r) in x.outer_iter().enumerate() {
            let ya = if pos[i] { m.alpha[i] } else { -m.alpha[i] };
            w.scaled_add(ya, &r);
            b += ya;
        }
        assert!((&w - &m.w).iter().all(|v| v.abs() < 1e-9));
        assert!((b - m.bias).abs() < 1e-9);
        // weak duality and a small gap
        let (pr, du) = (m.primal_objective(x.view(), &pos), m.dual_objective());
        assert!(pr >= du - 1e-9 * pr.abs(), "primal {pr} < dual {du}");
        assert!((pr - du) / pr < 1e-4, "{loss:?}: gap {pr} - {du}");
    }
    // multi-class wrapper on the same data: training accuracy 1
    let y: Vec<usize> = pos.iter().map(|&p| p as usize).collect();
    let svc = LinearSvcParams::with_c(100.0).fit(x.view(), &y).unwrap();
    assert_eq!(svc.predict(x.view()).unwrap(), y);
}

#[test]
fn kkt_conditions_and_gap_on_overlapping_classes() {
    // Not separable: many bounded / interior α.
    let (x, _) = separable(300, 8, 0.0, 2);
    let noise = gaussian(300, 1, 3);
    let w0 = gaussian(1, 8, 4).row(0).to_owned();
    let pos: Vec<bool> = x
        .outer_iter()
        .zip(noise.column(0))
        .map(|(r, e)| r.dot(&w0) + 0.8 * e > 0.0)
        .collect();
    for (loss, c, solver) in [
        (SvmLoss::SquaredHinge, 0.3, DualSolver::Direct),
        (SvmLoss::Hinge, 0.3, DualSolver::Direct),
        (SvmLoss::SquaredHinge, 0.3, DualSolver::Gram),
        (SvmLoss::Hinge, 0.3, DualSolver::Gram),
    ] {
        let p = LinearSvcParams {
            c,
            loss,
            tol: 1e-8,
            max_iter: 100_000,
            seed: 9,
            solver,
            ..Default::default()
        };
        let m = p.fit_binary(x.view(), &pos).unwrap();
        assert!(m.converged, "{loss:?} {solver:?} did not converge");
        let (pr, du) = (m.primal_objective(x.view(), &pos), m.dual_objective());
        assert!(pr >= du - 1e-12 * pr);
        assert!((pr - du) / pr < 1e-7, "{loss:?}: gap {}", (pr - du) / pr);
        let f = m.decision_function(x.view());
        for i in 0..300 {
            let yf = if pos[i] { f[i] } else { -f[i] };
            let a = m.alpha[i];
            match loss {
                // α_i = 2C max(0, 1 - y_i f_i)
                SvmLoss::SquaredHinge => {
                    assert!((a - 2.0 * c * (1.0 - yf).max(0.0)).abs() < 1e-6, "row {i}")
                }
                // α = 0 ⇒ y f ≥ 1; α = C ⇒ y f ≤ 1; interior ⇒ y f = 1
                SvmLoss::Hinge => {
                    assert!((0.0..=c).contains(&a));
                    if a == 0.0 {
                        assert!(yf >= 1.0 - 1e-6, "row {i}: α=0, yf={yf}");
                    } else if a == c {
                        assert!(yf <= 1.0 + 1e-6, "row {i}: α=C, yf={yf}");
                    } else {
                        assert!((yf - 1.0).abs() < 1e-6, "row {i}: yf={yf}");
                    }
                }
            }
        }
    }
}

#[test]
fn shrinking_and_seed_do_not_change_the_optimum() {
    let (x, y) = blobs(60, 4, 12, 1.5, 5);
    let base = LinearSvcParams {
        c: 0.5,
        tol: 1e-7,
        max_iter: 100_000,
        ..Default::default()
    };
    let a = base.fit(x.view(), &y).unwrap();
    let b = LinearSvcParams {
        shrinking: false,
        seed: 42,
        ..base
    }
    .fit(x.view(), &y)
    .unwrap();
    let d = (&a.coef() - &b.coef())
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(d < 1e-5, "optimum differs by {d}");
}

#[test]
fn deterministic_and_thread_independent() {
    let (x, y) = blobs(50, 5, 20, 2.0, 6);
    let xf = x.mapv(|v| v as f32);
    let p = LinearSvcParams::with_c(1.0);
    let fit = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                (
                    p.fit(xf.view(), &y).unwrap(),
                    p.select_c(xf.view(), &y, &[0.01, 0.1, 1.0], 3, 7).unwrap(),
                )
            })
    };
    let (m1, cv1) = fit(1);
    let (m2, cv2) = fit(2);
    assert_eq!(m1, m2);
    assert_eq!(cv1, cv2);
    // f32 and f64 fits agree
    let m64 = LinearSvcParams {
        tol: 1e-6,
        max_iter: 100_000,
        ..p
    }
    .fit(x.view(), &y)
    .unwrap();
    let m32 = LinearSvcParams {
        tol: 1e-6,
        max_iter: 100_000,
        ..p
    }
    .fit(xf.view(), &y)
    .unwrap();
    let f64v = m64.decision_function(x.view()).unwrap();
    let f32v = m32.decision_function(xf.view()).unwrap();
    for (a, b) in f32v.iter().zip(&f64v) {
        assert!((*a as f64 - b).abs() < 1e-3, "{a} vs {b}");
    }
}

#[test]
fn select_c_prefers_a_sensible_c() {
    // Overlapping blobs far from the origin: with a tiny C the dual keeps
    // w ≈ C Σ y_i x_i, dominated by the common offset (each one-vs-rest
    // problem has twice as many negatives), so the classes' scores hardly
    // differ and the cross-validated accuracy drops (0.82 here against 0.96
    // at C = 1e-2).
    let (x, y) = blobs(30, 3, 5, 2.5, 8);
    let x = x + 20.0;
    let grid = [1e-5, 1e-2, 1.0];
    let (best, table) = LinearSvcParams::default()
        .select_c(x.view(), &y, &grid, 5, 0)
        .unwrap();
    assert_eq!(table.iter().map(|t| t.0).collect::<Vec<_>>(), grid);
    assert!(table.iter().all(|t| (0.0..=1.0).contains(&t.1)));
    eprintln!("cv scores (C, accuracy): {table:?}");
    let top = table.iter().map(|t| t.1).fold(f64::NEG_INFINITY, f64::max);
    let smallest_best = table.iter().find(|t| t.1 == top).unwrap().0;
    assert_eq!(best, smallest_best);
    assert!(top > 0.6, "cv scores {table:?}");
    // the underfitting C scores clearly worse and is not chosen
    assert!(best != grid[0], "cv scores {table:?}");
    assert!(
        table[0].1 <= top - 0.1,
        "C = {} scores {}: cv scores {table:?}",
        grid[0],
        table[0].1
    );
    // fit_with_cv = select_c, then fit with the chosen C
    let (model, best2, table2) = LinearSvcParams::default()
        .fit_with_cv(x.view(), &y, &grid, 5, 0)
        .unwrap();
    assert_eq!((best2, &table2), (best, &table));
    assert_eq!(
        model,
        LinearSvcParams::with_c(best).fit(x.view(), &y).unwrap()
    );
    // folds > N and bad grids are errors
    assert!(matches!(
        LinearSvcParams::default().select_c(x.view(), &y, &grid, 1000, 0),
        Err(SvmError::InvalidCrossValidation(_))
    ));
    assert!(LinearSvcParams::default()
        .select_c(x.view(), &y, &[], 3, 0)
        .is_err());
    assert!(LinearSvcParams::default()
        .select_c(x.view(), &y, &[1.0, -1.0], 3, 0)
        .is_err());
}

#[test]
fn without_bias_and_with_zero_rows() {
    let (mut x, pos) = separable(100, 6, 0.5, 11);
    x.row_mut(0).fill(0.0);
    let y: Vec<usize> = pos.iter().map(|&p| p as usize).collect();
    for loss in [SvmLoss::Hinge, SvmLoss::SquaredHinge] {
        let p = LinearSvcParams {
            bias: false,
            loss,
            ..Default::default()
        };
        let m = p.fit(x.view(), &y).unwrap();
        assert!(m.intercept().iter().all(|v| *v == 0.0));
        assert!(m.coef().iter().all(|v| v.is_finite()));
        let b = p.fit_binary(x.view(), &pos).unwrap();
        assert_eq!(b.bias, 0.0);
        assert!(b.alpha.iter().all(|a| a.is_finite()));
        // the zero row has y f = 0 < 1: its α is at the bound (C) for the hinge
        if loss == SvmLoss::Hinge {
            assert_eq!(b.alpha[0], p.c);
        }
    }
}

#[test]
fn errors_are_clear() {
    let x = gaussian(6, 3, 0);
    let p = LinearSvcParams::default();
    assert_eq!(
        p.fit(x.view(), &[0; 6]).unwrap_err(),
        SvmError::TooFewClasses(1)
    );
    let e = p.fit(x.view(), &[0, 0, 2, 2, 0, 2]).unwrap_err();
    assert_eq!(
        e,
        SvmError::MissingClass {
            class: 1,
            n_classes: 3
        }
    );
    assert!(e.to_string().contains("class 1 has no training sample"));
    assert_eq!(
        p.fit(x.view(), &[0, 1]).unwrap_err(),
        SvmError::LabelLengthMismatch {
            n_rows: 6,
            n_labels: 2
        }
    );
    let e = p
        .fit_with_n_classes(x.view(), &[0, 1, 0, 1, 0, 7], 2)
        .unwrap_err();
    assert!(e.to_string().contains("y[5] = 7"), "{e}");
    for c in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = LinearSvcParams::with_c(c)
            .fit(x.view(), &[0, 1, 0, 1, 0, 1])
            .unwrap_err();
        assert!(matches!(
            e,
            SvmError::InvalidHyperParameter { name: "c", .. }
        ));
    }
    let empty = Array2::<f64>::zeros((0, 3));
    assert!(matches!(p.fit(empty.view(), &[]), Err(SvmError::Data(_))));
    let mut bad = x.clone();
    bad[[4, 1]] = f64::NAN;
    let e = p.fit(bad.view(), &[0, 1, 0, 1, 0, 1]).unwrap_err();
    assert!(e.to_string().contains("row 4, column 1"), "{e}");
    let m = p.fit(x.view(), &[0, 1, 0, 1, 0, 1]).unwrap();
    assert!(m.predict(bad.view()).is_err());
    assert!(m.decision_function(gaussian(2, 4, 1).view()).is_err());
}

#[test]
fn matches_scikit_learn_linearsvc_on_digits() {
    let c = 0.05;
    let body = format!(
        r#"
from sklearn.datasets import load_digits
from sklearn.svm import LinearSVC
from sklearn.metrics import balanced_accuracy_score, accuracy_score, confusion_matrix
x, y = load_digits(return_X_y=True)
x = x / 16.0
xtr, ytr, xte, yte = x[:1200], y[:1200], x[1200:], y[1200:]
m = LinearSVC(C={c}, loss="squared_hinge", dual=True, tol=1e-6, max_iter=200000,
              intercept_scaling=1.0, random_state=0).fit(xtr, ytr)
pred = m.predict(xte)
emit("xtr", xtr); emit("ytr", ytr); emit("xte", xte); emit("yte", yte)
emit("dec", m.decision_function(xte)); emit("pred", pred)
emit("acc", [[accuracy_score(yte, pred), balanced_accuracy_score(yte, pred)]])
emit("cm", confusion_matrix(yte, pred, labels=list(range(10))))
"#
    );
    let Some(peer) = common::run_python("import sklearn, sklearn.svm, sklearn.datasets", &body, "")
    else {
        return;
    };
    let lab = |a: &Array2<f64>| a.iter().map(|v| *v as usize).collect::<Vec<_>>();
    let (ytr, yte) = (lab(&peer["ytr"]), lab(&peer["yte"]));
    for solver in [DualSolver::Direct, DualSolver::Gram] {
        let p = LinearSvcParams {
            c,
            tol: 1e-6,
            max_iter: 200_000,
            solver,
            ..Default::default()
        };
        let m = p.fit(peer["xtr"].view(), &ytr).unwrap();
        assert!(m.converged().iter().all(|&c| c));
        let dec = m.decision_function(peer["xte"].view()).unwrap();
        let scale = peer["dec"].iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let diff = (&dec - &peer["dec"])
            .iter()
            .fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(
            diff < 1e-5 * scale,
            "decision values differ by {diff} (scale {scale})"
        );
        let pred = m.predict(peer["xte"].view()).unwrap();
        let acc = accuracy(&yte, &pred, 10).unwrap();
        let sk = peer["acc"][[0, 0]];
        eprintln!("digits ({solver:?}): max |Δ decision| = {diff:.2e} (scale {scale:.2}); accuracy {acc:.4} vs scikit-learn {sk:.4}");
        assert!(
            (acc - sk).abs() <= 0.01,
            "accuracy {acc} vs scikit-learn {sk}"
        );
        assert!(acc > 0.85);
    }
    // metrics against scikit-learn's on scikit-learn's predictions
    let skpred = lab(&peer["pred"]);
    assert!((accuracy(&yte, &skpred, 10).unwrap() - peer["acc"][[0, 0]]).abs() < 1e-12);
    let bal = mean_per_class_accuracy(&yte, &skpred, 10).unwrap();
    assert!((bal - peer["acc"][[0, 1]]).abs() < 1e-12);
    let cm = confusion_matrix(&yte, &skpred, 10).unwrap();
    assert_eq!(cm.mapv(|v| v as f64), peer["cm"]);
}

#[test]
fn gram_and_direct_solvers_agree() {
    // N < D: the Fisher-vector regime where Auto picks the Gram solver.
    let (x, y) = blobs(20, 4, 300, 4.0, 21);
    let xf = x.mapv(|v| v as f32);
    for loss in [SvmLoss::Hinge, SvmLoss::SquaredHinge] {
        let base = LinearSvcParams {
            c: 0.1,
            loss,
            tol: 1e-8,
            max_iter: 100_000,
            ..Default::default()
        };
        let direct = LinearSvcParams {
            solver: DualSolver::Direct,
            ..base
        };
        let gram = LinearSvcParams {
            solver: DualSolver::Gram,
            ..base
        };
        let auto = base.fit(x.view(), &y).unwrap();
        let a = direct.fit(x.view(), &y).unwrap();
        let b = gram.fit(x.view(), &y).unwrap();
        assert_eq!(auto, b, "Auto should pick Gram for N < D");
        let dw = (&a.coef() - &b.coef())
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        let db = (&a.intercept() - &b.intercept())
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(dw < 1e-6 && db < 1e-6, "{loss:?}: Δw {dw}, Δb {db}");
        // f32 Gram (blocked f32 GEMM) against f64 direct
        let c = gram.fit(xf.view(), &y).unwrap();
        let fa = a.decision_function(x.view()).unwrap();
        let fc = c.decision_function(xf.view()).unwrap();
        let d = fa
            .iter()
            .zip(&fc)
            .fold(0.0f64, |m, (u, v)| m.max((u - *v as f64).abs()));
        assert!(
            d < 1e-3,
            "{loss:?}: f32 Gram vs f64 direct decision values differ by {d}"
        );
        // cross-validation sees the same problems
        let grid = [0.001, 0.1, 10.0];
        let (_, ta) = direct.select_c(x.view(), &y, &grid, 4, 3).unwrap();
        let (_, tb) = gram.select_c(x.view(), &y, &grid, 4, 3).unwrap();
        for ((c1, s1), (c2, s2)) in ta.iter().zip(&tb) {
            assert_eq!(c1, c2);
            assert!((s1 - s2).abs() < 1e-12, "C {c1}: {s1} vs {s2}");
        }
    }
}

#[test]
fn gram_solver_across_row_chunks_and_column_blocks() {
    // N = 600 > 256-row chunks, D = 2100 > two 1024-column blocks.
    let (x, y) = blobs(200, 3, 2100, 6.0, 31);
    let base = LinearSvcParams {
        c: 0.01,
        tol: 1e-6,
        max_iter: 100_000,
        ..Default::default()
    };
    let fit = |solver, threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                LinearSvcParams { solver, ..base }
                    .fit(x.view(), &y)
                    .unwrap()
            })
    };
    let a = fit(DualSolver::Direct, 2);
    let b = fit(DualSolver::Gram, 2);
    assert_eq!(
        b,
        fit(DualSolver::Gram, 1),
        "Gram fit depends on thread count"
    );
    let dw = (&a.coef() - &b.coef())
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = a.coef().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(dw < 1e-6 * scale.max(1.0), "Δw {dw} (scale {scale})");
}
