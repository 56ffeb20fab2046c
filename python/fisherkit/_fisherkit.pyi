"""Type stubs of the native core ``fisherkit._fisherkit`` (PyO3). The public
API is the estimators of the ``fisherkit`` package; these functions take
C-contiguous float32/float64 arrays (the estimators prepare them)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

__version__: str

_F = npt.NDArray[np.float32] | npt.NDArray[np.float64]
_Gmm = tuple[_F, _F, _F]  # weights (K), means (K, D), variances (K, D)

def kmeans_fit(
    x: _F, n_clusters: int, max_iter: int, tol: float, n_init: int, seed: int
) -> tuple[_F, npt.NDArray[np.int64], float, int, bool]:
    """(centroids (K, D), labels (N,), inertia, n_iter, converged)."""

def kmeans_squared_distances(x: _F, centroids: _F) -> _F:
    """(N, K) squared distances, in x's dtype."""

def gmm_fit(
    x: _F,
    n_components: int,
    max_iter: int,
    tol: float,
    tol_mode: str,
    n_init: int,
    init: str,
    variance_floor: float,
    variance_floor_mode: str,
    seed: int,
    given: _Gmm | None = None,
) -> tuple[_Gmm, list[float], int, bool]:
    """((weights, means, variances), log-likelihood history, n_iter, converged)."""

def gmm_score_samples(weights: _F, means: _F, variances: _F, x: _F) -> npt.NDArray[np.float64]: ...
def gmm_predict_proba(weights: _F, means: _F, variances: _F, x: _F) -> _F: ...
def gmm_sufficient_statistics(weights: _F, means: _F, variances: _F, x: _F) -> GmmStatistics: ...
def gmm_from_statistics(
    stats: GmmStatistics, variance_floor: float, variance_floor_mode: str, dtype: str
) -> tuple[_Gmm, int]: ...
def gmm_fit_from_statistics(
    weights: _F,
    means: _F,
    variances: _F,
    statistics_of: Any,
    max_iter: int,
    tol: float,
    tol_mode: str,
    variance_floor: float,
    variance_floor_mode: str,
) -> tuple[_Gmm, list[float], int, bool]:
    """The library's EM loop with the E-step ``statistics_of(w, m, v) -> GmmStatistics``:
    ((weights, means, variances), log-likelihood history, n_iter, converged)."""

class GmmStatistics:
    """E-step sums of a diagonal GMM (float64); ``a + b`` merges, picklable."""

    def __init__(
        self,
        n_rows: float,
        log_likelihood: float,
        center: npt.NDArray[np.float64],
        resp_sums: npt.NDArray[np.float64],
        sum_y: npt.NDArray[np.float64],
        sum_y2: npt.NDArray[np.float64],
    ) -> None: ...
    @property
    def n_rows(self) -> float: ...
    @property
    def log_likelihood(self) -> float: ...
    @property
    def mean_log_likelihood(self) -> float: ...
    @property
    def n_components(self) -> int: ...
    @property
    def n_features(self) -> int: ...
    @property
    def center(self) -> npt.NDArray[np.float64]: ...
    @property
    def resp_sums(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_y(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_y2(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_x(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_x2(self) -> npt.NDArray[np.float64]: ...
    def __add__(self, other: GmmStatistics | int) -> GmmStatistics: ...
    def __radd__(self, other: GmmStatistics | int) -> GmmStatistics: ...
    def __reduce__(self) -> tuple[type[GmmStatistics], tuple[object, ...]]: ...

def fisher_vector(
    weights: _F,
    means: _F,
    variances: _F,
    bags: Sequence[_F],
    parts: Sequence[str],
    power: float,
    l2: bool,
    fast: bool,
    vlfeat_skips: bool,
) -> _F:
    """(n_bags, dim) in the bags' dtype."""

def fisher_vector_dim(n_components: int, dim: int, parts: Sequence[str]) -> int: ...
def vlad(
    bags: Sequence[_F],
    centers: _F | None,
    gmm: _Gmm | None,
    normalize_mass: bool,
    square_root: bool,
    normalize_components: bool,
    unnormalized: bool,
    hard_assignment: bool,
) -> _F: ...
def model_kind(path: str) -> str:
    """The model file's ``kind`` ("gmm", "mfa", "pca" or "linear-svm"), fisherkit-io's
    reader: FileNotFoundError / OSError / ValueError naming the file."""
def gmm_save(path: str, weights: _F, means: _F, variances: _F, metadata: dict[str, str]) -> None:
    """kind = "gmm" file, fisherkit-io's writer (validated)."""
def gmm_load(path: str) -> tuple[_F, _F, _F, dict[str, str]]:
    """(weights (K), means (K, D), variances (K, D), metadata), fisherkit-io's reader."""
def mfa_save(
    path: str,
    weights: _F,
    means: _F,
    loadings: _F,
    psi: _F,
    metadata: dict[str, str],
    whitening: tuple[Sequence[str], _F] | None = None,
) -> None:
    """kind = "mfa" file with an optional whitening block (parts, fisher_information (P))."""
def mfa_load(
    path: str,
) -> tuple[tuple[_F, _F, _F, _F], tuple[list[str], _F] | None, dict[str, str]]:
    """((weights, means, loadings, psi (1 or K, D)), (parts, fisher_information) or None, metadata)."""

# ---------------------------------------------------------------- MFA
_Mfa = tuple[_F, _F, _F, _F]  # weights (K), means (K, D), loadings (K, D, R), psi (1, D) or (K, D)

def mfa_fit(
    x: _F,
    n_components: int,
    n_factors: int,
    psi_mode: str,
    max_iter: int,
    tol: float,
    tol_mode: str,
    n_init: int,
    psi_floor: float,
    seed: int,
) -> tuple[_Mfa, list[float], int, bool]: ...
def mfa_score_samples(params: _Mfa, x: _F) -> npt.NDArray[np.float64]: ...
def mfa_predict_proba(params: _Mfa, x: _F) -> _F: ...
def mfa_sufficient_statistics(params: _Mfa, x: _F) -> MfaStatistics: ...
def mfa_update_from_statistics(params: _Mfa, stats: MfaStatistics, psi_floor: float) -> tuple[_Mfa, int]: ...
def mfa_fit_from_statistics(
    params: _Mfa, statistics_of: Any, max_iter: int, tol: float, tol_mode: str, psi_floor: float
) -> tuple[_Mfa, list[float], int, bool]:
    """The library's EM loop with the E-step ``statistics_of(w, m, lam, psi) -> MfaStatistics``."""
def mfa_fisher_score(
    params: _Mfa,
    bags: Sequence[_F],
    parts: Sequence[str],
    power: float,
    l2: bool,
    whitening: _F | None = None,
) -> _F: ...
def mfa_fisher_score_dim(k: int, d: int, r: int, parts: Sequence[str]) -> int: ...
def mfa_fit_whitening(params: _Mfa, bags: Sequence[_F], parts: Sequence[str]) -> _F: ...

class MfaStatistics:
    """E-step sums of an MFA (float64); ``a + b`` merges, picklable.
    ``sum_yy`` is (1, D) with a shared Psi, (K, D) per component."""

    def __init__(
        self,
        psi_mode: str,
        n_rows: int,
        log_likelihood: float,
        center: npt.NDArray[np.float64],
        resp_sums: npt.NDArray[np.float64],
        sum_e: npt.NDArray[np.float64],
        sum_ee: npt.NDArray[np.float64],
        sum_y: npt.NDArray[np.float64],
        sum_ye: npt.NDArray[np.float64],
        sum_yy: npt.NDArray[np.float64],
    ) -> None: ...
    @property
    def psi_mode(self) -> str: ...
    @property
    def n_rows(self) -> int: ...
    @property
    def log_likelihood(self) -> float: ...
    @property
    def mean_log_likelihood(self) -> float: ...
    @property
    def n_components(self) -> int: ...
    @property
    def n_features(self) -> int: ...
    @property
    def n_factors(self) -> int: ...
    @property
    def center(self) -> npt.NDArray[np.float64]: ...
    @property
    def resp_sums(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_e(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_ee(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_y(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_ye(self) -> npt.NDArray[np.float64]: ...
    @property
    def sum_yy(self) -> npt.NDArray[np.float64]: ...
    def __add__(self, other: MfaStatistics | int) -> MfaStatistics: ...
    def __radd__(self, other: MfaStatistics | int) -> MfaStatistics: ...
    def __reduce__(self) -> tuple[type[MfaStatistics], tuple[object, ...]]: ...

# ------------------------------------------------------------ PCA / SVM
def pca_fit(
    x: _F, n_components: int, whiten: bool, center: bool, clamp_components: bool
) -> tuple[_F, _F, npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """(mean (D), components (k, D), explained_variance (k), explained_variance_ratio (k),
    total_variance)."""

def pca_transform(
    mean: _F, components: _F, explained_variance: npt.NDArray[np.float64], whiten: bool, x: _F
) -> _F: ...
def linear_svc_fit(
    x: _F,
    y: Sequence[int],
    n_classes: int,
    c: float,
    loss: str,
    tol: float,
    max_iter: int,
    bias: bool,
    seed: int,
) -> tuple[_F, _F, list[int], list[bool]]:
    """(coef (K, D), intercept (K), n_iter per class, converged per class)."""

def linear_svc_decision_function(coef: _F, intercept: _F, x: _F) -> _F: ...

# model files of kind "pca" and "linear-svm" (fisherkit-io's writers and readers)
def pca_save(
    path: str,
    mean: _F,
    components: _F,
    explained_variance: npt.NDArray[np.float64],
    whiten: bool,
    total_variance: float,
    metadata: dict[str, str],
) -> None: ...
def pca_load(
    path: str,
) -> tuple[_F, _F, npt.NDArray[np.float64], bool, float, dict[str, str]]:
    """(mean (D), components (d, D), explained_variance (d), whiten, total_variance, metadata)."""

def linear_svc_save(
    path: str,
    coef: _F,
    intercept: _F,
    classes: Sequence[int] | Sequence[str],
    c: float | None,
    metadata: dict[str, str],
) -> None: ...
def linear_svc_load(
    path: str,
) -> tuple[_F, _F, list[int] | list[str], float | None, dict[str, str]]:
    """(coef (C, D), intercept (C), classes, c or None, metadata)."""

# --- the pipeline (crates/fisherkit-py/src/pipeline.rs) ---

def pipeline_config(request: str) -> str: ...
def pipeline_run(request: str, verbose: bool) -> str: ...
def cnn_descriptors(
    images: list[str | np.ndarray],
    cnn: str,
    scales: list[int],
    patch_mode: str,
    max_image_side: int | None,
    stride: float,
    with_global: bool,
) -> list[Any]: ...

class Job:
    def __init__(self, request: str) -> None: ...
    def folder(self) -> str: ...
    def sample_chunks(self) -> list[list[int]]: ...
    def sample_chunk(self, chunk: list[int]) -> dict[str, Any]: ...
    def add_sample(self, part: dict[str, Any], verbose: bool) -> None: ...
    def fit(self, verbose: bool) -> None: ...
    def load_learned(self) -> None: ...
    def encode_todo(self) -> list[int]: ...
    def encode_images(self, images: list[int]) -> dict[str, Any]: ...
    def put_encoded(self, part: dict[str, Any]) -> None: ...
    def add_timing(self, name: str, seconds: float) -> None: ...
    def classifier_tasks(self) -> list[tuple[str, str, int]]: ...  # (name, label, wave)
    def run_classifier_task(self, name: str, verbose: bool) -> float: ...
    def finish_classifier_tasks(self, done: list[str], verbose: bool) -> str: ...
    def finish(self, verbose: bool) -> str: ...

# --- a saved scene classifier (crates/fisherkit-py/src/scene.rs) ---

_Outcomes = tuple[np.ndarray, np.ndarray, np.ndarray | None, list[str | None]]

class SceneModel:
    def __init__(self, path: str) -> None: ...
    def save(self, path: str) -> None: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def dim(self) -> int: ...
    @property
    def info_json(self) -> str: ...
    def predict_images(
        self, images: list[str | np.ndarray], features: bool, batch: int | None = None
    ) -> _Outcomes: ...
    def predict_encoded(
        self, data: list[bytes], names: list[str], features: bool, batch: int | None = None
    ) -> _Outcomes: ...
    def predict_bags(self, bags: list[np.ndarray], features: bool) -> _Outcomes: ...

def relabel_classifier(src: str, dst: str, names: list[str], labels: str) -> None: ...
def write_png(path: str, image: str | np.ndarray) -> None: ...
def em_stopping_rule(
    history: list[float], ll: float, tol: float, tol_mode: str, reseeded: int = 0
) -> tuple[float, bool]: ...
def defaults() -> dict[str, float | int | bool | str]: ...
