"""What :class:`GaussianMixture` and :class:`MixtureOfFactorAnalyzers`
share: fitting with the verbose report, inference through the native
``<kind>_score_samples`` / ``<kind>_predict_proba``, the information
criteria, and the model-file metadata of a fit."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import as_matrix, check_n_features, positive_int, warn_unconverged


def store_params(est: Any, params: dict[str, Any]) -> None:
    """Stores an ``__init__``'s arguments (its ``locals()``) as attributes of
    the same names, as scikit-learn estimators do."""
    for name, value in params.items():
        if name != "self" and not name.startswith("__"):
            setattr(est, name, value)


class MixtureMixin:
    """A fitted mixture's inference. A class sets ``_native_kind`` (``"gmm"``,
    ``"mfa"``) and defines ``_params()`` (which checks it is fitted),
    ``_native_params()`` (the leading arguments of the native functions),
    ``_fit(X, max_iter)``, ``_n_parameters()`` and ``_after_fit()``."""

    _native_kind: str

    def _after_fit(self) -> None:
        """Forgets what belonged to the model before a fit (nothing here)."""

    def _fit_and_report(self, X) -> Any:
        self._fit(X, positive_int(self.max_iter, "max_iter"))
        self._after_fit()
        if self.verbose:
            print(
                f"{type(self).__name__}: {self.n_iter_} EM iterations, mean log-likelihood "
                f"{self.lower_bound_:.6f}, {'converged' if self.converged_ else 'not converged'}"
            )
            if self.verbose >= 2:
                for i, ll in enumerate(self.log_likelihood_history_):
                    print(f"  iteration {i + 1}: {ll:.6f}")
        if not self.converged_:
            warn_unconverged(self, "EM", stacklevel=4)  # the caller of fit
        return self

    def fit_predict(self, X, y=None) -> np.ndarray:
        """Fits, then returns the most probable component of each row of ``X``."""
        return self.fit(X).predict(X)

    def _X(self, X) -> np.ndarray:
        X = as_matrix(X)
        check_n_features(self, X)
        return X

    def _native(self, what: str, X) -> np.ndarray:
        params = self._native_params()
        return getattr(_native, f"{self._native_kind}_{what}")(*params, self._X(X))

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood log p(x_i) of each row of ``X`` (N, D): (N,) float64."""
        return self._native("score_samples", X)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row of ``X`` (N, D)."""
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X) -> np.ndarray:
        """Posteriors q_ik (N, K) of the rows of ``X`` (N, D), in X's dtype."""
        return self._native("predict_proba", X)

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row of ``X`` (N, D): (N,) int64."""
        return np.argmax(self.predict_proba(X), axis=1).astype(np.int64)

    def bic(self, X) -> float:
        """Bayesian information criterion on ``X`` (lower is better)."""
        n = as_matrix(X).shape[0]
        return -2 * self.score(X) * n + self._n_parameters() * np.log(n)

    def aic(self, X) -> float:
        """Akaike information criterion on ``X`` (lower is better)."""
        n = as_matrix(X).shape[0]
        return -2 * self.score(X) * n + 2 * self._n_parameters()

def _fit_metadata(est: Any) -> dict[str, str]:
    """The hyper-parameters and fit state of a mixture as model-file metadata
    (the command line's keys)."""
    meta = {"max_iter": str(int(est.max_iter)), "tol": repr(float(est.tol)), "tol_mode": str(est.tol_mode),
            "n_init": str(int(est.n_init))}
    rs = est.random_state
    if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool):
        meta["seed"] = str(int(rs))
    if hasattr(est, "n_iter_"):
        meta["n_iter"] = str(int(est.n_iter_))
    if hasattr(est, "converged_"):
        meta["converged"] = json.dumps(bool(est.converged_))
    if hasattr(est, "lower_bound_"):
        meta["mean_log_likelihood"] = repr(float(est.lower_bound_))
    return meta


def _hyper_from_metadata(meta: dict, extra: dict) -> dict[str, Any]:
    """Hyper-parameters from the metadata of :func:`_fit_metadata` (and
    ``extra``: key → (parameter, converter)); unparsable values are skipped."""
    out: dict[str, Any] = {}
    keys = {"max_iter": ("max_iter", int), "tol": ("tol", float), "tol_mode": ("tol_mode", _tol_mode),
            "n_init": ("n_init", int), "seed": ("random_state", int), **extra}
    for key, (name, conv) in keys.items():
        if key in meta:
            try:
                out[name] = conv(meta[key])
            except ValueError:
                pass
    return out


def _tol_mode(v: str) -> str:
    """A model file's ``tol_mode``: "absolute" or "relative" (a ``ValueError`` otherwise)."""
    if v not in ("absolute", "relative"):
        raise ValueError(v)
    return v


def _restore_fit(est: Any, meta: dict) -> None:
    try:
        est.n_iter_ = int(meta["n_iter"])
    except (KeyError, ValueError):
        pass
    if meta.get("converged") in ("true", "false"):
        est.converged_ = meta["converged"] == "true"
    try:
        est.lower_bound_ = float(meta["mean_log_likelihood"])
    except (KeyError, ValueError):
        pass


def _check_n_components(path: str, params: dict, k: int) -> None:
    if "n_components" in params:
        n = params.pop("n_components")
        if n != k:
            raise ValueError(
                f"{path}: n_components={n!r} differs from the file's model, which has {k} components; "
                "n_components comes from the file (omit it)"
            )
