"""k-means and the diagonal Gaussian mixture (scikit-learn conventions)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import (
    BaseEstimator,
    ClusterMixin,
    DensityMixin,
    StatisticsEMMixin,
    TransformerMixin,
    as_matrix,
    check_fitted,
    fitted_arrays,
    nonneg_float,
    positive_int,
    seed_from,
)
from ._fisherkit import GmmStatistics

__all__ = ["KMeans", "GaussianMixture", "GmmStatistics"]


class KMeans(ClusterMixin, TransformerMixin, BaseEstimator):
    """k-means clustering: k-means++ seeding, then Lloyd updates computed with
    one GEMM per chunk of rows (parallel, deterministic for a seed).

    Parameters
    ----------
    n_clusters : int
        Number of clusters K.
    max_iter : int, default 100
        Maximum number of Lloyd updates per run.
    tol : float, default 1e-4
        Stop when the relative decrease of the inertia is at most ``tol``.
    n_init : int, default 1
        Number of k-means++ seedings; the run of lowest inertia is kept.
    random_state : int, RandomState, Generator or None, default 0
        Seed of the k-means++ seeding (None: fresh entropy).

    Attributes
    ----------
    cluster_centers_ : ndarray (K, D), the dtype of the training data
    labels_ : ndarray (N,) int64, cluster of each training row
    inertia_ : float, sum of squared distances of the rows to their centre
    n_iter_ : int, Lloyd updates of the kept run
    converged_ : bool
    n_features_in_ : int, D
    """

    def __init__(self, n_clusters, max_iter=100, tol=1e-4, n_init=1, random_state=0):
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, y=None) -> "KMeans":
        """Clusters the rows of ``X`` (N, D), float32 or float64. Returns self."""
        X = as_matrix(X)
        c, labels, inertia, n_iter, converged = _native.kmeans_fit(
            X,
            positive_int(self.n_clusters, "n_clusters"),
            positive_int(self.max_iter, "max_iter"),
            nonneg_float(self.tol, "tol"),
            positive_int(self.n_init, "n_init"),
            seed_from(self.random_state),
        )
        self.cluster_centers_ = c
        self.labels_ = labels
        self.inertia_ = float(inertia)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        self.n_features_in_ = X.shape[1]
        return self

    def _sq_dist(self, X) -> np.ndarray:
        check_fitted(self, "cluster_centers_")
        return _native.kmeans_squared_distances(as_matrix(X), self.cluster_centers_)

    def predict(self, X) -> np.ndarray:
        """Index of the nearest centre of each row of ``X`` (N, D): (N,) int64."""
        return np.argmin(self._sq_dist(X), axis=1).astype(np.int64)

    def transform(self, X) -> np.ndarray:
        """Euclidean distances (N, K) of the rows of ``X`` to the centres."""
        return np.sqrt(self._sq_dist(X))

    def score(self, X, y=None) -> float:
        """Minus the inertia of ``X`` (N, D) (higher is better)."""
        return -float(np.min(self._sq_dist(X), axis=1).astype(np.float64).sum())

    def save(self, path: str | os.PathLike) -> None:
        """Writes the centres (K, D) to a ``.npy`` file, in their dtype: the
        command line's format (``fisherkit kmeans fit --output centroids.npy``,
        ``fisherkit encode --encoder vlad --model centroids.npy``)."""
        check_fitted(self, "cluster_centers_")
        np.save(os.fspath(path), np.ascontiguousarray(self.cluster_centers_), allow_pickle=False)

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "KMeans":
        """Reads centres (K, D), float32 or float64, from a ``.npy`` file into a
        fitted ``KMeans`` (``cluster_centers_``, ``n_features_in_``; no
        ``labels_``); ``params`` are further hyper-parameters."""
        p = os.fspath(path)
        c = np.load(p, allow_pickle=False)
        if c.ndim != 2 or c.dtype not in (np.float32, np.float64) or c.shape[0] == 0:
            raise ValueError(f"{p}: expected a (K, D) array of centres (K >= 1), float32 or float64, "
                             f"got dtype {c.dtype}, shape {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError(f"{p}: the centres have a non-finite value")
        km = cls(n_clusters=c.shape[0], **params)
        km.cluster_centers_ = np.ascontiguousarray(c)
        km.n_features_in_ = c.shape[1]
        return km


class GaussianMixture(StatisticsEMMixin, DensityMixin, BaseEstimator):
    """Diagonal-covariance Gaussian mixture fitted by EM.

    $p(x) = \\sum_k w_k N(x; \\mu_k, \\mathrm{diag}\\,\\sigma_k^2)$. Posteriors are
    computed in log space with one GEMM per chunk of rows; the E-step sums are
    accumulated in float64 whatever the data type. The model is kept in the
    dtype of the training data (float32 data give a float32 model: faster, and
    scikit-learn's float32 negative-variance problem cannot happen here).

    Parameters
    ----------
    n_components : int
        Number of components K.
    max_iter : int, default 100
        Maximum number of EM iterations per initialisation.
    tol : float, default 1e-6
        Stop when the relative change of the mean log-likelihood per row,
        $|\\ell_t - \\ell_{t-1}| / \\max(|\\ell_{t-1}|, 1)$, is below ``tol``
        (scikit-learn's ``tol`` is an absolute change of the lower bound).
    n_init : int, default 1
        Number of initialisations; the best final log-likelihood wins.
    init_params : {"kmeans", "random"}, default "kmeans"
        "kmeans": k-means++ then 20 Lloyd updates, then one M-step from the hard
        assignments; "random": k-means++ seeds as means, the data variance for
        every component, uniform weights.
    variance_floor : float, default 1e-3
        Lower bound on the variances (see ``variance_floor_mode``).
    variance_floor_mode : {"relative", "absolute"}, default "relative"
        "relative": $\\sigma^2_{kd} \\ge$ ``variance_floor`` $\\cdot \\mathrm{Var}(x_d)$;
        "absolute": $\\sigma^2_{kd} \\ge$ ``variance_floor`` (VLFeat uses 1e-4).
    random_state : int, RandomState, Generator or None, default 0
        Seed of the initialisation (None: fresh entropy).

    Attributes
    ----------
    weights_ : ndarray (K,)
    means_ : ndarray (K, D)
    covariances_ : ndarray (K, D), the diagonal variances (scikit-learn's "diag" layout)
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float, mean log-likelihood per row of the parameters entering the last iteration
    log_likelihood_history_ : ndarray (n_iter_,) float64, the same for every iteration
    n_features_in_ : int, D

    Streaming and distributed EM: :meth:`sufficient_statistics` on shards,
    ``sum`` of the statistics, :meth:`update_from_statistics` (exact EM);
    :meth:`partial_fit` does one EM step on a batch.
    """

    covariance_type = "diag"

    def __init__(
        self,
        n_components,
        max_iter=100,
        tol=1e-6,
        n_init=1,
        init_params="kmeans",
        variance_floor=1e-3,
        variance_floor_mode="relative",
        random_state=0,
    ):
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.init_params = init_params
        self.variance_floor = variance_floor
        self.variance_floor_mode = variance_floor_mode
        self.random_state = random_state

    # ----------------------------------------------------------------- fitting
    def _floor(self) -> tuple[float, str]:
        return float(self.variance_floor), str(self.variance_floor_mode)

    def _set_model(self, w, m, v) -> None:
        self.weights_ = w
        self.means_ = m
        self.covariances_ = v
        self.n_features_in_ = m.shape[1]

    def _fit(self, X, max_iter: int, given=None) -> "GaussianMixture":
        X = as_matrix(X)
        (w, m, v), lls, n_iter, converged = _native.gmm_fit(
            X,
            positive_int(self.n_components, "n_components"),
            max_iter,
            nonneg_float(self.tol, "tol"),
            positive_int(self.n_init, "n_init"),
            self.init_params,
            *self._floor(),
            seed_from(self.random_state),
            given,
        )
        self._set_model(w, m, v)
        return self._record_fit(lls, n_iter, converged)

    def fit(self, X, y=None) -> "GaussianMixture":
        """Fits the mixture to the rows of ``X`` (N, D), float32 or float64, by
        EM from the initialisation of ``init_params``. Returns self."""
        return self._fit(X, positive_int(self.max_iter, "max_iter"))

    def fit_predict(self, X, y=None) -> np.ndarray:
        return self.fit(X).predict(X)

    # -------------------------------------------------------------- inference
    def _params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        check_fitted(self, "means_")
        w, m, v = fitted_arrays(self, ("weights_", "means_", "covariances_"))
        if v.ndim != 2:
            raise ValueError(
                f"covariances_ must be the (K, D) diagonal variances, got shape {v.shape}"
            )
        return w, m, v

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood $\\log p(x_i)$ of each row of ``X`` (N, D): (N,) float64."""
        return _native.gmm_score_samples(*self._params(), as_matrix(X))

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row of ``X`` (N, D)."""
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X) -> np.ndarray:
        """Posteriors $q_{ik}$ (N, K) of the rows of ``X`` (N, D), in X's dtype."""
        return _native.gmm_predict_proba(*self._params(), as_matrix(X))

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row of ``X`` (N, D): (N,) int64."""
        return np.argmax(self.predict_proba(X), axis=1).astype(np.int64)

    def _n_parameters(self) -> int:
        k, d = np.shape(self.means_)
        return k - 1 + 2 * k * d

    def bic(self, X) -> float:
        """Bayesian information criterion on ``X`` (lower is better)."""
        n = as_matrix(X).shape[0]
        return -2 * self.score(X) * n + self._n_parameters() * np.log(n)

    def aic(self, X) -> float:
        """Akaike information criterion on ``X`` (lower is better)."""
        n = as_matrix(X).shape[0]
        return -2 * self.score(X) * n + 2 * self._n_parameters()

    # ------------------------------------------------- streaming / distributed
    # sufficient_statistics, update_from_statistics, partial_fit: StatisticsEMMixin
    _statistics_type = GmmStatistics

    def _statistics_of(self, X: np.ndarray) -> GmmStatistics:
        return _native.gmm_sufficient_statistics(*self._params(), X)

    def _m_step(self, stats: GmmStatistics) -> None:
        # works on an unfitted estimator too (the model is then float64)
        dtype = np.dtype(self.means_.dtype).name if hasattr(self, "means_") else "float64"
        self._set_model(*_native.gmm_from_statistics(stats, *self._floor(), dtype))

    def _converged(self, prev: float, ll: float) -> bool:
        return abs(ll - prev) / max(abs(prev), 1.0) < float(self.tol)

    # -------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> None:
        """Writes the model to a safetensors file: metadata ``kind`` = "gmm",
        ``format_version`` = "1"; tensors ``weights`` (K), ``means`` (K, D),
        ``variances`` (K, D) in the model's dtype (the fisherkit model format,
        readable by the ``fisherkit`` command line)."""
        w, m, v = self._params()
        _native.save_safetensors(
            os.fspath(path),
            {"kind": "gmm", "format_version": "1"},
            [("weights", w), ("means", m), ("variances", v)],
        )

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "GaussianMixture":
        """Reads a ``kind = "gmm"`` safetensors model file; ``params`` are
        hyper-parameters for further fitting (``n_components`` comes from the file)."""
        meta, tensors = read_model_file(path, "gmm", ("weights", "means", "variances"))
        m = tensors["means"]
        w = np.ascontiguousarray(tensors["weights"], dtype=m.dtype)
        v = np.ascontiguousarray(tensors["variances"], dtype=m.dtype)
        if w.ndim != 1 or m.ndim != 2 or v.shape != m.shape or w.shape[0] != m.shape[0]:
            raise ValueError(
                f"{os.fspath(path)}: inconsistent GMM tensor shapes: weights {w.shape}, "
                f"means {m.shape}, variances {v.shape}"
            )
        # validates the parameters (positive weights and variances, finite means)
        _native.gmm_score_samples(w, m, v, np.ascontiguousarray(m[:1]))
        gmm = cls(n_components=m.shape[0], **params)
        gmm._set_model(w, m, v)
        return gmm

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "means_")


def read_model_file(path, kind: str, required: tuple[str, ...]) -> tuple[dict, dict]:
    """Metadata and tensors of a fisherkit model file, checking ``kind``,
    ``format_version`` (if present) and the required tensor names."""
    p = os.fspath(path)
    meta, tensors = _native.load_safetensors(p)
    tensors = dict(tensors)
    got = meta.get("kind")
    if got != kind:
        raise ValueError(f"{p}: model file of kind {got!r}, expected {kind!r}")
    version = meta.get("format_version")
    if version is not None and version != "1":
        raise ValueError(f"{p}: unsupported format_version {version!r}; this fisherkit reads \"1\"")
    missing = [n for n in required if n not in tensors]
    if missing:
        raise ValueError(f"{p}: {kind} model file lacks tensor(s) {', '.join(missing)}")
    return meta, tensors
