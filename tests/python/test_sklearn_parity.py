"""Issue #11 items 4 and 5: the Python estimators read what the command line
writes (MFA whitening, hyper-parameters) and behave like scikit-learn's
(errors, warnings, shapes, dtypes, the attributes its users reach for)."""

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import fisherkit
from conftest import peer

ROOT = Path(__file__).resolve().parents[2]


def cli():
    """The ``fisherkit`` command line: $FISHERKIT_BIN, the workspace's build
    (``cargo test --workspace`` makes target/debug/fisherkit), or PATH."""
    cands = [os.environ.get("FISHERKIT_BIN"), ROOT / "target/release/fisherkit", ROOT / "target/debug/fisherkit",
             shutil.which("fisherkit")]
    for c in cands:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    msg = "the fisherkit command line is not built (cargo build -p fisherkit-cli)"
    if os.environ.get("FISHERKIT_REQUIRE_PEERS") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def bags_of(seed=0, n_bags=6, d=6):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(rng.integers(20, 40)), d)) + rng.standard_normal(d) for _ in range(n_bags)]


def quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fisherkit.ConvergenceWarning)
        return f(*a, **k)


# --------------------------------------------------------------- item 4
@pytest.mark.parametrize("parts", ["loading", "mean,loading"])
def test_whitened_mfa_file_scores_equal_the_cli(tmp_path, parts):
    exe = cli()
    bags = bags_of()
    mfa = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 2, max_iter=20).fit, np.concatenate(bags))
    model, wmodel = tmp_path / "mfa.safetensors", tmp_path / "mfa-w.safetensors"
    mfa.save(model)
    np.savez(tmp_path / "bags.npz", *bags)
    run = lambda *a: subprocess.run([exe, *a, "--quiet"], check=True, capture_output=True)  # noqa: E731
    run("mfa", "whiten", "--model", str(model), "--input", str(tmp_path / "bags.npz"), "--parts", parts,
        "--output", str(wmodel))
    run("encode", "--model", str(wmodel), "--input", str(tmp_path / "bags.npz"), "--output", str(tmp_path / "fs.npy"))
    ref = np.load(tmp_path / "fs.npy")
    loaded = fisherkit.MixtureOfFactorAnalyzers.load(wmodel)
    assert loaded.whitening_parts_ == tuple(parts.split(","))
    got = fisherkit.MFAFisherScore(loaded).transform(bags)  # parts=None: the whitening's, as the CLI
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    # the whitening matters, and whiten=False gives the raw score (the CLI's --no-whitening)
    raw = fisherkit.MFAFisherScore(loaded, whiten=False, parts=parts.split(",")).transform(bags)
    assert np.max(np.abs(raw - ref)) > 1e-3
    run("encode", "--model", str(wmodel), "--input", str(tmp_path / "bags.npz"), "--parts", parts,
        "--no-whitening", "--output", str(tmp_path / "raw.npy"))
    np.testing.assert_allclose(raw, np.load(tmp_path / "raw.npy"), rtol=1e-10, atol=1e-12)
    # the Python estimate of the same whitening gives the same scores
    py = fisherkit.MFAFisherScore(mfa, parts=parts.split(","), whiten=True).fit(bags)
    np.testing.assert_allclose(py.whitening_, loaded.fisher_information_, rtol=1e-10)
    # other parts than the whitening's are an error, as in the CLI
    if parts == "loading":
        with pytest.raises(ValueError, match="differ from the parts the model's stored whitening"):
            fisherkit.MFAFisherScore(loaded, parts=("mean",)).transform(bags)
    # save keeps the block: the re-saved file encodes the same with the CLI
    loaded.save(tmp_path / "again.safetensors")
    run("encode", "--model", str(tmp_path / "again.safetensors"), "--input", str(tmp_path / "bags.npz"),
        "--output", str(tmp_path / "fs2.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "fs2.npy"), ref)


# --------------------------------------------------------------- item 5: fitted state, shapes
def test_not_fitted_errors_and_check_is_fitted():
    validation = peer("sklearn.utils.validation")
    from sklearn.exceptions import NotFittedError

    X = np.random.default_rng(0).standard_normal((60, 3))
    with pytest.raises(NotFittedError):
        fisherkit.LinearSVC().predict(X)
    with pytest.raises(NotFittedError):
        fisherkit.LinearSVC().decision_function(X)
    g = fisherkit.GaussianMixture(2).fit(X)
    for enc in (fisherkit.FisherVector(g), fisherkit.VLAD(g)):
        validation.check_is_fitted(enc)
        assert enc.n_features_in_ == 3
    for enc in (fisherkit.FisherVector(fisherkit.GaussianMixture(2)), fisherkit.VLAD(fisherkit.KMeans(2))):
        with pytest.raises(NotFittedError):
            validation.check_is_fitted(enc)
        assert not hasattr(enc, "n_features_in_")


def test_binary_decision_function_is_1d_and_roc_auc_works():
    ms = peer("sklearn.model_selection")
    from sklearn.svm import LinearSVC as SkSVC

    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 4))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(120) > 0, "b", "a")
    clf = fisherkit.LinearSVC().fit(X, y)
    dec = clf.decision_function(X)
    assert dec.shape == (120,) and SkSVC().fit(X, y).decision_function(X).shape == dec.shape
    np.testing.assert_array_equal(clf.classes_[(dec > 0).astype(int)], clf.predict(X))
    for scoring, labels in (("roc_auc", y), ("average_precision", (y == "b").astype(int))):
        s = ms.cross_val_score(fisherkit.LinearSVC(), X, labels, cv=3, scoring=scoring)
        assert np.all(s > 0.8), (scoring, s)
    y3 = np.arange(120) % 3
    assert fisherkit.LinearSVC().fit(X, y3).decision_function(X).shape == (120, 3)


# --------------------------------------------------------------- item 5: warnings
def test_convergence_warnings():
    from sklearn.exceptions import ConvergenceWarning

    assert fisherkit.ConvergenceWarning is ConvergenceWarning
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    with pytest.warns(ConvergenceWarning, match="GaussianMixture: EM did not converge within max_iter=2"):
        fisherkit.GaussianMixture(3, max_iter=2).fit(X)
    with pytest.warns(ConvergenceWarning, match="MixtureOfFactorAnalyzers: EM did not converge"):
        fisherkit.MixtureOfFactorAnalyzers(2, 2, max_iter=2).fit(X)
    with pytest.warns(ConvergenceWarning, match="KMeans: k-means did not converge"):
        fisherkit.KMeans(8, max_iter=1, tol=0).fit(X)
    with pytest.warns(ConvergenceWarning, match="LinearSVC: .* did not converge"):
        fisherkit.LinearSVC(max_iter=1, tol=1e-12).fit(X, (X[:, 0] > 0).astype(int))
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(3\) found smaller than n_clusters \(5\)"):
        fisherkit.KMeans(5).fit(np.repeat(X[:3], 10, axis=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fisherkit.GaussianMixture(3, max_iter=500, tol=1e-3).fit(X)
        fisherkit.GaussianMixture(3).partial_fit(X)  # one step by design: no warning


def test_verbose_prints(capsys):
    X = np.random.default_rng(0).standard_normal((200, 3))
    fisherkit.GaussianMixture(2, verbose=2, tol=1e-3, max_iter=300).fit(X)
    out = capsys.readouterr().out
    assert "GaussianMixture:" in out and "iteration 1:" in out
    fisherkit.KMeans(2, verbose=1).fit(X)
    fisherkit.LinearSVC(verbose=1).fit(X, X[:, 0] > 0)
    out = capsys.readouterr().out
    assert "KMeans:" in out and "LinearSVC: class" in out


# --------------------------------------------------------------- item 5: model files
def test_gmm_and_mfa_files_keep_hyper_parameters_and_fit_state(tmp_path):
    X = np.random.default_rng(0).standard_normal((300, 5))
    g = fisherkit.GaussianMixture(3, variance_floor=0.9, variance_floor_mode="absolute", tol=1e-4, n_init=2,
                                  init_params="random", max_iter=300, random_state=7).fit(X)
    g.save(tmp_path / "g.safetensors")
    back = fisherkit.GaussianMixture.load(tmp_path / "g.safetensors")
    assert back.get_params() == g.get_params()
    assert (back.n_iter_, back.converged_, back.lower_bound_) == (g.n_iter_, g.converged_, g.lower_bound_)
    assert fisherkit.GaussianMixture.load(tmp_path / "g.safetensors", max_iter=5).max_iter == 5
    assert fisherkit.GaussianMixture.load(tmp_path / "g.safetensors", n_components=3).n_components == 3
    with pytest.raises(ValueError, match="n_components=7 differs from the file's model, which has 3 components"):
        fisherkit.GaussianMixture.load(tmp_path / "g.safetensors", n_components=7)
    m = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 2, psi_mode="per_component", psi_floor=0.01, tol=1e-3,
                                                 max_iter=7, random_state=3).fit, X)
    m.save(tmp_path / "m.safetensors")
    mb = fisherkit.MixtureOfFactorAnalyzers.load(tmp_path / "m.safetensors")
    assert mb.get_params() == m.get_params()
    assert (mb.n_iter_, mb.converged_, mb.lower_bound_) == (m.n_iter_, m.converged_, m.lower_bound_)
    with pytest.raises(ValueError, match="the file's model has n_factors=2"):
        fisherkit.MixtureOfFactorAnalyzers.load(tmp_path / "m.safetensors", n_factors=3)


def test_cli_gmm_file_hyper_parameters_load_in_python(tmp_path):
    exe = cli()
    X = np.random.default_rng(0).standard_normal((400, 3))
    np.save(tmp_path / "X.npy", X)
    subprocess.run([exe, "gmm", "fit", "--input", str(tmp_path / "X.npy"), "--components", "3", "--seed", "11",
                    "--max-iter", "40", "--tol", "0.0001", "--init", "random", "--variance-floor-absolute", "0.05",
                    "--output", str(tmp_path / "g.safetensors"), "--quiet"], check=True, capture_output=True)
    g = fisherkit.GaussianMixture.load(tmp_path / "g.safetensors")
    p = g.get_params()
    assert (p["random_state"], p["max_iter"], p["tol"], p["init_params"]) == (11, 40, 1e-4, "random")
    assert (p["variance_floor"], p["variance_floor_mode"]) == (0.05, "absolute")
    assert g.n_iter_ >= 1 and isinstance(g.converged_, bool) and np.isfinite(g.lower_bound_)
    np.testing.assert_allclose(g.lower_bound_, g.score(X), rtol=1e-3)


def test_old_gmm_file_without_metadata_still_loads(tmp_path):
    from test_model_files import write_by_hand

    w = np.array([0.25, 0.75])
    m = np.array([[0.0, 1.0], [2.0, 3.0]])
    write_by_hand(tmp_path / "old.safetensors", {"kind": "gmm", "format_version": "1"},
                  {"weights": w, "means": m, "variances": np.ones((2, 2))})
    g = fisherkit.GaussianMixture.load(tmp_path / "old.safetensors")
    assert g.get_params() == fisherkit.GaussianMixture(2).get_params() and not hasattr(g, "n_iter_")
    np.testing.assert_array_equal(g.means_, m)


# --------------------------------------------------------------- item 5: dtypes
def test_dtypes_like_sklearn():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    g = fisherkit.GaussianMixture(2, max_iter=300, tol=1e-3).fit(X)
    Xi = (X * 10).astype(np.int64)
    np.testing.assert_array_equal(g.predict_proba(Xi), g.predict_proba(Xi.astype(np.float64)))
    raw = (np.abs(X) * 40).astype(np.uint8)  # raw uint8 descriptors
    fv = fisherkit.FisherVector(g)
    np.testing.assert_array_equal(fv.transform([raw]), fv.transform([raw.astype(np.float64)]))
    np.testing.assert_array_equal(fv.transform([X.astype(">f8")]), fv.transform([X]))
    assert fv.transform([X.astype(">f4")]).dtype == np.float32
    km = fisherkit.KMeans(3).fit(raw)
    assert km.cluster_centers_.dtype == np.float64
    with pytest.raises(TypeError, match=r"e\.g\. bags\[0\]\.astype\(np\.float32\)"):
        fv.transform([X.astype("datetime64[s]")])
    sparse = peer("scipy.sparse")
    with pytest.raises(TypeError, match="sparse input: convert it to a dense array, e.g. X.toarray()"):
        g.predict(sparse.csr_matrix(X))
    with pytest.raises(TypeError, match="does not support sparse"):
        fv.transform([sparse.csr_matrix(X)])


# --------------------------------------------------------------- item 5: messages
def test_wrong_model_types_and_python_facing_messages():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    g = fisherkit.GaussianMixture(2, max_iter=300, tol=1e-3).fit(X)
    mfa = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 2, max_iter=5).fit, X)
    with pytest.raises(TypeError, match="FisherVector needs a diagonal Gaussian mixture .* got MixtureOfFactorAnalyzers"):
        fisherkit.FisherVector(mfa).transform([X])
    with pytest.raises(TypeError, match="MFAFisherScore needs a fisherkit.MixtureOfFactorAnalyzers, got GaussianMixture"):
        fisherkit.MFAFisherScore(g).transform([X])
    with pytest.raises(TypeError, match="VLAD needs centres"):
        fisherkit.VLAD(mfa).transform([X])
    km = fisherkit.KMeans(2).fit(X)
    cases = [
        (lambda: fisherkit.VLAD(km, hard_assignment=False).transform([X]), "pass a fitted GaussianMixture"),
        (lambda: fisherkit.PCA(10).fit(X), r"n_components=10 exceeds min\(n_samples, n_features\) = 4"),
        (lambda: fisherkit.GaussianMixture(2, variance_floor=-1.0).fit(X), "variance_floor must be a finite number >= 0"),
        (lambda: fisherkit.FisherVector(g, parts=()).transform([X]), "parts must be a non-empty sequence"),
        (lambda: fisherkit.MFAFisherScore(mfa, parts=[]).transform([X]), "parts must be a non-empty sequence"),
    ]
    for f, msg in cases:
        with pytest.raises(ValueError, match=msg) as e:
            f()
        assert "::" not in str(e.value) and "Relative(" not in str(e.value), str(e.value)


def test_overflow_scale_data_is_a_value_error():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    km = fisherkit.KMeans(3).fit(X)
    big = X * 1e200
    for f in (lambda: fisherkit.VLAD(km).transform([big]), lambda: km.predict(big), lambda: fisherkit.KMeans(3).fit(big),
              lambda: fisherkit.LinearSVC().fit(big, X[:, 0] > 0),
              lambda: fisherkit.LinearSVC().fit(X, X[:, 0] > 0).decision_function(big)):
        with pytest.raises(ValueError, match="too large .* squared distances overflow"):
            f()
    g = fisherkit.GaussianMixture(2, max_iter=300, tol=1e-3).fit(X)
    with pytest.raises(ValueError):
        fisherkit.FisherVector(g).transform([big])


def test_classification_targets():
    X = np.random.default_rng(0).standard_normal((100, 3))
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        fisherkit.LinearSVC().fit(X, np.linspace(0, 1, 100))
    y = (X[:, 0] > 0).astype(float)
    y[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fisherkit.LinearSVC().fit(X, y)
    with pytest.raises(ValueError, match="100 rows but y has 99 labels"):
        fisherkit.LinearSVC().fit(X, np.arange(99) % 2)
    assert list(fisherkit.LinearSVC().fit(X, (X[:, 0] > 0) * 1.0).classes_) == [0.0, 1.0]


# --------------------------------------------------------------- item 5: scikit-learn's GaussianMixture API
def test_gaussian_mixture_sklearn_api():
    mixture = peer("sklearn.mixture")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-4, 1, (300, 3)), rng.normal(4, 0.5, (300, 3))])
    g = fisherkit.GaussianMixture(2, covariance_type="diag", max_iter=300, tol=1e-6).fit(X)
    with pytest.raises(ValueError, match="covariance_type='full' is not supported"):
        fisherkit.GaussianMixture(2, covariance_type="full").fit(X)
    sk = mixture.GaussianMixture(2, covariance_type="diag", random_state=0).fit(X)
    order = np.argsort(g.means_[:, 0]), np.argsort(sk.means_[:, 0])
    np.testing.assert_allclose(g.precisions_cholesky_[order[0]], sk.precisions_cholesky_[order[1]], rtol=1e-3)
    np.testing.assert_allclose(g.precisions_[order[0]], sk.precisions_[order[1]], rtol=1e-3)
    # scikit-image's fisher_vector reads precisions_cholesky_ of a diag mixture (it accepts
    # only scikit-learn's class): with ours copied in, its mean block equals our FisherVector's
    skimage = peer("skimage.feature")
    sk2 = mixture.GaussianMixture(2, covariance_type="diag").fit(X)
    sk2.weights_, sk2.means_, sk2.covariances_ = g.weights_, g.means_, g.covariances_
    sk2.precisions_cholesky_ = g.precisions_cholesky_
    ski = skimage.fisher_vector(X[:50], sk2)
    ours = fisherkit.FisherVector(g, parts=("prior", "mean", "var"), power=1, l2=False).transform([X[:50]])[0]
    np.testing.assert_allclose(ski[2:8], ours[2:8], rtol=1e-6, atol=1e-9)
    Xs, ys = g.sample(1000)
    assert Xs.shape == (1000, 3) and ys.shape == (1000,) and set(ys) == {0, 1}
    np.testing.assert_allclose(np.sort(Xs.mean(0)), np.sort(X.mean(0)), atol=0.6)
    np.testing.assert_array_equal(g.sample(5)[0], g.sample(5)[0])  # seeded by random_state
    # means_init / weights_init start EM there; warm_start continues from the fitted model
    mi = fisherkit.GaussianMixture(2, means_init=[[4, 4, 4], [-4, -4, -4]], weights_init=[0.5, 0.5], max_iter=300).fit(X)
    assert mi.means_[0, 0] > 0 > mi.means_[1, 0]
    assert fisherkit.GaussianMixture(2, weights_init=[1, 3], max_iter=300).fit(X).converged_
    with pytest.raises(ValueError, match=r"means_init must be a finite \(2, 3\) array"):
        fisherkit.GaussianMixture(2, means_init=np.zeros((3, 3))).fit(X)
    ws = fisherkit.GaussianMixture(2, warm_start=True, max_iter=300).fit(X)
    it = quiet(ws.set_params(max_iter=1).fit, X).n_iter_
    assert it == 1 and abs(ws.lower_bound_ - g.lower_bound_) < 1e-3
    # MFA: bic / aic / fit_predict
    mfa = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 1, max_iter=50).fit, X)
    assert mfa.bic(X) > mfa.aic(X) and np.isfinite(mfa.bic(X))
    labels = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 1, max_iter=50).fit_predict, X)
    assert sorted(np.bincount(labels)) == [300, 300]


def test_encoder_feature_names_and_empty_bags():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    g = fisherkit.GaussianMixture(2, max_iter=300, tol=1e-3).fit(X)
    mfa = quiet(fisherkit.MixtureOfFactorAnalyzers(2, 2, max_iter=5).fit, X)
    for enc in (fisherkit.FisherVector(g), fisherkit.VLAD(g), fisherkit.MFAFisherScore(mfa)):
        names = enc.get_feature_names_out()
        assert len(names) == enc.output_dim() and names[0] == type(enc).__name__.lower() + "0"
        assert enc.n_features_in_ == 4
        bags = [X[:10], X[:0], X[10:30]]
        with pytest.raises(ValueError, match='bag 1: bag is empty .* empty_bag="zeros"'):
            enc.transform(bags)
        out = enc.set_params(empty_bag="zeros").transform(bags)
        np.testing.assert_array_equal(out[1], 0)
        np.testing.assert_array_equal(out[[0, 2]], enc.transform([X[:10], X[10:30]]))
        assert enc.transform([X[:0, :]]).shape == (1, enc.output_dim())
        with pytest.raises(ValueError, match="empty_bag must be"):
            enc.set_params(empty_bag="skip").transform(bags)


def test_help_has_no_latex_and_has_examples():
    import pydoc

    for est in (fisherkit.KMeans, fisherkit.GaussianMixture, fisherkit.FisherVector, fisherkit.VLAD,
                fisherkit.MixtureOfFactorAnalyzers, fisherkit.MFAFisherScore, fisherkit.PCA, fisherkit.LinearSVC):
        own = [est] + [v for v in vars(est).values() if callable(v) or isinstance(v, property)]
        for obj in own:
            text = pydoc.plaintext.document(obj) if obj is not est else (est.__doc__ or "")
            assert "$" not in text and "\\frac" not in text and "\\mu" not in text, (est.__name__, obj)
        assert "Examples" in est.__doc__ and "Attributes" in est.__doc__, est.__name__


def test_docstring_examples_run():
    import doctest

    from fisherkit import _encode, _gmm, _linear, _mfa

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fisherkit.ConvergenceWarning)
        for mod in (_gmm, _encode, _mfa, _linear):
            res = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
            assert res.failed == 0 and res.attempted > 0, (mod.__name__, res)
