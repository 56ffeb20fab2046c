//! Hyper-parameters are checked once, by `check`, into their checked form
//! (params → checked params → fit): one test per invalid setting, each
//! naming the setting, and the checked form is what the fits run on.

use fisherkit::svm::{LinearSvcParams, SvmError};
use ndarray::array;

fn svm_error(p: LinearSvcParams) -> (&'static str, String) {
    match p.check().unwrap_err() {
        SvmError::InvalidHyperParameter { name, reason } => (name, reason),
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
}

#[test]
fn svm_cost_must_be_finite_and_positive() {
    for c in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let (name, reason) = svm_error(LinearSvcParams::with_c(c));
        assert_eq!(name, "c");
        assert!(reason.contains(&c.to_string()), "{reason}");
    }
}

#[test]
fn svm_tolerance_must_be_finite_and_positive() {
    for tol in [0.0, -0.1, f64::NAN, f64::INFINITY] {
        let (name, reason) = svm_error(LinearSvcParams {
            tol,
            ..Default::default()
        });
        assert_eq!(name, "tol");
        assert!(reason.contains("> 0"), "{reason}");
    }
}

#[test]
fn svm_max_iter_must_be_at_least_one() {
    let (name, reason) = svm_error(LinearSvcParams {
        max_iter: 0,
        ..Default::default()
    });
    assert_eq!(name, "max_iter");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn every_svm_entry_point_checks_the_settings_first() {
    let x = array![[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [2.0, 0.0]];
    let y = [0, 1, 0, 1];
    let bad = LinearSvcParams::with_c(0.0);
    let is_c = |e: SvmError| matches!(e, SvmError::InvalidHyperParameter { name: "c", .. });
    assert!(is_c(bad.fit(x.view(), &y).unwrap_err()));
    assert!(is_c(bad.fit_with_n_classes(x.view(), &y, 2).unwrap_err()));
    assert!(is_c(
        bad.fit_binary(x.view(), &[true, false, true, false])
            .unwrap_err()
    ));
    assert!(is_c(bad.select_c(x.view(), &y, &[1.0], 2, 0).unwrap_err()));
    assert!(is_c(
        bad.fit_with_cv(x.view(), &y, &[1.0], 2, 0).unwrap_err()
    ));
    let gram = x.dot(&x.t());
    assert!(is_c(
        bad.fit_gram_with_cv(gram.view(), &y, &[1.0], 2, 0)
            .unwrap_err()
    ));
    // the checked form fits, with the same result as the convenience path
    let good = LinearSvcParams::with_c(1.0);
    let checked = good.check().unwrap();
    assert_eq!(checked.c, 1.0);
    assert_eq!(
        checked.fit(x.view(), &y).unwrap(),
        good.fit(x.view(), &y).unwrap()
    );
}

// ---- encoders: FisherVectorParams and MfaFisherScoreParams ----

use fisherkit::encode::{
    Encoder, FisherVector, FisherVectorParams, FvPart, MfaFisherScore, MfaFisherScoreParams,
    MfaPart,
};
use fisherkit::gmm::DiagGmm;
use fisherkit::mfa::Mfa;
use fisherkit::{EncodeError, Normalization};
use ndarray::{Array1, Array2, Array3};

fn option_error(e: EncodeError) -> String {
    match e {
        EncodeError::InvalidOption(s) => s,
        e => panic!("expected an invalid option, got {e}"),
    }
}

fn gmm() -> DiagGmm<f64> {
    DiagGmm::new(
        array![0.4, 0.6],
        array![[0.0, 1.0, -1.0], [2.0, 0.5, 0.0]],
        array![[1.0, 0.5, 2.0], [0.7, 1.2, 0.9]],
    )
    .unwrap()
}

fn mfa() -> Mfa<f64> {
    let loadings = Array3::from_shape_fn((2, 3, 2), |(k, d, r)| 0.1 * (k + 2 * d + r) as f64);
    Mfa::new(
        array![0.5, 0.5],
        array![[0.0, 1.0, -1.0], [2.0, 0.5, 0.0]],
        loadings,
        Array2::from_elem((2, 3), 0.8),
    )
    .unwrap()
}

fn bag() -> Array2<f64> {
    Array2::from_shape_fn((7, 3), |(i, j)| ((i * 3 + j) as f64 * 0.37).sin() * 2.0)
}

#[test]
fn fisher_vector_parts_must_be_given_once_each() {
    let none = FisherVectorParams {
        parts: vec![],
        ..Default::default()
    };
    assert!(option_error(none.check().unwrap_err()).contains("no Fisher vector part"));
    let twice = FisherVectorParams {
        parts: vec![FvPart::Var, FvPart::Mean, FvPart::Var],
        ..Default::default()
    };
    let e = option_error(twice.check().unwrap_err());
    assert!(e.contains("`var`") && e.contains("twice"), "{e}");
}

#[test]
fn encoder_power_must_be_finite_and_positive() {
    for power in [0.0, -0.5, f64::NAN, f64::INFINITY] {
        let normalization = Normalization { power, l2: true };
        let fv = FisherVectorParams {
            normalization,
            ..Default::default()
        };
        let e = option_error(fv.check().unwrap_err());
        assert!(e.contains("power") && e.contains(&power.to_string()), "{e}");
        let fs = MfaFisherScoreParams::<f64> {
            normalization,
            ..Default::default()
        };
        let e = option_error(fs.check().unwrap_err());
        assert!(e.contains("power") && e.contains(&power.to_string()), "{e}");
    }
}

#[test]
fn mfa_score_needs_a_part_and_a_valid_whitening() {
    let none = MfaFisherScoreParams::<f64> {
        parts: vec![],
        ..Default::default()
    };
    assert!(option_error(none.check().unwrap_err()).contains("at least one part"));
    for (i, bad) in [(1, -1.0), (2, f64::NAN), (0, f64::INFINITY)] {
        let mut w = Array1::from_elem(12, 1.0);
        w[i] = bad;
        let p = MfaFisherScoreParams {
            parts: vec![MfaPart::Loading],
            whitening: Some(w),
            ..Default::default()
        };
        let e = option_error(p.check().unwrap_err());
        assert!(e.contains(&format!("whitening value {i} is {bad}")), "{e}");
    }
    // The length depends on the model: checked when the encoder is built
    // (K·D·R = 2·3·2 = 12 loading values, not 11).
    let short = MfaFisherScoreParams {
        parts: vec![MfaPart::Loading],
        whitening: Some(Array1::from_elem(11, 1.0)),
        ..Default::default()
    };
    let e = option_error(short.check().unwrap().build(mfa()).unwrap_err());
    assert!(e.contains("11 values") && e.contains("12"), "{e}");
}

#[test]
fn new_is_check_then_build() {
    let x = bag();
    let p = FisherVectorParams {
        parts: FvPart::ALL.to_vec(),
        ..Default::default()
    };
    let a = FisherVector::new(&gmm(), p.clone())
        .unwrap()
        .encode(x.view())
        .unwrap();
    let b = p
        .check()
        .unwrap()
        .build(&gmm())
        .unwrap()
        .encode(x.view())
        .unwrap();
    assert_eq!(a, b);
    let p = MfaFisherScoreParams::<f64> {
        parts: MfaPart::ALL.to_vec(),
        ..Default::default()
    };
    let a = MfaFisherScore::new(mfa(), p.clone())
        .unwrap()
        .encode(x.view())
        .unwrap();
    let b = p
        .check()
        .unwrap()
        .build(mfa())
        .unwrap()
        .encode(x.view())
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 2 * 3 + 2 * 3 * 2);
}

// ---- KMeansParams ----

use fisherkit::kmeans::{KMeansError, KMeansParams};

/// Two loose clusters in 3-D, 40 rows.
fn rows() -> Array2<f64> {
    Array2::from_shape_fn((40, 3), |(i, j)| {
        5.0 * (i % 2) as f64 + ((i * 7 + j * 5) % 13) as f64 / 13.0
    })
}

fn kmeans_error(p: KMeansParams) -> (&'static str, String) {
    match p.check().unwrap_err() {
        KMeansError::InvalidHyperParameter { name, reason } => (name, reason),
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
}

#[test]
fn kmeans_n_clusters_must_be_at_least_one() {
    let (name, reason) = kmeans_error(KMeansParams::new(0));
    assert_eq!(name, "n_clusters");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn kmeans_max_iter_must_be_at_least_one() {
    let (name, reason) = kmeans_error(KMeansParams::new(2).max_iter(0));
    assert_eq!(name, "max_iter");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn kmeans_tol_must_be_finite_and_non_negative() {
    for tol in [-1.0, f64::NAN, f64::NEG_INFINITY] {
        let (name, reason) = kmeans_error(KMeansParams::new(2).tol(tol));
        assert_eq!(name, "tol");
        assert!(reason.contains(&tol.to_string()), "{reason}");
    }
}

#[test]
fn kmeans_n_init_must_be_at_least_one() {
    let (name, reason) = kmeans_error(KMeansParams::new(2).n_init(0));
    assert_eq!(name, "n_init");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn kmeans_n_local_trials_must_be_at_least_one() {
    let (name, reason) = kmeans_error(KMeansParams::new(2).n_local_trials(Some(0)));
    assert_eq!(name, "n_local_trials");
    assert!(reason.contains("at least 1"), "{reason}");
    assert!(KMeansParams::new(2).n_local_trials(None).check().is_ok());
}

#[test]
fn kmeans_checked_params_fit_like_the_convenience_path() {
    let x = rows();
    let p = KMeansParams::new(3).n_init(2).seed(9);
    let checked = p.check().unwrap();
    assert_eq!(checked.n_clusters(), 3);
    assert_eq!(checked.fit(x.view()).unwrap(), p.fit(x.view()).unwrap());
    // K > N is the data's problem, found when fitting
    let e = KMeansParams::new(41)
        .check()
        .unwrap()
        .fit(x.view())
        .unwrap_err();
    assert!(
        matches!(
            e,
            KMeansError::TooFewRows {
                n_rows: 40,
                n_clusters: 41
            }
        ),
        "{e}"
    );
}

// ---- PcaParams ----

use fisherkit::pca::{PcaError, PcaParams};

#[test]
fn pca_n_components_must_be_at_least_one() {
    let e = PcaParams::new(0).check().unwrap_err();
    assert_eq!(e, PcaError::NoComponents);
    assert!(e.to_string().contains("n_components"), "{e}");
    // every entry point refuses it
    assert_eq!(
        PcaParams::new(0).fit(rows().view()).unwrap_err(),
        PcaError::NoComponents
    );
    let mut m = fisherkit::pca::PcaMoments::new(Array1::zeros(3));
    m.add(rows().view()).unwrap();
    assert_eq!(
        PcaParams::new(0).fit_moments::<f64>(&m).unwrap_err(),
        PcaError::NoComponents
    );
}

#[test]
fn pca_sizes_are_checked_against_the_data_when_fitting() {
    let x = rows();
    let checked = PcaParams::new(4).check().unwrap();
    let e = checked.fit(x.view()).unwrap_err();
    assert_eq!(
        e,
        PcaError::TooManyComponents {
            requested: 4,
            max: 3
        }
    );
    assert!(e.to_string().contains("n_components = 4"), "{e}");
    let clamped = PcaParams::new(4).clamp_components(true).check().unwrap();
    assert_eq!(clamped.fit(x.view()).unwrap().n_components(), 3);
    let p = PcaParams::new(2).whiten(true);
    assert_eq!(
        p.check().unwrap().fit(x.view()).unwrap(),
        p.fit(x.view()).unwrap()
    );
}

// ---- GmmParams ----

use fisherkit::gmm::{GmmError, GmmFit, GmmInit, GmmParams, VarianceFloor};

fn gmm_error(p: GmmParams<f64>) -> (&'static str, String) {
    match p.check().unwrap_err() {
        GmmError::InvalidHyperParameter { name, reason } => (name, reason),
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
}

#[test]
fn gmm_n_components_must_be_at_least_one() {
    let (name, reason) = gmm_error(GmmParams::new(0));
    assert_eq!(name, "n_components");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn gmm_max_iter_must_be_at_least_one() {
    let (name, reason) = gmm_error(GmmParams::new(2).max_iter(0));
    assert_eq!(name, "max_iter");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn gmm_tol_must_be_finite_and_non_negative() {
    for tol in [-1e-3, f64::NAN, f64::INFINITY] {
        let (name, reason) = gmm_error(GmmParams::new(2).tol(tol));
        assert_eq!(name, "tol");
        assert!(reason.contains(&tol.to_string()), "{reason}");
    }
}

#[test]
fn gmm_n_init_must_be_at_least_one() {
    let (name, reason) = gmm_error(GmmParams::new(2).n_init(0));
    assert_eq!(name, "n_init");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn gmm_kmeans_max_iter_must_be_at_least_one() {
    let (name, reason) = gmm_error(GmmParams::new(2).kmeans_max_iter(0));
    assert_eq!(name, "kmeans_max_iter");
    assert!(reason.contains("at least 1"), "{reason}");
}

#[test]
fn gmm_variance_floor_must_be_finite_and_positive() {
    for floor in [
        VarianceFloor::Relative(0.0),
        VarianceFloor::Relative(f64::NAN),
        VarianceFloor::Absolute(-1.0),
        VarianceFloor::Absolute(f64::INFINITY),
    ] {
        let (name, reason) = gmm_error(GmmParams::new(2).variance_floor(floor));
        assert_eq!(name, "variance_floor");
        assert!(reason.contains("> 0"), "{reason}");
    }
}

#[test]
fn gmm_given_model_is_checked_against_the_data_when_fitting() {
    // data-dependent: `check` accepts it, the fit names the shapes
    let g = DiagGmm::new(array![1.0], array![[0.0, 0.0]], array![[1.0, 1.0]]).unwrap();
    let checked = GmmParams::new(1).init(GmmInit::Given(g)).check().unwrap();
    match checked.fit(rows().view()).unwrap_err() {
        GmmError::InvalidHyperParameter { name, reason } => {
            assert_eq!(name, "init");
            assert!(
                reason.contains("dimension 2") && reason.contains("dimension 3"),
                "{reason}"
            );
        }
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
    let e = GmmParams::new(41)
        .check()
        .unwrap()
        .fit(rows().view())
        .unwrap_err();
    assert!(
        matches!(
            e,
            GmmError::TooFewRows {
                n_rows: 40,
                n_components: 41
            }
        ),
        "{e}"
    );
}

#[test]
fn every_gmm_entry_point_checks_the_settings_first() {
    let x = rows();
    let bad = GmmParams::<f64>::new(2).max_iter(0);
    let is_max_iter = |e: GmmError| {
        matches!(
            e,
            GmmError::InvalidHyperParameter {
                name: "max_iter",
                ..
            }
        )
    };
    assert!(is_max_iter(bad.fit(x.view()).unwrap_err()));
    assert!(is_max_iter(
        bad.fit_with_progress(x.view(), &mut |_| {}).unwrap_err()
    ));
    let mut passes = 0;
    let e = bad
        .fit_streaming::<GmmError>(
            &mut |v| {
                passes += 1;
                v(x.view())
            },
            100,
            None,
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
    assert!(is_max_iter(e));
    assert_eq!(
        passes, 0,
        "no pass over the data before the settings are checked"
    );
    let start = GmmParams::new(2).max_iter(2).fit(x.view()).unwrap().model;
    let mut e_steps = 0;
    let e = bad
        .fit_from_statistics::<GmmError>(
            start.clone(),
            &mut |m| {
                e_steps += 1;
                m.sufficient_statistics(x.view())
            },
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
    assert!(is_max_iter(e));
    assert_eq!(e_steps, 0, "no E-step before the settings are checked");
    // the checked form fits, with the same result as the convenience path
    let good = GmmParams::new(2).max_iter(5).tol(0.0);
    let checked = good.check().unwrap();
    assert_eq!(checked.n_components(), 2);
    let a: GmmFit<f64> = checked.fit(x.view()).unwrap();
    assert_eq!(a, good.fit(x.view()).unwrap());
    let b = checked
        .fit_streaming::<GmmError>(&mut |v| v(x.view()), 40, None, &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(a, b);
    let stats = |m: &DiagGmm<f64>| m.sufficient_statistics(x.view());
    let c = checked
        .fit_from_statistics::<GmmError>(start.clone(), &mut |m| stats(m), &mut |_, _| Ok(()))
        .unwrap();
    let d = good
        .fit_from_statistics::<GmmError>(start, &mut |m| stats(m), &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(c, d);
}

// ---- MfaParams ----

use fisherkit::mfa::{MfaError, MfaParams};

fn mfa_error(p: MfaParams) -> (&'static str, String) {
    match p.check().unwrap_err() {
        MfaError::InvalidHyperParameter { name, reason } => (name, reason),
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
}

#[test]
fn mfa_n_components_must_be_at_least_one() {
    let (name, reason) = mfa_error(MfaParams::new(0, 1));
    assert_eq!(name, "n_components");
    assert!(reason.contains(">= 1"), "{reason}");
}

#[test]
fn mfa_n_factors_must_be_at_least_one() {
    let (name, reason) = mfa_error(MfaParams::new(2, 0));
    assert_eq!(name, "n_factors");
    assert!(reason.contains("0 < R"), "{reason}");
}

#[test]
fn mfa_max_iter_must_be_at_least_one() {
    let (name, reason) = mfa_error(MfaParams::new(2, 1).max_iter(0));
    assert_eq!(name, "max_iter");
    assert!(reason.contains(">= 1"), "{reason}");
}

#[test]
fn mfa_n_init_must_be_at_least_one() {
    let (name, reason) = mfa_error(MfaParams::new(2, 1).n_init(0));
    assert_eq!(name, "n_init");
    assert!(reason.contains(">= 1"), "{reason}");
}

#[test]
fn mfa_tol_must_be_finite_and_non_negative() {
    for tol in [-1e-3, f64::NAN, f64::INFINITY] {
        let (name, reason) = mfa_error(MfaParams::new(2, 1).tol(tol));
        assert_eq!(name, "tol");
        assert!(reason.contains(&tol.to_string()), "{reason}");
    }
}

#[test]
fn mfa_psi_floor_must_be_finite_and_non_negative() {
    for floor in [-1e-3, f64::NAN, f64::INFINITY] {
        let (name, reason) = mfa_error(MfaParams::new(2, 1).psi_floor(floor));
        assert_eq!(name, "psi_floor");
        assert!(reason.contains(&floor.to_string()), "{reason}");
    }
    // 0 turns the floor off: valid
    assert!(MfaParams::new(2, 1).psi_floor(0.0).check().is_ok());
}

#[test]
fn mfa_sizes_are_checked_against_the_data_when_fitting() {
    // data-dependent: `check` accepts them, the fit refuses them
    let x = rows();
    let checked = MfaParams::new(2, 3).check().unwrap();
    match checked.fit(x.view()).unwrap_err() {
        MfaError::InvalidHyperParameter { name, reason } => {
            assert_eq!(name, "n_factors");
            assert!(reason.contains("R < D = 3, got R = 3"), "{reason}");
        }
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
    match MfaParams::new(41, 1)
        .check()
        .unwrap()
        .fit(x.view())
        .unwrap_err()
    {
        MfaError::InvalidHyperParameter { name, reason } => {
            assert_eq!(name, "n_components");
            assert!(reason.contains("the data have 40"), "{reason}");
        }
        e => panic!("expected an invalid hyper-parameter, got {e}"),
    }
}

#[test]
fn every_mfa_entry_point_checks_the_settings_first() {
    let x = rows();
    let bad = MfaParams::new(2, 1).n_init(0);
    let is_n_init =
        |e: MfaError| matches!(e, MfaError::InvalidHyperParameter { name: "n_init", .. });
    assert!(is_n_init(bad.fit(x.view()).unwrap_err()));
    assert!(is_n_init(
        bad.fit_with_progress(x.view(), &mut |_| {}).unwrap_err()
    ));
    let mut passes = 0;
    let e = bad
        .fit_streaming::<f64, MfaError>(
            &mut |v| {
                passes += 1;
                v(x.view())
            },
            100,
            None,
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
    assert!(is_n_init(e));
    assert_eq!(
        passes, 0,
        "no pass over the data before the settings are checked"
    );
    let start = MfaParams::new(2, 1)
        .max_iter(2)
        .fit(x.view())
        .unwrap()
        .model;
    let mut e_steps = 0;
    let e = bad
        .fit_from_statistics::<f64, MfaError>(
            start.clone(),
            &mut |m| {
                e_steps += 1;
                m.sufficient_statistics(x.view())
            },
            &mut |_, _| Ok(()),
        )
        .unwrap_err();
    assert!(is_n_init(e));
    assert_eq!(e_steps, 0, "no E-step before the settings are checked");
    let good = MfaParams::new(2, 1).max_iter(4).tol(0.0);
    let checked = good.check().unwrap();
    let a = checked.fit(x.view()).unwrap();
    let b = good.fit(x.view()).unwrap();
    assert_eq!(a.model, b.model);
    assert_eq!(a.log_likelihood, b.log_likelihood);
    let c = checked
        .fit_streaming::<f64, MfaError>(&mut |v| v(x.view()), 40, None, &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(a.model, c.model);
    let stats = |m: &fisherkit::mfa::Mfa<f64>| m.sufficient_statistics(x.view());
    let d = checked
        .fit_from_statistics::<f64, MfaError>(start.clone(), &mut |m| stats(m), &mut |_, _| Ok(()))
        .unwrap();
    let e = good
        .fit_from_statistics::<f64, MfaError>(start, &mut |m| stats(m), &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(d.model, e.model);
    assert_eq!(d.log_likelihood, e.log_likelihood);
}

// ---- VladParams ----

use fisherkit::encode::{Vlad, VladParams};

#[test]
fn vlad_flags_are_all_valid() {
    // VLFeat's flags combine freely: `check` accepts every combination
    for b in 0..32u32 {
        let p = VladParams {
            normalize_mass: b & 1 != 0,
            square_root: b & 2 != 0,
            normalize_components: b & 4 != 0,
            unnormalized: b & 8 != 0,
            hard_assignment: b & 16 != 0,
        };
        assert_eq!(*p.check().unwrap(), p);
    }
}

#[test]
fn vlad_soft_assignment_needs_a_gmm() {
    // model-dependent: refused when built on bare centres, not by `check`
    let soft = VladParams {
        hard_assignment: false,
        ..VladParams::default()
    };
    let checked = soft.check().unwrap();
    let e = option_error(checked.clone().build(gmm().means().to_owned()).unwrap_err());
    assert!(e.contains("soft-assignment VLAD needs a GMM"), "{e}");
    let e = option_error(Vlad::new(gmm().means().to_owned(), soft).unwrap_err());
    assert!(e.contains("soft-assignment VLAD needs a GMM"), "{e}");
    // with the GMM's posteriors it builds
    assert!(checked.build_from_gmm(&gmm()).is_ok());
}

#[test]
fn vlad_centres_must_be_non_empty_and_finite() {
    let checked = VladParams::default().check().unwrap();
    let e = option_error(
        checked
            .clone()
            .build(Array2::<f64>::zeros((0, 3)))
            .unwrap_err(),
    );
    assert!(e.contains("shape (0, 3)"), "{e}");
    let e = option_error(checked.build(array![[0.0, f64::NAN]]).unwrap_err());
    assert!(e.contains("VLAD centre [0, 1] is NaN"), "{e}");
}

#[test]
fn vlad_new_is_check_then_build() {
    let x = bag();
    for hard in [true, false] {
        let p = VladParams {
            hard_assignment: hard,
            square_root: true,
            ..VladParams::default()
        };
        let a = Vlad::from_gmm(&gmm(), p.clone())
            .unwrap()
            .encode(x.view())
            .unwrap();
        let b = p
            .check()
            .unwrap()
            .build_from_gmm(&gmm())
            .unwrap()
            .encode(x.view())
            .unwrap();
        assert_eq!(a, b);
    }
    let p = VladParams::default();
    let a = Vlad::new(gmm().means().to_owned(), p.clone())
        .unwrap()
        .encode(x.view())
        .unwrap();
    let b = p
        .check()
        .unwrap()
        .build(gmm().means().to_owned())
        .unwrap()
        .encode(x.view())
        .unwrap();
    assert_eq!(a, b);
}

// ---- defaults written once: the k-means initialisations of the EM fits ----

#[test]
fn gmm_default_kmeans_initialisation_is_the_named_constant() {
    // GmmParams::new's k-means initialisation runs INIT_KMEANS_MAX_ITER
    // Lloyd updates: the same fit as asking for them explicitly
    assert_eq!(fisherkit::gmm::INIT_KMEANS_MAX_ITER, 20);
    let x = rows();
    let p = GmmParams::new(3).max_iter(3).tol(0.0).seed(4);
    let explicit = p
        .clone()
        .kmeans_max_iter(fisherkit::gmm::INIT_KMEANS_MAX_ITER);
    assert_eq!(p, explicit);
    assert_eq!(p.fit(x.view()).unwrap(), explicit.fit(x.view()).unwrap());
}

#[test]
fn mfa_initial_kmeans_iterations_are_the_named_constant() {
    assert_eq!(fisherkit::mfa::INIT_KMEANS_MAX_ITER, 25);
}
