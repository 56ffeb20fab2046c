"""Shared fixtures. Peers (scikit-learn, scikit-image, Ray) are optional: a
test needing a missing one is skipped with a message, unless
FISHERKIT_REQUIRE_PEERS=1, in which case it fails."""

import importlib
import os

import numpy as np
import pytest


def peer(module: str):
    """Imports a peer module, skipping (or failing under FISHERKIT_REQUIRE_PEERS=1) if absent."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = f"peer {module} is not installed ({e}); pip install -r tests/python/requirements.txt"
        if os.environ.get("FISHERKIT_REQUIRE_PEERS") == "1":
            pytest.fail(msg + " [FISHERKIT_REQUIRE_PEERS=1]")
        print(msg)
        pytest.skip(msg)


def planted(n=4000, k=4, d=5, seed=0, spread=8.0):
    """Rows of a planted diagonal mixture: (X, labels, weights, means, sds)."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.5, size=k)
    w /= w.sum()
    means = spread * rng.standard_normal((k, d))
    sds = rng.uniform(0.5, 1.5, size=(k, d))
    labels = rng.choice(k, size=n, p=w)
    X = means[labels] + sds[labels] * rng.standard_normal((n, d))
    return X, labels, w, means, sds


@pytest.fixture(scope="session")
def mixture():
    return planted()


def numpy_estep(X, w, m, v):
    """Posteriors, log-likelihoods and E-step sums computed directly in float64."""
    X = X.astype(np.float64)
    lp = (
        np.log(w)[None, :]
        - 0.5 * (X.shape[1] * np.log(2 * np.pi) + np.log(v).sum(1))[None, :]
        - 0.5 * (((X[:, None, :] - m[None]) ** 2) / v[None]).sum(2)
    )
    mx = lp.max(1, keepdims=True)
    ll = mx[:, 0] + np.log(np.exp(lp - mx).sum(1))
    q = np.exp(lp - ll[:, None])
    return q, ll, q.sum(0), q.T @ X, q.T @ (X**2)


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray cluster (2 CPUs) for every test that needs one: starting a
    second in the same process after a shutdown can time out on a loaded machine."""
    import tempfile

    import fisherkit

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
