"""fisherkit.ray: distributed EM and encoding on a local Ray cluster give the
same results as one process."""

import os
import tempfile

import numpy as np
import pytest

import fisherkit
from conftest import peer, planted


@pytest.fixture(scope="module")
def ray_local():
    ray = peer("ray")
    home = tempfile.mkdtemp(prefix="fkray-home-")
    temp = tempfile.mkdtemp(prefix="fkray", dir="/tmp")  # short: Ray's socket paths
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = home  # Ray writes under HOME
    # workers must import the same fisherkit as this process
    pkg_root = os.path.dirname(os.path.dirname(fisherkit.__file__))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}}
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=temp,
        runtime_env=env,
        log_to_driver=False,
    )
    yield ray
    ray.shutdown()
    if old_home is None:
        del os.environ["HOME"]
    else:
        os.environ["HOME"] = old_home


@pytest.fixture(scope="module")
def data():
    X, *_ = planted(n=6000, k=4, d=6, seed=11)
    return X


def test_distributed_em_equals_single_process(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    shards = [X[:1000], ray_local.put(X[1000:3500]), X[3500:3501], X[3501:]]
    gmm = fkray.fit_gmm_distributed(shards, 4, max_iter=15, tol=0, random_state=3, init_sample_size=800)
    # the same computation in one process: the documented initial sample, the
    # initial fit on it, then the library's own EM loop on the whole data
    sizes = [len(s) if isinstance(s, np.ndarray) else 2500 for s in shards]
    shares = fkray._shares(sizes, 800)
    sample = np.concatenate([fkray.sample_rows(x, m, 3, i) for i, (x, m) in enumerate(zip(np.split(X, [1000, 3500, 3501]), shares))])
    start = fisherkit.GaussianMixture(4, max_iter=10, tol=0, random_state=3).fit(sample)
    ref = fisherkit.GaussianMixture(4, tol=0)._fit(X, 15, given=(start.weights_, start.means_, start.covariances_))
    assert gmm.n_iter_ == ref.n_iter_ == 15
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(gmm, attr), getattr(ref, attr), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gmm.log_likelihood_history_, ref.log_likelihood_history_, rtol=1e-11)
    # deterministic
    again = fkray.fit_gmm_distributed(shards, 4, max_iter=15, tol=0, random_state=3, init_sample_size=800)
    np.testing.assert_array_equal(again.means_, gmm.means_)


def test_distributed_em_converges_like_fit_with_given_start(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    start = fisherkit.GaussianMixture(4, max_iter=2, random_state=0).fit(X[::7])
    shards = np.array_split(X, 5)  # more shards than CPUs
    gmm = fkray.fit_gmm_distributed(shards, 4, max_iter=200, tol=1e-8, init=start)
    ref = fisherkit.GaussianMixture(4, tol=1e-8)._fit(X, 200, given=(start.weights_, start.means_, start.covariances_))
    assert gmm.converged_ and ref.converged_ and gmm.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(gmm.means_, ref.means_, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="different numbers of columns"):
        fkray.fit_gmm_distributed([X[:100], X[100:200, :3]], 2)


def test_encode_distributed_equals_transform(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    gmm = fisherkit.GaussianMixture(4, max_iter=10).fit(X)
    rng = np.random.default_rng(0)
    bags = [X[rng.choice(len(X), size=int(rng.integers(1, 80)))].astype(np.float32) for _ in range(23)]
    bags[5] = ray_local.put(bags[5])
    local = [ray_local.get(b) if isinstance(b, ray_local.ObjectRef) else b for b in bags]
    mfa = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=5).fit(X)
    encoders = (
        fisherkit.FisherVector(gmm, parts=("prior", "mean", "var")),
        fisherkit.VLAD(gmm),
        fisherkit.MFAFisherScore(mfa, parts=("mean", "loading")),
    )
    for enc in encoders:
        out = fkray.encode_distributed(enc, bags, batch_size=4)
        np.testing.assert_array_equal(out, enc.transform(local))
    assert fkray.encode_distributed(fisherkit.FisherVector(gmm), [], batch_size=4).shape == (0, 48)
