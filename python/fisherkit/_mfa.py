"""Mixture of factor analysers and its Fisher score (Dixit & Vasconcelos, NIPS 2016)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import (
    BaseEstimator,
    DensityMixin,
    NotFittedError,
    StatisticsEMMixin,
    TransformerMixin,
    as_bags,
    as_matrix,
    check_fitted,
    fitted_arrays,
    clone,
    nonneg_float,
    positive_int,
    seed_from,
)
from ._fisherkit import MfaStatistics
from ._gmm import read_model_file

__all__ = ["MixtureOfFactorAnalyzers", "MFAFisherScore", "MfaStatistics"]


class MixtureOfFactorAnalyzers(StatisticsEMMixin, DensityMixin, BaseEstimator):
    """Mixture of K factor analysers with R factors, fitted by EM
    (Ghahramani & Hinton 1997).

    Component k: $x = \\Lambda_k z + \\mu_k + \\varepsilon$, $z \\sim N(0, I_R)$,
    $\\varepsilon \\sim N(0, \\Psi)$ with $\\Psi$ diagonal, so
    $p(x) = \\sum_k w_k N(x; \\mu_k, \\Lambda_k\\Lambda_k^\\top + \\Psi)$. No D×D
    matrix is ever formed (Woodbury identities, GEMMs against the stacked
    loadings); sums are accumulated in float64. The model keeps the dtype of
    the training data.

    Parameters
    ----------
    n_components : int
        K.
    n_factors : int
        R, with 0 < R < D.
    psi_mode : {"shared", "per_component"}, default "shared"
        One $\\Psi$ for all components (the paper's model) or one per component.
    max_iter : int, default 100
    tol : float, default 1e-6
        Stop when the relative change of the log-likelihood is below ``tol``.
    n_init : int, default 1
    psi_floor : float, default 1e-3
        $\\psi_d \\ge$ ``psi_floor`` $\\cdot \\mathrm{Var}(x_d)$.
    random_state : int, RandomState, Generator or None, default 0
        Seed of the k-means + PPCA initialisation.

    Attributes
    ----------
    weights_ : ndarray (K,)
    means_ : ndarray (K, D)
    loadings_ : ndarray (K, D, R), $\\Lambda_k$
    psi_ : ndarray (D,) shared or (K, D) per component, the diagonal of $\\Psi$
    converged_, n_iter_, lower_bound_, log_likelihood_history_, n_features_in_
        As :class:`GaussianMixture`.
    """

    def __init__(
        self,
        n_components,
        n_factors,
        psi_mode="shared",
        max_iter=100,
        tol=1e-6,
        n_init=1,
        psi_floor=1e-3,
        random_state=0,
    ):
        self.n_components = n_components
        self.n_factors = n_factors
        self.psi_mode = psi_mode
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.psi_floor = psi_floor
        self.random_state = random_state

    def _set_model(self, w, m, lam, psi) -> None:
        self.weights_ = w
        self.means_ = m
        self.loadings_ = lam
        # the library's psi is (1, D) shared or (K, D) per component
        self.psi_ = psi.reshape(-1) if self.psi_mode == "shared" else psi
        self.n_features_in_ = m.shape[1]

    def _params(self):
        check_fitted(self, "means_")
        w, m, lam, psi = fitted_arrays(self, ("weights_", "means_", "loadings_", "psi_"))
        return w, m, lam, np.ascontiguousarray(np.atleast_2d(psi))

    def _fit(self, X, max_iter: int):
        X = as_matrix(X)
        (w, m, lam, psi), lls, n_iter, converged = _native.mfa_fit(
            X,
            positive_int(self.n_components, "n_components"),
            positive_int(self.n_factors, "n_factors"),
            str(self.psi_mode),
            max_iter,
            nonneg_float(self.tol, "tol"),
            positive_int(self.n_init, "n_init"),
            nonneg_float(self.psi_floor, "psi_floor"),
            seed_from(self.random_state),
        )
        self._set_model(w, m, lam, psi)
        return self._record_fit(lls, n_iter, converged)

    def fit(self, X, y=None) -> "MixtureOfFactorAnalyzers":
        """Fits the mixture to the rows of ``X`` (N, D), float32 or float64. Returns self."""
        return self._fit(X, positive_int(self.max_iter, "max_iter"))

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row of ``X`` (N, D): (N,) float64."""
        return _native.mfa_score_samples(self._params(), as_matrix(X))

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row of ``X``."""
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X) -> np.ndarray:
        """Posteriors (N, K) of the rows of ``X``, in X's dtype."""
        return _native.mfa_predict_proba(self._params(), as_matrix(X))

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row: (N,) int64."""
        return np.argmax(self.predict_proba(X), axis=1).astype(np.int64)

    # sufficient_statistics, update_from_statistics, partial_fit: StatisticsEMMixin
    # (update_from_statistics needs the model that computed the statistics)
    _statistics_type = MfaStatistics

    def _statistics_of(self, X: np.ndarray) -> MfaStatistics:
        return _native.mfa_sufficient_statistics(self._params(), X)

    def _m_step(self, stats: MfaStatistics) -> None:
        self._set_model(*_native.mfa_update_from_statistics(self._params(), stats, float(self.psi_floor)))

    def _converged(self, prev: float, ll: float) -> bool:
        return abs(ll - prev) <= float(self.tol) * abs(prev)

    def save(self, path: str | os.PathLike) -> None:
        """Writes a safetensors model file: ``kind`` = "mfa", ``format_version``
        = "1"; tensors ``weights`` (K), ``means`` (K, D), ``loadings`` (K, D, R),
        ``psi`` (D) shared or (K, D) per component."""
        w, m, lam, psi = self._params()
        psi_t = psi[0] if np.ndim(self.psi_) == 1 else psi
        _native.save_safetensors(
            os.fspath(path),
            {"kind": "mfa", "format_version": "1"},
            [("weights", w), ("means", m), ("loadings", lam), ("psi", np.ascontiguousarray(psi_t))],
        )

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "MixtureOfFactorAnalyzers":
        """Reads a ``kind = "mfa"`` safetensors model file."""
        _, t = read_model_file(path, "mfa", ("weights", "means", "loadings", "psi"))
        m = t["means"]
        w = np.ascontiguousarray(t["weights"], dtype=m.dtype)
        lam = np.ascontiguousarray(t["loadings"], dtype=m.dtype)
        psi = np.ascontiguousarray(t["psi"], dtype=m.dtype)
        if m.ndim != 2 or lam.ndim != 3 or psi.ndim not in (1, 2):
            raise ValueError(
                f"{os.fspath(path)}: inconsistent MFA tensor shapes: weights {w.shape}, means {m.shape}, "
                f"loadings {lam.shape}, psi {psi.shape}"
            )
        # validates the parameters
        _native.mfa_score_samples((w, m, lam, np.atleast_2d(psi)), np.ascontiguousarray(m[:1]))
        mode = "shared" if psi.ndim == 1 else "per_component"
        mfa = cls(n_components=m.shape[0], n_factors=lam.shape[2], psi_mode=mode, **params)
        mfa._set_model(w, m, lam, psi)
        return mfa

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "means_")


class MFAFisherScore(TransformerMixin, BaseEstimator):
    """MFA Fisher score of bags of descriptors (the paper's equations 14, 15).

    For a bag $x_1 \\dots x_N$ with posteriors $h_{ik}$, $r_{ik} = S_k^{-1}(x_i - \\mu_k)$,
    $e_{ik} = E[z|x_i, k]$, $\\beta_k = M_k^{-1}\\Lambda_k^\\top\\Psi^{-1}$:
    ``"mean"``: $G_{\\mu_k} = \\frac1N\\sum_i h_{ik} r_{ik}$ (K·D, component-major);
    ``"loading"``: $G_{\\Lambda_k} = \\frac1N(\\sum_i h_{ik} r_{ik} e_{ik}^\\top - n_k\\beta_k^\\top)$
    (K·D·R: component, dimension, factor). Blocks in the order mean, loading,
    then optional diagonal whitening, signed power and L2.

    Parameters
    ----------
    mfa : MixtureOfFactorAnalyzers
        Fitted: used as is; unfitted: :meth:`fit` fits a clone on the stacked bags.
    parts : sequence of {"mean", "loading"}, default ("loading",)
    power : float, default 0.5
    l2 : bool, default True
    whiten : bool, default False
        :meth:`fit` estimates the diagonal Fisher information as the variance
        of the raw scores of the training bags (``whitening_``, at least 2
        bags) and :meth:`transform` divides by its square root before the
        normalisation.
    """

    def __init__(self, mfa, parts=("loading",), power=0.5, l2=True, whiten=False):
        self.mfa = mfa
        self.parts = parts
        self.power = power
        self.l2 = l2
        self.whiten = whiten

    def _parts(self) -> list[str]:
        parts = [self.parts] if isinstance(self.parts, str) else list(self.parts)
        return [str(p) for p in parts]

    def _model(self):
        model = getattr(self, "mfa_", None)
        if model is None:
            model = self.mfa
        if not hasattr(model, "means_"):
            raise NotFittedError("the MFAFisherScore's mfa is not fitted: fit it first, or call fit(bags)")
        return model

    def fit(self, bags=None, y=None) -> "MFAFisherScore":
        """Keeps a fitted ``mfa`` (``mfa_``) or fits a clone of an unfitted one
        on the stacked bags; with ``whiten``, estimates ``whitening_``. Returns self."""
        if hasattr(self.mfa, "means_"):
            self.mfa_ = self.mfa
        else:
            b = as_bags(bags)
            if not b:
                raise ValueError("cannot fit the model on an empty list of bags")
            self.mfa_ = clone(self.mfa).fit(np.concatenate(b, axis=0))
        if self.whiten:
            self.whitening_ = _native.mfa_fit_whitening(self.mfa_._params(), as_bags(bags), self._parts())
        return self

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (list of (N_i, D) arrays): (n_bags, dim) in the
        bags' dtype (float32 if all are float32, else float64)."""
        model = self._model()
        whitening = None
        if self.whiten:
            check_fitted(self, "whitening_")
            whitening = np.ascontiguousarray(self.whitening_)
        bags = as_bags(bags)
        if whitening is not None and bags:
            whitening = whitening.astype(bags[0].dtype)
        return _native.mfa_fisher_score(
            model._params(), bags, self._parts(), float(self.power), bool(self.l2), whitening
        )

    def output_dim(self) -> int:
        """Length of the encoding."""
        k, d, r = np.shape(self._model().loadings_)
        return _native.mfa_fisher_score_dim(k, d, r, self._parts())
