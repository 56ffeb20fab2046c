"""GaussianMixture and KMeans: against scikit-learn, direct numpy formulas,
and their own streaming/sharded paths."""

import json
import pickle
import struct

import numpy as np
import pytest

import fisherkit
from conftest import numpy_estep, peer, planted


def _match(est_means, true_means):
    """For each true mean, the distance to the nearest estimated mean."""
    dist = np.linalg.norm(true_means[:, None, :] - est_means[None].astype(np.float64), axis=2)
    return dist.min(axis=1)


# ------------------------------------------------------------------- k-means
def test_kmeans_recovers_blobs_and_matches_sklearn(mixture):
    cluster = peer("sklearn.cluster")
    X, labels, _, means, _ = mixture
    km = fisherkit.KMeans(4, random_state=3).fit(X)
    assert km.cluster_centers_.shape == (4, 5) and km.labels_.dtype == np.int64
    assert np.all(_match(km.cluster_centers_, means) < 0.2)
    ref = cluster.KMeans(4, n_init=5, random_state=0).fit(X)
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    # predict == nearest centre, transform == distances
    d = np.linalg.norm(X[:, None] - km.cluster_centers_[None], axis=2)
    np.testing.assert_array_equal(km.predict(X), d.argmin(1))
    np.testing.assert_allclose(km.transform(X[:50]), d[:50], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(km.predict(X), km.labels_)


# ------------------------------------------------------------- EM vs sklearn
def test_gmm_matches_sklearn_on_planted_mixture(mixture):
    sk_mixture = peer("sklearn.mixture")
    X, _, w, means, sds = mixture
    g = fisherkit.GaussianMixture(4, tol=1e-10, max_iter=500, random_state=0).fit(X)
    assert g.converged_
    assert g.weights_.shape == (4,) and g.means_.shape == (4, 5) and g.covariances_.shape == (4, 5)
    assert np.all(_match(g.means_, means) < 0.15)
    ref = sk_mixture.GaussianMixture(4, covariance_type="diag", tol=1e-10, max_iter=1000, reg_covar=0, random_state=0).fit(X)
    assert g.score(X) == pytest.approx(ref.score(X), abs=1e-7)
    np.testing.assert_allclose(g.score_samples(X), ref.score_samples(X), atol=1e-5)
    # same model up to the order of the components
    order = np.argsort(g.means_[:, 0])
    ref_order = np.argsort(ref.means_[:, 0])
    np.testing.assert_allclose(g.means_[order], ref.means_[ref_order], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g.covariances_[order], ref.covariances_[ref_order], rtol=1e-4)
    np.testing.assert_allclose(g.weights_[order], ref.weights_[ref_order], rtol=1e-5)
    # history: non-decreasing, lower_bound_ is its last entry
    h = g.log_likelihood_history_
    assert len(h) == g.n_iter_ and h[-1] == g.lower_bound_
    assert np.all(np.diff(h) >= -1e-10)


def test_default_tolerance_converges_like_sklearn():
    # Issue 30 item 7: K = 3 on 1 000 x 5 standard normal rows ran to the cap
    # of 100 iterations with a ConvergenceWarning under the old default
    # (relative change 1e-6). The default is now scikit-learn's rule and
    # tolerance: the absolute change of the mean log-likelihood below 1e-3.
    import warnings

    X = np.random.default_rng(0).standard_normal((1000, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", fisherkit.ConvergenceWarning)
        g = fisherkit.GaussianMixture(n_components=3, random_state=0).fit(X)
    assert g.converged_ and g.n_iter_ < 30, g.n_iter_
    assert (g.tol, g.tol_mode) == (1e-3, "absolute")
    h = g.log_likelihood_history_
    assert abs(h[-1] - h[-2]) < 1e-3 <= abs(h[-2] - h[-3])
    # the strict former default is still there, and runs to the cap here
    with pytest.warns(fisherkit.ConvergenceWarning):
        strict = fisherkit.GaussianMixture(3, tol=1e-6, tol_mode="relative", random_state=0).fit(X)
    assert not strict.converged_ and strict.n_iter_ == 100
    assert strict.lower_bound_ - g.lower_bound_ < 1e-2
    with pytest.raises(ValueError, match='tol_mode must be "absolute" or "relative", got "rel"'):
        fisherkit.GaussianMixture(3, tol_mode="rel").fit(X)
    # scikit-learn, same data and rule: converges too, in a comparable number
    # of iterations (its k-means start differs), to a comparable likelihood
    sk_mixture = peer("sklearn.mixture")
    ref = sk_mixture.GaussianMixture(3, covariance_type="diag", random_state=0).fit(X)
    assert ref.converged_ and ref.n_iter_ < 30
    print(f"fisherkit: {g.n_iter_} iterations, mean log-likelihood {g.score(X):.5f}; "
          f"scikit-learn: {ref.n_iter_} iterations, {ref.score(X):.5f}")
    assert abs(g.score(X) - ref.score(X)) < 0.02


def test_inference_matches_direct_formulas(mixture):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(4, max_iter=5, random_state=1).fit(X)
    q, ll, *_ = numpy_estep(X, g.weights_, g.means_, g.covariances_)
    np.testing.assert_allclose(g.predict_proba(X), q, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g.score_samples(X), ll, rtol=1e-12)
    np.testing.assert_array_equal(g.predict(X), q.argmax(1))
    assert g.score(X) == pytest.approx(ll.mean(), rel=1e-12)
    n = len(X)
    p = 4 - 1 + 2 * 4 * 5
    assert g.bic(X) == pytest.approx(-2 * ll.sum() + p * np.log(n), rel=1e-12)


# ------------------------------------------------- statistics / streaming EM
def test_statistics_equal_direct_estep_and_shards_sum_to_batch(mixture):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(4, max_iter=3, random_state=2).fit(X)
    st = g.sufficient_statistics(X)
    _, ll, nk, sx, sx2 = numpy_estep(X, g.weights_, g.means_, g.covariances_)
    assert st.n_rows == len(X) and st.n_components == 4 and st.n_features == 5
    np.testing.assert_allclose(st.resp_sums, nk, rtol=1e-10)
    np.testing.assert_allclose(st.sum_x, sx, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(st.sum_x2, sx2, rtol=1e-10)
    assert st.log_likelihood == pytest.approx(ll.sum(), rel=1e-12)

    shards = np.array_split(X, [700, 2200, 2201])
    parts = [g.sufficient_statistics(s) for s in shards]
    merged = sum(parts)
    assert isinstance(merged, fisherkit.GmmStatistics)
    np.testing.assert_allclose(merged.resp_sums, st.resp_sums, rtol=1e-12)
    np.testing.assert_allclose(merged.sum_x, st.sum_x, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(merged.sum_x2, st.sum_x2, rtol=1e-11)
    assert (parts[0] + parts[1] + parts[2] + parts[3]).n_rows == len(X)

    # M-step from merged shard statistics == one batch EM step of the library
    a = fisherkit.clone(g).update_from_statistics(merged)
    b = fisherkit.clone(g)._fit(X, 1, given=(g.weights_, g.means_, g.covariances_))
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(a, attr), getattr(b, attr), rtol=1e-9, atol=1e-12)
    # ... and the direct M-step formulas
    np.testing.assert_allclose(a.weights_, nk / len(X), rtol=1e-9)
    np.testing.assert_allclose(a.means_, sx / nk[:, None], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.covariances_, sx2 / nk[:, None] - (sx / nk[:, None]) ** 2, rtol=1e-7)


def test_statistics_pickle_and_validation(mixture):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(2, max_iter=2).fit(X[:500])
    st = g.sufficient_statistics(X[:100])
    st2 = pickle.loads(pickle.dumps(st))
    np.testing.assert_array_equal(st2.sum_y2, st.sum_y2)
    assert st2.log_likelihood == st.log_likelihood
    other = fisherkit.GaussianMixture(3, max_iter=2).fit(X[:500]).sufficient_statistics(X[:100])
    with pytest.raises(ValueError, match="cannot merge statistics of 3 components"):
        st + other
    with pytest.raises(TypeError):
        st + "x"
    with pytest.raises(ValueError, match="do not fit a model of 2 components"):
        g.update_from_statistics(other)
    with pytest.raises(ValueError, match="sum_y2"):
        fisherkit.GmmStatistics(1.0, 0.0, np.zeros(2), np.ones(1), np.zeros((1, 2)), -np.ones((1, 2)))


def test_partial_fit_is_em_step_by_step(mixture):
    X, *_ = mixture
    full = fisherkit.GaussianMixture(4, max_iter=6, tol=0, random_state=5).fit(X)
    inc = fisherkit.GaussianMixture(4, tol=0, random_state=5)
    for _ in range(6):
        inc.partial_fit(X)
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(inc, attr), getattr(full, attr), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(inc.log_likelihood_history_, full.log_likelihood_history_, rtol=1e-12)
    assert inc.n_iter_ == 6
    # on successive batches: ends near where full-data EM from the same start goes
    batches = fisherkit.GaussianMixture(4, random_state=5)
    split = np.array_split(X, 8)
    batches.partial_fit(split[0])
    start = (batches.weights_, batches.means_, batches.covariances_)
    for b in split[1:]:
        batches.partial_fit(b)
    ref = fisherkit.GaussianMixture(4)._fit(X, 7, given=start)
    assert batches.n_iter_ == 8
    # the last step fits the last batch of 500 rows: its excess over the
    # full-data optimum is about p / (2 n) = 44 / 1000 nats per row
    assert 0 <= ref.score(X) - batches.score(X) < 0.15
    order, ref_order = np.argsort(batches.means_[:, 0]), np.argsort(ref.means_[:, 0])
    np.testing.assert_allclose(batches.means_[order], ref.means_[ref_order], atol=0.5)


def test_update_from_statistics_is_not_converged_while_it_reseeds(mixture):
    # A component no row reaches starves, and the M-step re-seeds it: the
    # library's stopping rule (the one fit runs) never calls that converged,
    # whatever the tolerance; the next, ordinary step with the same huge
    # tolerance is converged.
    X, *_ = mixture
    g = fisherkit.GaussianMixture(4, max_iter=30, random_state=0).fit(X)
    g.tol = 1e9
    g.means_ = g.means_.copy()
    g.means_[3] += 1e4
    st = g.sufficient_statistics(X)
    assert st.resp_sums[3] == 0.0
    g.update_from_statistics(st)
    assert not g.converged_
    assert np.all(np.abs(g.means_) < 1e3)  # re-seeded among the data
    g.update_from_statistics(g.sufficient_statistics(X))
    assert g.converged_


# ----------------------------------------------------------- dtypes, errors
def test_float32_model_stays_float32_and_agrees_with_float64(mixture):
    X, *_ = mixture
    g64 = fisherkit.GaussianMixture(4, max_iter=20, random_state=0).fit(X)
    g32 = fisherkit.GaussianMixture(4, max_iter=20, random_state=0).fit(X.astype(np.float32))
    assert g32.means_.dtype == np.float32 and g32.covariances_.dtype == np.float32
    assert g64.means_.dtype == np.float64
    np.testing.assert_allclose(g32.means_, g64.means_, rtol=1e-3, atol=1e-3)
    assert g32.predict_proba(X.astype(np.float32)).dtype == np.float32
    # a float32 model scores float64 data (and vice versa)
    assert g32.score(X) == pytest.approx(g64.score(X), rel=1e-4)
    assert g64.score(X.astype(np.float32)) == pytest.approx(g64.score(X), rel=1e-5)
    km = fisherkit.KMeans(4).fit(X.astype(np.float32))
    assert km.cluster_centers_.dtype == np.float32


def test_errors_are_clear(mixture):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(3)
    with pytest.raises(ValueError, match=r"2-D array .* shape \(5,\)"):
        g.fit(np.ones(5))
    with pytest.raises(ValueError, match=r"2-D array .* shape \(2, 3, 4\)"):
        g.fit(np.ones((2, 3, 4)))
    bad = X[:50].copy()
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite value .* row 7, column 2"):
        g.fit(bad)
    with pytest.raises(ValueError, match="cannot fit 3 components to 2 rows"):
        g.fit(X[:2])
    with pytest.raises(ValueError, match="cannot make 5 clusters from 2 rows"):
        fisherkit.KMeans(5).fit(X[:2])
    with pytest.raises(TypeError, match="complex128|bytes|<U"):
        g.fit(np.ones((10, 2)).astype(str))
    with pytest.raises(ValueError, match="init_params"):
        fisherkit.GaussianMixture(2, init_params="bogus").fit(X)
    with pytest.raises(ValueError, match="variance_floor_mode"):
        fisherkit.GaussianMixture(2, variance_floor_mode="bogus").fit(X)
    with pytest.raises(ValueError, match="n_components must be an integer >= 1"):
        fisherkit.GaussianMixture(0).fit(X)
    fitted = fisherkit.GaussianMixture(2, max_iter=2).fit(X)
    with pytest.raises(ValueError, match="3 columns but the model has dimension 5"):
        fitted.predict(X[:, :3])
    with pytest.raises(fisherkit.NotFittedError):
        fisherkit.GaussianMixture(2).predict(X)
    # lists are accepted (float64), non-contiguous arrays are copied
    fisherkit.GaussianMixture(2, max_iter=2).fit(X[:100].tolist())
    a = fisherkit.GaussianMixture(2, max_iter=3).fit(np.asfortranarray(X[:300]))
    b = fisherkit.GaussianMixture(2, max_iter=3).fit(X[:300])
    np.testing.assert_array_equal(a.means_, b.means_)


# ------------------------------------------- sklearn conventions, persistence
def test_get_set_params_clone_and_pickle(mixture):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(4, max_iter=7, init_params="random", random_state=9)
    params = g.get_params()
    assert params["n_components"] == 4 and params["init_params"] == "random"
    c = fisherkit.clone(g.fit(X))
    assert c.get_params() == params and not hasattr(c, "means_")
    g.set_params(max_iter=8)
    assert g.max_iter == 8
    for est in (g, fisherkit.KMeans(3).fit(X)):
        back = pickle.loads(pickle.dumps(est))
        assert back.get_params() == est.get_params()
        for attr in ("means_", "covariances_", "weights_", "cluster_centers_", "labels_"):
            if hasattr(est, attr):
                np.testing.assert_array_equal(getattr(back, attr), getattr(est, attr))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(g)).predict_proba(X), g.predict_proba(X))


def _read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_save_load_round_trip(tmp_path, mixture, dtype):
    X, *_ = mixture
    g = fisherkit.GaussianMixture(4, max_iter=5).fit(X.astype(dtype))
    path = tmp_path / "gmm.safetensors"
    g.save(path)
    header = _read_safetensors_header(path)
    meta = header["__metadata__"]
    assert {k: meta[k] for k in ("kind", "format_version", "dtype", "max_iter", "n_iter", "init")} == {
        "kind": "gmm", "format_version": "1", "dtype": np.dtype(dtype).name, "max_iter": "5",
        "n_iter": str(g.n_iter_), "init": "kmeans"}
    code = {np.float32: "F32", np.float64: "F64"}[dtype]
    assert header["means"] == {**header["means"], "dtype": code, "shape": [4, 5]}
    assert header["variances"]["shape"] == [4, 5] and header["weights"]["shape"] == [4]
    back = fisherkit.GaussianMixture.load(path)
    assert back.n_components == 4 and back.means_.dtype == dtype
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_array_equal(getattr(back, attr), getattr(g, attr))
    np.testing.assert_array_equal(fisherkit.load_model(path).means_, g.means_)
    back.partial_fit(X.astype(dtype))  # can keep training
    with pytest.raises(OSError):
        fisherkit.GaussianMixture.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="safetensors"):
        fisherkit.GaussianMixture.load(tmp_path / "junk.safetensors")


def test_reseeds_starved_components_without_nan():
    # 3 identical points per cluster, K larger than distinct points: no NaN
    X = np.repeat(np.array([[0.0, 0.0], [10.0, 10.0]]), 50, axis=0)
    g = fisherkit.GaussianMixture(4, max_iter=20).fit(X)
    assert np.all(np.isfinite(g.means_)) and np.all(g.covariances_ > 0)
    assert np.isclose(g.weights_.sum(), 1.0)
