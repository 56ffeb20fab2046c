"""PCA and LinearSVC against scikit-learn."""

import pickle

import numpy as np
import pytest

import fisherkit
from conftest import peer


def test_pca_matches_sklearn():
    decomposition = peer("sklearn.decomposition")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 12)) @ rng.standard_normal((12, 12)) + 5.0
    for whiten in (False, True):
        p = fisherkit.PCA(4, whiten=whiten).fit(X)
        ref = decomposition.PCA(4, whiten=whiten, svd_solver="full").fit(X)
        np.testing.assert_allclose(p.explained_variance_, ref.explained_variance_, rtol=1e-9)
        np.testing.assert_allclose(p.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9)
        np.testing.assert_allclose(p.mean_, ref.mean_, rtol=1e-12)
        # components up to sign
        signs = np.sign((p.components_ * ref.components_).sum(1))
        np.testing.assert_allclose(p.components_ * signs[:, None], ref.components_, atol=1e-8)
        np.testing.assert_allclose(p.transform(X) * signs, ref.transform(X), atol=1e-7)
    assert fisherkit.PCA(3).fit(X.astype(np.float32)).transform(X.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="exceeds min"):
        fisherkit.PCA(20).fit(X)
    assert fisherkit.PCA(20, clamp_components=True).fit(X).n_components_ == 12
    back = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(back.transform(X), p.transform(X))


def test_linear_svc_matches_sklearn_and_pipeline():
    svm = peer("sklearn.svm")
    pipeline = peer("sklearn.pipeline")
    rng = np.random.default_rng(1)
    centres = 3.0 * rng.standard_normal((3, 10))
    y = rng.integers(0, 3, 600)
    X = centres[y] + rng.standard_normal((600, 10))
    labels = np.array(["a", "b", "c"])[y]
    clf = fisherkit.LinearSVC(C=0.5, tol=1e-6, max_iter=10000).fit(X, labels)
    ref = svm.LinearSVC(C=0.5, tol=1e-6, max_iter=100000, dual=True, intercept_scaling=1.0).fit(X, labels)
    assert list(clf.classes_) == ["a", "b", "c"] and clf.coef_.shape == (3, 10)
    # the same optimum as LIBLINEAR to 1e-5 of the scale, as the Rust test on digits
    # (crates/fisherkit/tests/pca_svm_svm.rs) checks
    coef_scale = np.abs(ref.coef_).max()
    assert np.abs(clf.coef_ - ref.coef_).max() < 1e-5 * coef_scale
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=0, atol=1e-5 * coef_scale)
    dec, ref_dec = clf.decision_function(X), ref.decision_function(X)
    assert np.abs(dec - ref_dec).max() < 1e-5 * np.abs(ref_dec).max()
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    assert clf.score(X, labels) > 0.95
    # a whole fisherkit pipeline on bags
    bags = [centres[c] + rng.standard_normal((30, 10)) for c in y[:60]]
    pipe = pipeline.make_pipeline(
        fisherkit.FisherVector(fisherkit.GaussianMixture(4, max_iter=20)), fisherkit.LinearSVC(C=100)
    )
    acc = (pipe.fit(bags, labels[:60]).predict(bags) == labels[:60]).mean()
    V = pipe[0].transform(bags)
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        ref_acc = (svm.LinearSVC(C=100).fit(V, labels[:60]).predict(V) == labels[:60]).mean()
    assert acc > 0.8 and acc >= ref_acc - 0.05
    with pytest.raises(ValueError, match="at least 2 classes"):
        fisherkit.LinearSVC().fit(X, np.zeros(600))
