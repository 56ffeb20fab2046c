"""Encoders of bags of local descriptors: GMM Fisher vector and VLAD."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _fisherkit as _native
from ._base import (
    BaseEstimator,
    NotFittedError,
    TransformerMixin,
    as_bags,
    check_scale,
    clone,
    fitted_arrays,
)

__all__ = ["FisherVector", "VLAD"]

_FV_PARTS = ("prior", "mean", "var")


def _is_fitted(model: Any, attr: str) -> bool:
    return hasattr(model, attr)


def _is_mfa(model: Any) -> bool:
    return hasattr(model, "loadings_") or type(model).__name__ == "MixtureOfFactorAnalyzers"


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


def _check_gmm_type(model: Any, who: str) -> None:
    """A ``TypeError`` naming the expected type when ``model`` is no diagonal
    Gaussian mixture (e.g. an MFA, k-means, an array)."""
    if _is_mfa(model) or isinstance(model, np.ndarray) or not (
        hasattr(model, "covariances_") or (hasattr(model, "fit") and hasattr(model, "covariance_type"))
    ):
        hint = " (for an MFA use fisherkit.MFAFisherScore)" if _is_mfa(model) else ""
        raise TypeError(
            f"{who} needs a diagonal Gaussian mixture (fisherkit.GaussianMixture, or "
            f"sklearn.mixture.GaussianMixture(covariance_type='diag')), got {type(model).__name__}{hint}"
        )


def _stack(bags: list[np.ndarray]) -> np.ndarray:
    if not bags:
        raise ValueError("cannot fit the model on an empty list of bags")
    return np.concatenate(bags, axis=0)


def _parts_of(parts: Any, allowed: tuple[str, ...], who: str, what: str) -> list[str]:
    """``parts`` as a list of strings: a non-empty sequence of ``allowed``
    (``what`` names the encoding in messages)."""
    parts = [parts] if isinstance(parts, str) else list(parts)
    parts = [str(p) for p in parts]
    if not parts:
        raise ValueError(f"{who}: parts must be a non-empty sequence of {', '.join(map(repr, allowed))}, got ()")
    bad = [p for p in parts if p not in allowed]
    if bad:
        raise ValueError(
            f"{who}: unknown {what} part `{bad[0]}`; parts are among {', '.join(map(repr, allowed))}"
        )
    if len(set(parts)) != len(parts):
        raise ValueError(f"{who}: parts {tuple(parts)} repeat a part")
    return parts


class _EncoderMixin:
    """What the bag encoders share: ``empty_bag`` handling, ``n_features_in_``,
    ``get_feature_names_out`` and ``__sklearn_is_fitted__``. A subclass
    defines ``_model()`` (the fitted model or NotFittedError), ``_dim_in()``
    and ``output_dim()``."""

    def _encode(self, bags: list[np.ndarray], run: Callable[[list[np.ndarray]], np.ndarray]) -> np.ndarray:
        """Encodes ``bags`` with ``run``, handling empty bags by ``empty_bag``."""
        mode = getattr(self, "empty_bag", "error")
        if mode not in ("error", "zeros"):
            raise ValueError(f"empty_bag must be \"error\" or \"zeros\", got {mode!r}")
        empty = [i for i, b in enumerate(bags) if b.shape[0] == 0]
        if not empty:
            return run(bags)
        d = self._dim_in()
        for i in empty:
            if bags[i].shape[1] != d:
                raise ValueError(
                    f"bag {i}: bag has {bags[i].shape[1]} columns but the model has dimension {d}"
                )
        if mode == "error":
            raise ValueError(
                f"bag {empty[0]}: bag is empty (0 descriptors) and has no encoding; pass "
                f"empty_bag=\"zeros\" to {type(self).__name__} to encode empty bags as zero vectors"
            )
        keep = [i for i, b in enumerate(bags) if b.shape[0] > 0]
        dtype = bags[0].dtype if bags else np.float64
        out = np.zeros((len(bags), self.output_dim()), dtype=dtype)
        if keep:
            out[keep] = run([bags[i] for i in keep])
        return out

    @property
    def n_features_in_(self) -> int:
        """D, the width of the descriptors (the model's dimension)."""
        try:
            return self._dim_in()
        except NotFittedError as e:
            raise AttributeError(str(e)) from None

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the output columns: ``"<classname><i>"``, i < :meth:`output_dim`
        (scikit-learn's convention for transformers whose outputs are not the inputs)."""
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.output_dim())], dtype=object)

    def __sklearn_is_fitted__(self) -> bool:
        try:
            self._model()
        except (NotFittedError, AttributeError):
            return False
        return True


class FisherVector(_EncoderMixin, TransformerMixin, BaseEstimator):
    """Fisher vector of a diagonal GMM (VLFeat's ``vl_fisher_encode`` layout).

    For a bag x_1 ... x_N (N, D) with posteriors q_ik and
    z_ikd = (x_id - mu_kd) / sigma_kd:
    u_kd = 1/(N sqrt(w_k)) sum_i q_ik z_ikd (``"mean"``),
    v_kd = 1/(N sqrt(2 w_k)) sum_i q_ik (z_ikd^2 - 1) (``"var"``),
    d_k = (1/N sum_i q_ik - w_k) / sqrt(w_k) (``"prior"``).
    Output blocks in the order prior (K), mean (K·D, component-major), var
    (K·D), then signed power and L2 normalisation. With ``power=1, l2=False``
    the mean and var blocks equal VLFeat's un-normalised output; scikit-image's
    ``fisher_vector`` has layout [prior, mean, var] and a var block of the
    opposite sign.

    Parameters
    ----------
    gmm : GaussianMixture
        A fisherkit ``GaussianMixture`` (or scikit-learn's with
        ``covariance_type="diag"``); another type is a ``TypeError``. If it is
        fitted, :meth:`transform` works right away and :meth:`fit` keeps it as
        is (``gmm_`` is ``gmm``); if not, :meth:`fit` fits a clone of it on all
        the descriptors of the bags (so the encoder also works after
        ``sklearn.base.clone``, which un-fits sub-estimators, e.g. in a grid
        search).
    parts : sequence of {"prior", "mean", "var"}, default ("mean", "var")
        Non-empty.
    power : float, default 0.5
        Signed power sign(v)|v|^power; 1 disables it.
    l2 : bool, default True
        L2-normalise the vector (norm floored at 1e-12).
    fast : bool, default False
        Hard assignment to the most probable component (VLFeat's FAST).
    vlfeat_skips : bool, default False
        Reproduce VLFeat 0.9.21's skips (components with w_k < 1e-6,
        posteriors below 1e-6); default: exact posteriors as scikit-image.
    empty_bag : {"error", "zeros"}, default "error"
        A bag without descriptors: a ``ValueError`` naming it, or a zero vector.

    Attributes
    ----------
    gmm_ : the fitted mixture used (after :meth:`fit`)
    n_features_in_ : int, D (once the mixture is fitted)

    The bags are encoded in parallel (rayon; ``RAYON_NUM_THREADS`` limits the
    threads) with the GIL released, in the bags' dtype.

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> rng = np.random.default_rng(0)
    >>> bags = [rng.standard_normal((50, 4)) for _ in range(3)]
    >>> gmm = fisherkit.GaussianMixture(n_components=2).fit(np.concatenate(bags))
    >>> fisherkit.FisherVector(gmm).transform(bags).shape
    (3, 16)
    """

    def __init__(
        self, gmm, parts=("mean", "var"), power=0.5, l2=True, fast=False, vlfeat_skips=False, empty_bag="error"
    ):
        self.gmm = gmm
        self.parts = parts
        self.power = power
        self.l2 = l2
        self.fast = fast
        self.vlfeat_skips = vlfeat_skips
        self.empty_bag = empty_bag

    def _parts(self) -> list[str]:
        return _parts_of(self.parts, _FV_PARTS, "FisherVector", "Fisher vector")

    def _model(self) -> Any:
        model = getattr(self, "gmm_", None)
        if model is None:
            model = self.gmm
        _check_gmm_type(model, "FisherVector")
        if not _is_fitted(model, "means_"):
            raise NotFittedError(
                "the FisherVector's gmm is not fitted: fit the gmm first, or call fit(bags)"
            )
        return model

    def _dim_in(self) -> int:
        return int(np.shape(self._model().means_)[1])

    def fit(self, bags=None, y=None) -> "FisherVector":
        """Keeps a fitted ``gmm`` (``gmm_ = gmm``) or fits a clone of an unfitted
        one on the stacked descriptors of ``bags``. Returns self."""
        _check_gmm_type(self.gmm, "FisherVector")
        self._parts()  # validates parts early
        if _is_fitted(self.gmm, "means_"):
            self.gmm_ = self.gmm
        else:
            self.gmm_ = clone(self.gmm).fit(_stack(as_bags(bags)))
        return self

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (a list of (N_i, D) arrays, or one (n_bags, N, D)
        array): returns (n_bags, dim), float32 if every bag is float32, else
        float64. dim = K (prior) + K·D (mean) + K·D (var)."""
        w, m, v = _gmm_params(self._model())
        parts = self._parts()

        def run(b):
            return _native.fisher_vector(
                w, m, v, b, parts, float(self.power), bool(self.l2), bool(self.fast), bool(self.vlfeat_skips)
            )

        return self._encode(as_bags(bags), run)

    def output_dim(self) -> int:
        """Length of the encoding."""
        k, d = np.shape(self._model().means_)
        return _native.fisher_vector_dim(k, d, self._parts())


class VLAD(_EncoderMixin, TransformerMixin, BaseEstimator):
    """VLAD (VLFeat's ``vl_vlad_encode``): v_k = sum_i q_ik (x_i - mu_k),
    output [v_1 ... v_K] (K·D, component-major), then VLFeat's options in
    VLFeat's order (mass, square root, per-component L2, global L2).

    Parameters
    ----------
    centers_or_gmm : ndarray (K, D), KMeans or GaussianMixture
        The centres mu_k: an array, a fitted ``KMeans`` (its
        ``cluster_centers_``) or a fitted ``GaussianMixture`` (its means; its
        posteriors with ``hard_assignment=False``). An unfitted estimator is
        fitted (as a clone) by :meth:`fit` on the stacked bags.
    normalize_mass : bool, default False
        Divide each block by its mass sum_i q_ik.
    square_root : bool, default False
        Signed square root of every entry.
    normalize_components : bool, default False
        L2-normalise each component's block.
    l2 : bool, default True
        Global L2 normalisation (False is VLFeat's UNNORMALIZED flag).
    hard_assignment : bool, default True
        Each descriptor goes to its nearest centre; False: soft assignment by
        the posteriors of a GaussianMixture (which ``centers_or_gmm`` must then be).
    empty_bag : {"error", "zeros"}, default "error"
        A bag without descriptors: a ``ValueError`` naming it, or a zero vector.

    Attributes
    ----------
    model_ : the centres or fitted estimator used (after :meth:`fit`)
    n_features_in_ : int, D

    Bags whose squared norms overflow their dtype (e.g. ``X * 1e200``) are a
    ``ValueError``.

    Examples
    --------
    >>> import numpy as np, fisherkit
    >>> rng = np.random.default_rng(0)
    >>> bags = [rng.standard_normal((50, 4)) for _ in range(3)]
    >>> km = fisherkit.KMeans(n_clusters=8).fit(np.concatenate(bags))
    >>> fisherkit.VLAD(km).transform(bags).shape
    (3, 32)
    """

    def __init__(
        self,
        centers_or_gmm,
        normalize_mass=False,
        square_root=False,
        normalize_components=False,
        l2=True,
        hard_assignment=True,
        empty_bag="error",
    ):
        self.centers_or_gmm = centers_or_gmm
        self.normalize_mass = normalize_mass
        self.square_root = square_root
        self.normalize_components = normalize_components
        self.l2 = l2
        self.hard_assignment = hard_assignment
        self.empty_bag = empty_bag

    @staticmethod
    def _fitted(model: Any) -> bool:
        return isinstance(model, np.ndarray) or _is_fitted(model, "means_") or _is_fitted(
            model, "cluster_centers_"
        )

    @staticmethod
    def _check_type(model: Any) -> None:
        if _is_mfa(model):
            raise TypeError(
                "VLAD needs centres: a (K, D) array, a KMeans or a GaussianMixture, got "
                f"{type(model).__name__} (for an MFA use fisherkit.MFAFisherScore)"
            )

    def fit(self, bags=None, y=None) -> "VLAD":
        """Keeps fitted centres (``model_``) or fits a clone of an unfitted
        estimator on the stacked descriptors of ``bags``. Returns self."""
        model = self.centers_or_gmm
        self._check_type(model)
        if self._fitted(model) or not hasattr(model, "fit"):
            self.model_ = model
        else:
            self.model_ = clone(model).fit(_stack(as_bags(bags)))
        return self

    def _model(self) -> Any:
        model = getattr(self, "model_", self.centers_or_gmm)
        self._check_type(model)
        if not self._fitted(model):
            if hasattr(model, "fit"):
                raise NotFittedError("the VLAD's model is not fitted: fit it first, or call fit(bags)")
            model = np.asarray(model)
        return model

    def _centers(self) -> np.ndarray:
        model = self._model()
        c = model if isinstance(model, np.ndarray) else (
            model.means_ if _is_fitted(model, "means_") else model.cluster_centers_
        )
        c = np.ascontiguousarray(c)
        if c.dtype not in (np.float32, np.float64):
            c = c.astype(np.float64)
        if c.ndim != 2:
            raise ValueError(f"VLAD centres must be a (K, D) array, got shape {c.shape}")
        return c

    def _dim_in(self) -> int:
        return int(self._centers().shape[1])

    def output_dim(self) -> int:
        """Length of the encoding, K·D."""
        return int(self._centers().size)

    def transform(self, bags) -> np.ndarray:
        """Encodes ``bags`` (list of (N_i, D) arrays): (n_bags, K·D)."""
        model = self._model()
        centers, gmm = None, None
        if _is_fitted(model, "means_") and not isinstance(model, np.ndarray):
            gmm = _gmm_params(model)
            if self.hard_assignment:
                centers, gmm = gmm[1], None
        else:
            if not self.hard_assignment:
                raise ValueError(
                    "VLAD(hard_assignment=False) assigns by the posteriors of a GaussianMixture: pass a "
                    f"fitted GaussianMixture as centers_or_gmm, not {type(model).__name__}"
                )
            centers = self._centers()
        bags = as_bags(bags)
        for i, b in enumerate(bags):
            check_scale(b, f"bag {i}")

        def run(b):
            return _native.vlad(
                b, centers, gmm, bool(self.normalize_mass), bool(self.square_root),
                bool(self.normalize_components), not bool(self.l2), bool(self.hard_assignment),
            )

        return self._encode(bags, run)
