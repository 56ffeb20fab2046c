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
    check_n_features,
    fitted_arrays,
    clone,
    nonneg_float,
    positive_int,
    seed_from,
)
from ._fisherkit import MfaStatistics
from ._mixture import MixtureMixin, _check_n_components, _fit_metadata, _hyper_from_metadata, _restore_fit, store_params
from ._encode import _EncoderMixin, _parts_of

__all__ = ["MixtureOfFactorAnalyzers", "MFAFisherScore", "MfaStatistics"]


class MixtureOfFactorAnalyzers(MixtureMixin, StatisticsEMMixin, DensityMixin, BaseEstimator):
    """Mixture of K factor analysers with R factors, fitted by EM
    (Ghahramani & Hinton 1997).

    Component k: x = Lambda_k z + mu_k + eps, z ~ N(0, I_R), eps ~ N(0, Psi)
    with Psi diagonal, so p(x) = sum_k w_k N(x; mu_k, Lambda_k Lambda_k^T + Psi).
    No D x D matrix is ever formed (Woodbury identities, GEMMs against the
    stacked loadings); sums are accumulated in float64. The model keeps the
    dtype of the training data.

    Parameters
    ----------
    n_components : int
        K.
    n_factors : int
        R, with 0 < R < D.
    psi_mode : {"shared", "per_component"}, default "shared"
        One Psi for all components (the paper's model) or one per component.
    max_iter : int, default 100
    tol : float, default 1e-3
        Stop when the change of the mean log-likelihood per row between two
        iterations is below ``tol``: by default the absolute change
        |l_t - l_(t-1)| (scikit-learn's ``GaussianMixture`` rule and default).
    tol_mode : {"absolute", "relative"}, default "absolute"
        "relative": |l_t - l_(t-1)| / max(|l_(t-1)|, 1) instead
        (``tol=1e-6, tol_mode="relative"``: the strict former default).
    n_init : int, default 1
    psi_floor : float, default 1e-3
        psi_d >= ``psi_floor`` * Var(x_d).
    random_state : int, RandomState, Generator or None, default 0
        Seed of the k-means + PPCA initialisation.
    verbose : int, default 0
        1: print a summary after the fit; 2: also every iteration's log-likelihood.

    Attributes
    ----------
    weights_ : ndarray (K,)
    means_ : ndarray (K, D)
    loadings_ : ndarray (K, D, R), Lambda_k
    psi_ : ndarray (D,) shared or (K, D) per component, the diagonal of Psi
    converged_, n_iter_, lower_bound_, log_likelihood_history_, n_features_in_
        As :class:`GaussianMixture` (an unconverged fit warns with a
        ``ConvergenceWarning``).
    whitening_parts_, fisher_information_
        Only on a model loaded from a file with a whitening block (``fisherkit
        mfa whiten``): the MFA Fisher score parts and the diagonal
        Fisher-information estimate (P,) that :class:`MFAFisherScore` whitens
        with; :meth:`save` writes them back.

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> X = np.random.default_rng(0).standard_normal((400, 6))
    >>> mfa = fisherkit.MixtureOfFactorAnalyzers(n_components=2, n_factors=2).fit(X)
    >>> mfa.loadings_.shape
    (2, 6, 2)
    >>> mfa.predict(X[:3]).shape
    (3,)
    """

    _native_kind = "mfa"

    def __init__(
        self,
        n_components,
        n_factors,
        psi_mode="shared",
        max_iter=100,
        tol=1e-3,
        tol_mode="absolute",
        n_init=1,
        psi_floor=1e-3,
        random_state=0,
        verbose=0,
    ):
        store_params(self, locals())

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
        r = positive_int(self.n_factors, "n_factors")
        if r >= X.shape[1]:
            raise ValueError(
                f"n_factors={r} must satisfy 0 < n_factors < n_features = {X.shape[1]} (X has shape {X.shape})"
            )
        (w, m, lam, psi), lls, n_iter, converged = _native.mfa_fit(
            X,
            positive_int(self.n_components, "n_components"),
            positive_int(self.n_factors, "n_factors"),
            str(self.psi_mode),
            max_iter,
            nonneg_float(self.tol, "tol"),
            str(self.tol_mode),
            positive_int(self.n_init, "n_init"),
            nonneg_float(self.psi_floor, "psi_floor"),
            seed_from(self.random_state),
        )
        self._set_model(w, m, lam, psi)
        return self._record_fit(lls, n_iter, converged)

    def fit(self, X, y=None) -> "MixtureOfFactorAnalyzers":
        """Fits the mixture to the rows of ``X`` (N, D), float32 or float64
        (integers are converted to float64). Returns self."""
        return self._fit_and_report(X)

    def _after_fit(self) -> None:
        for attr in ("whitening_parts_", "fisher_information_"):  # estimated for the old model
            self.__dict__.pop(attr, None)

    def _native_params(self) -> tuple:
        return (self._params(),)

    def _n_parameters(self) -> int:
        """Free parameters: K-1 weights, K·D means, K·D·R loadings (not
        discounting their rotational invariance), D or K·D noise variances."""
        k, d, r = np.shape(self.loadings_)
        return k - 1 + k * d + k * d * r + int(np.size(self.psi_))

    # sufficient_statistics, update_from_statistics, partial_fit: StatisticsEMMixin
    # (update_from_statistics needs the model that computed the statistics)
    _statistics_type = MfaStatistics

    def _statistics_of(self, X: np.ndarray) -> MfaStatistics:
        check_n_features(self, X)
        return _native.mfa_sufficient_statistics(self._params(), X)

    def _m_step(self, stats: MfaStatistics) -> int:
        params, reseeded = _native.mfa_update_from_statistics(self._params(), stats, float(self.psi_floor))
        self._set_model(*params)
        return reseeded

    def _native_fit_from_statistics(self, step, max_iter: int):
        return _native.mfa_fit_from_statistics(
            self._params(), step, max_iter, nonneg_float(self.tol, "tol"), str(self.tol_mode),
            nonneg_float(self.psi_floor, "psi_floor"),
        )

    def save(self, path: str | os.PathLike) -> None:
        """Writes a safetensors model file with the command line's Rust writer
        (docs/formats.md §2.3): ``kind`` = "mfa", ``format_version`` = "1";
        tensors ``weights`` (K), ``means`` (K, D), ``loadings`` (K, D, R),
        ``psi`` (D) shared or (K, D) per component; the whitening block
        (``fisher_information``, ``whitening_parts``) if the model has one;
        the hyper-parameters (``max_iter``, ``tol``, ``tol_mode``, ``n_init``, ``psi``,
        ``psi_floor``, ``seed``) and ``n_iter``, ``converged``,
        ``mean_log_likelihood`` as optional metadata."""
        w, m, lam, psi = self._params()
        meta = _fit_metadata(self)
        meta["psi"] = "per-component" if self.psi_mode == "per_component" else "shared"
        meta["psi_floor"] = repr(float(self.psi_floor))
        whitening = None
        if hasattr(self, "fisher_information_"):
            whitening = (
                list(self.whitening_parts_),
                np.ascontiguousarray(self.fisher_information_, dtype=m.dtype),
            )
        _native.mfa_save(os.fspath(path), w, m, lam, psi, meta, whitening)

    @classmethod
    def load(cls, path: str | os.PathLike, **params: Any) -> "MixtureOfFactorAnalyzers":
        """Reads a ``kind = "mfa"`` safetensors model file (Python's, the command
        line's or another tool's; validated by the Rust reader), with its
        whitening block if it has one (``whitening_parts_``,
        ``fisher_information_``) and the stored hyper-parameters and fit state
        (missing keys: the defaults); ``params`` override hyper-parameters.
        ``n_components``, ``n_factors`` and ``psi_mode`` come from the file."""
        p = os.fspath(path)
        (w, m, lam, psi), whitening, meta = _native.mfa_load(p)
        k, r = m.shape[0], lam.shape[2]
        mode = "per_component" if psi.shape[0] > 1 or meta.get("psi") == "per-component" else "shared"
        if k == 1 and meta.get("psi") not in ("shared", "per-component"):
            mode = "shared"
        _check_n_components(p, params, k)
        for name, value in (("n_factors", r), ("psi_mode", mode)):
            if name in params and params.pop(name) != value:
                raise ValueError(f"{p}: the file's model has {name}={value!r}; it comes from the file (omit it)")
        hyper = _hyper_from_metadata(meta, {"psi_floor": ("psi_floor", float)})
        hyper.update(params)
        mfa = cls(n_components=k, n_factors=r, psi_mode=mode, **hyper)
        mfa._set_model(w, m, lam, psi)
        if whitening is not None:
            mfa.whitening_parts_ = tuple(whitening[0])
            mfa.fisher_information_ = whitening[1]
        _restore_fit(mfa, meta)
        return mfa

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "means_")


class MFAFisherScore(_EncoderMixin, TransformerMixin, BaseEstimator):
    """MFA Fisher score of bags of descriptors (the paper's equations 14, 15).

    For a bag x_1 ... x_N with posteriors h_ik, r_ik = S_k^-1 (x_i - mu_k),
    e_ik = E[z | x_i, k], beta_k = M_k^-1 Lambda_k^T Psi^-1:
    ``"mean"``: G_mu_k = 1/N sum_i h_ik r_ik (K·D, component-major);
    ``"loading"``: G_Lambda_k = 1/N (sum_i h_ik r_ik e_ik^T - n_k beta_k^T)
    (K·D·R: component, dimension, factor). Blocks in the order mean, loading,
    then optional diagonal whitening, signed power and L2.

    Parameters
    ----------
    mfa : MixtureOfFactorAnalyzers
        Fitted: used as is; unfitted: :meth:`fit` fits a clone on the stacked
        bags. Another type (e.g. a GaussianMixture) is a ``TypeError``.
    parts : sequence of {"mean", "loading"} or None, default None
        Non-empty. None: the parts of the model's stored whitening if it has
        one (as ``fisherkit encode``), else ``("loading",)``.
    power : float, default 0.5
    l2 : bool, default True
    whiten : {"auto", True, False}, default "auto"
        "auto": divide by the square root of the Fisher-information estimate
        stored in the model (``fisher_information_``, read from an MFA file
        written by ``fisherkit mfa whiten``), as ``fisherkit encode`` does; no
        whitening for a model without one. ``parts`` must then be the parts
        the estimate was made for (a ``ValueError`` otherwise, as the command
        line). True: :meth:`fit` estimates the diagonal Fisher information as
        the variance of the raw scores of the training bags (``whitening_``,
        at least 2 bags). False: never whiten.
    empty_bag : {"error", "zeros"}, default "error"
        A bag without descriptors: a ``ValueError`` naming it, or a zero vector.

    Attributes
    ----------
    mfa_ : the fitted mixture used (after :meth:`fit`)
    whitening_ : ndarray (dim,), with ``whiten=True`` after :meth:`fit`
    n_features_in_ : int, D

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> rng = np.random.default_rng(0)
    >>> bags = [rng.standard_normal((60, 6)) for _ in range(4)]
    >>> mfa = fisherkit.MixtureOfFactorAnalyzers(n_components=2, n_factors=2).fit(np.concatenate(bags))
    >>> fisherkit.MFAFisherScore(mfa).transform(bags).shape
    (4, 24)
    """

    def __init__(self, mfa, parts=None, power=0.5, l2=True, whiten="auto", empty_bag="error"):
        store_params(self, locals())

    @staticmethod
    def _check_type(model: Any) -> None:
        if not (hasattr(model, "loadings_") or isinstance(model, MixtureOfFactorAnalyzers)):
            raise TypeError(
                "MFAFisherScore needs a fisherkit.MixtureOfFactorAnalyzers, got "
                f"{type(model).__name__}" + (
                    " (for a Gaussian mixture use fisherkit.FisherVector)" if hasattr(model, "covariance_type") else ""
                )
            )

    def _stored(self, model) -> tuple | None:
        """The model's stored whitening ``(parts, fisher_information)`` that
        ``whiten="auto"`` applies, or None."""
        if self.whiten != "auto" or not hasattr(model, "fisher_information_"):
            return None
        return list(model.whitening_parts_), model.fisher_information_

    def _parts_for(self, model) -> list[str]:
        stored = self._stored(model)
        if self.parts is None:
            return stored[0] if stored else ["loading"]
        parts = _parts_of(self.parts, ("mean", "loading"), "MFAFisherScore", "MFA Fisher score")
        if stored and sorted(parts) != sorted(stored[0]):
            raise ValueError(
                f"parts {tuple(parts)} differ from the parts the model's stored whitening was estimated "
                f"for {tuple(stored[0])}; pass parts={tuple(stored[0])} (or parts=None), or whiten=False"
            )
        return parts

    def _parts(self) -> list[str]:
        return self._parts_for(self._model())

    def _model(self):
        model = getattr(self, "mfa_", None)
        if model is None:
            model = self.mfa
        self._check_type(model)
        if not hasattr(model, "means_"):
            raise NotFittedError("the MFAFisherScore's mfa is not fitted: fit it first, or call fit(bags)")
        return model

    def _dim_in(self) -> int:
        return int(np.shape(self._model().means_)[1])

    def fit(self, bags=None, y=None) -> "MFAFisherScore":
        """Keeps a fitted ``mfa`` (``mfa_``) or fits a clone of an unfitted one
        on the stacked bags; with ``whiten=True``, estimates ``whitening_``. Returns self."""
        if self.whiten not in ("auto", True, False):
            raise ValueError(f"whiten must be \"auto\", True or False, got {self.whiten!r}")
        self._check_type(self.mfa)
        if hasattr(self.mfa, "means_"):
            self.mfa_ = self.mfa
        else:
            b = as_bags(bags)
            if not b:
                raise ValueError("cannot fit the model on an empty list of bags")
            self.mfa_ = clone(self.mfa).fit(np.concatenate(b, axis=0))
        parts = self._parts_for(self.mfa_)
        if self.whiten is True:
            self.whitening_ = _native.mfa_fit_whitening(self.mfa_._params(), as_bags(bags), parts)
        return self

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (list of (N_i, D) arrays): (n_bags, dim) in the
        bags' dtype (float32 if all are float32, else float64)."""
        model = self._model()
        parts = self._parts_for(model)
        whitening = None
        if self.whiten is True:
            check_fitted(self, "whitening_")
            whitening = np.ascontiguousarray(self.whitening_)
        else:
            stored = self._stored(model)
            if stored is not None:
                # the stored estimate follows the canonical order mean, loading
                whitening = np.ascontiguousarray(stored[1])
        bags = as_bags(bags)
        if whitening is not None and bags:
            whitening = whitening.astype(bags[0].dtype)
        params = model._params()

        def run(b):
            return _native.mfa_fisher_score(params, b, parts, float(self.power), bool(self.l2), whitening)

        return self._encode(bags, run)

    def output_dim(self) -> int:
        """Length of the encoding."""
        model = self._model()
        k, d, r = np.shape(model.loadings_)
        return _native.mfa_fisher_score_dim(k, d, r, self._parts_for(model))
