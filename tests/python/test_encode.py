"""FisherVector against scikit-image's fisher_vector and the direct formulas;
VLAD against its definition; scikit-learn Pipeline usage."""

import pickle

import numpy as np
import pytest

import fisherkit
from conftest import numpy_estep, peer, planted


@pytest.fixture(scope="module")
def setup():
    X, _, _, _, _ = planted(n=3000, k=5, d=6, seed=1)
    gmm = fisherkit.GaussianMixture(5, max_iter=30, random_state=0).fit(X)
    rng = np.random.default_rng(7)
    bags = [X[rng.choice(len(X), size=n, replace=False)] + 0.3 * rng.standard_normal((n, 6)) for n in (1, 17, 200, 64)]
    return gmm, bags


def _sk_gmm(g):
    """A scikit-learn GaussianMixture (diag) holding exactly fisherkit's parameters."""
    mixture = peer("sklearn.mixture")
    sk = mixture.GaussianMixture(len(g.weights_), covariance_type="diag")
    sk.weights_ = g.weights_.astype(np.float64)
    sk.means_ = g.means_.astype(np.float64)
    sk.covariances_ = g.covariances_.astype(np.float64)
    sk.precisions_cholesky_ = 1.0 / np.sqrt(sk.covariances_)
    return sk


def _skimage_to_vlfeat(v, k, d):
    """scikit-image's [d_pi, d_mu, d_sigma] with d_sigma of the opposite sign."""
    out = v.copy()
    out[k + k * d :] *= -1
    return out


def test_fisher_vector_matches_scikit_image(setup):
    feature = peer("skimage.feature")
    g, bags = setup
    k, d = g.means_.shape
    sk = _sk_gmm(g)
    raw = fisherkit.FisherVector(g, parts=("prior", "mean", "var"), power=1.0, l2=False).transform(bags)
    imp = fisherkit.FisherVector(g, parts=("prior", "mean", "var")).transform(bags)
    assert raw.shape == (len(bags), k + 2 * k * d)
    for i, bag in enumerate(bags):
        ref = _skimage_to_vlfeat(feature.fisher_vector(bag, sk), k, d)
        np.testing.assert_allclose(raw[i], ref, rtol=1e-7, atol=1e-9)
        ref_imp = _skimage_to_vlfeat(feature.fisher_vector(bag, sk, improved=True, alpha=0.5), k, d)
        np.testing.assert_allclose(imp[i], ref_imp, rtol=1e-7, atol=1e-9)
    # the scikit-learn mixture itself is accepted as the gmm
    np.testing.assert_allclose(fisherkit.FisherVector(sk).transform(bags), fisherkit.FisherVector(g).transform(bags), rtol=1e-12)


def test_fisher_vector_blocks_equal_direct_formulas(setup):
    g, bags = setup
    k, d = g.means_.shape
    w, m, v = g.weights_, g.means_, g.covariances_
    enc = fisherkit.FisherVector(g, parts=("var", "mean"), power=1.0, l2=False)  # order is irrelevant
    out = enc.transform(bags)
    assert enc.output_dim() == 2 * k * d == out.shape[1]
    for i, bag in enumerate(bags):
        q, *_ = numpy_estep(bag, w, m, v)
        n = len(bag)
        z = (bag[:, None, :] - m[None]) / np.sqrt(v)[None]
        u = (q[:, :, None] * z).sum(0) / (n * np.sqrt(w)[:, None])
        vv = (q[:, :, None] * (z**2 - 1)).sum(0) / (n * np.sqrt(2 * w)[:, None])
        np.testing.assert_allclose(out[i], np.concatenate([u.ravel(), vv.ravel()]), rtol=1e-8, atol=1e-10)
    # fast: hard assignment to the arg-max component
    fast = fisherkit.FisherVector(g, parts=("mean",), power=1.0, l2=False, fast=True).transform(bags[2:3])[0]
    bag = bags[2]
    q, *_ = numpy_estep(bag, w, m, v)
    h = np.eye(k)[q.argmax(1)]
    z = (bag[:, None, :] - m[None]) / np.sqrt(v)[None]
    u = (h[:, :, None] * z).sum(0) / (len(bag) * np.sqrt(w)[:, None])
    np.testing.assert_allclose(fast, u.ravel(), rtol=1e-8, atol=1e-10)


def test_dtypes_and_inputs(setup):
    g, bags = setup
    enc = fisherkit.FisherVector(g)
    v64 = enc.transform(bags)
    v32 = enc.transform([b.astype(np.float32) for b in bags])
    assert v64.dtype == np.float64 and v32.dtype == np.float32
    np.testing.assert_allclose(v32, v64, rtol=1e-3, atol=1e-4)
    # a float32 model encodes float64 bags (and the reverse)
    g32 = fisherkit.GaussianMixture(5, max_iter=30).fit(np.concatenate(bags).astype(np.float32))
    assert fisherkit.FisherVector(g32).transform(bags).dtype == np.float64
    # mixed dtypes → float64; a 3-D array is a stack of bags; empty list → (0, dim)
    mixed = enc.transform([bags[0].astype(np.float32), bags[1]])
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed[1], v64[1])
    stack = np.stack([bags[3], bags[3]])
    np.testing.assert_allclose(enc.transform(stack), np.stack([v64[3], v64[3]]))
    assert enc.transform([]).shape == (0, enc.output_dim())
    np.testing.assert_allclose(np.linalg.norm(v64, axis=1), 1.0, rtol=1e-12)


def test_encoder_errors(setup):
    g, bags = setup
    enc = fisherkit.FisherVector(g)
    with pytest.raises(ValueError, match="bag 1: bag has 4 columns but the model has dimension 6"):
        enc.transform([bags[0], bags[1][:, :4]])
    with pytest.raises(ValueError, match="pass \\[X\\]"):
        enc.transform(bags[0])
    bad = bags[1].copy()
    bad[3, 0] = np.inf
    with pytest.raises(ValueError, match="bag 2: bag has a non-finite value \\(inf\\) at row 3, column 0"):
        enc.transform([bags[0], bags[0], bad])
    with pytest.raises(ValueError, match="bag 0: bag is empty"):
        enc.transform([bags[0][:0]])
    with pytest.raises(ValueError, match="unknown Fisher vector part `sigma`"):
        fisherkit.FisherVector(g, parts=("mean", "sigma")).transform(bags)
    with pytest.raises(ValueError, match="power must be"):
        fisherkit.FisherVector(g, power=0).transform(bags)
    with pytest.raises(fisherkit.NotFittedError):
        fisherkit.FisherVector(fisherkit.GaussianMixture(3)).transform(bags)
    with pytest.raises(TypeError, match=r"bag 0 has dtype <U\d+; .* e\.g\. bags\[0\]\.astype\(np\.float32\)"):
        enc.transform([np.ones((3, 6)).astype(str)])


def test_vlad_matches_definition(setup):
    g, bags = setup
    km = fisherkit.KMeans(5, random_state=0).fit(np.concatenate(bags))
    c = km.cluster_centers_
    raw = fisherkit.VLAD(km, l2=False).transform(bags)
    for i, bag in enumerate(bags):
        a = np.linalg.norm(bag[:, None] - c[None], axis=2).argmin(1)
        ref = np.stack([(bag[a == j] - c[j]).sum(0) for j in range(len(c))]).ravel()
        np.testing.assert_allclose(raw[i], ref, rtol=1e-9, atol=1e-9)
    # default: global L2; centres as an array give the same
    np.testing.assert_allclose(
        fisherkit.VLAD(c).transform(bags), raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-9
    )
    # soft assignment by GMM posteriors
    soft = fisherkit.VLAD(g, hard_assignment=False, l2=False).transform(bags[1:2])[0]
    q, *_ = numpy_estep(bags[1], g.weights_, g.means_, g.covariances_)
    ref = (q[:, :, None] * (bags[1][:, None] - g.means_[None])).sum(0).ravel()
    np.testing.assert_allclose(soft, ref, rtol=1e-8, atol=1e-9)


def test_pipeline_clone_pickle(setup):
    pipeline = peer("sklearn.pipeline")
    linear = peer("sklearn.linear_model")
    model_selection = peer("sklearn.model_selection")
    rng = np.random.default_rng(3)
    # two classes of bags: drawn around different centres
    bags = [rng.normal(loc=(c * 2.0), size=(40, 4)) for c in (0, 1) for _ in range(20)]
    y = np.repeat([0, 1], 20)
    pipe = pipeline.Pipeline(
        [("fv", fisherkit.FisherVector(fisherkit.GaussianMixture(3, max_iter=20))), ("clf", linear.LogisticRegression())]
    )
    pipe.fit(bags, y)
    assert pipe.named_steps["fv"].gmm_.means_.shape == (3, 4)
    assert not hasattr(pipe.named_steps["fv"].gmm, "means_")  # the parameter is not mutated
    assert (pipe.predict(bags) == y).mean() > 0.9
    scores = model_selection.cross_val_score(pipe, bags, y, cv=2)
    assert scores.mean() > 0.9
    # grid search over nested parameters (clone + set_params)
    gs = model_selection.GridSearchCV(pipe, {"fv__gmm__n_components": [2, 3], "fv__parts": [("mean",), ("mean", "var")]}, cv=2)
    gs.fit(bags, y)
    assert gs.best_score_ > 0.9
    back = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_allclose(back.predict_proba(bags), pipe.predict_proba(bags))
    c = fisherkit.clone(fisherkit.FisherVector(pipe.named_steps["fv"].gmm_, parts=("mean",)))
    assert c.parts == ("mean",) and not hasattr(c.gmm, "means_")
    # VLAD with an unfitted KMeans in a pipeline. Four clusters of these two
    # overlapping blobs have many near-optimal splits, and the classifier's
    # training accuracy depends on which (0.80-0.95 over scikit-learn's seeds):
    # compare with the same pipeline on scikit-learn's clusterings.
    cluster = peer("sklearn.cluster")
    pipe2 = pipeline.make_pipeline(fisherkit.VLAD(fisherkit.KMeans(4)), linear.LogisticRegression())
    acc = (pipe2.fit(bags, y).predict(bags) == y).mean()
    stacked = np.vstack(bags)
    refs = []
    for seed in range(5):
        centres = cluster.KMeans(4, n_init=1, random_state=seed).fit(stacked).cluster_centers_
        p = pipeline.make_pipeline(fisherkit.VLAD(centres), linear.LogisticRegression())
        refs.append((p.fit(bags, y).predict(bags) == y).mean())
    assert acc >= np.median(refs) - 0.05, (acc, refs)
    best = cluster.KMeans(4, n_init=10, random_state=0).fit(stacked).inertia_
    assert pipe2[0].model_.inertia_ <= best * 1.01
