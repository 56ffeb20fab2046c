"""PCA and the one-vs-rest linear SVM of the scene pipeline."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import (
    HAVE_SKLEARN,
    BaseEstimator,
    TransformerMixin,
    as_matrix,
    check_fitted,
    check_n_features,
    check_scale,
    positive_int,
    seed_from,
    warn_unconverged,
)

try:
    from sklearn.base import ClassifierMixin
except ImportError:  # pragma: no cover

    class ClassifierMixin:
        _estimator_type = "classifier"

        def score(self, X, y, sample_weight=None):
            return float(np.mean(self.predict(X) == np.asarray(y)))


__all__ = ["PCA", "LinearSVC"]


def _data_conversion_warning():
    try:
        from sklearn.exceptions import DataConversionWarning

        return DataConversionWarning
    except ImportError:  # pragma: no cover
        return UserWarning


def _check_classification_targets(y: np.ndarray) -> None:
    """scikit-learn's ``check_classification_targets``: continuous (or NaN)
    labels are a ``ValueError``."""
    if HAVE_SKLEARN:
        from sklearn.utils.multiclass import check_classification_targets

        check_classification_targets(y)
        return
    if y.dtype.kind == "f":  # pragma: no cover - without scikit-learn
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity")
        if np.any(y != np.round(y)):
            raise ValueError("Unknown label type: continuous. Classification needs discrete labels")


class PCA(TransformerMixin, BaseEstimator):
    """Principal component analysis (eigendecomposition of the D×D covariance,
    accumulated in float64).

    Parameters
    ----------
    n_components : int
        k, at most min(N, D) (see ``clamp_components``).
    whiten : bool, default False
        Divide each coordinate by sqrt(lambda_j) (unit variance on the training data).
    center : bool, default True
        Subtract the mean first (without: decomposition of X^T X / N).
    clamp_components : bool, default False
        Keep min(n_components, N, D) components instead of failing.

    Attributes
    ----------
    components_ : ndarray (k, D), orthonormal rows, in the data's dtype
    mean_ : ndarray (D,)
    explained_variance_ : ndarray (k,) float64, decreasing (N - 1 divisor when centred)
    explained_variance_ratio_ : ndarray (k,) float64
    n_components_ : int, k
    n_features_in_ : int, D

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> X = np.random.default_rng(0).standard_normal((100, 6))
    >>> fisherkit.PCA(n_components=2).fit(X).transform(X).shape
    (100, 2)
    """

    def __init__(self, n_components, whiten=False, center=True, clamp_components=False):
        self.n_components = n_components
        self.whiten = whiten
        self.center = center
        self.clamp_components = clamp_components

    def fit(self, X, y=None) -> "PCA":
        """Fits on the rows of ``X`` (N, D). Returns self."""
        X = as_matrix(X)
        k = positive_int(self.n_components, "n_components")
        if self.center and X.shape[0] < 2:
            raise ValueError(f"PCA with centring needs n_samples >= 2, got n_samples = {X.shape[0]}")
        if k > min(X.shape) and not self.clamp_components:
            raise ValueError(
                f"n_components={k} exceeds min(n_samples, n_features) = {min(X.shape)} "
                f"(X has shape {X.shape}); pass a smaller n_components, or clamp_components=True to keep "
                f"min(n_components, n_samples, n_features) components"
            )
        mean, comp, var, ratio, total = _native.pca_fit(
            X, positive_int(self.n_components, "n_components"), bool(self.whiten),
            bool(self.center), bool(self.clamp_components),
        )
        self.mean_, self.components_ = mean, comp
        self.explained_variance_, self.explained_variance_ratio_ = var, ratio
        self._total_variance = float(total)
        self.n_components_ = comp.shape[0]
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        """Projects ``X`` (N, D) to (N, k), in X's dtype."""
        check_fitted(self, "components_")
        comp = np.ascontiguousarray(self.components_)
        mean = np.ascontiguousarray(self.mean_, dtype=comp.dtype)
        X = as_matrix(X)
        check_n_features(self, X)
        return _native.pca_transform(
            mean, comp, np.ascontiguousarray(self.explained_variance_, dtype=np.float64),
            bool(self.whiten), X,
        )

    # -------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> None:
        """Writes the fitted PCA to a safetensors model file (written and
        validated by the same Rust code as the ``fisherkit`` crates): metadata
        ``kind`` = "pca", ``format_version`` = "1", ``whiten``,
        ``total_variance`` (the denominator of ``explained_variance_ratio_``)
        and the hyper-parameters ``n_components``, ``center``,
        ``clamp_components``; tensors ``mean`` (D) and ``components`` (k, D)
        in the model's dtype, ``explained_variance`` (k) float64. Raises
        ValueError for parameters that would not load back (e.g. components
        not orthonormal)."""
        check_fitted(self, "components_")
        comp = np.ascontiguousarray(self.components_)
        if comp.dtype not in (np.float32, np.float64):
            comp = comp.astype(np.float64)
        var = np.ascontiguousarray(self.explained_variance_, dtype=np.float64)
        total = getattr(self, "_total_variance", None)
        if total is None:
            total = float(var.sum())
        meta = {
            "n_components": str(self.n_components),
            "center": json.dumps(bool(self.center)),
            "clamp_components": json.dumps(bool(self.clamp_components)),
        }
        _native.pca_save(
            os.fspath(path), np.ascontiguousarray(self.mean_, dtype=comp.dtype), comp, var,
            bool(self.whiten), float(total), meta,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "PCA":
        """Reads a ``kind = "pca"`` model file (any file of that kind: written
        by :meth:`save`, by the Rust ``fisherkit_io::ModelFile::write`` of a
        ``Pca`` or by another tool). ``params`` override the hyper-parameters stored in the file
        (for refitting); ``whiten`` comes from the file. A file of another
        kind raises ValueError naming its kind."""
        mean, comp, var, whiten, total, meta = _native.pca_load(os.fspath(path))
        if "whiten" in params and bool(params["whiten"]) != whiten:
            raise ValueError(f"{os.fspath(path)}: the file's PCA has whiten={whiten}; it cannot be changed on load")
        hyper: dict[str, Any] = {"n_components": comp.shape[0], "whiten": whiten}
        try:
            hyper["n_components"] = int(meta["n_components"])
        except (KeyError, ValueError):
            pass
        for key in ("center", "clamp_components"):
            if meta.get(key) in ("true", "false"):
                hyper[key] = meta[key] == "true"
        hyper.update(params)
        pca = cls(**hyper)
        pca.mean_, pca.components_, pca.explained_variance_ = mean, comp, var
        pca.explained_variance_ratio_ = var / total if total > 0 else np.zeros_like(var)
        pca._total_variance = float(total)
        pca.n_components_ = comp.shape[0]
        pca.n_features_in_ = comp.shape[1]
        return pca

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "components_")


class LinearSVC(ClassifierMixin, BaseEstimator):
    """One-vs-rest linear SVM (LIBLINEAR's dual coordinate descent): one binary
    problem per class (also for two classes), prediction by the largest
    decision value.

    Parameters
    ----------
    C : float, default 1.0
    loss : {"squared_hinge", "hinge"}, default "squared_hinge"
    tol : float, default 0.1
        LIBLINEAR's stopping tolerance.
    max_iter : int, default 1000
        Passes over the data per binary problem.
    fit_intercept : bool, default True
        Append a constant feature (regularised intercept, as LIBLINEAR).
    random_state : int, default 0
        Seed of the coordinate order.
    verbose : int, default 0
        1: print the passes and convergence of every binary problem after the fit.

    Labels are checked as scikit-learn does (continuous or NaN labels are a
    ``ValueError``). A binary problem that ends at ``max_iter`` unconverged
    warns with a ``ConvergenceWarning``; data whose squared norms overflow
    the dtype are a ``ValueError``.

    Attributes
    ----------
    classes_ : ndarray (K,), the sorted labels
    coef_ : ndarray (K, D), in the data's dtype
    intercept_ : ndarray (K,)
    n_iter_ : ndarray (K,) int, converged_ : ndarray (K,) bool
    n_features_in_ : int

    ``decision_function`` returns (N, K) for K > 2 and, as scikit-learn, (N,)
    for two classes: the score of ``classes_[1]``, ``f_1(x) - f_0(x)`` (the two
    one-vs-rest problems are kept, so ``coef_`` is (2, D)); positive means
    ``classes_[1]``.

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 5)); y = (X[:, 0] > 0).astype(int)
    >>> svc = fisherkit.LinearSVC(C=1.0).fit(X, y)
    >>> svc.decision_function(X[:3]).shape, svc.predict(X[:3]).shape
    ((3,), (3,))
    """

    def __init__(
        self, C=1.0, loss="squared_hinge", tol=0.1, max_iter=1000, fit_intercept=True, random_state=0, verbose=0
    ):
        self.C = C
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y) -> "LinearSVC":
        """Trains on ``X`` (N, D) with labels ``y`` (N,): integer, string or
        bool labels (or floats with integer values). Returns self."""
        X = as_matrix(X)
        check_scale(X)
        if not (isinstance(self.C, (int, float, np.number)) and np.isfinite(self.C) and self.C > 0):
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}")
        if y is None:
            raise ValueError("LinearSVC requires y to be passed, but the target y is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            import warnings

            warnings.warn("A column-vector y was passed when a 1d array was expected; ravelled to (n_samples,)",
                          _data_conversion_warning(), stacklevel=2)
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of labels, got shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
        _check_classification_targets(y)
        classes, idx = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"need at least 2 classes, got {len(classes)} class")
        coef, intercept, n_iter, converged = _native.linear_svc_fit(
            X, idx.astype(np.int64).ravel().tolist(), len(classes), float(self.C), str(self.loss),
            float(self.tol), positive_int(self.max_iter, "max_iter"), bool(self.fit_intercept),
            seed_from(self.random_state),
        )
        self.classes_ = classes
        self.coef_, self.intercept_ = coef, intercept
        self.n_iter_ = np.asarray(n_iter)
        self.converged_ = np.asarray(converged)
        self.n_features_in_ = X.shape[1]
        if self.verbose:
            for c, it, ok in zip(classes, self.n_iter_, self.converged_):
                print(f"LinearSVC: class {c!r} vs rest: {it} passes, {'converged' if ok else 'not converged'}")
        if not np.all(self.converged_):
            warn_unconverged(self, "the dual coordinate descent (LIBLINEAR)")
        return self

    def _scores(self, X) -> np.ndarray:
        """w_k^T x_i + b_k, (N, K) for every K."""
        check_fitted(self, "coef_")
        coef = np.ascontiguousarray(self.coef_)
        X = as_matrix(X)
        check_n_features(self, X)
        check_scale(X)
        return _native.linear_svc_decision_function(
            coef, np.ascontiguousarray(self.intercept_, dtype=coef.dtype), X
        )

    def decision_function(self, X) -> np.ndarray:
        """w_k^T x_i + b_k, (N, K), in X's dtype; for two classes (N,), the
        score of ``classes_[1]``: f_1(x) - f_0(x) (as scikit-learn, > 0 means
        ``classes_[1]``)."""
        s = self._scores(X)
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s

    def predict(self, X) -> np.ndarray:
        """The label of the largest decision value of each row."""
        s = self._scores(X)
        return self.classes_[np.argmax(s, axis=1)]

    # -------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> None:
        """Writes the trained classifier to a safetensors model file (written
        and validated by the same Rust code as the ``fisherkit`` crates):
        metadata ``kind`` = "linear-svm", ``format_version`` = "1",
        ``classes`` (a JSON list of the labels, in the order of the rows of
        ``coef_``), ``c`` (= ``C``), ``classes_dtype`` and the other
        hyper-parameters; tensors ``weights`` = ``coef_`` (K, D) and ``bias`` =
        ``intercept_`` (K) in the model's dtype.

        ``classes_`` must hold integer (or bool) or string labels; other
        labels (e.g. floats) raise ValueError."""
        check_fitted(self, "coef_")
        coef = np.ascontiguousarray(self.coef_)
        if coef.dtype not in (np.float32, np.float64):
            coef = coef.astype(np.float64)
        classes = np.asarray(self.classes_)
        if classes.dtype.kind in "iub":
            if classes.dtype.kind == "u" and classes.size and int(classes.max()) > np.iinfo(np.int64).max:
                raise ValueError("class labels above 2**63 - 1 cannot be stored in a model file")
            labels: list = [int(v) for v in classes.tolist()]
        elif classes.dtype.kind == "U" or (
            classes.dtype.kind == "O" and all(isinstance(v, str) for v in classes.tolist())
        ):
            labels = [str(v) for v in classes.tolist()]
        else:
            raise ValueError(
                f"classes_ of dtype {classes.dtype} cannot be stored in a model file; "
                "use integer or string labels"
            )
        meta = {
            "classes_dtype": classes.dtype.str if classes.dtype.kind in "iub" else "str",
            "loss": str(self.loss),
            "fit_intercept": json.dumps(bool(self.fit_intercept)),
            "tol": repr(float(self.tol)),
            "max_iter": str(int(self.max_iter)),
        }
        if isinstance(self.random_state, (int, np.integer)):
            meta["random_state"] = str(int(self.random_state))
        _native.linear_svc_save(
            os.fspath(path), coef, np.ascontiguousarray(self.intercept_, dtype=coef.dtype), labels,
            float(self.C), meta,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "LinearSVC":
        """Reads a ``kind = "linear-svm"`` model file (written by :meth:`save`,
        by the Rust ``fisherkit_io::ModelFile::write`` of a ``LabelledSvm`` or
        by another tool; without a ``classes`` key the labels are 0..K-1). ``params`` override
        the hyper-parameters stored in the file. A file of another kind raises
        ValueError naming its kind. ``n_iter_`` and ``converged_`` are not
        stored."""
        coef, intercept, labels, c, meta = _native.linear_svc_load(os.fspath(path))
        if labels and isinstance(labels[0], str):
            classes = np.array(labels, dtype=str)
        else:
            try:
                dt = np.dtype(meta.get("classes_dtype", "int64"))
            except TypeError:
                dt = np.dtype(np.int64)
            classes = np.array(labels, dtype=np.int64)
            if dt.kind in "iub" and np.array_equal(classes.astype(dt).astype(np.int64), classes):
                classes = classes.astype(dt)
        hyper: dict[str, Any] = {}
        if c is not None:
            hyper["C"] = c
        if meta.get("loss") in ("squared_hinge", "hinge"):
            hyper["loss"] = meta["loss"]
        if meta.get("fit_intercept") in ("true", "false"):
            hyper["fit_intercept"] = meta["fit_intercept"] == "true"
        for key, conv in (("tol", float), ("max_iter", int), ("random_state", int)):
            try:
                hyper[key] = conv(meta[key])
            except (KeyError, ValueError):
                pass
        hyper.update(params)
        svc = cls(**hyper)
        svc.classes_ = classes
        svc.coef_, svc.intercept_ = coef, intercept
        svc.n_features_in_ = coef.shape[1]
        return svc

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")
