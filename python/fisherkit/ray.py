"""Distributed EM and encoding on Ray.

EM's E-step sums add up over disjoint shards of the data (see
:class:`fisherkit.GmmStatistics` and :class:`fisherkit.MfaStatistics`), so
exact EM over data spread across machines is a map-reduce per iteration, for
the diagonal GMM (:func:`fit_gmm_distributed`) and the mixture of factor
analysers (:func:`fit_mfa_distributed`) alike:

* map: the shards live in Ray's object store (local arrays are put there
  once; ObjectRefs are used as they are), and each iteration runs one Ray task
  per shard, scheduled on the node that holds it, computing the shard's
  sufficient statistics under the current model (the model, O(K·D·R)
  numbers, is broadcast through the object store);
* reduce: the driver sums the statistics in shard order (deterministic);
* M-step on the driver (``update_from_statistics``).

:func:`sufficient_statistics_distributed` is one such map-reduce (the E-step of
any fitted fisherkit mixture). The result equals single-process EM from the
same initial model up to the rounding of the sums (rtol ~1e-12 in float64).
The initial model is fitted, as the in-process ``fit`` does (k-means then EM;
k-means + PPCA then EM for the MFA), on a sample gathered from the shards:
``init_sample_size`` rows in all, each shard giving a share proportional to its
size, rows drawn without replacement by
``numpy.random.default_rng([seed, shard_index])`` (see :func:`sample_rows`), so a
given ``random_state`` and sharding always give the same model. With
``init_sample_size`` at least the number of rows the sample is the whole data
in shard order, and the distributed fit equals the in-process
``fit(np.concatenate(shards))`` with ``max_iter = init_max_iter + max_iter``.

Running on a cluster
--------------------
The same code runs unchanged on one machine or many; only ``ray.init`` differs::

    import numpy as np, ray, fisherkit, fisherkit.ray as fkray

    ray.init(address="auto")          # on a node of a running cluster
                                      # (`ray start --head` on one node, then
                                      # `ray start --address=HEAD:6379` on the others;
                                      # or ray.init(address="ray://HEAD:10001") from outside)
    # Load each shard where it will be used: a remote task returns an ObjectRef,
    # and the data never goes through the driver.
    @ray.remote
    def load(path):
        return np.load(path)
    shards = [load.remote(p) for p in shard_paths]
    gmm = fkray.fit_gmm_distributed(shards, n_components=256, max_iter=50)
    mfa = fkray.fit_mfa_distributed(shards, n_components=50, n_factors=10, max_iter=50)
    V = fkray.encode_distributed(fisherkit.FisherVector(gmm), bags, batch_size=256)
    S = fkray.encode_distributed(fisherkit.MFAFisherScore(mfa), bags, batch_size=256)

On one machine, ``ray.init(num_cpus=4)`` starts a local cluster and the same
calls run there. Every node needs ``fisherkit`` installed (or
``runtime_env={"pip": ["fisherkit"]}``). Each task reserves ``num_cpus`` CPUs
and sets ``RAYON_NUM_THREADS`` to that number in its worker process (before
fisherkit's first parallel call there), so the Rust threads do not
oversubscribe the node.

The whole pipeline
------------------
:func:`run_pipeline` is ``fisherkit.pipeline.run`` (``fisherkit run``) with
its two passes over the images in Ray tasks: the sample pass (fixed chunks of
sample images → PCA sums and model-sample rows, merged on the driver in chunk
order) and the encode pass (CNN → PCA → every model's raw encoding); the
driver fits the PCA and the models and writes the encodings to the run
folder; the classifier stage runs in Ray tasks as well (one per term kernel,
or per report row on the primal path), reading the stores from the run
folder, and the driver writes the report — the same report as one process
for the same options and seed (docs/pipeline.md §6). Images and the
cache folder must be at the same path on every node.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import sys
import warnings
from typing import Any, Sequence

import numpy as np

from ._base import ConvergenceWarning, as_matrix, positive_int, seed_from
from ._gmm import GaussianMixture
from ._mfa import MixtureOfFactorAnalyzers

__all__ = [
    "predict",
    "fit_gmm_distributed",
    "fit_mfa_distributed",
    "sufficient_statistics_distributed",
    "encode_distributed",
    "sample_rows",
    "em_on_statistics",
    "run_pipeline",
]


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fisherkit.ray needs Ray: pip install ray") from e
    return ray


def _limit_threads(num_cpus: float) -> None:
    # rayon reads RAYON_NUM_THREADS when its pool starts (first parallel call
    # in this worker process); a worker that already started keeps its pool.
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, int(num_cpus))))


def sample_rows(x: np.ndarray, n: int, seed: int, shard_index: int) -> np.ndarray:
    """The initialisation sample of one shard: ``n`` rows of ``x`` (all if
    ``n`` ≥ N) drawn without replacement by
    ``numpy.random.default_rng([seed, shard_index])``, in their original order."""
    x = as_matrix(x, "shard")
    if n >= x.shape[0]:
        return x
    rng = np.random.default_rng([seed, shard_index])
    idx = np.sort(rng.choice(x.shape[0], size=n, replace=False))
    return x[idx]


def _shares(sizes: Sequence[int], total: int) -> list[int]:
    """Rows each shard contributes to a sample of ``total`` rows (proportional,
    rounded up, at most the shard's size)."""
    n = sum(sizes)
    return [min(s, math.ceil(total * s / n)) for s in sizes]


def _shard_shape(x: Any) -> tuple[int, int]:
    return as_matrix(x, "shard").shape


def _shard_sample(x: Any, n: int, seed: int, shard_index: int) -> np.ndarray:
    return sample_rows(x, n, seed, shard_index)


def _shard_statistics(model: Any, x: Any, num_cpus: float):
    _limit_threads(num_cpus)
    return model.sufficient_statistics(as_matrix(x, "shard"))


def em_on_statistics(model: Any, statistics_of: Any, max_iter: int) -> Any:
    """EM driven by a function returning the merged statistics of the whole
    data under a model: ``statistics_of(model) -> GmmStatistics`` (or
    ``MfaStatistics``). Runs until ``model.converged_`` (the estimator's
    ``tol`` rule) or ``max_iter`` iterations; returns ``model`` (a fitted
    ``GaussianMixture`` or ``MixtureOfFactorAnalyzers``), updated in place,
    with ``n_iter_``, ``converged_``, ``lower_bound_`` and
    ``log_likelihood_history_`` of this run. The engine-independent core of
    :func:`fit_gmm_distributed` and :func:`fit_mfa_distributed`.

    The loop is the library's own (``fit_from_statistics`` of the Rust
    ``GmmParams`` / ``MfaParams``), the one every fit runs: M-step,
    re-seeding of starved components and stopping rule as ``fit``.
    ``statistics_of`` must return statistics of the model it was called
    with (an error names the mismatch)."""
    if not hasattr(model, "_fit_from_statistics"):
        raise TypeError(
            f"model must be a GaussianMixture or MixtureOfFactorAnalyzers, got {type(model).__name__}"
        )
    return model._fit_from_statistics(statistics_of, max_iter)


def _shard_refs(ray: Any, shards: Sequence[Any]) -> list[Any]:
    """Shards in the object store (local arrays are put there once)."""
    if len(shards) == 0:
        raise ValueError("no shards: give at least one (N_i, D) array or ObjectRef")
    return [s if isinstance(s, ray.ObjectRef) else ray.put(as_matrix(s, f"shard {i}")) for i, s in enumerate(shards)]


def sufficient_statistics_distributed(model: Any, shards: Sequence[Any], *, num_cpus: float = 1) -> Any:
    """One distributed E-step: ``model.sufficient_statistics`` of every shard
    in a Ray task (map), summed in shard order on the driver (reduce).

    ``model``: a fitted ``GaussianMixture`` or ``MixtureOfFactorAnalyzers``
    (put in the object store once). ``shards``: (N_i, D) arrays or ObjectRefs
    to them. Returns the ``GmmStatistics`` / ``MfaStatistics`` of all the rows,
    equal to ``model.sufficient_statistics(np.concatenate(shards))`` up to the
    rounding of the sums.
    """
    ray = _ray()
    return _statistics_of_refs(ray, model, _shard_refs(ray, shards), num_cpus)


def _statistics_of_refs(ray: Any, model: Any, refs: list[Any], num_cpus: float) -> Any:
    task = _remote(ray, num_cpus, _shard_statistics)
    model_ref = ray.put(model)
    parts = ray.get([task.remote(model_ref, r, num_cpus) for r in refs])
    return functools.reduce(operator.add, parts)


def _fit_distributed(
    ray: Any,
    est: Any,
    shards: Sequence[Any],
    seed: int,
    init: Any,
    init_sample_size: int | None,
    init_max_iter: int,
    num_cpus: float,
) -> Any:
    """The common driver of the distributed fits: ``est`` (unfitted, its
    hyper-parameters set) gets its initial model from ``init`` or from a fit
    of a copy with ``max_iter=init_max_iter`` on the gathered sample, then
    runs EM over the shards."""
    refs = _shard_refs(ray, shards)
    remote = functools.partial(_remote, ray, num_cpus)
    shapes = ray.get([remote(_shard_shape).remote(r) for r in refs])
    dims = {d for _, d in shapes}
    if len(dims) != 1:
        raise ValueError(f"shards have different numbers of columns: shapes {shapes}")
    k = positive_int(est.n_components, "n_components")
    if init is None:
        size = init_sample_size if init_sample_size is not None else max(100 * k, 10_000)
        shares = _shares([n for n, _ in shapes], positive_int(size, "init_sample_size"))
        sample = remote(_shard_sample)
        parts = ray.get([sample.remote(r, m, seed, i) for i, (r, m) in enumerate(zip(refs, shares))])
        start = type(est)(**{**est.get_params(deep=False), "max_iter": init_max_iter})
        with warnings.catch_warnings():
            # a short initial fit is not expected to converge; EM over the shards follows
            warnings.simplefilter("ignore", ConvergenceWarning)
            start.fit(np.concatenate(parts, axis=0))
    else:
        start = init
        if not hasattr(start, "means_"):
            raise ValueError("init must be a fitted model (call its fit first)")
        got = (np.shape(start.means_), type(start).__name__)
        want = ((k, dims.pop()), type(est).__name__)
        if got != want:
            raise ValueError(
                f"init is a {got[1]} with means of shape {got[0]}; expected a {want[1]} with means of shape {want[0]}"
            )
    est._set_model(*[a.copy() for a in start._params()])
    return em_on_statistics(est, lambda model: _statistics_of_refs(ray, model, refs, num_cpus), est.max_iter)


def fit_gmm_distributed(
    shards: Sequence[Any],
    n_components: int,
    max_iter: int = 100,
    tol: float = 1e-3,
    random_state: Any = 0,
    *,
    tol_mode: str = "absolute",
    init_params: str = "kmeans",
    variance_floor: float = 1e-3,
    variance_floor_mode: str = "relative",
    init: GaussianMixture | None = None,
    init_sample_size: int | None = None,
    init_max_iter: int = 10,
    num_cpus: float = 1,
) -> GaussianMixture:
    """Fits a diagonal GMM by exact EM over ``shards`` held in Ray's object
    store (one task per shard and iteration).

    Parameters
    ----------
    shards : list of ndarray (N_i, D) or ray.ObjectRef to one
        The data, split by rows (any number of shards, more than CPUs is
        fine). ObjectRefs are resolved inside the tasks, so a shard loaded by
        a remote task never travels through the driver.
    n_components, max_iter, tol, tol_mode, init_params, variance_floor, variance_floor_mode
        As :class:`fisherkit.GaussianMixture` (``tol``: by default the
        absolute change of the mean log-likelihood per row, scikit-learn's rule).
    random_state : int, default 0
        Seed of the initialisation sample and of the initial fit.
    init : GaussianMixture, optional
        A fitted model to start EM from (then no sample is drawn).
    init_sample_size : int, optional
        Rows gathered from the shards for the initial model (default
        ``max(100 * n_components, 10000)``); the initial model is
        ``GaussianMixture(..., max_iter=init_max_iter).fit(sample)``.
    num_cpus : float, default 1
        CPUs reserved by each task (its Rust thread count).

    Returns
    -------
    GaussianMixture
        Fitted: ``weights_``, ``means_``, ``covariances_``, ``n_iter_``,
        ``converged_``, ``lower_bound_``, ``log_likelihood_history_`` of the
        distributed EM run (mean log-likelihood per row over all shards).

    Ray must be initialised (``ray.init()``, or ``ray.init(address="auto")`` on
    a cluster); see the module documentation.
    """
    ray = _ray()
    seed = seed_from(random_state)
    gmm = GaussianMixture(
        positive_int(n_components, "n_components"),
        max_iter=positive_int(max_iter, "max_iter"),
        tol=tol,
        tol_mode=tol_mode,
        init_params=init_params,
        variance_floor=variance_floor,
        variance_floor_mode=variance_floor_mode,
        random_state=seed,
    )
    return _fit_distributed(ray, gmm, shards, seed, init, init_sample_size, init_max_iter, num_cpus)


def fit_mfa_distributed(
    shards: Sequence[Any],
    n_components: int,
    n_factors: int,
    max_iter: int = 100,
    tol: float = 1e-3,
    random_state: Any = 0,
    *,
    tol_mode: str = "absolute",
    psi_mode: str = "shared",
    psi_floor: float = 1e-3,
    init: MixtureOfFactorAnalyzers | None = None,
    init_sample_size: int | None = None,
    init_max_iter: int = 10,
    num_cpus: float = 1,
) -> MixtureOfFactorAnalyzers:
    """Fits a mixture of factor analysers by exact EM over ``shards`` held in
    Ray's object store (one task per shard and iteration computing the shard's
    :class:`fisherkit.MfaStatistics`; their sum gives the M-step on the driver).

    Parameters
    ----------
    shards : list of ndarray (N_i, D) or ray.ObjectRef to one
        The data, split by rows (any number of shards). ObjectRefs are
        resolved inside the tasks.
    n_components, n_factors, max_iter, tol, tol_mode, psi_mode, psi_floor
        As :class:`fisherkit.MixtureOfFactorAnalyzers` (``tol``: by default
        the absolute change of the mean log-likelihood per row, ``|l_t - l_{t-1}| < tol``).
    random_state : int, default 0
        Seed of the initialisation sample and of the initial fit.
    init : MixtureOfFactorAnalyzers, optional
        A fitted model (K components, the shards' D, ``n_factors`` factors, the
        same ``psi_mode``) to start EM from; then no sample is drawn.
    init_sample_size : int, optional
        Rows gathered from the shards for the initial model (default
        ``max(100 * n_components, 10000)``); the initial model is
        ``MixtureOfFactorAnalyzers(..., max_iter=init_max_iter).fit(sample)``:
        k-means + PPCA, then EM, as the in-process fit.
    num_cpus : float, default 1
        CPUs reserved by each task (its Rust thread count).

    Returns
    -------
    MixtureOfFactorAnalyzers
        Fitted: ``weights_``, ``means_``, ``loadings_``, ``psi_``, ``n_iter_``,
        ``converged_``, ``lower_bound_``, ``log_likelihood_history_`` of the
        distributed EM run. The model keeps the dtype of the shards (of the
        initial sample).

    Ray must be initialised (``ray.init()``, or ``ray.init(address="auto")`` on
    a cluster); see the module documentation.
    """
    ray = _ray()
    seed = seed_from(random_state)
    mfa = MixtureOfFactorAnalyzers(
        positive_int(n_components, "n_components"),
        positive_int(n_factors, "n_factors"),
        psi_mode=psi_mode,
        max_iter=positive_int(max_iter, "max_iter"),
        tol=tol,
        tol_mode=tol_mode,
        psi_floor=psi_floor,
        random_state=seed,
    )
    if psi_mode not in ("shared", "per_component"):
        raise ValueError(f'psi_mode must be "shared" or "per_component", got {psi_mode!r}')
    if init is not None and (
        np.shape(getattr(init, "loadings_", ()))[2:] != (mfa.n_factors,)
        or getattr(init, "psi_mode", None) != psi_mode
    ):
        raise ValueError(
            f"init must be a fitted MixtureOfFactorAnalyzers with n_factors={mfa.n_factors} and "
            f"psi_mode={psi_mode!r}, got {init!r}"
        )
    return _fit_distributed(ray, mfa, shards, seed, init, init_sample_size, init_max_iter, num_cpus)


def _remote(ray: Any, num_cpus: float, fn: Any) -> Any:
    return ray.remote(fn).options(num_cpus=num_cpus)


def _encode_batch(encoder: Any, batch: list[Any], num_cpus: float) -> np.ndarray:
    ray = _ray()
    _limit_threads(num_cpus)
    bags = [ray.get(b) if isinstance(b, ray.ObjectRef) else b for b in batch]
    return encoder.transform(bags)


def encode_distributed(
    encoder: Any,
    bags: Sequence[Any],
    batch_size: int = 64,
    *,
    num_cpus: float = 1,
) -> np.ndarray:
    """Encodes ``bags`` with Ray tasks: ``encoder.transform`` on batches of
    ``batch_size`` bags, results stacked in the order of ``bags``.

    ``encoder``: any picklable transformer of lists of bags (``FisherVector``,
    ``VLAD``, ...), fitted; it is put in the object store once. ``bags``: a
    list of (N_i, D) arrays or ObjectRefs to them (resolved in the tasks).
    Returns the same array as ``encoder.transform(bags)`` (n_bags, dim).
    """
    ray = _ray()
    size = positive_int(batch_size, "batch_size")
    bags = list(bags)
    if not bags:
        return encoder.transform([])
    enc_ref = ray.put(encoder)
    task = ray.remote(_encode_batch).options(num_cpus=num_cpus)
    futures = [task.remote(enc_ref, bags[i : i + size], num_cpus) for i in range(0, len(bags), size)]
    return np.concatenate(ray.get(futures), axis=0)


# --- the whole pipeline on Ray ---------------------------------------------------------

_JOBS: dict = {}


def _job(args: str, learned: bool):
    """This worker process's Job of the configuration ``args`` (JSON text;
    opened once per process and phase)."""
    from . import _fisherkit

    key = (args, learned)
    job = _JOBS.get(key)
    if job is None:
        job = _fisherkit.Job(args)
        if learned:
            job.load_learned()
        _JOBS.clear()
        _JOBS[key] = job
    return job


def _sample_task(args: str, chunk: list, num_cpus: float) -> dict:
    _limit_threads(num_cpus)
    return _job(args, False).sample_chunk(chunk)


def _encode_task(args: str, images: list, num_cpus: float, fault_marker: str | None) -> dict:
    _limit_threads(num_cpus)
    if fault_marker and not os.path.exists(fault_marker):
        # Fault injection for tests (FISHERKIT_RAY_FAULT_MARKER): the first
        # encode task kills its worker process; Ray retries the task.
        open(fault_marker, "w").close()
        os._exit(1)
    return _job(args, True).encode_images(images)


def _classifier_task(args: str, name: str, num_cpus: float, verbose: bool) -> tuple[str, float]:
    _limit_threads(num_cpus)
    from . import _fisherkit

    # A fresh job, not the cached one of the encode pass: it opens the
    # stores and the image journal as the encode pass left them.
    return name, _fisherkit.Job(args).run_classifier_task(name, verbose)


def run_pipeline(
    train: Any = None,
    test: Any = None,
    *,
    images_per_task: int = 16,
    num_cpus: float = 1,
    classifier_tasks: bool = True,
    verbose: bool = False,
    **options: Any,
) -> dict:
    """``fisherkit.pipeline.run`` on a Ray cluster: the same options, the
    same report (same accuracies for the same seed).

    The two passes over the images run in Ray tasks of ``num_cpus`` CPUs
    each: the sample pass (CNN descriptors of the seeded sample images →
    per-chunk PCA sums and model-sample rows, in fixed chunks of
    ``fisherkit._fisherkit`` 's ``SAMPLE_CHUNK`` images, merged on the driver
    in chunk order, so the sums do not depend on the cluster) and the encode
    pass (CNN → PCA → every model's raw encoding, ``images_per_task`` images
    per task, rows returned through the object store). The driver fits the
    PCA and the models (EM on the merged sample) and writes the encodings to
    the run folder's stores.

    With ``classifier_tasks=True`` (the default) the classifier stage runs
    in Ray tasks too, each opening the run folder: on the kernel path
    (``classifier="kernel"``, the default up to 23 170 training images) one
    task per term kernel, reading the stores, then, once those are done, one
    per report row — an encoder at one scale or all, whitened or not:
    cross-validation over the C grid, the final one-vs-rest SVM and the
    test images' scores — reading the kernels; on the primal path
    (``classifier="primal"``) one task per report row, reading the stores.
    Each task keeps its result in the run folder (the files a resumed
    single-process run reads), so a run started again skips the finished
    tasks; the driver then checks the results are there and computes the
    report from them (and the saved classifier, whose weights the all-scale
    row tasks keep). ``classifier_tasks=False``
    computes the whole stage on the driver. The report is the same either
    way, and the single-process one (docs/pipeline.md §6). The report's
    ``timings`` give the time of each distributed pass.

    On a multi-node cluster: every node needs fisherkit installed, the
    image folders must be readable at the same path on every node, and the
    cache folder (``cache=``, default ``.fisherkit-cache``, made absolute
    here) must be on a file system every node sees (NFS or similar): the
    workers read the fitted PCA and models from the run folder, and the
    classifier tasks the stores, and write their results there (a result
    missing on the driver is an error naming the task). A killed run
    resumes from the run folder like ``fisherkit run``; a task whose worker
    dies is retried by Ray (the passes compute only, so a retry cannot
    write twice; a classifier task writes its result atomically, the same
    bytes on a retry).
    """
    import json
    import time

    from . import _fisherkit
    from .pipeline import _request

    ray = _ray()
    size = positive_int(images_per_task, "images_per_task")
    if options.get("no_cache"):
        raise ValueError("run_pipeline needs a cache folder every node sees; no_cache=True is not supported")
    if options.get("save_descriptors"):
        raise ValueError("run_pipeline does not write descriptor files; use fisherkit.pipeline.run for save_descriptors")
    options = dict(options)
    options["cache"] = os.path.abspath(os.fspath(options.get("cache") or ".fisherkit-cache"))
    for name in ("output_dir", "report", "plot"):
        if options.get(name):
            options[name] = os.path.abspath(os.fspath(options[name]))
    train = None if train is None else os.path.abspath(os.fspath(train))
    test = None if test is None else os.path.abspath(os.fspath(test))
    args = _request(train, test, options.pop("config", None), options)
    job = _fisherkit.Job(args)
    sample = ray.remote(_sample_task).options(num_cpus=num_cpus, max_retries=3)
    encode = ray.remote(_encode_task).options(num_cpus=num_cpus, max_retries=3)

    chunks = job.sample_chunks()
    if chunks:
        t = time.perf_counter()
        futures = [sample.remote(args, c, num_cpus) for c in chunks]
        for f in futures:  # merged in chunk order
            job.add_sample(ray.get(f), bool(verbose))
        job.add_timing(f"sample pass (ray, {len(chunks)} tasks)", time.perf_counter() - t)
    job.fit(bool(verbose))

    todo = job.encode_todo()
    if todo:
        t = time.perf_counter()
        fault = os.environ.get("FISHERKIT_RAY_FAULT_MARKER")
        pending = [encode.remote(args, todo[i : i + size], num_cpus, fault) for i in range(0, len(todo), size)]
        n_tasks = len(pending)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            job.put_encoded(ray.get(done[0]))
        job.add_timing(
            f"cnn + encoding (ray, {len(todo)} images, {n_tasks} tasks)", time.perf_counter() - t
        )
    if not classifier_tasks:
        return json.loads(job.finish(bool(verbose)))
    tasks = job.classifier_tasks()
    if tasks:
        t = time.perf_counter()
        classify = ray.remote(_classifier_task).options(num_cpus=num_cpus, max_retries=3)
        # a wave's tasks read the earlier waves' results (the kernel path's rows read its kernels)
        for wave in sorted({w for _, _, w in tasks}):
            now = [(name, label) for name, label, w in tasks if w == wave]
            done = ray.get([classify.remote(args, name, num_cpus, bool(verbose)) for name, _ in now])
            if verbose:
                for (name, label), (_, seconds) in zip(now, done):
                    print(f"{label}: {seconds:.1f} s (ray task)", file=sys.stderr)
        job.add_timing(f"classifier (ray, {len(tasks)} tasks)", time.perf_counter() - t)
    return json.loads(job.finish_classifier_tasks([name for name, _, _ in tasks], bool(verbose)))


class _ScenePredictor:
    """A Ray Data actor: loads the classifier once, labels batches."""

    def __init__(self, model_path: str, column: str, num_cpus: float):
        _limit_threads(num_cpus)
        from . import SceneClassifier

        self.clf = SceneClassifier.load(model_path)
        self.column = column

    def __call__(self, batch: dict) -> dict:
        model = self.clf._model
        if "bytes" in batch and self.column not in batch:
            data = [bytes(b) for b in batch["bytes"]]
            names = [f"row {i}" for i in range(len(data))]
            classes, scores, _, errors = model.predict_encoded(data, names, False)
        elif self.column in batch and len(batch[self.column]) and isinstance(batch[self.column][0], (bytes, bytearray)):
            data = [bytes(b) for b in batch[self.column]]
            names = [f"row {i}" for i in range(len(data))]
            classes, scores, _, errors = model.predict_encoded(data, names, False)
        else:
            paths = [str(p) for p in batch[self.column]]
            classes, scores, _, errors = model.predict_images(paths, False)
        names = np.asarray(self.clf.classes_).astype(str)
        ok = classes >= 0
        label = np.where(ok, names[np.maximum(classes, 0)], "")
        best = scores[np.arange(len(classes)), np.maximum(classes, 0)]
        score = np.array([float(v) if k else None for v, k in zip(best, ok)], dtype=object)
        out = dict(batch)
        out["label"] = label
        out["score"] = score
        out["error"] = np.array([e or "" for e in errors], dtype=object)
        return out


def predict(
    dataset: Any,
    model_path: str | os.PathLike,
    *,
    column: str = "path",
    batch_size: int = 16,
    concurrency: int = 1,
    num_cpus: float = 1,
) -> Any:
    """Labels a Ray Data ``Dataset`` of images with a saved scene classifier
    (``fisherkit run --save-model``, ``SceneClassifier.save``): Ray Data's
    batch-inference pattern, ``map_batches`` over a pool of ``concurrency``
    actors, each loading the classifier once and reserving ``num_cpus``
    CPUs (its Rust threads limited to them).

    The rows hold image paths in ``column`` (e.g. ``ray.data.from_items``),
    or the encoded files as bytes (``column`` of bytes, or the ``bytes``
    column of ``ray.data.read_binary_files``). Returns the dataset with
    three more columns: ``label`` (the class name, as a string), ``score``
    (the winning class's SVM score) and ``error`` (empty, or why the image
    could not be labelled; its label is then empty and its score null) — the
    labels and scores ``fisherkit predict`` gives.

    >>> import ray, fisherkit.ray as fkray                        # doctest: +SKIP
    >>> ds = ray.data.from_items([{"path": p} for p in paths])     # doctest: +SKIP
    >>> fkray.predict(ds, "scene.safetensors").take_all()          # doctest: +SKIP
    """
    _ray()
    path = os.fspath(model_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such classifier file")
    return dataset.map_batches(
        _ScenePredictor,
        fn_constructor_args=(path, column, num_cpus),
        batch_size=batch_size,
        batch_format="numpy",
        concurrency=concurrency,
        num_cpus=num_cpus,
    )
