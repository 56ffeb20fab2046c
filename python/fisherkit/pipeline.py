"""The whole scene-classification pipeline from Python: ``run`` is
``fisherkit run`` (image folders → CNN descriptors → PCA → GMM/MFA →
Fisher vectors/scores → SVM → report), with the same options, defaults and
report.

Options are the long flags of ``fisherkit run --help`` with underscores::

    import fisherkit.pipeline
    report = fisherkit.pipeline.run(
        train="scenes/train", test="scenes/test",
        scales=[128], pca_dim=40, encoders="cnn-global,gmm-fv:var", seed=3)
    for row in report["results"]:
        print(row["spec"], row["accuracy"])

Values: numbers, strings and paths as they are; lists and tuples become
comma-separated lists (``scales=[96, 128]``); ``True`` turns a flag on
(``save_encodings=True``, ``no_cache=True``); ``False`` and ``None`` leave an
option at its default. The options are parsed by the command line's own
definitions (in Rust), so a name or value ``fisherkit run`` refuses raises
``ValueError`` with its message. The report is the ``--report`` JSON as a
dict (docs/formats.md); ``report="r.json"`` also writes it.

Building the pipeline from the estimators instead, to swap a stage, is shown
in docs/python.md.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from . import _fisherkit

__all__ = ["run"]


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"option {name}: a list of booleans is not a valid value")
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(
        f"option {name}={value!r}: expected a number, a string, a path, True/False "
        f"or a list of numbers, not {type(value).__name__}"
    )


def _argv(train: Any, test: Any, options: dict[str, Any]) -> list[str]:
    """The ``fisherkit run`` arguments of ``run(train, test, **options)``."""
    args: list[str] = []
    for name, path in (("train", train), ("test", test)):
        if path is not None:
            args += [f"--{name}", _text(name, path)]
    for name, value in options.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"unknown option {name!r}: options are fisherkit run's long flags with underscores")
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"option {name}: the list is empty")
            args += [flag, ",".join(_text(name, v) for v in value)]
        else:
            args += [flag, _text(name, value)]
    return args


def _check(e: ValueError) -> ValueError:
    """clap's message for an unknown flag, in the Python option's name."""
    m = re.search(r"unexpected argument '--([a-z0-9-]+)'", str(e))
    if m:
        name = m.group(1).replace("-", "_")
        return ValueError(f"unknown option {name!r} (fisherkit run has no --{m.group(1)}); see fisherkit run --help")
    return e


def run(train: Any = None, test: Any = None, *, verbose: bool = False, **options: Any) -> dict:
    """Runs the pipeline (``fisherkit run``) and returns its report as a dict.

    ``train``/``test``: image folders ``DIR/<class>/*.jpg|png`` (or pass
    ``train_descriptors=``/``test_descriptors=`` descriptor files instead).
    ``verbose``: progress and results on stderr. ``options``: see the module
    docstring. The GIL is released while the run computes.

    Raises ``ValueError`` for an unknown option, a bad value, an unreadable
    folder, or any failure of the run (the message names it), ``TypeError``
    for a value of the wrong type.

    Examples
    --------
    >>> report = run("data/fashion-mnist-demo/train", "data/fashion-mnist-demo/test",
    ...              scales=[28], pca_dim=20, encoders="gmm-fv:var",
    ...              gmm_components=4, no_cache=True)     # doctest: +SKIP
    >>> sorted(report)                                     # doctest: +SKIP
    ['config', 'dataset', 'fisherkit_version', 'peak_rss_mb', 'results', 'sweep', 'timings']
    """
    args = _argv(train, test, options)
    try:
        text = _fisherkit.pipeline_run(args, bool(verbose))
    except ValueError as e:
        raise _check(e) from None
    return json.loads(text)
