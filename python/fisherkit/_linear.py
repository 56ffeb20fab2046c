"""PCA and the one-vs-rest linear SVM of the scene pipeline."""

from __future__ import annotations

import numpy as np

from . import _fisherkit as _native
from ._base import BaseEstimator, TransformerMixin, as_matrix, check_fitted, positive_int, seed_from

try:
    from sklearn.base import ClassifierMixin
except ImportError:  # pragma: no cover

    class ClassifierMixin:
        _estimator_type = "classifier"

        def score(self, X, y, sample_weight=None):
            return float(np.mean(self.predict(X) == np.asarray(y)))


__all__ = ["PCA", "LinearSVC"]


class PCA(TransformerMixin, BaseEstimator):
    """Principal component analysis (eigendecomposition of the D×D covariance,
    accumulated in float64).

    Parameters
    ----------
    n_components : int
        k, at most min(N, D) (see ``clamp_components``).
    whiten : bool, default False
        Divide each coordinate by $\\sqrt{\\lambda_j}$ (unit variance on the training data).
    center : bool, default True
        Subtract the mean first (without: decomposition of $X^\\top X / N$).
    clamp_components : bool, default False
        Keep min(n_components, N, D) components instead of failing.

    Attributes
    ----------
    components_ : ndarray (k, D), orthonormal rows, in the data's dtype
    mean_ : ndarray (D,)
    explained_variance_ : ndarray (k,) float64, decreasing ($N-1$ divisor when centred)
    explained_variance_ratio_ : ndarray (k,) float64
    n_components_ : int, k
    n_features_in_ : int, D
    """

    def __init__(self, n_components, whiten=False, center=True, clamp_components=False):
        self.n_components = n_components
        self.whiten = whiten
        self.center = center
        self.clamp_components = clamp_components

    def fit(self, X, y=None) -> "PCA":
        """Fits on the rows of ``X`` (N, D). Returns self."""
        X = as_matrix(X)
        mean, comp, var, ratio = _native.pca_fit(
            X, positive_int(self.n_components, "n_components"), bool(self.whiten),
            bool(self.center), bool(self.clamp_components),
        )
        self.mean_, self.components_ = mean, comp
        self.explained_variance_, self.explained_variance_ratio_ = var, ratio
        self.n_components_ = comp.shape[0]
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        """Projects ``X`` (N, D) to (N, k), in X's dtype."""
        check_fitted(self, "components_")
        comp = np.ascontiguousarray(self.components_)
        mean = np.ascontiguousarray(self.mean_, dtype=comp.dtype)
        return _native.pca_transform(
            mean, comp, np.ascontiguousarray(self.explained_variance_, dtype=np.float64),
            bool(self.whiten), as_matrix(X),
        )


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

    Attributes
    ----------
    classes_ : ndarray (K,), the sorted labels
    coef_ : ndarray (K, D), in the data's dtype
    intercept_ : ndarray (K,)
    n_iter_ : ndarray (K,) int, converged_ : ndarray (K,) bool
    n_features_in_ : int

    ``decision_function`` returns (N, K) for every K ≥ 2 (scikit-learn returns
    (N,) for two classes).
    """

    def __init__(self, C=1.0, loss="squared_hinge", tol=0.1, max_iter=1000, fit_intercept=True, random_state=0):
        self.C = C
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def fit(self, X, y) -> "LinearSVC":
        """Trains on ``X`` (N, D) with labels ``y`` (N,), any hashable labels. Returns self."""
        X = as_matrix(X)
        if not (isinstance(self.C, (int, float, np.number)) and np.isfinite(self.C) and self.C > 0):
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}")
        classes, idx = np.unique(np.asarray(y), return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"need at least 2 classes, got {len(classes)}")
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
        return self

    def decision_function(self, X) -> np.ndarray:
        """$w_k^\\top x_i + b_k$, (N, K), in X's dtype."""
        check_fitted(self, "coef_")
        coef = np.ascontiguousarray(self.coef_)
        return _native.linear_svc_decision_function(
            coef, np.ascontiguousarray(self.intercept_, dtype=coef.dtype), as_matrix(X)
        )

    def predict(self, X) -> np.ndarray:
        """The label of the largest decision value of each row."""
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]
