"""fisherkit: Fisher vectors of diagonal GMMs (VLFeat-compatible), VLAD and MFA
Fisher scores of bags of local descriptors, computed in Rust.

Estimators follow scikit-learn's conventions (hyper-parameters in ``__init__``,
``fit`` returns self, fitted attributes end in ``_``, ``get_params`` /
``set_params`` / ``clone``, usable in a ``Pipeline``)::

    gmm = fisherkit.GaussianMixture(n_components=K, random_state=0).fit(X)
    enc = fisherkit.FisherVector(gmm, parts=("mean", "var"), power=0.5, l2=True)
    V = enc.transform(list_of_bags)          # (n_bags, dim) numpy array
    mfa = fisherkit.MixtureOfFactorAnalyzers(n_components=K, n_factors=R).fit(X)
    S = fisherkit.MFAFisherScore(mfa, parts=("loading",)).transform(list_of_bags)

    # EM over shards (streaming, or a distributed engine's map and reduce):
    st = gmm.sufficient_statistics(X_shard)  # E-step sums; st_a + st_b merges
    gmm.update_from_statistics(st)           # M-step from merged sums
    gmm.partial_fit(X_batch)                 # one EM step on a batch

Arrays are float32 or float64 (computation happens in the data's dtype;
integer and boolean arrays, e.g. raw uint8 descriptors, become float64 as in
scikit-learn, big-endian floats are converted; other dtypes and sparse input
raise ``TypeError``); C-contiguous inputs are used without copies and
the GIL is released while computing. ``fisherkit.ray`` runs EM and encoding on
a Ray cluster.
"""

from __future__ import annotations

import os as _os

from ._fisherkit import __version__
from ._base import ConvergenceWarning, NotFittedError, clone
from ._gmm import GaussianMixture, GmmStatistics, KMeans
from ._encode import VLAD, FisherVector
from ._mfa import MFAFisherScore, MfaStatistics, MixtureOfFactorAnalyzers
from ._linear import PCA, LinearSVC
from ._scene import SceneClassifier

__all__ = [
    "__version__",
    "KMeans",
    "GaussianMixture",
    "GmmStatistics",
    "FisherVector",
    "VLAD",
    "MixtureOfFactorAnalyzers",
    "MfaStatistics",
    "MFAFisherScore",
    "PCA",
    "SceneClassifier",
    "LinearSVC",
    "NotFittedError",
    "ConvergenceWarning",
    "clone",
    "load_model",
]


def load_model(path: str | _os.PathLike):
    """Reads a fisherkit safetensors model file and returns the fitted
    estimator its ``kind`` names (``"gmm"``: :class:`GaussianMixture`,
    ``"mfa"``: :class:`MixtureOfFactorAnalyzers`, ``"pca"``: :class:`PCA`,
    ``"linear-svm"``: :class:`LinearSVC`, ``"scene-classifier"``:
    :class:`SceneClassifier`).

    The kind is read by the Rust reader (``fisherkit-io``), which checks the
    file first: a missing file raises :class:`FileNotFoundError`, another
    operating-system error :class:`OSError`, a file that is not a fisherkit
    model (not safetensors, no or unknown ``kind``, unsupported
    ``format_version``) :class:`ValueError`; each message names the file."""
    from . import _fisherkit as _native

    kind = _native.model_kind(_os.fspath(path))
    if kind == "gmm":
        return GaussianMixture.load(path)
    if kind == "mfa":
        return MixtureOfFactorAnalyzers.load(path)
    if kind == "pca":
        return PCA.load(path)
    if kind == "linear-svm":
        return LinearSVC.load(path)
    if kind == "scene-classifier":
        return SceneClassifier.load(path)
    raise ValueError(f"{_os.fspath(path)}: unsupported model kind {kind!r}")
