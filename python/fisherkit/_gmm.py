"""k-means and the diagonal Gaussian mixture (scikit-learn conventions)."""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import (
    BaseEstimator,
    ClusterMixin,
    DensityMixin,
    StatisticsEMMixin,
    TransformerMixin,
    ConvergenceWarning,
    as_matrix,
    check_fitted,
    check_n_features,
    check_scale,
    fitted_arrays,
    warn_unconverged,
    nonneg_float,
    positive_int,
    seed_from,
)
from ._fisherkit import GmmStatistics
from ._mixture import MixtureMixin, _check_n_components, _fit_metadata, _hyper_from_metadata, _restore_fit, store_params

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
    verbose : int, default 0
        1: print a summary of the fit (iterations, inertia, convergence).

    A fit that ends unconverged, or whose rows fall in fewer clusters than
    ``n_clusters`` (e.g. fewer distinct rows than clusters), warns with a
    ``ConvergenceWarning``. Data whose squared norms overflow the dtype are a
    ``ValueError``.

    Attributes
    ----------
    cluster_centers_ : ndarray (K, D), the dtype of the training data
    labels_ : ndarray (N,) int64, cluster of each training row
    inertia_ : float, sum of squared distances of the rows to their centre
    n_iter_ : int, Lloyd updates of the kept run
    converged_ : bool
    n_features_in_ : int, D

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> X = np.random.default_rng(0).standard_normal((200, 3))
    >>> km = fisherkit.KMeans(n_clusters=4, random_state=0).fit(X)
    >>> km.cluster_centers_.shape, km.predict(X[:5]).shape
    ((4, 3), (5,))
    """

    def __init__(self, n_clusters, max_iter=100, tol=1e-4, n_init=1, random_state=0, verbose=0):
        store_params(self, locals())

    def fit(self, X, y=None) -> "KMeans":
        """Clusters the rows of ``X`` (N, D), float32 or float64 (integers are
        converted to float64). Returns self."""
        X = as_matrix(X)
        check_scale(X)
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
        k = int(self.n_clusters)
        distinct = len(np.unique(labels))  # clusters holding a row, as scikit-learn counts
        if self.verbose:
            print(
                f"KMeans: {self.n_iter_} Lloyd updates, inertia {self.inertia_:.6g}, "
                f"{'converged' if self.converged_ else 'not converged'}"
            )
        if distinct < k:
            warnings.warn(
                f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({k}): "
                "some clusters hold no row (possibly X has fewer distinct rows than clusters: duplicate points)",
                ConvergenceWarning,
                stacklevel=2,
            )
        elif not self.converged_:
            warn_unconverged(self, "k-means")
        return self

    def _sq_dist(self, X) -> np.ndarray:
        check_fitted(self, "cluster_centers_")
        X = as_matrix(X)
        check_n_features(self, X)
        check_scale(X)
        c = np.ascontiguousarray(self.cluster_centers_)
        if c.dtype != X.dtype:
            c = c.astype(X.dtype)
        return _native.kmeans_squared_distances(X, c)

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


class GaussianMixture(MixtureMixin, StatisticsEMMixin, DensityMixin, BaseEstimator):
    """Diagonal-covariance Gaussian mixture fitted by EM.

    p(x) = sum_k w_k N(x; mu_k, diag(sigma_k^2)). Posteriors are computed in
    log space with one GEMM per chunk of rows; the E-step sums are
    accumulated in float64 whatever the data type. The model is kept in the
    dtype of the training data (float32 data give a float32 model: faster, and
    scikit-learn's float32 negative-variance problem cannot happen here).

    Parameters
    ----------
    n_components : int
        Number of components K.
    max_iter : int, default 100
        Maximum number of EM iterations per initialisation.
    tol : float, default 1e-3
        Stop when the change of the mean log-likelihood per row between two
        iterations is below ``tol``: by default the absolute change
        |l_t - l_(t-1)|, scikit-learn's rule and default.
    tol_mode : {"absolute", "relative"}, default "absolute"
        "relative": the change |l_t - l_(t-1)| / max(|l_(t-1)|, 1) instead,
        free of the data's scale (``tol=1e-6, tol_mode="relative"`` is the
        strict setting that was the default before; it often runs to
        ``max_iter``).
    n_init : int, default 1
        Number of initialisations; the best final log-likelihood wins.
    init_params : {"kmeans", "random"}, default "kmeans"
        "kmeans": k-means++ then at most 20 Lloyd updates (the library's
        ``gmm_init_kmeans_max_iter``), then one M-step from the hard
        assignments; "random": k-means++ seeds as means, the data variance for
        every component, uniform weights.
    variance_floor : float, default 1e-3
        Lower bound on the variances (see ``variance_floor_mode``), >= 0.
    variance_floor_mode : {"relative", "absolute"}, default "relative"
        "relative": sigma^2_kd >= ``variance_floor`` * Var(x_d);
        "absolute": sigma^2_kd >= ``variance_floor`` (VLFeat uses 1e-4).
    random_state : int, RandomState, Generator or None, default 0
        Seed of the initialisation and of :meth:`sample` (None: fresh entropy).
    covariance_type : {"diag"}, default "diag"
        Only diagonal covariances are implemented; any other value is a
        ``ValueError`` at fit (accepted for code written for scikit-learn).
    warm_start : bool, default False
        If True and the estimator is fitted, :meth:`fit` starts EM from the
        current model (one initialisation) instead of ``init_params``.
    means_init : array (K, D) or None, default None
        Initial means; EM then starts from them with ``weights_init`` (or
        uniform weights) and the per-dimension variance of the data (floored).
    weights_init : array (K,) or None, default None
        Initial weights (positive, normalised to sum 1); with ``means_init``
        or alone (the means then come from ``init_params``'s k-means++ seeds).
    verbose : int, default 0
        1: print a summary after the fit; 2: also the log-likelihood of every
        iteration.

    Attributes
    ----------
    weights_ : ndarray (K,)
    means_ : ndarray (K, D)
    covariances_ : ndarray (K, D), the diagonal variances (scikit-learn's "diag" layout)
    precisions_ : ndarray (K, D), 1 / covariances_
    precisions_cholesky_ : ndarray (K, D), 1 / sqrt(covariances_) (scikit-learn's
        "diag" convention, what scikit-image's ``fisher_vector`` reads)
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float, mean log-likelihood per row of the parameters entering the last iteration
    log_likelihood_history_ : ndarray (n_iter_,) float64, the same for every iteration
    n_features_in_ : int, D

    A fit that stops at ``max_iter`` without converging warns with a
    ``ConvergenceWarning``. Streaming and distributed EM:
    :meth:`sufficient_statistics` on shards, ``sum`` of the statistics,
    :meth:`update_from_statistics` (exact EM); :meth:`partial_fit` does one EM
    step on a batch.

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> X = np.random.default_rng(0).standard_normal((500, 4))
    >>> gmm = fisherkit.GaussianMixture(n_components=3, random_state=0).fit(X)
    >>> gmm.means_.shape, gmm.predict_proba(X[:2]).shape
    ((3, 4), (2, 3))
    >>> Xs, labels = gmm.sample(10)
    """

    _native_kind = "gmm"

    def __init__(
        self,
        n_components,
        max_iter=100,
        tol=1e-3,
        tol_mode="absolute",
        n_init=1,
        init_params="kmeans",
        variance_floor=1e-3,
        variance_floor_mode="relative",
        random_state=0,
        covariance_type="diag",
        warm_start=False,
        means_init=None,
        weights_init=None,
        verbose=0,
    ):
        store_params(self, locals())

    # ----------------------------------------------------------------- fitting
    def _floor(self) -> tuple[float, str]:
        if self.variance_floor_mode not in ("relative", "absolute"):
            raise ValueError(
                f"variance_floor_mode must be \"relative\" or \"absolute\", got {self.variance_floor_mode!r}"
            )
        return nonneg_float(self.variance_floor, "variance_floor"), str(self.variance_floor_mode)

    def _set_model(self, w, m, v) -> None:
        self.weights_ = w
        self.means_ = m
        self.covariances_ = v
        self.n_features_in_ = m.shape[1]

    @property
    def precisions_(self) -> np.ndarray:
        check_fitted(self, "covariances_")
        return 1.0 / np.asarray(self.covariances_)

    @property
    def precisions_cholesky_(self) -> np.ndarray:
        check_fitted(self, "covariances_")
        return 1.0 / np.sqrt(np.asarray(self.covariances_))

    def _check_hyper(self) -> None:
        if self.covariance_type != "diag":
            raise ValueError(
                f"covariance_type={self.covariance_type!r} is not supported: fisherkit's "
                "GaussianMixture has diagonal covariances only (covariance_type=\"diag\")"
            )
        if self.init_params not in ("kmeans", "random"):
            raise ValueError(f"init_params must be \"kmeans\" or \"random\", got {self.init_params!r}")

    def _given(self, X: np.ndarray):
        """The starting model of EM, or None for ``init_params``."""
        k = positive_int(self.n_components, "n_components")
        if self.warm_start and hasattr(self, "means_"):
            w, m, v = self._params()
            if m.shape != (k, X.shape[1]):
                raise ValueError(
                    f"warm_start: the fitted model has shape {m.shape}, the data need ({k}, {X.shape[1]})"
                )
            return tuple(np.ascontiguousarray(a, dtype=X.dtype) for a in (w, m, v))
        if self.means_init is None and self.weights_init is None:
            return None
        d = X.shape[1]
        if self.weights_init is not None:
            w = np.asarray(self.weights_init, dtype=np.float64)
            if w.shape != (k,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
                raise ValueError(
                    f"weights_init must be {k} positive finite weights (shape ({k},)), got shape {w.shape}"
                )
            w = w / w.sum()
        else:
            w = np.full(k, 1.0 / k)
        if self.means_init is not None:
            m = np.asarray(self.means_init, dtype=np.float64)
            if m.shape != (k, d) or not np.all(np.isfinite(m)):
                raise ValueError(f"means_init must be a finite ({k}, {d}) array, got shape {m.shape}")
        else:  # k-means centres, as init_params="kmeans" starts from
            iters = _native.defaults()["gmm_init_kmeans_max_iter"]  # gmm::INIT_KMEANS_MAX_ITER
            km = KMeans(n_clusters=k, max_iter=iters, random_state=self.random_state)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                m = np.asarray(km.fit(X).cluster_centers_, dtype=np.float64)
        var = X.astype(np.float64).var(axis=0)
        floor, mode = self._floor()
        if mode == "relative":
            pos = var[var > 0]
            base = np.where(var > 0, var, pos.mean() if pos.size else 1.0)
            var = np.maximum(var, floor * base)
        else:
            var = np.maximum(var, floor)
        var = np.where(var > 0, var, 1.0)
        v = np.tile(var, (k, 1))
        return tuple(np.ascontiguousarray(a, dtype=X.dtype) for a in (w, m, v))

    def _native_fit(self, X: np.ndarray, max_iter: int, given):
        return _native.gmm_fit(
            X,
            positive_int(self.n_components, "n_components"),
            max_iter,
            nonneg_float(self.tol, "tol"),
            str(self.tol_mode),
            positive_int(self.n_init, "n_init"),
            self.init_params,
            *self._floor(),
            seed_from(self.random_state),
            given,
        )

    def _fit(self, X, max_iter: int, given=None) -> "GaussianMixture":
        self._check_hyper()
        X = as_matrix(X)
        if given is None:
            given = self._given(X)
        (w, m, v), lls, n_iter, converged = self._native_fit(X, max_iter, given)
        self._set_model(w, m, v)
        return self._record_fit(lls, n_iter, converged)

    def fit(self, X, y=None) -> "GaussianMixture":
        """Fits the mixture to the rows of ``X`` (N, D), float32 or float64
        (integers are converted to float64), by EM from the initialisation of
        ``init_params`` (or ``means_init``/``weights_init``, or the current
        model with ``warm_start``). Returns self."""
        return self._fit_and_report(X)

    # -------------------------------------------------------------- inference
    def _params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        check_fitted(self, "means_")
        w, m, v = fitted_arrays(self, ("weights_", "means_", "covariances_"))
        if v.ndim != 2:
            raise ValueError(
                f"covariances_ must be the (K, D) diagonal variances, got shape {v.shape}"
            )
        return w, m, v

    def _native_params(self) -> tuple:
        return self._params()

    def sample(self, n_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Draws ``n_samples`` rows from the fitted mixture (seeded by
        ``random_state``, as scikit-learn): ``(X (n_samples, D), y
        (n_samples,) int64 components)``, X in the model's dtype, rows grouped
        by component."""
        w, m, v = self._params()
        n = positive_int(n_samples, "n_samples")
        rs = self.random_state
        rng = rs if isinstance(rs, (np.random.RandomState, np.random.Generator)) else np.random.default_rng(
            seed_from(rs)
        )
        counts = rng.multinomial(n, np.asarray(w, dtype=np.float64) / float(np.sum(w)))
        y = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        z = rng.standard_normal((n, m.shape[1]))
        X = m[y].astype(np.float64) + np.sqrt(v[y].astype(np.float64)) * z
        return X.astype(m.dtype), y

    def _n_parameters(self) -> int:
        k, d = np.shape(self.means_)
        return k - 1 + 2 * k * d

    # ------------------------------------------------- streaming / distributed
    # sufficient_statistics, update_from_statistics, partial_fit: StatisticsEMMixin
    _statistics_type = GmmStatistics

    def _statistics_of(self, X: np.ndarray) -> GmmStatistics:
        check_n_features(self, X)
        return _native.gmm_sufficient_statistics(*self._params(), X)

    def _m_step(self, stats: GmmStatistics) -> int:
        # works on an unfitted estimator too (the model is then float64)
        dtype = np.dtype(self.means_.dtype).name if hasattr(self, "means_") else "float64"
        params, reseeded = _native.gmm_from_statistics(stats, *self._floor(), dtype)
        self._set_model(*params)
        return reseeded

    def _native_fit_from_statistics(self, step, max_iter: int):
        return _native.gmm_fit_from_statistics(
            *self._params(), step, max_iter, nonneg_float(self.tol, "tol"), str(self.tol_mode), *self._floor()
        )

    # -------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> None:
        """Writes the model to a safetensors file with the same Rust writer
        as the ``fisherkit`` command line (docs/formats.md §2.2): metadata
        ``kind`` = "gmm", ``format_version`` = "1"; tensors ``weights`` (K),
        ``means`` (K, D), ``variances`` (K, D) in the model's dtype; the
        hyper-parameters (``max_iter``, ``tol``, ``tol_mode``, ``n_init``, ``init``,
        ``variance_floor`` as "Relative(f)"/"Absolute(f)", ``seed`` for an
        int ``random_state``) and the fit's ``n_iter``, ``converged`` and
        ``mean_log_likelihood`` as optional metadata (the command line's keys)."""
        w, m, v = self._params()
        meta = _fit_metadata(self)
        meta["init"] = str(self.init_params)
        mode = "Absolute" if self.variance_floor_mode == "absolute" else "Relative"
        meta["variance_floor"] = f"{mode}({float(self.variance_floor)!r})"
        _native.gmm_save(os.fspath(path), w, m, v, meta)

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "GaussianMixture":
        """Reads a ``kind = "gmm"`` safetensors model file (Python's, the command
        line's or another tool's; validated by the Rust reader). The
        hyper-parameters and fit state stored in it are restored (missing keys:
        the defaults); ``params`` override hyper-parameters for further
        fitting. ``n_components`` comes from the file (a different value is a
        ``ValueError``)."""
        p = os.fspath(path)
        w, m, v, meta = _native.gmm_load(p)
        k = m.shape[0]
        hyper = _hyper_from_metadata(meta, {"init": ("init_params", str)})
        floor = re.fullmatch(r"(Relative|Absolute)\((.*)\)", meta.get("variance_floor", ""))
        if floor:
            try:
                hyper["variance_floor"] = float(floor.group(2))
                hyper["variance_floor_mode"] = floor.group(1).lower()
            except ValueError:
                pass
        if hyper.get("init_params") not in (None, "kmeans", "random"):
            del hyper["init_params"]
        _check_n_components(p, params, k)
        hyper.update(params)
        gmm = cls(n_components=k, **hyper)
        gmm._set_model(w, m, v)
        _restore_fit(gmm, meta)
        return gmm

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "means_")
