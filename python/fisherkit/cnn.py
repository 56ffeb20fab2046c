"""The CNN descriptors of the pipeline: ImageNet CNN (SqueezeNet v1.1 or EfficientNet-Lite0)
class scores of image patches at several scales, as natural parameters
(log-probabilities), computed in Rust (docs/math.md §6).

``Descriptors().transform(images)`` returns exactly the rows ``fisherkit run
--save-descriptors`` writes for each image, in the same order (every scale's
patches, scales in order).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from . import _fisherkit
from ._base import BaseEstimator, TransformerMixin

__all__ = ["Descriptors"]


class Descriptors(TransformerMixin, BaseEstimator):
    """Semantic patch descriptors of images: per image, one (n_i, 1000)
    float32 array of log-probabilities, one row per patch.

    Parameters
    ----------
    scales : sequence of int, default (96, 128, 160)
        Patch sides in pixels of the working image.
    patch_mode : {"dense", "exact"}, default "dense"
        ``dense``: each scale is one pass of the fully convolutional network
        over the image resized so that a patch becomes 227 px, the cells of
        the class-score map being the patches; ``exact``: every patch cropped
        and resized to 227 px.
    max_image_side : int or None, default 512
        Larger images are first shrunk to this longer side (None: never).
    stride : float, default 0.5
        ``exact`` mode: step between patches as a fraction of the side.
    cnn : {"efficientnet-lite0", "squeezenet"}, default "efficientnet-lite0"
        The built-in ImageNet network (``fisherkit run --cnn``; docs/backbones.md).
    global_descriptor : bool, default False
        Also return each image's image-level vector (1000): ``transform``
        then returns a list of ``(patches, global)`` pairs.

    Attributes
    ----------
    n_features_out_ : int
        1000, the ImageNet classes.

    Examples
    --------
    >>> import numpy as np, fisherkit.cnn
    >>> img = np.zeros((64, 48, 3), np.uint8)
    >>> d = fisherkit.cnn.Descriptors(scales=[32]).transform([img])
    >>> d[0].shape[1]
    1000
    """

    n_features_out_ = 1000

    def __init__(
        self,
        scales: Sequence[int] = (96, 128, 160),
        patch_mode: str = "dense",
        max_image_side: int | None = 512,
        stride: float = 0.5,
        global_descriptor: bool = False,
        cnn: str = "efficientnet-lite0",
    ):
        self.scales = scales
        self.patch_mode = patch_mode
        self.max_image_side = max_image_side
        self.stride = stride
        self.global_descriptor = global_descriptor
        self.cnn = cnn

    def fit(self, X: Any = None, y: Any = None) -> "Descriptors":
        """Nothing to learn (the network is fixed); returns self."""
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def _params(self) -> tuple[list[int], str, int | None, float]:
        scales = self.scales
        if isinstance(scales, (int, np.integer)):
            scales = [scales]
        try:
            scales = [int(s) for s in scales]
        except (TypeError, ValueError):
            raise TypeError(f"scales must be a sequence of integers, got {self.scales!r}") from None
        if not scales or any(s < 1 for s in scales):
            raise ValueError(f"scales must be a non-empty list of positive sides in pixels, got {self.scales!r}")
        if self.patch_mode not in ("dense", "exact"):
            raise ValueError(f"patch_mode must be 'dense' or 'exact', got {self.patch_mode!r}")
        side = self.max_image_side
        if side is not None:
            if isinstance(side, bool) or not isinstance(side, (int, np.integer)):
                raise TypeError(f"max_image_side must be an int or None, got {side!r}")
            if side < 1:
                raise ValueError(f"max_image_side must be at least 1 (None: no limit), got {side}")
            side = int(side)
        return scales, self.patch_mode, side, float(self.stride)

    def transform(self, images: Sequence[Any]) -> list:
        """The descriptors of ``images``: paths (str or os.PathLike, PNG or
        JPEG) or arrays, in any mix. Returns a list with one (n_i, 1000)
        float32 array per image (or ``(array, global_vector)`` pairs with
        ``global_descriptor=True``).

        Arrays, converted as image files are:

        - values: ``uint8`` in 0–255 (other integer dtypes with values in
          0–255 alike), or floats in [0, 1] (scikit-image's convention,
          multiplied by 255 for the network). A float array with a value
          outside [0, 1], NaN or infinite is a ``ValueError`` naming the image
          and the range found: convert a float image in 0–255 with
          ``img.astype(np.uint8)``;
        - shapes: (H, W, 3) RGB; (H, W) or (H, W, 1) grey, replicated to the
          three channels (as a greyscale file); (H, W, 4) RGBA, whose alpha
          channel is dropped (as the file reader drops it, without compositing).

        So a PNG file, its pixels as ``uint8``, the same divided by 255 and,
        for a grey file, its (H, W) array give the same descriptors (up to
        float rounding for the floats).

        Raises ``ValueError`` naming the image that cannot be read or used,
        ``TypeError`` for an input that is neither a path nor an array."""
        scales, mode, side, stride = self._params()
        if isinstance(images, (str, os.PathLike, np.ndarray)) and not (
            isinstance(images, np.ndarray) and images.ndim == 4
        ):
            raise TypeError("images must be a sequence of paths or image arrays, not a single image")
        items = []
        for i, im in enumerate(images):
            if isinstance(im, (str, os.PathLike)):
                items.append(os.fspath(im))
            elif isinstance(im, np.ndarray):
                if im.dtype == np.uint8 or im.dtype in (np.float32, np.float64):
                    items.append(np.ascontiguousarray(im))
                elif im.dtype.kind in "iu":
                    lo, hi = (int(im.min()), int(im.max())) if im.size else (0, 0)
                    if lo < 0 or hi > 255:
                        raise ValueError(
                            f"image {i} is an integer array ({im.dtype}) with values in [{lo}, {hi}]; "
                            "images are uint8 arrays in 0..255 or float arrays in [0, 1]"
                        )
                    items.append(np.ascontiguousarray(im, dtype=np.uint8))
                elif im.dtype.kind == "f":
                    items.append(np.ascontiguousarray(im, dtype=np.float64))
                else:
                    raise TypeError(
                        f"image {i} has dtype {im.dtype}; expected uint8 (0..255) or a float array in [0, 1]"
                    )
            else:
                raise TypeError(f"image {i} is a {type(im).__name__}; expected a path or an image array")
        if not items:
            return []
        if self.cnn not in ("squeezenet", "efficientnet-lite0"):
            raise ValueError(f"cnn must be 'squeezenet' or 'efficientnet-lite0', got {self.cnn!r}")
        return _fisherkit.cnn_descriptors(items, self.cnn, scales, mode, side, stride, bool(self.global_descriptor))
