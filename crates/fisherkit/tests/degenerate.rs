//! Degenerate but valid training data: every fit returns a valid model
//! (finite parameters, weights > 0 summing to 1, variances and Ψ > 0) with a
//! finite log-likelihood — never NaN — and does something sensible.
//!
//! # What the models do (issue #6, item 3)
//!
//! | data | GMM (`fisherkit::gmm`) | MFA (`fisherkit::mfa`) |
//! |---|---|---|
//! | a constant column | its means are the constant, its variances sit at the floor: `Relative(f)` × the mean variance of the other, non-constant columns (1 if all are constant; `docs/math.md` §2.4) | its means are the constant, $\psi_d$ sits at its floor (`psi_floor` × data variance, backed by $10^{-9}$ × the mean variance of all columns; `docs/math.md` §4.5) and the loadings of that dimension are ~0 |
//! | duplicated points (a few distinct points, many copies) | one component per distinct point, variances at the floor, weights = the copies' shares | one component per distinct point, Ψ at its floor |
//! | fewer distinct points than components | fits without error: the spare components duplicate a distinct point (starved ones are re-seeded); every mean is one of the distinct points, the mixture density is that of the distinct points | the same: every mean is one of the distinct points |
//! | values of magnitude $10^{15}$ or $10^{-15}$ | f64: scale-equivariant (for the same number of EM steps; the stopping rule on the relative change of the mean log-likelihood is not scale-invariant, as that shifts by $-D\ln s$) — the fit of $s\,x$ is the fit of $x$ with means × s and variances × s² (relative $10^{-6}$); f32: finite and valid; at $10^{15}$ the clusters are found, but variances cannot go below $\sqrt{\text{f32::MIN\_POSITIVE}} \approx 1.1\cdot10^{-19}$ (so that $1/\sigma^2$ stays finite), so clusters of scale $10^{-15}$ (variances ~$10^{-30}$) merge towards the data mean: rescale such data or fit in f64 | f64: the same equivariance (Ψ × s², Λ × s); f32: finite and valid |
//! | one dimension (D = 1) | works (a 1-D mixture) | refused with `InvalidHyperParameter` (`n_factors` must satisfy 0 < R < D, impossible for D = 1): fit a GMM instead |
//! | one component (K = 1) | weight 1, mean = sample mean, variance = the (1/N) sample variance | weight 1, mean = sample mean, diag(ΛΛᵀ + Ψ) = the sample variances (the factor-analysis fixed point) |

use fisherkit::gmm::{DiagGmm, GmmParams, VarianceFloor};
use fisherkit::mfa::{Mfa, MfaParams, PsiMode};
use ndarray::{Array1, Array2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Asserts a GMM is valid: finite, weights > 0 summing to 1, variances > 0.
fn check_gmm(m: &DiagGmm<f64>) {
    assert!(m.weights().iter().all(|&w| w.is_finite() && w > 0.0));
    assert!((m.weights().sum() - 1.0).abs() < 1e-9, "{}", m.weights());
    assert!(m.means().iter().all(|v| v.is_finite()), "{}", m.means());
    assert!(m.variances().iter().all(|&v| v.is_finite() && v > 0.0));
}

fn check_gmm32(m: &DiagGmm<f32>) {
    check_gmm(&m.cast());
}

/// Asserts an MFA is valid: finite, weights > 0 summing to 1, Ψ > 0.
fn check_mfa(m: &Mfa<f64>) {
    assert!(m.weights().iter().all(|&w| w.is_finite() && w > 0.0));
    assert!((m.weights().sum() - 1.0).abs() < 1e-9, "{}", m.weights());
    assert!(m.means().iter().all(|v| v.is_finite()));
    assert!(m.loadings().iter().all(|v| v.is_finite()));
    assert!(m.psi().iter().all(|&v| v.is_finite() && v > 0.0));
}

fn gmm_fit(x: &Array2<f64>, k: usize) -> DiagGmm<f64> {
    gmm_fit_with(x, GmmParams::<f64>::new(k).seed(3))
}

fn gmm_fit_with(x: &Array2<f64>, params: GmmParams<f64>) -> DiagGmm<f64> {
    let fit = params.fit(x.view()).unwrap();
    assert!(fit.log_likelihood.iter().all(|l| l.is_finite()));
    check_gmm(&fit.model);
    assert!(fit.model.score(x.view()).unwrap().is_finite());
    fit.model
}

fn mfa_fit(x: &Array2<f64>, k: usize, r: usize) -> Mfa<f64> {
    mfa_fit_with(x, MfaParams::new(k, r).seed(3))
}

/// Fits with shared and with per-component Ψ, checks both, returns the latter.
fn mfa_fit_with(x: &Array2<f64>, params: MfaParams) -> Mfa<f64> {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let fit = params.clone().psi_mode(mode).fit(x.view()).unwrap();
        assert!(fit.log_likelihood.iter().all(|l| l.is_finite()));
        check_mfa(&fit.model);
        assert!(fit.model.score(x.view()).unwrap().is_finite());
        if mode == PsiMode::PerComponent {
            return fit.model;
        }
    }
    unreachable!()
}

/// Two well-separated clusters in D dims, `n` rows.
fn two_clusters(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((n, d), |(i, j)| {
        let z: f64 = StandardNormal.sample(&mut rng);
        let c = if i % 2 == 0 { -6.0 } else { 6.0 };
        c * (1.0 + j as f64 * 0.1) + z * (0.5 + 0.2 * j as f64)
    })
}

fn col_var(x: &Array2<f64>, j: usize) -> f64 {
    x.column(j).var(0.0)
}

#[test]
fn constant_column() {
    let mut x = two_clusters(300, 3, 1);
    x.column_mut(1).fill(5.0);
    let g = gmm_fit(&x, 2);
    // Floor: Relative(1e-3) × the mean variance of the other (non-constant)
    // columns 0 and 2, each computed here by ndarray from the data.
    let floor = 1e-3 * (col_var(&x, 0) + col_var(&x, 2)) / 2.0;
    for k in 0..2 {
        assert!((g.means()[[k, 1]] - 5.0).abs() < 1e-12);
        let v = g.variances()[[k, 1]];
        assert!(
            (v - floor).abs() <= 1e-9 * floor,
            "variance {v}, floor {floor}"
        );
    }
    // Another constant column does not move that floor.
    let x2 = ndarray::concatenate![Axis(1), x.view(), Array2::from_elem((300, 1), -1.0).view()];
    let g2 = gmm_fit(&x2, 2);
    for k in 0..2 {
        for j in [1, 3] {
            let v = g2.variances()[[k, j]];
            assert!(
                (v - floor).abs() <= 1e-9 * floor,
                "column {j}: {v} vs {floor}"
            );
        }
    }
    // The other columns are still fitted: the two clusters are found.
    let mut m0: Vec<f64> = g.means().column(0).to_vec();
    m0.sort_by(f64::total_cmp);
    assert!(
        (m0[0] + 6.0).abs() < 0.3 && (m0[1] - 6.0).abs() < 0.3,
        "{m0:?}"
    );

    let m = mfa_fit(&x, 2, 1);
    for k in 0..2 {
        assert!((m.means()[[k, 1]] - 5.0).abs() < 1e-9);
        assert!(m.loadings()[[k, 1, 0]].abs() < 1e-3);
    }
    // ψ of the constant column sits at the MFA's backstop floor, 1e-9 × the
    // mean variance of all D columns (psi_floor × its variance 0 is 0).
    let psi_floor = 1e-9 * (0..3).map(|j| col_var(&x, j)).sum::<f64>() / 3.0;
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let fit = MfaParams::new(2, 1)
            .seed(3)
            .psi_mode(mode)
            .fit(x.view())
            .unwrap();
        for row in fit.model.psi().rows() {
            let p = row[1];
            assert!(
                (p - psi_floor).abs() <= 1e-6 * psi_floor,
                "{mode:?}: psi {p} vs floor {psi_floor}"
            );
            // the other columns are fitted, above their floors
            for j in [0, 2] {
                assert!(
                    row[j] > 2.0 * 1e-3 * col_var(&x, j),
                    "{mode:?}: psi_{j} = {}",
                    row[j]
                );
            }
        }
    }
    // Every column constant: one point, repeated.
    let x = Array2::from_elem((40, 3), -2.5);
    let g = gmm_fit(&x, 1);
    assert!(g.means().iter().all(|&v| (v + 2.5).abs() < 1e-12));
    // All constant: the relative floor falls back to 1e-3 × 1.
    assert!(g.variances().iter().all(|&v| (v - 1e-3).abs() < 1e-12));
}

#[test]
fn duplicated_points() {
    let pts = [[0.0, 1.0, 2.0], [10.0, -3.0, 4.0], [-7.0, 8.0, 0.5]];
    let copies = [30, 60, 90];
    let mut rows = Vec::new();
    for (p, &c) in pts.iter().zip(&copies) {
        for _ in 0..c {
            rows.extend_from_slice(p);
        }
    }
    let x = Array2::from_shape_vec((180, 3), rows).unwrap();
    let g = gmm_fit(&x, 3);
    let m = mfa_fit(&x, 3, 1);
    for (means, weights) in [
        (g.means().to_owned(), g.weights().to_owned()),
        (m.means().to_owned(), m.weights().to_owned()),
    ] {
        // One component per distinct point, weights the copies' shares.
        for (p, &c) in pts.iter().zip(&copies) {
            let k = (0..3)
                .find(|&k| (0..3).all(|j| (means[[k, j]] - p[j]).abs() < 1e-6))
                .unwrap_or_else(|| panic!("no component at {p:?}: {means}"));
            assert!((weights[k] - c as f64 / 180.0).abs() < 1e-6, "{weights}");
        }
    }
    // GMM variances at the floor, 1e-3 × each column's variance.
    for j in 0..3 {
        let f = 1e-3 * col_var(&x, j);
        assert!(g
            .variances()
            .column(j)
            .iter()
            .all(|&v| (v - f).abs() <= 1e-9 * f));
    }
    // MFA Ψ at its floor, psi_floor (1e-3) × each column's variance, with
    // shared and per-component Ψ.
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let fit = MfaParams::new(3, 1)
            .seed(3)
            .psi_mode(mode)
            .fit(x.view())
            .unwrap();
        for row in fit.model.psi().rows() {
            for j in 0..3 {
                let f = 1e-3 * col_var(&x, j);
                assert!(
                    (row[j] - f).abs() <= 1e-6 * f,
                    "{mode:?}: psi_{j} = {} vs floor {f}",
                    row[j]
                );
            }
        }
    }
}

#[test]
fn fewer_distinct_points_than_components() {
    // Two distinct points, 10 copies each, K = 4.
    let mut x = Array2::zeros((20, 2));
    for i in 0..20 {
        if i % 2 == 1 {
            x.row_mut(i).assign(&ndarray::array![3.0, -1.0]);
        }
    }
    let g = gmm_fit(&x, 4);
    let m = mfa_fit(
        &Array2::from_shape_fn((20, 3), |(i, j)| x[[i, j.min(1)]]),
        4,
        1,
    );
    for means in [
        g.means().to_owned(),
        m.means().slice(ndarray::s![.., ..2]).to_owned(),
    ] {
        for row in means.rows() {
            let at = |p: [f64; 2]| (row[0] - p[0]).abs() < 1e-6 && (row[1] - p[1]).abs() < 1e-6;
            assert!(
                at([0.0, 0.0]) || at([3.0, -1.0]),
                "mean {row} is not a data point"
            );
        }
    }
    // Both points are covered, half the weight each.
    let near = |p: f64| -> f64 {
        g.means()
            .rows()
            .into_iter()
            .zip(g.weights())
            .filter(|(r, _)| (r[0] - p).abs() < 1e-6)
            .map(|(_, w)| *w)
            .sum()
    };
    assert!((near(0.0) - 0.5).abs() < 1e-9 && (near(3.0) - 0.5).abs() < 1e-9);
}

#[test]
fn huge_and_tiny_magnitudes_are_scale_equivariant_in_f64() {
    // The stopping rule compares relative changes of the mean log-likelihood,
    // which scaling shifts by -D·ln s: run a fixed number of iterations
    // (tol = 0) so both fits make the same EM steps.
    let gp = GmmParams::<f64>::new(2).seed(3).tol(0.0).max_iter(30);
    let mp = MfaParams::new(2, 1).seed(3).tol(0.0).max_iter(30);
    let x = two_clusters(400, 3, 2);
    let g = gmm_fit_with(&x, gp.clone());
    let m = mfa_fit_with(&x, mp.clone());
    for s in [1e15, 1e-15] {
        let xs = x.mapv(|v| v * s);
        let gs = gmm_fit_with(&xs, gp.clone());
        let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-300);
        for (a, b) in gs.means().iter().zip(g.means()) {
            assert!(rel(*a, b * s) < 1e-6, "scale {s}: mean {a} vs {}", b * s);
        }
        for (a, b) in gs.variances().iter().zip(g.variances()) {
            assert!(
                rel(*a, b * s * s) < 1e-6,
                "scale {s}: variance {a} vs {}",
                b * s * s
            );
        }
        for (a, b) in gs.weights().iter().zip(g.weights()) {
            assert!((a - b).abs() < 1e-9);
        }
        let ms = mfa_fit_with(&xs, mp.clone());
        for (a, b) in ms.means().iter().zip(m.means()) {
            assert!(
                rel(*a, b * s) < 1e-6,
                "scale {s}: MFA mean {a} vs {}",
                b * s
            );
        }
        for (a, b) in ms.psi().iter().zip(m.psi()) {
            assert!(
                rel(*a, b * s * s) < 1e-6,
                "scale {s}: psi {a} vs {}",
                b * s * s
            );
        }
        // Λ is determined up to sign: compare ΛΛᵀ diagonals.
        for (a, b) in ms.loadings().iter().zip(m.loadings()) {
            assert!(
                rel(a * a, b * b * s * s) < 1e-5,
                "scale {s}: loading {a} vs {}",
                b * s
            );
        }
    }
}

#[test]
fn huge_and_tiny_magnitudes_stay_valid_in_f32() {
    let x = two_clusters(400, 3, 2);
    for s in [1e15f64, 1e-15] {
        let xs = x.mapv(|v| (v * s) as f32);
        let fit = GmmParams::<f32>::new(2).seed(3).fit(xs.view()).unwrap();
        assert!(fit.log_likelihood.iter().all(|l| l.is_finite()));
        check_gmm32(&fit.model);
        let m0 = fit.model.means()[[0, 0]].abs() as f64;
        let v_min = fit.model.variances().fold(f32::INFINITY, |a, &b| a.min(b)) as f64;
        if s > 1.0 {
            // Means at the data's scale: the two clusters are found.
            assert!(m0 > 3.0 * s && m0 < 9.0 * s, "scale {s}: mean {m0}");
        } else {
            // f32 variances stop at sqrt(f32::MIN_POSITIVE) ≈ 1.08e-19 (so that
            // 1/σ² stays finite), far above the data's ~1e-30: the components
            // are wider than the clusters and merge towards the data mean.
            // Valid and finite, but the structure is lost — fit in f64.
            assert!(
                v_min >= (f32::MIN_POSITIVE as f64).sqrt() * 0.999,
                "{v_min}"
            );
            assert!(m0 < 9.0 * s, "scale {s}: mean {m0} outside the data");
        }
        let fit = MfaParams::new(2, 1).seed(3).fit(xs.view()).unwrap();
        assert!(fit.log_likelihood.iter().all(|l| l.is_finite()));
        check_mfa(&fit.model.cast::<f64>().unwrap());
    }
}

#[test]
fn one_dimension() {
    let x = two_clusters(300, 1, 4);
    let g = gmm_fit(&x, 2);
    let mut mu: Vec<f64> = g.means().iter().copied().collect();
    mu.sort_by(f64::total_cmp);
    assert!(
        (mu[0] + 6.0).abs() < 0.2 && (mu[1] - 6.0).abs() < 0.2,
        "{mu:?}"
    );
    assert!(g.variances().iter().all(|&v| (v - 0.25).abs() < 0.1));
    // MFA needs 0 < R < D: impossible in one dimension, a clear error.
    let e = MfaParams::new(2, 1).fit(x.view()).unwrap_err();
    assert!(e.to_string().contains("0 < R < D = 1"), "{e}");
}

#[test]
fn one_component() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let x = Array2::from_shape_fn((500, 4), |(_, j)| {
        let z: f64 = StandardNormal.sample(&mut rng);
        (j as f64 - 1.5) * 3.0 + z * (1.0 + j as f64) + 0.3 * rng.random::<f64>()
    });
    let mean: Array1<f64> = x.mean_axis(Axis(0)).unwrap();
    let var: Array1<f64> = x.var_axis(Axis(0), 0.0);
    let g = gmm_fit(&x, 1);
    assert_eq!(g.weights()[0], 1.0);
    for j in 0..4 {
        assert!((g.means()[[0, j]] - mean[j]).abs() < 1e-12 * (1.0 + mean[j].abs()));
        assert!((g.variances()[[0, j]] - var[j]).abs() < 1e-10 * var[j]);
    }
    let m = mfa_fit(&x, 1, 2);
    assert!((m.weights()[0] - 1.0).abs() < 1e-12);
    for j in 0..4 {
        assert!((m.means()[[0, j]] - mean[j]).abs() < 1e-6 * (1.0 + var[j].sqrt()));
        let l = m.loadings();
        let model_var = (0..2).map(|r| l[[0, j, r]] * l[[0, j, r]]).sum::<f64>() + m.psi()[[0, j]];
        assert!(
            (model_var - var[j]).abs() < 1e-3 * var[j],
            "dim {j}: model variance {model_var}, sample variance {}",
            var[j]
        );
    }
}

#[test]
fn variance_floor_kinds_apply_to_constant_data() {
    // An absolute floor is used as is.
    let x = Array2::from_elem((10, 2), 1.0);
    let fit = GmmParams::<f64>::new(1)
        .variance_floor(VarianceFloor::Absolute(1e-4))
        .fit(x.view())
        .unwrap();
    check_gmm(&fit.model);
    assert!(fit
        .model
        .variances()
        .iter()
        .all(|&v| (v - 1e-4).abs() < 1e-15));
}
