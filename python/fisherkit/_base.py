"""scikit-learn glue: base classes (scikit-learn's own when it is importable),
input validation and seeds."""

from __future__ import annotations

import inspect
import numbers
from typing import Any, Sequence

import numpy as np

from . import _fisherkit as _native

try:  # scikit-learn is optional: estimators then behave the same without it
    from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin, TransformerMixin
    from sklearn.base import clone as _sk_clone
    from sklearn.exceptions import ConvergenceWarning, NotFittedError

    HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised only without scikit-learn
    HAVE_SKLEARN = False

    class NotFittedError(ValueError, AttributeError):
        """Raised when an estimator is used before ``fit``."""

    class ConvergenceWarning(UserWarning):
        """Warned when an iterative fit stops before converging."""

    class BaseEstimator:
        """Minimal stand-in for ``sklearn.base.BaseEstimator``:
        ``get_params``/``set_params`` from the ``__init__`` signature."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            sig = inspect.signature(cls.__init__)
            return sorted(
                p.name
                for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            )

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            out = {}
            for name in self._get_param_names():
                value = getattr(self, name)
                if deep and hasattr(value, "get_params") and not isinstance(value, type):
                    out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
                out[name] = value
            return out

        def set_params(self, **params: Any) -> "BaseEstimator":
            valid = self._get_param_names()
            for key, value in params.items():
                name, _, sub = key.partition("__")
                if name not in valid:
                    raise ValueError(
                        f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}"
                    )
                if sub:
                    getattr(self, name).set_params(**{sub: value})
                else:
                    setattr(self, name, value)
            return self

        def __repr__(self) -> str:
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
            return f"{type(self).__name__}({args})"

    class TransformerMixin:
        def fit_transform(self, X, y=None, **fit_params):
            return self.fit(X, y, **fit_params).transform(X)

    class ClusterMixin:
        def fit_predict(self, X, y=None):
            self.fit(X)
            return self.labels_

    class DensityMixin:
        def score(self, X, y=None):
            return 0.0

    def _sk_clone(estimator, *, safe=True):
        if isinstance(estimator, (list, tuple, set, frozenset)):
            return type(estimator)(_sk_clone(e, safe=safe) for e in estimator)
        if not hasattr(estimator, "get_params") or isinstance(estimator, type):
            if not safe:
                import copy

                return copy.deepcopy(estimator)
            raise TypeError(f"cannot clone {estimator!r}: it has no get_params")
        params = estimator.get_params(deep=False)
        return type(estimator)(**{k: _sk_clone(v, safe=False) for k, v in params.items()})


def clone(estimator: Any) -> Any:
    """``sklearn.base.clone`` (or an equivalent without scikit-learn)."""
    return _sk_clone(estimator)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _is_sparse(X: Any) -> bool:
    try:
        import scipy.sparse as sp

        if sp.issparse(X):
            return True
    except ImportError:  # pragma: no cover
        pass
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def as_matrix(X: Any, what: str = "X", expr: str | None = None) -> np.ndarray:
    """A C-contiguous float32/float64 2-D array, without a copy when ``X`` is one.

    float32 and float64 arrays keep their dtype (in native byte order:
    big-endian data are converted); integers and booleans (e.g. raw uint8
    descriptors) become float64, as in scikit-learn, float16 becomes
    float32; other dtypes are a ``TypeError`` naming it. Sparse matrices are a
    ``TypeError`` (not supported), complex data a ``ValueError``. A non-2-D
    input is a ``ValueError`` naming its shape. ``what`` names the argument
    in messages, ``expr`` is the Python expression for it in hints.
    """
    expr = what if expr is None else expr
    if _is_sparse(X):
        raise TypeError(
            f"{what} is a sparse matrix ({type(X).__name__}); fisherkit does not support sparse "
            f"input: convert it to a dense array, e.g. {expr}.toarray()"
        )
    arr = X if isinstance(X, np.ndarray) else np.asarray(X)
    kind = arr.dtype.kind
    if kind in "iub":
        arr = arr.astype(np.float64)
    elif kind == "f" and arr.dtype.itemsize == 2:
        arr = arr.astype(np.float32)
    elif kind == "c":
        raise ValueError(f"Complex data not supported: {what} has dtype {arr.dtype}")
    elif kind == "O":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{what} has dtype object and not every value is a number ({e}); fisherkit computes in "
                f"float32 or float64: convert it, e.g. np.asarray({expr}, dtype=np.float32)"
            ) from None
    if arr.dtype.kind == "f" and not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype not in _FLOATS:
        raise TypeError(
            f"{what} has dtype {arr.dtype}; fisherkit computes in float32 or float64: "
            f"convert it, e.g. {expr}.astype(np.float32)"
        )
    if arr.ndim != 2:
        hint = (
            " (Reshape your data: x.reshape(1, -1) for a single sample, x.reshape(-1, 1) for a single feature)"
            if arr.ndim == 1
            else ""
        )
        raise ValueError(
            f"{what} must be a 2-D array (n_samples, n_features), got an array of shape {arr.shape}{hint}"
        )
    if arr.shape[1] == 0:
        raise ValueError(f"{what} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    return np.ascontiguousarray(arr)


def as_bags(bags: Any) -> list[np.ndarray]:
    """A list of C-contiguous 2-D bags sharing one dtype (float32 if all are
    float32, else float64). Accepts a sequence of (N_i, D) arrays or one
    (n_bags, N, D) array."""
    if _is_sparse(bags):
        raise TypeError(
            f"bags is a sparse matrix ({type(bags).__name__}); fisherkit does not support sparse "
            "input: pass a list of dense (N_i, D) arrays"
        )
    if isinstance(bags, np.ndarray):
        if bags.ndim == 3:
            bags = list(bags)
        elif bags.ndim == 2:
            raise ValueError(
                "expected a list of bags (each an (N_i, D) array), got one 2-D array of shape "
                f"{bags.shape}: to encode a single bag, pass [X]"
            )
        else:
            raise ValueError(
                f"expected a list of bags (each an (N_i, D) array), got an array of shape {bags.shape}"
            )
    elif not isinstance(bags, Sequence) and not hasattr(bags, "__iter__"):
        raise TypeError(f"expected a list of bags (each an (N_i, D) array), got {type(bags).__name__}")
    out = [as_matrix(b, f"bag {i}", f"bags[{i}]") for i, b in enumerate(bags)]
    if any(b.dtype != np.float32 for b in out):
        out = [b if b.dtype == np.float64 else b.astype(np.float64) for b in out]
    return out


def check_n_features(est: Any, X: np.ndarray) -> None:
    """scikit-learn's message for a width different from the training data's."""
    n = getattr(est, "n_features_in_", None)
    if n is not None and X.shape[1] != n:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting {n} features as input "
            f"(X has {X.shape[1]} columns but the model has dimension {n})"
        )


def check_scale(X: np.ndarray, what: str = "X") -> None:
    """A ``ValueError`` when squared norms of the rows of ``X`` overflow its
    dtype (e.g. ``X * 1e200``): distances and dot products would be infinite
    and the results meaningless (all zeros, one cluster)."""
    if X.size == 0:
        return
    big = float(np.max(np.abs(X)))
    if not np.isfinite(big):
        return  # the native check names the row and column
    limit = np.sqrt(float(np.finfo(X.dtype).max) / (4.0 * max(X.shape[1], 1)))
    if big > limit:
        raise ValueError(
            f"{what} has values too large for {X.dtype} arithmetic (max |x| = {big:.3g}): squared "
            f"distances overflow above {limit:.3g}; rescale the data (e.g. divide by its standard deviation)"
        )


def warn_unconverged(est: Any, what: str, stacklevel: int = 3) -> None:
    """A ``ConvergenceWarning`` (scikit-learn's when it is importable),
    attributed to the caller of the method that called this one (the default
    ``stacklevel``; one more for each helper in between)."""
    import warnings

    warnings.warn(
        f"{type(est).__name__}: {what} did not converge within max_iter={est.max_iter} "
        "iterations; increase max_iter or tol, or check the data",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )


def seed_from(random_state: Any) -> int:
    """A u64 seed: an int as is, None → fresh entropy, a numpy RandomState or
    Generator → one draw from it."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        v = int(random_state)
        if not 0 <= v < 2**64:
            raise ValueError(f"random_state must be in [0, 2**64), got {v}")
        return v
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**32, dtype=np.uint64))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63))
    raise ValueError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


def fitted_arrays(est: Any, names: Sequence[str]) -> list[np.ndarray]:
    """The fitted arrays ``names`` of ``est`` (one of them ``"means_"``),
    C-contiguous, all in the dtype of ``means_`` (float32 or float64; another
    dtype becomes float64): the parameters as the native core takes them."""
    m = np.ascontiguousarray(est.means_)
    if m.dtype not in _FLOATS:
        m = m.astype(np.float64)
    return [m if n == "means_" else np.ascontiguousarray(getattr(est, n), dtype=m.dtype) for n in names]


class StatisticsEMMixin:
    """Streaming / distributed EM shared by the mixtures: ``sufficient_statistics``
    (E-step sums of a shard), ``update_from_statistics`` (M-step from merged
    sums) and ``partial_fit``. A subclass defines ``_statistics_type`` (the
    native statistics class), ``_statistics_of(X)``, ``_m_step(stats)``
    (replaces the model, returns how many components it re-seeded), ``_fit(X, max_iter)`` (which ends with ``_record_fit``),
    ``_set_model(*params)`` and ``_native_fit_from_statistics(step, max_iter)`` (the library's
    EM loop with the E-step ``step(*params) -> statistics``)."""

    def _record_fit(self, lls, n_iter, converged):
        """Stores a fit's log-likelihood history and convergence; returns self."""
        self.log_likelihood_history_ = np.asarray(lls, dtype=np.float64)
        self.lower_bound_ = float(lls[-1])
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        return self

    def sufficient_statistics(self, X):
        """E-step sums of the rows of ``X`` (N, D) under the current model, in
        float64 (``st_a + st_b`` and ``sum([...])`` merge the statistics of
        disjoint shards; picklable, to ship between processes)."""
        check_fitted(self, "means_")
        return self._statistics_of(as_matrix(X))

    def update_from_statistics(self, stats):
        """M-step from (merged) statistics: replaces the parameters and returns
        self. With the sum of the statistics of every shard of a data set,
        computed with the current model, this is exactly one EM iteration on
        the whole set. Records the statistics' mean log-likelihood in
        ``log_likelihood_history_`` / ``lower_bound_``, increments ``n_iter_``
        and sets ``converged_`` by ``tol`` and ``tol_mode`` (the rule of ``fit``).

        ``GaussianMixture`` also accepts statistics on an unfitted estimator
        (the model is then float64); the MFA's M-step needs the model that
        computed the statistics (a ``ValueError`` otherwise)."""
        if not isinstance(stats, self._statistics_type):
            raise TypeError(f"expected {self._statistics_type.__name__}, got {type(stats).__name__}")
        if hasattr(self, "means_"):
            k, d = np.shape(self.means_)
            if (stats.n_components, stats.n_features) != (k, d):
                raise ValueError(
                    f"statistics of {stats.n_components} components in dimension {stats.n_features} "
                    f"do not fit a model of {k} components in dimension {d}"
                )
        reseeded = self._m_step(stats)
        ll = float(stats.mean_log_likelihood)
        hist = list(getattr(self, "log_likelihood_history_", []))
        # the library's one stopping rule, the one ``fit`` runs: not converged
        # while the M-step re-seeds starved components
        _, converged = _native.em_stopping_rule(hist, ll, float(self.tol), str(self.tol_mode), reseeded)
        hist.append(ll)
        self.log_likelihood_history_ = np.asarray(hist, dtype=np.float64)
        self.lower_bound_ = ll
        self.n_iter_ = int(getattr(self, "n_iter_", 0)) + 1
        self.converged_ = bool(converged)
        return self

    def _fit_from_statistics(self, statistics_of, max_iter: int):
        """EM by the library's one loop (``GmmParams::fit_from_statistics`` /
        ``MfaParams::fit_from_statistics``: M-step, re-seeding and stopping
        rule as ``fit``) from the current model, with the E-step done by
        ``statistics_of(self) -> statistics`` of all rows (called with the
        estimator holding the model of that iteration). Records the run's
        history and convergence; returns self. An exception of
        ``statistics_of`` propagates; the estimator then holds the model it
        was called with."""
        check_fitted(self, "means_")
        for attr in ("log_likelihood_history_", "n_iter_", "converged_", "lower_bound_"):
            self.__dict__.pop(attr, None)

        def step(*params):
            self._set_model(*params)
            return statistics_of(self)

        params, lls, n_iter, converged = self._native_fit_from_statistics(step, positive_int(max_iter, "max_iter"))
        self._set_model(*params)
        return self._record_fit(lls, n_iter, converged)

    def partial_fit(self, X, y=None):
        """One EM step on the batch ``X`` (N, D). The first call (unfitted
        estimator) initialises from the batch, as ``fit`` does, then runs one
        EM step on it. Returns self.

        This is incremental EM on successive batches (each step sees one
        batch). For exact EM over data too large for memory, sum the
        :meth:`sufficient_statistics` of every batch, then call
        :meth:`update_from_statistics` once per pass."""
        if not hasattr(self, "means_"):
            return self._fit(X, 1)
        return self.update_from_statistics(self.sufficient_statistics(X))


def check_fitted(est: Any, attr: str) -> None:
    if not hasattr(est, attr):
        raise NotFittedError(
            f"this {type(est).__name__} instance is not fitted yet: call fit first"
        )


def positive_int(value: Any, name: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def nonneg_float(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}") from None
    if not (v >= 0 and np.isfinite(v)):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v
