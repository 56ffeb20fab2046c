"""The whole scene-classification pipeline from Python: ``run`` is
``fisherkit run`` (image folders → CNN descriptors → PCA → GMM/MFA →
Fisher vectors/scores → SVM → report), on the same configuration, with the
same defaults and report.

Options are the settings of the pipeline's configuration, each named as its
``fisherkit run`` flag with underscores::

    import fisherkit.pipeline
    report = fisherkit.pipeline.run(
        train="scenes/train", test="scenes/test",
        scales=[128], pca_dim=40, encoders="cnn-global,gmm-fv:var", seed=3)
    for row in report["results"]:
        print(row["spec"], row["accuracy"])

Values: numbers, strings, booleans and paths as they are; lists as lists
(``scales=[96, 128]``) or as the flag's comma-separated text
(``encoders="gmm-fv:var,mfa-fs:loading"``); ``None`` leaves a setting at its
default. ``config=`` starts from a configuration instead of the defaults: a
nested dict (the groups ``data``, ``descriptors``, ``pca``, ``models``,
``encoding``, ``svm``, ``output`` and ``seed``), or a JSON file — a
configuration (``fisherkit run --print-config`` writes one) or the report of
an earlier run, which records its own. The options are set over it.

The settings are checked by the library (in Rust) exactly as the command
line's: an unknown name or a bad value raises ``ValueError`` naming the
option and its flag. :func:`config` returns the checked configuration
without running; the report (a dict, docs/formats.md) records it whole as
``report["config"]``, so ``run(config=report["config"])`` repeats a run.

Building the pipeline from the estimators instead, to swap a stage, is shown
in docs/python.md.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _fisherkit

__all__ = ["config", "run"]


def _plain(name: str, value: Any) -> Any:
    """``value`` as JSON data (paths as text, numpy scalars as numbers)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_plain(name, v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(f"{name}.{k}", v) for k, v in value.items()}
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy scalar
        return value.item()
    if hasattr(value, "tolist"):  # a numpy array
        return _plain(name, value.tolist())
    raise TypeError(
        f"option {name}={value!r}: expected a number, a string, a path, True/False, "
        f"a list or a dict, not {type(value).__name__}"
    )


def _request(train: Any, test: Any, config: Any, options: dict[str, Any]) -> str:
    """The JSON the native module checks: the base configuration and the options."""
    given = {"train": train, "test": test, **options}
    opts = {name: _plain(name, v) for name, v in given.items() if v is not None}
    if config is not None and not isinstance(config, dict):
        config = os.fspath(config)
    return json.dumps({"config": _plain("config", config), "options": opts}, allow_nan=False)


def config(train: Any = None, test: Any = None, *, config: Any = None, **options: Any) -> dict:
    """The checked configuration of ``run(train, test, config=…, **options)``,
    as a nested dict, without running anything.

    Examples
    --------
    >>> c = config("scenes/train", "scenes/test", pca_dim=64)
    >>> c["pca"]["pca_dim"], c["descriptors"]["cnn"]
    (64, 'efficientnet-lite0')
    """
    return json.loads(_fisherkit.pipeline_config(_request(train, test, config, options)))


def run(
    train: Any = None,
    test: Any = None,
    *,
    config: Any = None,
    verbose: bool = False,
    **options: Any,
) -> dict:
    """Runs the pipeline (``fisherkit run``) and returns its report as a dict.

    ``train``/``test``: image folders ``DIR/<class>/*.jpg|png`` (or pass
    ``train_descriptors=``/``test_descriptors=`` descriptor files instead).
    ``config``: a base configuration (dict, or a JSON file: a configuration
    or a report). ``verbose``: each stage's summary on stderr. ``options``:
    see the module docstring. The GIL is released while the run computes;
    Ctrl-C raises ``KeyboardInterrupt`` at the next batch and the run folder
    keeps the finished work (the same call continues from it).

    Raises ``ValueError`` for an unknown option, a bad value, an unreadable
    folder, or any failure of the run (the message names it), ``TypeError``
    for a value that is not JSON data.

    Examples
    --------
    >>> report = run("data/fashion-mnist-demo/train", "data/fashion-mnist-demo/test",
    ...              scales=[28], pca_dim=20, encoders="gmm-fv:var",
    ...              gmm_components=4, no_cache=True)     # doctest: +SKIP
    >>> sorted(report)                                     # doctest: +SKIP
    ['cnn', 'config', 'dataset', 'fisherkit_version', 'model', 'models', 'peak_rss_mb', 'results', 'sweep', 'timings']
    """
    text = _fisherkit.pipeline_run(_request(train, test, config, options), bool(verbose))
    return json.loads(text)
