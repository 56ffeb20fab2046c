"""Encoders of bags of local descriptors: GMM Fisher vector and VLAD."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _fisherkit as _native
from ._base import BaseEstimator, TransformerMixin, as_bags, clone, fitted_arrays

__all__ = ["FisherVector", "VLAD"]

_FV_PARTS = ("prior", "mean", "var")


def _is_fitted(model: Any, attr: str) -> bool:
    return hasattr(model, attr)


def _gmm_params(gmm: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, means, variances) of a fitted diagonal mixture: a fisherkit
    GaussianMixture, or scikit-learn's with ``covariance_type="diag"``."""
    ct = getattr(gmm, "covariance_type", "diag")
    if ct != "diag":
        raise ValueError(
            f"the Gaussian mixture has covariance_type={ct!r}; Fisher vectors need a diagonal one ('diag')"
        )
    w, m, v = fitted_arrays(gmm, ("weights_", "means_", "covariances_"))
    return w, m, v


def _stack(bags: list[np.ndarray]) -> np.ndarray:
    if not bags:
        raise ValueError("cannot fit the model on an empty list of bags")
    return np.concatenate(bags, axis=0)


class FisherVector(TransformerMixin, BaseEstimator):
    """Fisher vector of a diagonal GMM (VLFeat's ``vl_fisher_encode`` layout).

    For a bag $x_1 \\dots x_N$ (N, D) with posteriors $q_{ik}$ and
    $z_{ikd} = (x_{id} - \\mu_{kd})/\\sigma_{kd}$:
    $u_{kd} = \\frac{1}{N\\sqrt{w_k}} \\sum_i q_{ik} z_{ikd}$ (``"mean"``),
    $v_{kd} = \\frac{1}{N\\sqrt{2w_k}} \\sum_i q_{ik}(z_{ikd}^2 - 1)$ (``"var"``),
    $d_{\\pi,k} = (\\frac1N\\sum_i q_{ik} - w_k)/\\sqrt{w_k}$ (``"prior"``).
    Output blocks in the order prior (K), mean (K·D, component-major), var
    (K·D), then signed power and L2 normalisation. With ``power=1, l2=False``
    the mean and var blocks equal VLFeat's un-normalised output; scikit-image's
    ``fisher_vector`` has layout [prior, mean, var] and a var block of the
    opposite sign.

    Parameters
    ----------
    gmm : GaussianMixture
        A fisherkit ``GaussianMixture`` (or scikit-learn's with
        ``covariance_type="diag"``). If it is fitted, :meth:`transform` works
        right away and :meth:`fit` keeps it as is (``gmm_`` is ``gmm``); if not,
        :meth:`fit` fits a clone of it on all the descriptors of the bags (so
        the encoder also works after ``sklearn.base.clone``, which un-fits
        sub-estimators, e.g. in a grid search).
    parts : sequence of {"prior", "mean", "var"}, default ("mean", "var")
    power : float, default 0.5
        Signed power $\\mathrm{sign}(v)|v|^{power}$; 1 disables it.
    l2 : bool, default True
        L2-normalise the vector (norm floored at 1e-12).
    fast : bool, default False
        Hard assignment to the most probable component (VLFeat's FAST).
    vlfeat_skips : bool, default False
        Reproduce VLFeat 0.9.21's skips (components with $w_k < 10^{-6}$,
        posteriors below $10^{-6}$); default: exact posteriors as scikit-image.

    The bags are encoded in parallel (rayon; ``RAYON_NUM_THREADS`` limits the
    threads) with the GIL released, in the bags' dtype.
    """

    def __init__(self, gmm, parts=("mean", "var"), power=0.5, l2=True, fast=False, vlfeat_skips=False):
        self.gmm = gmm
        self.parts = parts
        self.power = power
        self.l2 = l2
        self.fast = fast
        self.vlfeat_skips = vlfeat_skips

    def _parts(self) -> list[str]:
        parts = [self.parts] if isinstance(self.parts, str) else list(self.parts)
        return [str(p) for p in parts]

    def _model(self) -> Any:
        model = getattr(self, "gmm_", None)
        if model is None:
            model = self.gmm
        if not _is_fitted(model, "means_"):
            from ._base import NotFittedError

            raise NotFittedError(
                "the FisherVector's gmm is not fitted: fit the gmm first, or call fit(bags)"
            )
        return model

    def fit(self, bags=None, y=None) -> "FisherVector":
        """Keeps a fitted ``gmm`` (``gmm_ = gmm``) or fits a clone of an unfitted
        one on the stacked descriptors of ``bags``. Returns self."""
        if _is_fitted(self.gmm, "means_"):
            self.gmm_ = self.gmm
        else:
            self.gmm_ = clone(self.gmm).fit(_stack(as_bags(bags)))
        _native.fisher_vector_dim(1, 1, self._parts())  # validates parts early
        return self

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (a list of (N_i, D) arrays, or one (n_bags, N, D)
        array): returns (n_bags, dim), float32 if every bag is float32, else
        float64. dim = K (prior) + K·D (mean) + K·D (var)."""
        w, m, v = _gmm_params(self._model())
        return _native.fisher_vector(
            w, m, v, as_bags(bags), self._parts(), float(self.power), bool(self.l2),
            bool(self.fast), bool(self.vlfeat_skips),
        )

    def output_dim(self) -> int:
        """Length of the encoding."""
        k, d = np.shape(self._model().means_)
        return _native.fisher_vector_dim(k, d, self._parts())


class VLAD(TransformerMixin, BaseEstimator):
    """VLAD (VLFeat's ``vl_vlad_encode``): $v_k = \\sum_i q_{ik}(x_i - \\mu_k)$,
    output $[v_1 \\dots v_K]$ (K·D, component-major), then VLFeat's options in
    VLFeat's order (mass, square root, per-component L2, global L2).

    Parameters
    ----------
    centers_or_gmm : ndarray (K, D), KMeans or GaussianMixture
        The centres $\\mu_k$: an array, a fitted ``KMeans`` (its
        ``cluster_centers_``) or a fitted ``GaussianMixture`` (its means; its
        posteriors with ``hard_assignment=False``). An unfitted estimator is
        fitted (as a clone) by :meth:`fit` on the stacked bags.
    normalize_mass : bool, default False
        Divide each block by its mass $\\sum_i q_{ik}$.
    square_root : bool, default False
        Signed square root of every entry.
    normalize_components : bool, default False
        L2-normalise each component's block.
    l2 : bool, default True
        Global L2 normalisation (False is VLFeat's UNNORMALIZED flag).
    hard_assignment : bool, default True
        Each descriptor goes to its nearest centre; False: soft assignment by
        the posteriors of a GaussianMixture.
    """

    def __init__(
        self,
        centers_or_gmm,
        normalize_mass=False,
        square_root=False,
        normalize_components=False,
        l2=True,
        hard_assignment=True,
    ):
        self.centers_or_gmm = centers_or_gmm
        self.normalize_mass = normalize_mass
        self.square_root = square_root
        self.normalize_components = normalize_components
        self.l2 = l2
        self.hard_assignment = hard_assignment

    @staticmethod
    def _fitted(model: Any) -> bool:
        return isinstance(model, np.ndarray) or _is_fitted(model, "means_") or _is_fitted(
            model, "cluster_centers_"
        )

    def fit(self, bags=None, y=None) -> "VLAD":
        """Keeps fitted centres (``model_``) or fits a clone of an unfitted
        estimator on the stacked descriptors of ``bags``. Returns self."""
        model = self.centers_or_gmm
        if self._fitted(model) or not hasattr(model, "fit"):
            self.model_ = model
        else:
            self.model_ = clone(model).fit(_stack(as_bags(bags)))
        return self

    def _model(self) -> Any:
        model = getattr(self, "model_", self.centers_or_gmm)
        if not self._fitted(model):
            if hasattr(model, "fit"):
                from ._base import NotFittedError

                raise NotFittedError("the VLAD's model is not fitted: fit it first, or call fit(bags)")
            model = np.asarray(model)
        return model

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (list of (N_i, D) arrays): (n_bags, K·D)."""
        model = self._model()
        centers, gmm = None, None
        if isinstance(model, np.ndarray):
            centers = model
        elif _is_fitted(model, "means_"):
            gmm = _gmm_params(model)
            if self.hard_assignment:
                centers, gmm = gmm[1], None
        else:
            centers = model.cluster_centers_
        if centers is not None:
            centers = np.ascontiguousarray(centers)
            if centers.dtype not in (np.float32, np.float64):
                centers = centers.astype(np.float64)
            if centers.ndim != 2:
                raise ValueError(f"VLAD centres must be a (K, D) array, got shape {centers.shape}")
        return _native.vlad(
            as_bags(bags), centers, gmm, bool(self.normalize_mass), bool(self.square_root),
            bool(self.normalize_components), not bool(self.l2), bool(self.hard_assignment),
        )
