"""A tiny image data set (3 classes of the bundled Fashion-MNIST demo) and the
`fisherkit` binary, shared by the pipeline tests."""

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "fashion-mnist-demo"
CLASSES = ("bag", "sandal", "trouser")

# Small settings that still run every stage (sample, PCA, GMM, MFA, encode, SVM).
OPTIONS = dict(
    scales=[28, 20],
    pca_dim=12,
    encoders="cnn-global,gmm-fv:var,mfa-fs:loading,mfa-fs:loading&cnn-global",
    gmm_components=3,
    gmm_max_iter=10,
    mfa_components=2,
    mfa_factors=2,
    mfa_max_iter=5,
    sample_images=12,
    pca_sample=2000,
    model_sample=1500,
    c_grid=[0.1, 1, 10],
    cv_folds=2,
    seed=5,
)


def make_set(root: Path, n_train: int = 8, n_test: int = 4) -> tuple[Path, Path]:
    """root/train/<class>/*.png and root/test/<class>/*.png from the demo set."""
    for split, n in (("train", n_train), ("test", n_test)):
        for c in CLASSES:
            dst = root / split / c
            dst.mkdir(parents=True, exist_ok=True)
            for f in sorted((DEMO / split / c).iterdir())[:n]:
                shutil.copy(f, dst / f.name)
    return root / "train", root / "test"


def cli_args(options: dict) -> list[str]:
    """The command-line flags of the Python options (the documented mapping)."""
    args = []
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif isinstance(v, (list, tuple)):
            args += [flag, ",".join(str(x) for x in v)]
        else:
            args += [flag, str(v)]
    return args


def cli_binary() -> str:
    """The `fisherkit` binary the Rust tests built (scripts/test.sh builds it first)."""
    env = os.environ.get("FISHERKIT_BIN")
    for p in [env] if env else [ROOT / "target" / "debug" / "fisherkit", ROOT / "target" / "release" / "fisherkit"]:
        if p and Path(p).is_file():
            return str(p)
    if os.environ.get("FISHERKIT_REQUIRE_PEERS") == "1":
        pytest.fail("the fisherkit binary is not built (cargo build -p fisherkit-cli)")
    pytest.skip("the fisherkit binary is not built (cargo build -p fisherkit-cli)")


def comparable(report: dict) -> dict:
    """What must agree between two runs of the same settings: every result
    row but its timings, the sweep, the data set."""
    rows = [
        {k: v for k, v in r.items() if not k.endswith("_seconds")}
        for r in report["results"]
    ]
    return {"results": rows, "sweep": report["sweep"], "classes": report["dataset"]["classes"],
            "n": (report["dataset"]["n_train"], report["dataset"]["n_test"]),
            "pca_dims": report["dataset"]["pca_dims"]}
