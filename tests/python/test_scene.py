"""fisherkit.SceneClassifier and fisherkit.ray.predict: a classifier trained
from Python or saved by `fisherkit run --save-model` gives the labels the
command line gives, from paths, arrays and bytes, and on Ray."""

import csv
import io
import json
import subprocess

import numpy as np
import pytest

import fisherkit
from conftest import peer
from pipeline_data import CLASSES, cli_binary, make_set

SMALL = dict(
    scales=[28],
    pca_dim=12,
    encoders="gmm-fv:var,mfa-fs:loading",
    gmm_components=3,
    mfa_components=2,
    mfa_factors=2,
    c_grid=[0.1, 1],
    cv_folds=2,
    sample_images=24,
)


# SMALL as SceneClassifier parameters (the rest of the run's options in `options`).
PARAMS = {k: v for k, v in SMALL.items() if k not in ("cv_folds", "sample_images")}
PARAMS["options"] = {"cv_folds": 2, "sample_images": 24}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return make_set(tmp_path_factory.mktemp("scene"))


@pytest.fixture(scope="module")
def cli_model(images, tmp_path_factory):
    """A classifier saved by the command line, its run report and its CLI predictions."""
    train, test = images
    out = tmp_path_factory.mktemp("cli")
    model = out / "scene.safetensors"
    args = []
    for k, v in SMALL.items():
        args += ["--" + k.replace("_", "-"), ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    subprocess.run(
        [cli_binary(), "--quiet", "run", "--train", str(train), "--test", str(test), "--no-cache",
         "--save-model", str(model), "--report", str(out / "r.json"), *args],
        check=True, capture_output=True,
    )
    pred = subprocess.run([cli_binary(), "predict", "--model", str(model), str(test)],
                          check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(pred)))
    return model, json.loads((out / "r.json").read_text()), rows


def test_a_cli_classifier_labels_paths_and_arrays_as_the_cli(images, cli_model):
    _, test = images
    model, report, rows = cli_model
    clf = fisherkit.SceneClassifier.load(model)
    assert list(clf.classes_) == list(CLASSES)
    paths = [r["path"] for r in rows]
    got = clf.predict(paths)
    assert list(got) == [r["label"] for r in rows]
    # the run's own test predictions and accuracy
    want = [CLASSES[k] for k in report["model"]["test_predictions"]]
    assert list(got) == want
    truth = [p.split("/")[-2] for p in paths]
    acc = np.mean([np.mean(got[np.array(truth) == c] == c) for c in CLASSES])
    assert acc == pytest.approx(report["model"]["test_accuracy"], abs=1e-12)
    # scores: the CLI's, to its 6 printed decimals
    scores = clf.decision_function(paths)
    assert scores.shape == (len(paths), 3)
    best = scores[np.arange(len(paths)), [CLASSES.index(g) for g in got]]
    np.testing.assert_allclose(best, [float(r["score"]) for r in rows], atol=1e-6)
    # arrays decoded from the files give the same labels
    PIL = peer("PIL.Image")
    arrays = [np.asarray(PIL.open(p).convert("RGB")) for p in paths[:4]]
    assert list(clf.predict(arrays)) == list(got[:4])
    feats = clf.transform(paths[:3])
    assert feats.shape == (3, clf.n_features_) and feats.dtype == np.float32
    # load_model dispatches on the kind
    assert type(fisherkit.load_model(model)) is fisherkit.SceneClassifier


def test_fit_save_load_round_trip_with_integer_labels(images, tmp_path):
    train, test = images
    paths, y = [], []
    for k, c in enumerate(CLASSES):
        files = sorted((train / c).glob("*.png"))
        paths += files
        y += [10 * k + 5] * len(files)  # integer labels that do not sort as strings
    clf = fisherkit.SceneClassifier(**PARAMS, model_encoder="mfa-fs:loading").fit(paths, y)
    assert list(clf.classes_) == [5, 15, 25]
    assert clf.encoder_ == "mfa-fs:loading"
    test_paths = sorted(test.rglob("*.png"))
    pred = clf.predict(test_paths)
    assert set(pred) <= {5, 15, 25}
    assert clf.score(test_paths, [10 * CLASSES.index(p.parent.name) + 5 for p in test_paths]) > 0.5
    clf.save(tmp_path / "m.safetensors")
    back = fisherkit.SceneClassifier.load(tmp_path / "m.safetensors")
    assert list(back.classes_) == [5, 15, 25]
    np.testing.assert_array_equal(back.predict(test_paths), pred)
    # the saved file is the command line's too
    out = subprocess.run([cli_binary(), "predict", "--model", str(tmp_path / "m.safetensors"),
                          *map(str, test_paths)], check=True, capture_output=True, text=True).stdout
    assert [r["label"] for r in csv.DictReader(io.StringIO(out))] == [str(p) for p in pred]


def test_from_folder_and_bad_inputs(images, tmp_path):
    train, test = images
    clf = fisherkit.SceneClassifier.from_folder(train, test, **PARAMS)
    assert list(clf.classes_) == list(CLASSES)
    assert clf.fit_report_["model"]["encoder"] in ("gmm-fv:var", "mfa-fs:loading")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="bad.png"):
        clf.predict([bad])
    with pytest.raises(TypeError, match="list of image paths"):
        clf.predict(str(bad))
    with pytest.raises(fisherkit.NotFittedError):
        fisherkit.SceneClassifier().predict([bad])
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        fisherkit.SceneClassifier.load(tmp_path / "nope.safetensors")
    with pytest.raises(ValueError, match="at least 2 classes"):
        fisherkit.SceneClassifier(**PARAMS).fit(sorted(train.rglob("*.png"))[:3], ["a"] * 3)
    cut = tmp_path / "cut.safetensors"
    clf.save(tmp_path / "whole.safetensors")
    data = (tmp_path / "whole.safetensors").read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.safetensors"):
        fisherkit.SceneClassifier.load(cut)


def test_ray_predict_gives_the_cli_labels(ray_local, images, cli_model, tmp_path):
    ray = ray_local
    peer("pandas")
    peer("pyarrow")
    model, _, rows = cli_model
    import fisherkit.ray as fkray

    ds = ray.data.from_items([{"path": r["path"]} for r in rows] + [{"path": str(tmp_path / "missing.png")}])
    out = fkray.predict(ds, model, batch_size=4).take_all()
    by_path = {o["path"]: o for o in out}
    for r in rows:
        assert by_path[r["path"]]["label"] == r["label"]
        assert by_path[r["path"]]["score"] == pytest.approx(float(r["score"]), abs=1e-6)
        assert by_path[r["path"]]["error"] == ""
    miss = by_path[str(tmp_path / "missing.png")]
    assert miss["label"] == "" and "missing.png" in miss["error"]
    # encoded bytes (read_binary_files) give the same labels
    ds = ray.data.read_binary_files([r["path"] for r in rows], include_paths=True)
    out = fkray.predict(ds, model, batch_size=4).take_all()
    assert sorted((o["path"].split("/")[-1], o["label"]) for o in out) == sorted(
        (r["path"].split("/")[-1], r["label"]) for r in rows)


# The scikit-learn estimator checks that apply to an estimator of images: the
# others fit on random (n, d) float matrices, which are not images (issue 30).
SKLEARN_CHECKS = (
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_no_attributes_set_in_init",
    "check_estimators_unfitted",
    "check_estimator_repr",
    "check_estimator_cloneable",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_mixin_order",
)


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
def test_the_sklearn_checks_that_apply_to_image_inputs(check):
    checks = peer("sklearn.utils.estimator_checks")
    fn = getattr(checks, check, None)
    if fn is None:
        pytest.skip(f"this scikit-learn has no {check}")
    fn("SceneClassifier", fisherkit.SceneClassifier())
