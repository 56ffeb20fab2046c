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
        bad.fit_gram_with_cv(gram, &y, &[1.0], 2, 0).unwrap_err()
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
