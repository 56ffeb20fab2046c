//! MFA EM: monotone log-likelihood, planted-model recovery, reproducibility,
//! K = 1 against scikit-learn's `FactorAnalysis` (LAPACK SVD, run to a stall),
//! and one E+M step for K > 1 against numpy's dense D×D formulas
//! (`docs/math.md` §4.4). The Python peers skip (with a message) only when
//! python3, numpy or scikit-learn cannot be imported, unless
//! `FISHERKIT_REQUIRE_PEERS=1`; any other Python failure fails the test.
#![allow(clippy::needless_range_loop)]

#[path = "pca_svm_common/mod.rs"]
mod common;

use fisherkit::mfa::{Mfa, MfaParams, PsiMode};
use ndarray::{Array1, Array2, Array3, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, Uniform};

/// A well-separated planted MFA and N samples from it.
fn planted(
    k: usize,
    d: usize,
    r: usize,
    n: usize,
    mode: PsiMode,
    seed: u64,
) -> (Mfa<f64>, Array2<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nrm = Normal::new(0.0, 1.0).unwrap();
    let uni = Uniform::new(0.2, 0.6).unwrap();
    let w = Array1::from_elem(k, 1.0 / k as f64);
    let means = Array2::from_shape_fn((k, d), |_| 8.0 * nrm.sample(&mut rng));
    let lam = Array3::from_shape_fn((k, d, r), |_| 1.5 * nrm.sample(&mut rng));
    let p = if mode == PsiMode::Shared { 1 } else { k };
    let psi = Array2::from_shape_fn((p, d), |_| uni.sample(&mut rng));
    let m = Mfa::new(w, means, lam, psi).unwrap();
    let mut x = Array2::zeros((n, d));
    for i in 0..n {
        let c = i % k;
        let z: Vec<f64> = (0..r).map(|_| nrm.sample(&mut rng)).collect();
        let pr = if p == 1 { 0 } else { c };
        for dd in 0..d {
            let mut v = m.means()[[c, dd]] + m.psi()[[pr, dd]].sqrt() * nrm.sample(&mut rng);
            for a in 0..r {
                v += m.loadings()[[c, dd, a]] * z[a];
            }
            x[[i, dd]] = v;
        }
    }
    (m, x)
}

fn check_monotone(lls: &[f64], slack: f64, what: &str) {
    for t in 1..lls.len() {
        assert!(
            lls[t] >= lls[t - 1] - slack * lls[t - 1].abs(),
            "{what}: log-likelihood decreased at iteration {t}: {} -> {}",
            lls[t - 1],
            lls[t]
        );
    }
}

#[test]
fn em_log_likelihood_never_decreases() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let (_, x) = planted(4, 8, 2, 2000, mode, 7);
        let p = MfaParams::new(4, 2)
            .psi_mode(mode)
            .max_iter(40)
            .tol(0.0)
            .seed(3);
        let f64fit = p.fit(x.view()).unwrap();
        assert_eq!(f64fit.log_likelihood.len(), 40);
        check_monotone(&f64fit.log_likelihood, 1e-12, &format!("f64 {mode:?}"));
        // the final model is at least as good as the last recorded one
        let last = f64fit.model.score(x.view()).unwrap();
        assert!(last >= f64fit.log_likelihood[39] - 1e-12 * last.abs());
        let x32 = x.mapv(|v| v as f32);
        let f32fit = p.fit(x32.view()).unwrap();
        check_monotone(&f32fit.log_likelihood, 2e-6, &format!("f32 {mode:?}"));
        let gap = (f32fit.log_likelihood[39] - f64fit.log_likelihood[39]).abs();
        assert!(
            gap < 1e-3 * last.abs(),
            "f32 vs f64 final LL differ by {gap}"
        );
    }
}

/// sin of the largest principal angle between the column spaces of a and b (D, R).
fn max_sin_angle(a: ndarray::ArrayView2<f64>, b: ndarray::ArrayView2<f64>) -> f64 {
    let orth = |m: ndarray::ArrayView2<f64>| {
        let mut q = m.to_owned();
        for j in 0..q.ncols() {
            for i in 0..j {
                let p = q.column(i).dot(&q.column(j));
                let ci = q.column(i).to_owned();
                q.column_mut(j).scaled_add(-p, &ci);
            }
            let nrm = q.column(j).dot(&q.column(j)).sqrt();
            q.column_mut(j).mapv_inplace(|v| v / nrm);
        }
        q
    };
    let (qa, qb) = (orth(a), orth(b));
    let pa = qa.dot(&qa.t());
    let pb = qb.dot(&qb.t());
    // ‖Pa − Pb‖_F² = 2 Σ sin² θ  ≥ 2 max sin² θ
    ((&pa - &pb).mapv(|v| v * v).sum() / 2.0).sqrt()
}

#[test]
fn planted_model_is_recovered() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let (truth, x) = planted(3, 10, 2, 3000, mode, 17);
        let fit = MfaParams::new(3, 2)
            .psi_mode(mode)
            .max_iter(300)
            .tol(1e-9)
            .n_init(2)
            .seed(5)
            .fit(x.view())
            .unwrap();
        assert!(fit.converged, "{mode:?}: not converged in 300 iterations");
        let ll_fit = fit.model.score(x.view()).unwrap();
        let ll_true = truth.score(x.view()).unwrap();
        assert!(
            ll_fit >= ll_true - 1e-3,
            "{mode:?}: fitted LL {ll_fit} below planted LL {ll_true}"
        );
        for c in 0..3 {
            // match by nearest mean
            let j = (0..3)
                .min_by(|&a, &b| {
                    let da = (&fit.model.means().row(a) - &truth.means().row(c))
                        .mapv(|v| v * v)
                        .sum();
                    let db = (&fit.model.means().row(b) - &truth.means().row(c))
                        .mapv(|v| v * v)
                        .sum();
                    da.partial_cmp(&db).unwrap()
                })
                .unwrap();
            let dist = (&fit.model.means().row(j) - &truth.means().row(c))
                .mapv(|v| v * v)
                .sum()
                .sqrt();
            assert!(dist < 0.5, "{mode:?}: component {c} mean off by {dist}");
            let s = max_sin_angle(
                fit.model.loadings().index_axis(Axis(0), j),
                truth.loadings().index_axis(Axis(0), c),
            );
            assert!(s < 0.1, "{mode:?}: component {c} subspace angle sin = {s}");
            assert!((fit.model.weights()[j] - 1.0 / 3.0).abs() < 0.02);
        }
    }
}

#[test]
fn same_seed_same_bits_and_progress_reports() {
    let (_, x) = planted(3, 6, 2, 9000, PsiMode::Shared, 23); // > 2 parallel blocks
    let p = MfaParams::new(3, 2).max_iter(5).tol(0.0).seed(9);
    let mut seen = Vec::new();
    let a = p
        .fit_with_progress(x.view(), &mut |it| {
            seen.push((it.restart, it.iter, it.log_likelihood))
        })
        .unwrap();
    assert_eq!(seen.len(), 5);
    assert_eq!(
        seen.iter().map(|s| s.2).collect::<Vec<_>>(),
        a.log_likelihood
    );
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b = one_thread.install(|| p.fit(x.view()).unwrap());
    assert_eq!(a.model, b.model);
    assert_eq!(a.log_likelihood, b.log_likelihood);
}

#[test]
fn single_factor_analyser_matches_scikit_learn() {
    let r = 5;
    let body = format!(
        "X = load_digits().data\n\
         X = X[:, X.std(0) > 0]\n\
         fa = FactorAnalysis(n_components={r}, tol=0.0, max_iter=2000, svd_method='lapack').fit(X)\n\
         emit('score', [[fa.score(X)]])\n\
         emit('x', X)\n"
    );
    let Some(peer) = common::run_python(
        "from sklearn.datasets import load_digits\n    from sklearn.decomposition import FactorAnalysis",
        &body,
        "",
    ) else {
        return;
    };
    let sk = peer["score"][[0, 0]];
    let x = &peer["x"];
    let fit = MfaParams::new(1, r)
        .max_iter(5000)
        .tol(1e-12)
        .psi_floor(1e-6)
        .fit(x.view())
        .unwrap();
    let ours = fit.model.score(x.view()).unwrap();
    eprintln!(
        "digits K=1 R={r}: ours {ours} after {} iterations, scikit-learn {sk}",
        fit.n_iter
    );
    assert!((ours - sk).abs() < 1e-6, "ours {ours} vs scikit-learn {sk}");
}

/// One EM step written with dense D×D matrices in numpy: $S_k = \Lambda_k
/// \Lambda_k^\top + \Psi$ inverted directly, posteriors by log-sum-exp of the
/// dense log-densities, $E[z] = \Lambda^\top S^{-1} d$ and $\operatorname{Cov}[z]
/// = I - \Lambda^\top S^{-1}\Lambda$, then Ghahramani & Hinton's update of
/// $[\Lambda_k\ \mu_k]$, Ψ and the weights — no Woodbury identity, no
/// centring, no sufficient-statistic shortcut.
const DENSE_M_STEP: &str = r#"
x = read("x"); w = read("w")[0]; mu = read("mu"); psi = read("psi")
K, D = mu.shape
lam = read("lam").reshape(K, D, -1)
R = lam.shape[2]
N = len(x)
logp = np.zeros((N, K)); ez = []; cz = []
for k in range(K):
    p = psi[0] if psi.shape[0] == 1 else psi[k]
    L = lam[k]
    S = L @ L.T + np.diag(p)
    Si = np.linalg.inv(S)
    _, logdet = np.linalg.slogdet(S)
    d = x - mu[k]
    logp[:, k] = np.log(w[k]) - 0.5 * (D * np.log(2 * np.pi) + logdet + np.einsum("ij,jk,ik->i", d, Si, d))
    B = L.T @ Si
    ez.append(d @ B.T)
    cz.append(np.eye(R) - B @ L)
top = logp.max(1, keepdims=True)
h = np.exp(logp - top)
ll = float(np.sum(top[:, 0] + np.log(h.sum(1))))
h /= h.sum(1, keepdims=True)
nk = h.sum(0)
new_lam = np.zeros((K, D, R)); new_mu = np.zeros((K, D)); resid = np.zeros((K, D))
for k in range(K):
    zt = np.hstack([ez[k], np.ones((N, 1))])
    A = np.einsum("i,ij,il->jl", h[:, k], zt, zt)
    A[:R, :R] += nk[k] * cz[k]
    Bk = (h[:, k, None] * x).T @ zt
    Lt = Bk @ np.linalg.inv(A)
    new_lam[k] = Lt[:, :R]; new_mu[k] = Lt[:, R]
    resid[k] = (h[:, k, None] * x * x).sum(0) - (Lt * Bk).sum(1)
new_psi = resid.sum(0, keepdims=True) / N if psi.shape[0] == 1 else resid / nk[:, None]
emit("ll", [[ll]]); emit("w", nk / N); emit("mu", new_mu)
emit("lam", new_lam.reshape(K, D * R)); emit("psi", new_psi)
"#;

#[test]
fn one_em_step_for_several_components_matches_dense_numpy() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let (truth, x) = planted(3, 6, 2, 600, mode, 17);
        let (k, d, r) = (3, 6, 2);
        // A start model between the clusters with wide noise: soft posteriors,
        // so every component's update sees every row.
        let mut rng = ChaCha8Rng::seed_from_u64(18);
        let nrm = Normal::new(0.0, 1.0).unwrap();
        let w = Array1::from_vec(vec![0.5, 0.3, 0.2]);
        let means = truth.means().mapv(|v| 0.3 * v);
        let lam = Array3::from_shape_fn((k, d, r), |_| nrm.sample(&mut rng));
        let p = if mode == PsiMode::Shared { 1 } else { k };
        let psi = Array2::from_shape_fn((p, d), |(a, j)| 30.0 + (a + j) as f64);
        let start = Mfa::new(w.clone(), means.clone(), lam.clone(), psi.clone()).unwrap();

        let mut input = String::new();
        common::write_matrix(&mut input, "x", x.view());
        common::write_matrix(&mut input, "w", w.view().insert_axis(Axis(0)));
        common::write_matrix(&mut input, "mu", means.view());
        common::write_matrix(&mut input, "psi", psi.view());
        let lam2 = lam.to_shape((k, d * r)).unwrap().to_owned();
        common::write_matrix(&mut input, "lam", lam2.view());
        let Some(peer) = common::run_python("", DENSE_M_STEP, &input) else {
            return;
        };

        let st = start.sufficient_statistics(x.view()).unwrap();
        let ll = peer["ll"][[0, 0]];
        assert!(
            (st.log_likelihood() - ll).abs() <= 1e-10 * ll.abs(),
            "{mode:?}: log-likelihood {} vs dense {ll}",
            st.log_likelihood()
        );
        // posteriors are soft: the smallest component still holds many rows
        let soft = st
            .soft_counts()
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        assert!(soft > 50.0, "{mode:?}: soft counts {}", st.soft_counts());
        let new = start.update_from_statistics(&st, 0.0).unwrap();
        let close = |what: &str, got: ndarray::ArrayViewD<f64>, want: ndarray::ArrayViewD<f64>| {
            assert_eq!(got.len(), want.len(), "{what}");
            let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            for (g, v) in got.iter().zip(want.iter()) {
                assert!(
                    (g - v).abs() <= 1e-9 * scale,
                    "{mode:?} {what}: {g} vs dense {v}"
                );
            }
        };
        close(
            "weights",
            new.weights().into_dyn(),
            peer["w"].row(0).into_dyn(),
        );
        close(
            "means",
            new.means().into_dyn(),
            peer["mu"].view().into_dyn(),
        );
        let nl = new.loadings().to_shape((k, d * r)).unwrap().to_owned();
        close(
            "loadings",
            nl.view().into_dyn(),
            peer["lam"].view().into_dyn(),
        );
        close("psi", new.psi().into_dyn(), peer["psi"].view().into_dyn());
        // and the step moved the model (the comparison is not of a fixed point)
        let moved = (&new.means() - &start.means())
            .iter()
            .fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(moved > 0.1, "{mode:?}: means moved by {moved}");
    }
}

#[test]
fn constant_column_and_few_rows_fit_without_nan() {
    let (_, mut x) = planted(2, 5, 1, 300, PsiMode::Shared, 31);
    x.column_mut(3).fill(100.0);
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let fit = MfaParams::new(2, 1)
            .psi_mode(mode)
            .max_iter(20)
            .fit(x.view())
            .unwrap();
        assert!(fit.log_likelihood.iter().all(|v| v.is_finite()));
        assert!(fit.model.psi().iter().all(|v| *v > 0.0 && v.is_finite()));
        let x32 = x.mapv(|v| v as f32);
        let f32fit = MfaParams::new(2, 1)
            .psi_mode(mode)
            .max_iter(20)
            .fit(x32.view())
            .unwrap();
        assert!(f32fit.model.score(x32.view()).unwrap().is_finite());
    }
    // as many components as rows
    let small = x.slice(ndarray::s![..4, ..]).to_owned();
    let fit = MfaParams::new(4, 2).max_iter(5).fit(small.view()).unwrap();
    assert!(fit.model.score(small.view()).unwrap().is_finite());
}

/// Regression: per-thread cached workspaces of a per-component fit must not leak
/// into a later single-component fit (its Σ y² once picked up stale sums).
#[test]
fn per_component_fit_does_not_disturb_a_later_single_component_fit() {
    let (_, x1) = planted(1, 6, 2, 1500, PsiMode::Shared, 11);
    let (_, x3) = planted(3, 6, 2, 1500, PsiMode::PerComponent, 12);
    let fit1 = || {
        MfaParams::new(1, 2)
            .max_iter(30)
            .seed(0)
            .fit(x1.view())
            .unwrap()
    };
    let before = fit1();
    MfaParams::new(3, 2)
        .psi_mode(PsiMode::PerComponent)
        .max_iter(3)
        .fit(x3.view())
        .unwrap();
    let after = fit1();
    assert_eq!(before.model.psi(), after.model.psi());
    assert_eq!(before.log_likelihood, after.log_likelihood);
}
