//! MFA model: Woodbury log-likelihood vs dense D×D algebra, Fisher scores vs
//! finite differences, mergeable statistics, errors.
#![allow(clippy::needless_range_loop)]

use fisherkit::encode::{parse_mfa_parts, MfaFisherScore, MfaFisherScoreParams, MfaPart};
use fisherkit::mfa::{Mfa, MfaError, MfaParams, PsiMode};
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2, Array3, Axis};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, Uniform};

fn random_model(k: usize, d: usize, r: usize, mode: PsiMode, seed: u64) -> Mfa<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nrm = Normal::new(0.0, 1.0).unwrap();
    let uni = Uniform::new(0.3, 1.5).unwrap();
    let w: Array1<f64> = Array1::from_shape_fn(k, |_| uni.sample(&mut rng));
    let w = &w / w.sum();
    let means = Array2::from_shape_fn((k, d), |_| 2.0 * nrm.sample(&mut rng) + 5.0);
    let lam = Array3::from_shape_fn((k, d, r), |_| nrm.sample(&mut rng));
    let p = if mode == PsiMode::Shared { 1 } else { k };
    let psi = Array2::from_shape_fn((p, d), |_| uni.sample(&mut rng));
    Mfa::new(w, means, lam, psi).unwrap()
}

fn sample(m: &Mfa<f64>, n: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nrm = Normal::new(0.0, 1.0).unwrap();
    let uni = Uniform::new(0.0, 1.0).unwrap();
    let (k, d, r) = (m.n_components(), m.dim(), m.n_factors());
    let mut x = Array2::zeros((n, d));
    for i in 0..n {
        let u: f64 = uni.sample(&mut rng);
        let mut acc = 0.0;
        let mut c = k - 1;
        for j in 0..k {
            acc += m.weights()[j];
            if u < acc {
                c = j;
                break;
            }
        }
        let z: Vec<f64> = (0..r).map(|_| nrm.sample(&mut rng)).collect();
        let pr = if m.psi().nrows() == 1 { 0 } else { c };
        for dd in 0..d {
            let mut v = m.means()[[c, dd]];
            for a in 0..r {
                v += m.loadings()[[c, dd, a]] * z[a];
            }
            v += m.psi()[[pr, dd]].sqrt() * nrm.sample(&mut rng);
            x[[i, dd]] = v;
        }
    }
    x
}

/// Naive Gauss-Jordan inverse and log|det| of a dense matrix.
fn inv_logdet(a: &Array2<f64>) -> (Array2<f64>, f64) {
    let n = a.nrows();
    let mut m = a.clone();
    let mut inv = Array2::<f64>::eye(n);
    let mut logdet = 0.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| m[[i, c]].abs().partial_cmp(&m[[j, c]].abs()).unwrap())
            .unwrap();
        if p != c {
            for j in 0..n {
                m.swap([p, j], [c, j]);
                inv.swap([p, j], [c, j]);
            }
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

/// Dense log w_k N(x; mu_k, Λ Λᵀ + Ψ) for every row and component (N, K).
fn dense_log_joint(m: &Mfa<f64>, x: &Array2<f64>) -> Array2<f64> {
    let (k, d) = (m.n_components(), m.dim());
    let mut out = Array2::zeros((x.nrows(), k));
    for c in 0..k {
        let lam = m.loadings().index_axis(Axis(0), c).to_owned();
        let pr = if m.psi().nrows() == 1 { 0 } else { c };
        let mut s = lam.dot(&lam.t());
        for dd in 0..d {
            s[[dd, dd]] += m.psi()[[pr, dd]];
        }
        let (si, ld) = inv_logdet(&s);
        for (i, row) in x.rows().into_iter().enumerate() {
            let diff = &row - &m.means().row(c);
            let q = diff.dot(&si.dot(&diff));
            out[[i, c]] =
                m.weights()[c].ln() - 0.5 * (d as f64 * (2.0 * std::f64::consts::PI).ln() + ld + q);
        }
    }
    out
}

fn lse(v: ndarray::ArrayView1<f64>) -> f64 {
    let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    mx + v.iter().map(|a| (a - mx).exp()).sum::<f64>().ln()
}

#[test]
fn woodbury_loglik_and_posteriors_match_dense_covariance() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let m = random_model(3, 7, 2, mode, 1);
        let x = sample(&m, 600, 2); // > one chunk
        let lj = dense_log_joint(&m, &x);
        let ll = m.score_samples(x.view()).unwrap();
        let q = m.predict_proba(x.view()).unwrap();
        for i in 0..x.nrows() {
            let want = lse(lj.row(i));
            assert!(
                (ll[i] - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{mode:?} row {i}: {} vs {want}",
                ll[i]
            );
            for c in 0..3 {
                assert!((q[[i, c]] - (lj[[i, c]] - want).exp()).abs() < 1e-9);
            }
        }
        let mean = ll.sum() / ll.len() as f64;
        assert!((m.score(x.view()).unwrap() - mean).abs() < 1e-12);
    }
}

#[test]
fn f32_loglik_agrees_with_f64() {
    let m = random_model(3, 20, 3, PsiMode::Shared, 3);
    let x = sample(&m, 300, 4);
    let ll64 = m.score_samples(x.view()).unwrap();
    let m32: Mfa<f32> = m.cast().unwrap();
    let ll32 = m32.score_samples(x.mapv(|v| v as f32).view()).unwrap();
    for i in 0..x.nrows() {
        assert!(
            (ll64[i] - ll32[i]).abs() < 1e-3 * (1.0 + ll64[i].abs()),
            "{} {}",
            ll64[i],
            ll32[i]
        );
    }
}

fn raw_encoder(m: &Mfa<f64>) -> MfaFisherScore<f64> {
    MfaFisherScore::new(
        m.clone(),
        MfaFisherScoreParams {
            parts: vec![MfaPart::Mean, MfaPart::Loading],
            normalization: Normalization::NONE,
            whitening: None,
        },
    )
    .unwrap()
}

#[test]
fn fisher_scores_are_finite_difference_gradients_of_mean_loglik() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let m = random_model(2, 5, 2, mode, 11);
        let x = sample(&m, 40, 12);
        let g = raw_encoder(&m).encode(x.view()).unwrap();
        let (k, d, r) = (2, 5, 2);
        let mut fd = Array1::<f64>::zeros(k * d + k * d * r);
        let h = 1e-5;
        let ll = |mm: &Mfa<f64>| mm.score(x.view()).unwrap();
        let (w, mu, lam, psi) = m.clone().into_parts();
        for c in 0..k {
            for dd in 0..d {
                let f = |delta: f64| {
                    let mut mu2 = mu.clone();
                    mu2[[c, dd]] += delta;
                    ll(&Mfa::new(w.clone(), mu2, lam.clone(), psi.clone()).unwrap())
                };
                fd[c * d + dd] = (f(h) - f(-h)) / (2.0 * h);
                for a in 0..r {
                    let f = |delta: f64| {
                        let mut l2 = lam.clone();
                        l2[[c, dd, a]] += delta;
                        ll(&Mfa::new(w.clone(), mu.clone(), l2, psi.clone()).unwrap())
                    };
                    fd[k * d + c * d * r + dd * r + a] = (f(h) - f(-h)) / (2.0 * h);
                }
            }
        }
        let err = (&g - &fd).mapv(|v| v * v).sum().sqrt() / fd.mapv(|v| v * v).sum().sqrt();
        assert!(err < 1e-6, "{mode:?}: relative error {err}\n{g}\n{fd}");
        // loading-only encoder is the tail of the full one
        let lo = MfaFisherScore::new(
            m.clone(),
            MfaFisherScoreParams {
                parts: vec![MfaPart::Loading],
                normalization: Normalization::NONE,
                whitening: None,
            },
        )
        .unwrap();
        assert_eq!(lo.output_dim(), k * d * r);
        let gl = lo.encode(x.view()).unwrap();
        assert!((&gl - &g.slice(ndarray::s![k * d..]))
            .iter()
            .all(|v| v.abs() < 1e-12));
        // mean-only encoder (its own narrower kernel path) is the head of the full one
        let me = MfaFisherScore::new(
            m.clone(),
            MfaFisherScoreParams {
                parts: vec![MfaPart::Mean],
                normalization: Normalization::NONE,
                whitening: None,
            },
        )
        .unwrap();
        assert_eq!(me.output_dim(), k * d);
        let gm = me.encode(x.view()).unwrap();
        assert!((&gm - &g.slice(ndarray::s![..k * d]))
            .iter()
            .all(|v| v.abs() < 1e-12));
        // and a bag longer than one chunk (several flushes)
        let xl = sample(&m, 1300, 13);
        let full = raw_encoder(&m).encode(xl.view()).unwrap();
        let gm = me.encode(xl.view()).unwrap();
        let scale = full.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!((&gm - &full.slice(ndarray::s![..k * d]))
            .iter()
            .all(|v| v.abs() <= 1e-12 * scale));
    }
}

#[test]
fn default_encoder_normalises_and_f32_matches_f64() {
    let m = random_model(3, 12, 2, PsiMode::Shared, 21);
    let bags: Vec<Array2<f64>> = (0..4)
        .map(|b| sample(&m, 50 + 30 * b, 30 + b as u64))
        .collect();
    let enc = MfaFisherScore::new(m.clone(), MfaFisherScoreParams::default()).unwrap();
    assert_eq!(enc.output_dim(), 3 * 12 * 2);
    let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
    let v = enc.encode_batch(&views).unwrap();
    for row in v.rows() {
        assert!((row.dot(&row) - 1.0).abs() < 1e-9);
    }
    let raw = raw_encoder(&m).encode(bags[1].view()).unwrap();
    let mut want = raw.slice(ndarray::s![36..]).to_owned();
    Normalization::default().apply(want.view_mut());
    assert!((&want - &v.row(1)).iter().all(|a| a.abs() < 1e-12));
    // f32
    let enc32 =
        MfaFisherScore::new(m.cast::<f32>().unwrap(), MfaFisherScoreParams::default()).unwrap();
    let v32 = enc32.encode(bags[1].mapv(|a| a as f32).view()).unwrap();
    let diff: f64 = v32
        .iter()
        .zip(v.row(1).iter())
        .map(|(a, b)| (*a as f64 - b).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(diff < 1e-3, "f32 vs f64 encoding differ by {diff}");
    // Whitening. The estimate is the per-entry (1/B) variance of the raw
    // scores over the training bags, recomputed here from each bag's raw
    // score with a two-pass formula; encoding divides the raw score of any
    // bag by sqrt(max(F, 1e-12 · mean F)) (docs/math.md §5.3).
    let raw_enc = raw_encoder(&m);
    let train: Vec<Array2<f64>> = (0..40).map(|b| sample(&m, 60, 100 + b)).collect();
    let held: Vec<Array2<f64>> = (0..40).map(|b| sample(&m, 60, 200 + b)).collect();
    let tv: Vec<_> = train.iter().map(|b| b.view()).collect();
    let fim = raw_enc.fit_whitening(&tv).unwrap();
    let raws: Vec<Array1<f64>> = train
        .iter()
        .map(|b| raw_enc.encode(b.view()).unwrap())
        .collect();
    let dim = raws[0].len();
    let nb = raws.len() as f64;
    for j in 0..dim {
        let mean = raws.iter().map(|r| r[j]).sum::<f64>() / nb;
        let var = raws.iter().map(|r| (r[j] - mean).powi(2)).sum::<f64>() / nb;
        assert!(
            (fim[j] - var).abs() <= 1e-12 * var,
            "entry {j}: {} vs {var}",
            fim[j]
        );
    }
    let mut white = MfaFisherScore::new(
        m.clone(),
        MfaFisherScoreParams {
            parts: vec![MfaPart::Mean, MfaPart::Loading],
            normalization: Normalization::NONE,
            whitening: Some(fim.clone()),
        },
    )
    .unwrap();
    let floor = 1e-12 * fim.mean().unwrap();
    let mut ratio = 0.0;
    for b in &held {
        let r = raw_enc.encode(b.view()).unwrap();
        let w = white.encode(b.view()).unwrap();
        for j in 0..dim {
            let want = r[j] / fim[j].max(floor).sqrt();
            assert!(
                (w[j] - want).abs() <= 1e-12 * want.abs().max(1e-300),
                "entry {j}"
            );
        }
    }
    // On held-out bags from the model itself the whitened entries have about
    // unit variance (the raw score's covariance is the Fisher information):
    // averaged over entries, within sampling error of 40 + 40 bags.
    for j in 0..dim {
        let col: Vec<f64> = held
            .iter()
            .map(|b| white.encode(b.view()).unwrap()[j])
            .collect();
        let mu = col.iter().sum::<f64>() / nb;
        ratio += col.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / nb / dim as f64;
    }
    assert!(
        (0.8..1.3).contains(&ratio),
        "mean whitened variance on held-out bags {ratio}"
    );
    assert!(white.set_whitening(Array1::zeros(3)).is_err());
    assert!(raw_enc.fit_whitening(&views[..1]).is_err());
}

#[test]
fn parts_parse() {
    assert_eq!(parse_mfa_parts("loading").unwrap(), vec![MfaPart::Loading]);
    assert_eq!(
        parse_mfa_parts("loading+mean").unwrap(),
        vec![MfaPart::Mean, MfaPart::Loading]
    );
    assert_eq!(
        parse_mfa_parts("mean, loading").unwrap(),
        vec![MfaPart::Mean, MfaPart::Loading]
    );
    assert!(parse_mfa_parts("var")
        .unwrap_err()
        .to_string()
        .contains("var"));
    assert!(parse_mfa_parts("").is_err());
}

#[test]
fn shard_statistics_merge_to_batch_statistics_and_update() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let m = random_model(3, 6, 2, mode, 41);
        let x = sample(&m, 5000, 42);
        let batch = m.sufficient_statistics(x.view()).unwrap();
        let mut a = m
            .sufficient_statistics(x.slice(ndarray::s![..1234, ..]))
            .unwrap();
        let b = m
            .sufficient_statistics(x.slice(ndarray::s![1234.., ..]))
            .unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.n_rows(), 5000);
        assert!(
            (a.log_likelihood() - batch.log_likelihood()).abs()
                < 1e-9 * batch.log_likelihood().abs()
        );
        assert!((a.soft_counts().to_owned() - batch.soft_counts())
            .iter()
            .all(|v| v.abs() < 1e-8));
        let u1 = m.update_from_statistics(&a, 1e-3).unwrap();
        let u2 = m.update_from_statistics(&batch, 1e-3).unwrap();
        let close = |p: ndarray::ArrayViewD<f64>, q: ndarray::ArrayViewD<f64>| {
            p.iter()
                .zip(q.iter())
                .all(|(a, b)| (a - b).abs() < 1e-8 * (1.0 + b.abs()))
        };
        assert!(close(u1.means().into_dyn(), u2.means().into_dyn()));
        assert!(close(u1.loadings().into_dyn(), u2.loadings().into_dyn()));
        assert!(close(u1.psi().into_dyn(), u2.psi().into_dyn()));
        assert!(close(u1.weights().into_dyn(), u2.weights().into_dyn()));
        // statistics of another model do not merge
        let other = random_model(3, 6, 2, mode, 43);
        let c = other.sufficient_statistics(x.view()).unwrap();
        assert!(matches!(a.merge(&c), Err(MfaError::StatisticsMismatch(_))));
        assert!(m.update_from_statistics(&c, 1e-3).is_err());
    }
}

#[test]
fn invalid_models_hyper_parameters_and_data_are_errors() {
    let m = random_model(2, 4, 1, PsiMode::Shared, 51);
    let (w, mu, lam, psi) = m.clone().into_parts();
    let e = |r: Result<Mfa<f64>, MfaError>| r.unwrap_err().to_string();
    assert!(e(Mfa::new(
        w.clone(),
        mu.clone(),
        Array3::zeros((2, 4, 0)),
        psi.clone()
    ))
    .contains("R = 0"));
    assert!(e(Mfa::new(
        w.clone(),
        mu.clone(),
        Array3::zeros((2, 4, 4)),
        psi.clone()
    ))
    .contains("R = 4"));
    assert!(e(Mfa::new(
        w.clone(),
        mu.clone(),
        Array3::zeros((2, 3, 1)),
        psi.clone()
    ))
    .contains("loadings have shape"));
    assert!(e(Mfa::new(
        w.clone(),
        mu.clone(),
        lam.clone(),
        Array2::zeros((1, 4))
    ))
    .contains("psi [0] is 0; psi must be finite and > 0"));
    assert!(e(Mfa::new(
        w.clone(),
        mu.clone(),
        lam.clone(),
        Array2::ones((3, 4))
    ))
    .contains("psi has shape"));
    assert!(e(Mfa::new(
        Array1::zeros(0),
        Array2::zeros((0, 4)),
        Array3::zeros((0, 4, 1)),
        psi.clone()
    ))
    .contains("0 components"));
    let x = sample(&m, 20, 52);
    let mut bad = x.clone();
    bad[[7, 2]] = f64::NAN;
    assert!(m
        .score(bad.view())
        .unwrap_err()
        .to_string()
        .contains("row 7"));
    assert!(m.sufficient_statistics(bad.view()).is_err());
    let fit_err = |p: MfaParams, x: &Array2<f64>| p.fit(x.view()).unwrap_err().to_string();
    assert!(fit_err(MfaParams::new(0, 1), &x).contains("n_components"));
    assert!(fit_err(MfaParams::new(21, 1), &x).contains("n_components"));
    assert!(fit_err(MfaParams::new(2, 0), &x).contains("n_factors"));
    assert!(fit_err(MfaParams::new(2, 4), &x).contains("n_factors"));
    assert!(fit_err(MfaParams::new(2, 1), &bad).contains("row 7"));
    assert!(fit_err(MfaParams::new(2, 1).tol(-1.0), &x).contains("tol"));
    let enc = raw_encoder(&m);
    assert!(enc.encode(Array2::<f64>::zeros((3, 5)).view()).is_err());
    assert!(MfaFisherScore::new(
        m,
        MfaFisherScoreParams {
            parts: vec![],
            ..Default::default()
        }
    )
    .is_err());
}

#[test]
fn starved_component_is_reseeded_not_nan() {
    let m = random_model(3, 6, 2, PsiMode::PerComponent, 61);
    let x = sample(&m, 800, 62);
    // move component 2 far away: it receives (almost) no responsibility
    let (w, mut mu, lam, psi) = m.into_parts();
    mu.row_mut(2).fill(1e4);
    let far = Mfa::new(w, mu, lam, psi).unwrap();
    let st = far.sufficient_statistics(x.view()).unwrap();
    assert!(st.soft_counts()[2] < 1e-6);
    let up = far.update_from_statistics(&st, 1e-3).unwrap();
    assert!(up.means().iter().all(|v| v.is_finite() && v.abs() < 100.0));
    assert!(
        up.weights()[2] > 0.05,
        "re-seeded weight {}",
        up.weights()[2]
    );
    assert!(up.score(x.view()).unwrap().is_finite());
}

#[test]
fn f32_kernel_is_accurate_far_from_origin() {
    let m = random_model(3, 10, 2, PsiMode::Shared, 71);
    let (w, mu, lam, psi) = m.into_parts();
    let shifted = Mfa::new(w, mu.mapv(|v| v + 1e4), lam, psi).unwrap();
    let x = sample(&shifted, 200, 72);
    let ll64 = shifted.score_samples(x.view()).unwrap();
    let m32: Mfa<f32> = shifted.cast().unwrap();
    let ll32 = m32.score_samples(x.mapv(|v| v as f32).view()).unwrap();
    let worst = ll64
        .iter()
        .zip(ll32.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 0.05,
        "f32 log-likelihood off by {worst} nats at offset 1e4"
    );
    let enc64 = MfaFisherScore::new(shifted.clone(), MfaFisherScoreParams::default()).unwrap();
    let enc32 = MfaFisherScore::new(m32, MfaFisherScoreParams::default()).unwrap();
    let v64 = enc64.encode(x.view()).unwrap();
    let v32 = enc32.encode(x.mapv(|v| v as f32).view()).unwrap();
    let diff: f64 = v64
        .iter()
        .zip(v32.iter())
        .map(|(a, b)| (a - *b as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(diff < 1e-2, "f32 encoding off by {diff} at offset 1e4");
}

/// Relative L2 distance ‖a − b‖ / ‖b‖ of an f32 array from an f64 one.
fn rel_dist<'a>(a: impl IntoIterator<Item = &'a f32>, b: impl IntoIterator<Item = &'a f64>) -> f64 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (x, y) in a.into_iter().zip(b) {
        num += (f64::from(*x) - y).powi(2);
        den += y * y;
    }
    (num / den).sqrt()
}

/// K = 24 separated components 1e3 from the origin: each row has one or two
/// live posteriors, so every chunk takes the sparse path (docs/math.md §4.6),
/// where the `f32` log-joints of the pairs that carry the mass are recomputed
/// in the centred direct form and every sum is taken in `f64`. The `f32`
/// log-likelihoods, posteriors, one EM step and raw Fisher scores are then
/// within 1e-6 of `f64` with the same model and rows. (Before the sparse
/// path, with the expanded GEMM form and `f32` sums, this measured
/// log-likelihoods 1.4e-6 (shared Ψ) and 4.0e-6 (per component) off and the
/// per-component ψ of the M-step 1.2e-6 off; the scores 7.8e-7. On real
/// descriptors the scores moved from 4.8e-6 to 2.6e-8: `scripts/bench.py --data real`.)
#[test]
fn f32_sparse_path_is_within_1e_6_of_f64_far_from_the_origin() {
    for mode in [PsiMode::Shared, PsiMode::PerComponent] {
        let m = random_model(24, 16, 3, mode, 81);
        let (w, mu, lam, psi) = m.into_parts();
        let far = Mfa::new(w, mu.mapv(|v| 1.5 * v + 1e3), lam, psi).unwrap();
        // The same f32-representable model and rows in both precisions.
        let m32: Mfa<f32> = far.cast().unwrap();
        let m64: Mfa<f64> = m32.cast().unwrap();
        let x32 = sample(&m64, 700, 82).mapv(|v| v as f32);
        let x64 = x32.mapv(f64::from);

        let l32 = m32.score_samples(x32.view()).unwrap();
        let l64 = m64.score_samples(x64.view()).unwrap();
        let worst = l32
            .iter()
            .zip(&l64)
            .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
            .fold(0.0, f64::max);
        assert!(worst < 1e-6, "{mode:?}: log-likelihood off by {worst:.2e}");
        let q32 = m32.predict_proba(x32.view()).unwrap();
        let q64 = m64.predict_proba(x64.view()).unwrap();
        let worst = q32
            .iter()
            .zip(&q64)
            .map(|(a, b)| (f64::from(*a) - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-6, "{mode:?}: posteriors off by {worst:.2e}");

        let up32 = m32
            .update_from_statistics(&m32.sufficient_statistics(x32.view()).unwrap(), 1e-3)
            .unwrap();
        let up64 = m64
            .update_from_statistics(&m64.sufficient_statistics(x64.view()).unwrap(), 1e-3)
            .unwrap();
        let checks = [
            ("means", rel_dist(up32.means(), up64.means())),
            ("loadings", rel_dist(up32.loadings(), up64.loadings())),
            ("psi", rel_dist(up32.psi(), up64.psi())),
            ("weights", rel_dist(up32.weights(), up64.weights())),
        ];
        for (name, e) in checks {
            assert!(e < 1e-6, "{mode:?}: M-step {name} off by {e:.2e}");
        }

        fn raw<F: fisherkit::Float>() -> MfaFisherScoreParams<F> {
            MfaFisherScoreParams {
                parts: vec![MfaPart::Mean, MfaPart::Loading],
                normalization: Normalization::NONE,
                whitening: None,
            }
        }
        let s32 = MfaFisherScore::new(m32.clone(), raw())
            .unwrap()
            .encode(x32.view())
            .unwrap();
        let s64 = MfaFisherScore::new(m64.clone(), raw())
            .unwrap()
            .encode(x64.view())
            .unwrap();
        let e = rel_dist(&s32, &s64);
        assert!(e < 1e-6, "{mode:?}: raw Fisher scores off by {e:.2e}");
    }
}

#[test]
fn encoding_into_a_strided_row_gives_the_same_bits() {
    // `Encoder::encode_unchecked` may be handed any view, e.g. a column of a
    // (dim, n_bags) matrix; the MFA-FS finishing writes contiguous slices.
    let m = random_model(3, 12, 2, PsiMode::PerComponent, 5);
    let bag = sample(&m, 80, 6);
    for params in [
        MfaFisherScoreParams::default(),
        MfaFisherScoreParams {
            parts: vec![MfaPart::Mean, MfaPart::Loading],
            normalization: Normalization::NONE,
            ..Default::default()
        },
    ] {
        let enc = MfaFisherScore::new(m.clone(), params).unwrap();
        let want = enc.encode(bag.view()).unwrap();
        let mut cols = Array2::<f64>::zeros((enc.output_dim(), 3));
        enc.encode_unchecked(bag.view(), cols.column_mut(1));
        assert_eq!(cols.column(1), want);
    }
}
