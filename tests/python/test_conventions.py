"""Every estimator of the Python module (the classes of docs/architecture.md §1) follows
scikit-learn's conventions: get_params / set_params, clone, fit returns self,
float32 and float64 in and out, pickling, use inside a Pipeline, ValueError
with a message naming the bad hyper-parameter; the models with a file format
save and load."""

import inspect
import pickle

import numpy as np
import pytest

import fisherkit
from conftest import peer, planted


@pytest.fixture(scope="module")
def data():
    X, labels, *_ = planted(n=1200, k=3, d=5, seed=21)
    rng = np.random.default_rng(4)
    bags = [X[rng.choice(len(X), size=n, replace=False)] for n in (3, 40, 25, 60)]
    return X, labels, bags


def cases():
    """(name, factory, how to fit, how to use, a bad hyper-parameter and its message)."""
    return [
        ("KMeans", lambda: fisherkit.KMeans(3, max_iter=20), "X", "transform", ("n_clusters", 0, "n_clusters")),
        ("GaussianMixture", lambda: fisherkit.GaussianMixture(3, max_iter=10), "X", "predict_proba",
         ("variance_floor_mode", "bogus", "variance_floor_mode")),
        ("MixtureOfFactorAnalyzers", lambda: fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=5), "X",
         "predict_proba", ("psi_mode", "bogus", "psi_mode")),
        ("PCA", lambda: fisherkit.PCA(3), "X", "transform", ("n_components", 9, "n_components")),
        ("LinearSVC", lambda: fisherkit.LinearSVC(), "Xy", "decision_function", ("C", -1.0, r"C must be a finite number > 0, got -1\.0")),
        ("FisherVector", lambda: fisherkit.FisherVector(fisherkit.GaussianMixture(3, max_iter=10)), "bags",
         "transform", ("parts", ("sigma",), "part")),
        ("VLAD", lambda: fisherkit.VLAD(fisherkit.KMeans(3, max_iter=20)), "bags", "transform",
         ("centers_or_gmm", np.zeros((3, 2)), "dimension|columns|width")),
        ("MFAFisherScore", lambda: fisherkit.MFAFisherScore(fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=5)),
         "bags", "transform", ("parts", ("sigma",), "unknown MFA Fisher score part")),
    ]


CASES = cases()
IDS = [c[0] for c in CASES]


def _fit(est, how, X, y, bags):
    if how == "X":
        return est.fit(X)
    if how == "Xy":
        return est.fit(X, y)
    return est.fit(bags)


def _use(est, how, use, X, bags):
    return getattr(est, use)(bags if how == "bags" else X)


def test_every_architecture_class_is_exported():
    names = {"KMeans", "GaussianMixture", "GmmStatistics", "MixtureOfFactorAnalyzers", "MfaStatistics",
             "FisherVector", "VLAD", "MFAFisherScore", "PCA", "LinearSVC", "load_model", "clone"}
    assert names <= set(fisherkit.__all__)
    assert {c[0] for c in CASES} == {n for n in names if inspect.isclass(getattr(fisherkit, n))} - {
        "GmmStatistics", "MfaStatistics"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_params_clone_fit_returns_self(case, data):
    X, y, bags = data
    name, make, how, use, _ = case
    est = make()
    init_names = [p for p in inspect.signature(type(est).__init__).parameters if p != "self"]
    params = est.get_params(deep=False)
    assert sorted(params) == sorted(init_names)
    assert _fit(est, how, X, y, bags) is est
    c = fisherkit.clone(est)
    assert type(c) is type(est) and sorted(c.get_params(deep=False)) == sorted(params)
    fitted_attrs = [a for a in vars(est) if a.endswith("_") and not a.startswith("_")]
    assert fitted_attrs, name
    assert not any(hasattr(c, a) for a in fitted_attrs)
    # set_params returns self and changes the hyper-parameter; unknown ones are a ValueError
    key = init_names[-1]
    assert c.set_params(**{key: params[key]}) is c
    with pytest.raises(ValueError, match="bogus_parameter"):
        c.set_params(bogus_parameter=1)
    # nested parameters of the wrapped model (encoders)
    deep = est.get_params(deep=True)
    if how == "bags":
        sub = next(k for k in deep if "__" in k)
        assert fisherkit.clone(est).set_params(**{sub: deep[sub]}).get_params()[sub] == deep[sub]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_and_pickle(case, data, dtype):
    X, y, bags = data
    name, make, how, use, _ = case
    Xd, bagsd = X.astype(dtype), [b.astype(dtype) for b in bags]
    est = _fit(make(), how, Xd, y, bagsd)
    out = _use(est, how, use, Xd, bagsd)
    assert out.dtype == dtype, name
    assert np.all(np.isfinite(out))
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(_use(back, how, use, Xd, bagsd), out)
    assert back.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    # the other dtype's input is accepted too, and computed in its own dtype
    other = np.float64 if dtype == np.float32 else np.float32
    out2 = _use(est, how, use, X.astype(other), [b.astype(other) for b in bags])
    assert out2.dtype == other
    np.testing.assert_allclose(out2, out, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bad_hyper_parameter_is_a_clear_value_error(case, data):
    X, y, bags = data
    name, make, how, use, (param, value, message) = case
    est = make().set_params(**{param: value})
    with pytest.raises(ValueError, match=message):
        _fit(est, how, X, y, bags)
        _use(est, how, use, X, bags)


@pytest.mark.parametrize("case", [c for c in CASES if c[2] != "bags"], ids=[c[0] for c in CASES if c[2] != "bags"])
def test_non_finite_input_names_row_and_column(case, data):
    X, y, bags = data
    name, make, how, use, _ = case
    bad = X.copy()
    bad[11, 3] = np.inf
    with pytest.raises(ValueError, match="non-finite value .*row 11, column 3"):
        _fit(make(), how, bad, y, bags)
    est = _fit(make(), how, X, y, bags)
    with pytest.raises(ValueError, match="non-finite value .*row 11, column 3"):
        _use(est, how, use, bad, bags)


def test_pipelines(data):
    pipeline = peer("sklearn.pipeline")
    linear = peer("sklearn.linear_model")
    metrics = peer("sklearn.metrics")
    X, y, _ = data
    # PCA → LinearSVC on rows, PCA → GaussianMixture / KMeans / MFA as final density or cluster steps
    pipe = pipeline.make_pipeline(fisherkit.PCA(4), fisherkit.LinearSVC(C=10))
    assert pipe.fit(X, y).score(X, y) > 0.95
    for last in (fisherkit.GaussianMixture(3, max_iter=20), fisherkit.KMeans(3),
                 fisherkit.MixtureOfFactorAnalyzers(3, 1, max_iter=20)):
        p = pipeline.make_pipeline(fisherkit.PCA(4), last).fit(X)
        labels = p.predict(X)
        # the planted clusters are recovered up to relabelling: adjusted Rand
        # index near 1 (all points in one cluster scores 0), and each class's
        # majority label is its own
        ari = metrics.adjusted_rand_score(y, labels)
        assert ari > 0.9, (type(last).__name__, ari)
        majority = [np.bincount(labels[y == c]).argmax() for c in range(3)]
        assert len(set(majority)) == 3, (type(last).__name__, majority)
        assert np.isfinite(p.score(X))
    # bag encoders → classifier
    rng = np.random.default_rng(5)
    # two classes of bags, shifted by 0.7 (overlapping: the encoders' gradients carry the shift)
    bags = [rng.normal(loc=0.7 * c, size=(30, 4)) for c in (0, 1) for _ in range(12)]
    yb = np.repeat([0, 1], 12)
    for enc in (fisherkit.MFAFisherScore(fisherkit.MixtureOfFactorAnalyzers(2, 1, max_iter=10), parts=("mean", "loading")),
                fisherkit.VLAD(fisherkit.GaussianMixture(2, max_iter=10), hard_assignment=False)):
        p = pipeline.make_pipeline(enc, linear.LogisticRegression()).fit(bags, yb)
        assert (p.predict(bags) == yb).mean() > 0.9
        back = pickle.loads(pickle.dumps(p))
        np.testing.assert_array_equal(back.predict_proba(bags), p.predict_proba(bags))


def test_kmeans_save_load(tmp_path, data):
    X, *_ = data
    for dtype in (np.float32, np.float64):
        km = fisherkit.KMeans(3).fit(X.astype(dtype))
        path = tmp_path / f"centroids-{np.dtype(dtype).name}.npy"
        km.save(path)
        # the command line's format: one (K, D) .npy array (fisherkit kmeans fit --output)
        np.testing.assert_array_equal(np.load(path), km.cluster_centers_)
        back = fisherkit.KMeans.load(path)
        assert back.n_clusters == 3 and back.cluster_centers_.dtype == dtype
        np.testing.assert_array_equal(back.predict(X), km.predict(X))
        np.testing.assert_array_equal(fisherkit.VLAD(back).transform([X[:9]]), fisherkit.VLAD(km).transform([X[:9]]))
    np.save(tmp_path / "bad.npy", np.ones(4))
    with pytest.raises(ValueError, match=r"\(K, D\) array.*shape \(4,\)"):
        fisherkit.KMeans.load(tmp_path / "bad.npy")
    np.save(tmp_path / "nan.npy", np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="non-finite"):
        fisherkit.KMeans.load(tmp_path / "nan.npy")
    with pytest.raises(fisherkit.NotFittedError):
        fisherkit.KMeans(2).save(tmp_path / "x.npy")


def test_native_stubs_match_the_module():
    """_fisherkit.pyi declares exactly the native module's functions and classes,
    and each class's public attributes."""
    import ast
    import os

    from fisherkit import _fisherkit as native

    path = os.path.join(os.path.dirname(fisherkit.__file__), "_fisherkit.pyi")
    tree = ast.parse(open(path, encoding="utf-8").read())
    stub_funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    stub_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    public = {n for n in dir(native) if not n.startswith("_")}
    real_classes = {n for n in public if inspect.isclass(getattr(native, n))}
    assert stub_funcs == public - real_classes
    assert set(stub_classes) == real_classes
    for name, node in stub_classes.items():
        declared = {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("__")}
        actual = {a for a in dir(getattr(native, name)) if not a.startswith("_")}
        assert declared == actual, name
        # the stub's constructor takes the real constructor's arguments, in order
        init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        sig = inspect.signature(getattr(native, name))
        assert [a.arg for a in init.args.args[1:]] == list(sig.parameters), name


def _defaults_of(f):
    return {n: p.default for n, p in inspect.signature(f).parameters.items() if p.default is not p.empty}


def test_keyword_defaults_are_the_librarys():
    # Every default is written once, in Rust (fisherkit::stream::em_defaults,
    # kmeans::kmeans_defaults, mfa::PSI_FLOOR, VarianceFloor::default,
    # LinearSvcParams::default, Normalization::default); the Python signatures
    # repeat them for scikit-learn's get_params and must say the same.
    lib = fisherkit._fisherkit.defaults()
    from fisherkit import ray as fk_ray  # imports ray only when a fit runs

    em = {"max_iter": "em_max_iter", "tol": "em_tol", "tol_mode": "em_tol_mode", "random_state": "em_seed"}
    want = {
        fisherkit.KMeans: {"max_iter": "kmeans_max_iter", "tol": "kmeans_tol", "n_init": "kmeans_n_init",
                           "random_state": "kmeans_seed"},
        fisherkit.GaussianMixture: {**em, "n_init": "em_n_init", "variance_floor": "variance_floor",
                                    "variance_floor_mode": "variance_floor_mode"},
        fisherkit.MixtureOfFactorAnalyzers: {**em, "n_init": "em_n_init", "psi_floor": "psi_floor"},
        fisherkit.LinearSVC: {"C": "svm_c", "tol": "svm_tol", "max_iter": "svm_max_iter",
                              "random_state": "svm_seed"},
        fisherkit.FisherVector: {"power": "power", "l2": "l2"},
        fisherkit.MFAFisherScore: {"power": "power", "l2": "l2"},
        fk_ray.fit_gmm_distributed: {**em, "variance_floor": "variance_floor",
                                     "variance_floor_mode": "variance_floor_mode"},
        fk_ray.fit_mfa_distributed: {**em, "psi_floor": "psi_floor"},
    }
    for f, names in want.items():
        got = _defaults_of(f)
        for arg, key in names.items():
            assert got[arg] == lib[key] and type(got[arg]) is type(lib[key]), (
                f"{f.__name__}({arg}={got[arg]!r}) but the library's default {key} is {lib[key]!r}"
            )


def test_kmeans_initialisations_are_the_librarys(monkeypatch, data):
    # The k-means that starts EM runs the library's Lloyd updates, written once
    # in Rust (gmm::INIT_KMEANS_MAX_ITER, mfa::INIT_KMEANS_MAX_ITER) and
    # reported by defaults(); the GaussianMixture's own k-means start (means
    # for weights_init) reads them from there instead of repeating the number.
    lib = fisherkit._fisherkit.defaults()
    assert (lib["gmm_init_kmeans_max_iter"], lib["mfa_init_kmeans_max_iter"]) == (20, 25)
    import fisherkit._gmm as gmm_module

    seen = []

    class RecordingKMeans(gmm_module.KMeans):
        def fit(self, X, y=None):
            seen.append(self.max_iter)
            return super().fit(X, y)

    monkeypatch.setattr(gmm_module, "KMeans", RecordingKMeans)
    X, *_ = data
    fisherkit.GaussianMixture(3, max_iter=5, weights_init=[0.2, 0.3, 0.5]).fit(X)
    assert seen == [lib["gmm_init_kmeans_max_iter"]]
    assert type(seen[0]) is int
