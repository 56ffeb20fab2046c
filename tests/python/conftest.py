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
