"""``SceneClassifier``: the scene-classification pipeline as a scikit-learn
classifier over images, saved and loaded as the file ``fisherkit run
--save-model`` writes (and ``fisherkit predict`` reads)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Sequence

import numpy as np

from . import _fisherkit as _native
from ._base import BaseEstimator, check_fitted
from ._linear import ClassifierMixin


__all__ = ["SceneClassifier"]

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def _images(X: Any) -> list:
    """X as a list of paths (str / PathLike) or (H, W, 3) arrays."""
    if isinstance(X, (str, os.PathLike)):
        raise TypeError(
            "X must be a list of image paths or (H, W, 3) arrays, not one path; "
            "use SceneClassifier.from_folder(DIR) for a folder"
        )
    if isinstance(X, np.ndarray) and X.ndim == 4:
        return list(X)
    items = list(X)
    out = []
    for i, x in enumerate(items):
        if isinstance(x, (str, os.PathLike)):
            out.append(os.fspath(x))
        elif isinstance(x, np.ndarray):
            out.append(np.ascontiguousarray(x))
        else:
            raise TypeError(
                f"X[{i}] is a {type(x).__name__}; expected an image path or an (H, W, 3) array"
            )
    return out


def _raise_first(errors: list, what: str) -> None:
    """A ValueError naming the first input that could not be labelled (``what``
    formats its index) and how many more there are."""
    bad = [(i, e) for i, e in enumerate(errors) if e is not None]
    if bad:
        i, e = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ValueError(f"{what.format(i)}: {e}{more}")


class SceneClassifier(ClassifierMixin, BaseEstimator):
    """The paper's scene classifier (Dixit & Vasconcelos, NIPS 2016): patches
    → ImageNet CNN → PCA → GMM Fisher vectors / MFA Fisher scores → linear
    SVM, trained on images and applied to new ones.

    Parameters
    ----------
    encoders : str, optional
        Encoders to train (``fisherkit run --encoders``), e.g.
        ``"mfa-fs:loading"``; default the run's Table-1 list.
    model_encoder : str, optional
        The encoder kept (one of ``encoders``); default the one with the best
        cross-validated training accuracy.
    cnn, scales, pca_dim, gmm_components, mfa_components, mfa_factors, c_grid : optional
        The run's settings (``fisherkit run --help``); ``None`` keeps its default.
    cache : str, optional
        Run folder root (resumable runs); default a temporary folder.
    seed : int, default 0
        Seed of every random choice.
    options : dict, optional
        Any other ``fisherkit run`` option, by its long name with underscores.
    verbose : bool, default False
        Progress of the run on stderr.

    ``fit`` writes the training images into a temporary folder (paths as
    symbolic links, arrays as 8-bit PNG files) and runs the pipeline on it;
    the run also needs a test split, for which it is given one training image
    per class (its accuracy, in ``fit_report_``, is not a held-out measure:
    use ``score`` on held-out images). Images are paths or (H, W, 3) arrays
    (uint8 0–255, or float in 0–1, or greyscale (H, W)), classified in
    batches with the GIL released; Ctrl-C stops between batches.

    Attributes
    ----------
    classes_ : ndarray (K,), the labels, sorted
    encoder_ : str, the encoder of the classifier
    n_features_ : int, length of the feature the SVM reads
    fit_report_ : dict, the run's report (``fit`` and ``from_folder`` only)
    """

    def __init__(
        self,
        encoders: str | None = None,
        model_encoder: str | None = None,
        cnn: str | None = None,
        scales: Sequence[int] | None = None,
        pca_dim: int | None = None,
        gmm_components: int | None = None,
        mfa_components: int | None = None,
        mfa_factors: int | None = None,
        c_grid: Sequence[float] | None = None,
        cache: str | None = None,
        seed: int = 0,
        options: dict | None = None,
        verbose: bool = False,
    ):
        self.encoders = encoders
        self.model_encoder = model_encoder
        self.cnn = cnn
        self.scales = scales
        self.pca_dim = pca_dim
        self.gmm_components = gmm_components
        self.mfa_components = mfa_components
        self.mfa_factors = mfa_factors
        self.c_grid = c_grid
        self.cache = cache
        self.seed = seed
        self.options = options
        self.verbose = verbose

    # -- training ---------------------------------------------------------

    def _run_options(self, model_path: str) -> dict:
        opts: dict[str, Any] = dict(self.options or {})
        for name in (
            "encoders",
            "model_encoder",
            "cnn",
            "scales",
            "pca_dim",
            "gmm_components",
            "mfa_components",
            "mfa_factors",
            "c_grid",
        ):
            value = getattr(self, name)
            if value is not None:
                opts[name] = value
        opts["seed"] = self.seed
        if self.cache is None:
            opts["no_cache"] = True
        else:
            opts["cache"] = self.cache
        opts["save_model"] = model_path
        return opts

    def _train(self, train: str, test: str, work: str) -> str:
        from . import pipeline

        model = os.path.join(work, "model.safetensors")
        self.fit_report_ = pipeline.run(train, test, verbose=self.verbose, **self._run_options(model))
        return model

    def _adopt(self, path: str) -> "SceneClassifier":
        self._model = _native.SceneModel(os.fspath(path))
        info = json.loads(self._model.info_json)
        names = list(self._model.classes)
        if info.get("training", {}).get("python_labels") == "int":
            self.classes_ = np.array([int(n) for n in names])
        else:
            self.classes_ = np.array(names)
        self.encoder_ = info["encoder"] + (" (whitened)" if info["whitened"] else "")
        self.n_features_ = int(self._model.dim)
        return self

    def fit(self, X, y) -> "SceneClassifier":
        """Trains on images ``X`` (paths or arrays) with labels ``y``."""
        items = _images(X)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(items):
            raise ValueError(f"y must be 1-D with one label per image: {len(items)} images, y of shape {y.shape}")
        classes, index = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"fit needs at least 2 classes, got {len(classes)}")
        if y.dtype.kind not in "iuUSO":
            raise ValueError(f"labels must be integers or strings, got dtype {y.dtype}")
        work = tempfile.mkdtemp(prefix="fisherkit-scene-")
        try:
            train, test = os.path.join(work, "train"), os.path.join(work, "test")
            first = {}
            for i, (x, k) in enumerate(zip(items, index)):
                d = os.path.join(train, f"{k:06d}")
                os.makedirs(d, exist_ok=True)
                dst = self._place(x, d, i)
                first.setdefault(k, dst)
            for k, src in first.items():
                d = os.path.join(test, f"{k:06d}")
                os.makedirs(d, exist_ok=True)
                os.symlink(os.path.abspath(src), os.path.join(d, os.path.basename(src)))
            model = self._train(train, test, work)
            kind = "int" if classes.dtype.kind in "iu" else "str"
            named = os.path.join(work, "named.safetensors")
            _native.relabel_classifier(model, named, [str(c) for c in classes], kind)
            self._adopt(named)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return self

    @staticmethod
    def _place(x, folder: str, i: int) -> str:
        if isinstance(x, str):
            ext = os.path.splitext(x)[1].lower()
            if ext not in _IMAGE_EXTENSIONS:
                dst = os.path.join(folder, f"{i:07d}.png")
                _native.write_png(dst, x)
            else:
                dst = os.path.join(folder, f"{i:07d}{ext}")
                os.symlink(os.path.abspath(x), dst)
        else:
            dst = os.path.join(folder, f"{i:07d}.png")
            _native.write_png(dst, x)
        return dst

    @classmethod
    def from_folder(cls, train: str | os.PathLike, test: str | os.PathLike | None = None, **params) -> "SceneClassifier":
        """Trains on the image folder ``train`` (``DIR/<class>/*.jpg|png``),
        classes = folder names; ``test`` (same layout) is the run's test
        split, reported in ``fit_report_`` (default: one training image per
        class, not a held-out measure)."""
        self = cls(**params)
        work = tempfile.mkdtemp(prefix="fisherkit-scene-")
        try:
            if test is None:
                test = os.path.join(work, "test")
                for c in sorted(os.listdir(train)):
                    src_dir = os.path.join(train, c)
                    if not os.path.isdir(src_dir):
                        continue
                    files = sorted(f for f in os.listdir(src_dir) if f.lower().endswith(_IMAGE_EXTENSIONS))
                    if files:
                        os.makedirs(os.path.join(test, c), exist_ok=True)
                        os.symlink(os.path.abspath(os.path.join(src_dir, files[0])), os.path.join(test, c, files[0]))
            model = self._train(os.fspath(train), os.fspath(test), work)
            self._adopt(model)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return self

    # -- the file -----------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Writes the classifier file (the one ``fisherkit predict`` reads)."""
        check_fitted(self, "_model")
        self._model.save(os.fspath(path))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SceneClassifier":
        """Reads a classifier file (``fisherkit run --save-model``, ``save``)."""
        return cls()._adopt(os.fspath(path))

    # -- applying -------------------------------------------------------------

    def _apply(self, X, features: bool):
        check_fitted(self, "_model")
        items = _images(X)
        classes, scores, feats, errors = self._model.predict_images(items, features)
        _raise_first(errors, "X[{}]")
        return classes, scores, feats

    def predict(self, X) -> np.ndarray:
        """The label of every image."""
        classes, _, _ = self._apply(X, False)
        return self.classes_[classes]

    def decision_function(self, X) -> np.ndarray:
        """The one-vs-rest SVM scores (n_images, K); for two classes the
        difference of the second class's score and the first's (n_images,),
        as scikit-learn's binary convention."""
        _, scores, _ = self._apply(X, False)
        if scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def transform(self, X) -> np.ndarray:
        """The features the SVM reads (n_images, n_features_), float32."""
        _, _, feats = self._apply(X, True)
        return feats

    def predict_descriptors(self, bags) -> np.ndarray:
        """Labels bags of descriptors ((n_i, D) arrays), for a classifier
        trained on descriptor files."""
        check_fitted(self, "_model")
        bags = [np.ascontiguousarray(b, dtype=np.float32) for b in bags]
        classes, _, _, errors = self._model.predict_bags(bags, False)
        _raise_first(errors, "bag {}")
        return self.classes_[classes]
