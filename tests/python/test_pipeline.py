"""fisherkit.pipeline.run and fisherkit.cnn.Descriptors against the
`fisherkit` command line on the same images and settings."""

import json
import subprocess

import numpy as np
import pytest

import fisherkit.cnn
import fisherkit.pipeline
from conftest import peer
from pipeline_data import OPTIONS, cli_args, cli_binary, comparable, make_set


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return make_set(tmp_path_factory.mktemp("pipe"))


@pytest.fixture(scope="module")
def cli_report(images, tmp_path_factory):
    train, test = images
    out = tmp_path_factory.mktemp("cli")
    subprocess.run(
        [cli_binary(), "--quiet", "run", "--train", str(train), "--test", str(test),
         "--cache", str(out / "cache"), "--report", str(out / "report.json"),
         "--save-descriptors", str(out / "desc"), *cli_args(OPTIONS)],
        check=True, capture_output=True,
    )
    return json.loads((out / "report.json").read_text()), out


def test_python_run_gives_the_cli_report(images, cli_report, tmp_path):
    train, test = images
    report = fisherkit.pipeline.run(train, test, cache=tmp_path / "cache", **OPTIONS)
    assert set(report) == set(cli_report[0])
    assert comparable(report) == comparable(cli_report[0])
    # per-scale rows exist, and the accuracies are real numbers of a real run
    assert {r["scale"] for r in report["results"]} == {None, "28", "20"}
    assert all(0 <= r["accuracy"] <= 1 for r in report["results"])
    # a second call reuses the run folder and gives the same numbers
    again = fisherkit.pipeline.run(train, test, cache=tmp_path / "cache", report=tmp_path / "r.json", **OPTIONS)
    assert comparable(again) == comparable(report)
    assert comparable(json.loads((tmp_path / "r.json").read_text())) == comparable(report)
    # both reports record the same whole configuration (but where they wrote to)
    cli_config = cli_report[0]["config"]
    for c in (cli_config, report["config"]):
        c["output"].update(cache=None, report=None, save_descriptors=None)
    assert report["config"] == cli_config
    # and a run repeats from its report's configuration
    repeat = fisherkit.pipeline.run(config=tmp_path / "r.json", cache=tmp_path / "cache", report=None)
    assert comparable(repeat) == comparable(report)


def test_python_builds_the_configuration_the_cli_prints(images, tmp_path):
    train, test = images
    options = dict(OPTIONS, whitening="both", store="q8", classifier="primal", compact_pca=5, power=0.75)
    got = fisherkit.pipeline.config(train, test, **options)
    printed = subprocess.run(
        [cli_binary(), "run", "--train", str(train), "--test", str(test), "--print-config", *cli_args(options)],
        check=True, capture_output=True, text=True,
    ).stdout
    assert got == json.loads(printed)
    assert got["pca"]["pca_dim"] == OPTIONS["pca_dim"] and got["svm"]["classifier"] == "primal"
    # a JSON round trip: the file the CLI reads gives the same configuration back
    path = tmp_path / "run.json"
    path.write_text(printed)
    assert fisherkit.pipeline.config(config=path) == got
    assert fisherkit.pipeline.config(config=got) == got
    again = subprocess.run([cli_binary(), "run", "--config", str(path), "--print-config"],
                           check=True, capture_output=True, text=True).stdout
    assert json.loads(again) == got
    # options override the base configuration, a nested group at once too
    over = fisherkit.pipeline.config(config=got, seed=11, models={"gmm_components": 7})
    assert (over["seed"], over["models"]["gmm_components"]) == (11, 7)
    assert over["pca"] == got["pca"]


def test_descriptors_are_the_rows_the_cli_saves(images, cli_report):
    train, _ = images
    saved = np.load(cli_report[1] / "desc" / "train.npz")
    paths = sorted(p for p in train.rglob("*.png"))
    enc = fisherkit.cnn.Descriptors(scales=OPTIONS["scales"])
    got = enc.fit_transform(paths[:5])
    for p, d in zip(paths[:5], got):
        ref = saved[f"{p.parent.name}/{p.name}"]
        assert d.dtype == np.float32 and d.shape == ref.shape
        np.testing.assert_allclose(d, ref, atol=1e-5)
    # decoded arrays give the rows of the files they came from
    PIL = peer("PIL.Image")
    arrays = [np.asarray(PIL.open(p).convert("RGB")) for p in paths[:2]]
    for a, d in zip(enc.transform(arrays), got[:2]):
        np.testing.assert_allclose(a, d, atol=1e-5)
    both = fisherkit.cnn.Descriptors(scales=[28], global_descriptor=True).transform(paths[:1])
    rows, g = both[0]
    assert rows.shape[1] == g.shape[0] == 1000
    np.testing.assert_allclose(np.exp(g).sum(), 1.0, rtol=1e-4)


def test_bad_options_and_inputs_are_named(images, tmp_path):
    train, test = images
    with pytest.raises(ValueError, match="unknown option `pca_dims` .fisherkit run has no --pca-dims"):
        fisherkit.pipeline.run(train, test, pca_dims=3, no_cache=True)
    with pytest.raises(ValueError, match="nowhere"):
        fisherkit.pipeline.run(tmp_path / "nowhere", test, no_cache=True)
    with pytest.raises(ValueError, match="pca-dim"):
        fisherkit.pipeline.run(train, test, pca_dim="many", no_cache=True)
    with pytest.raises(ValueError, match=r"option scales \(--scales\)"):
        fisherkit.pipeline.run(train, test, scales={28: 1}, no_cache=True)
    with pytest.raises(TypeError, match="option scales"):
        fisherkit.pipeline.run(train, test, scales=[object()], no_cache=True)
    # what a new user tried (issue 30): each gets one message naming the problem
    with pytest.raises(ValueError, match=r"save_encodings.*needs an output folder \(output_dir, --output-dir\)"):
        fisherkit.pipeline.run(train, test, save_encodings=True, no_cache=True)
    with pytest.raises(ValueError, match=r"option seed \(--seed\).*-1"):
        fisherkit.pipeline.run(train, test, seed=-1, no_cache=True)
    with pytest.raises(ValueError, match="unknown option `help`"):
        fisherkit.pipeline.run(help=True)
    with pytest.raises(ValueError, match="folds"):
        fisherkit.pipeline.run(train, test, cv_folds=1, no_cache=True, **{k: v for k, v in OPTIONS.items() if k != "cv_folds"})
    enc = fisherkit.cnn.Descriptors(scales=[28])
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png"):
        enc.transform([broken])
    with pytest.raises(ValueError, match=r"image 0 has shape \[10, 10, 2\]"):
        enc.transform([np.zeros((10, 10, 2), np.uint8)])
    with pytest.raises(TypeError, match="image 0"):
        enc.transform([3])
    with pytest.raises(ValueError, match="patch_mode"):
        fisherkit.cnn.Descriptors(patch_mode="sparse").transform([np.zeros((30, 30, 3), np.uint8)])


def test_array_conventions_give_the_rows_of_the_file(images, tmp_path):
    # uint8 0-255, float 0-1 (scikit-image's convention), grey (H, W) and
    # (H, W, 1), RGBA: each gives the descriptors of the PNG file it came from.
    PIL = peer("PIL.Image")
    train, _ = images
    grey_path = sorted(train.rglob("*.png"))[0]  # the demo's pictures are grey
    grey = np.asarray(PIL.open(grey_path).convert("L"))
    assert grey.std() > 0
    # a colour picture made from it, written as an RGB PNG
    rgb = np.dstack([grey, grey // 2, 255 - grey]).astype(np.uint8)
    path = tmp_path / "colour.png"
    PIL.fromarray(rgb).save(path)
    enc = fisherkit.cnn.Descriptors(scales=[28])
    (from_file,) = enc.transform([path])
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 9, np.uint8)])
    arrays = [rgb, rgb / 255.0, (rgb / 255.0).astype(np.float32), rgba, rgb.astype(np.int64)]
    for i, d in enumerate(enc.transform(arrays)):
        np.testing.assert_allclose(d, from_file, atol=1e-4, err_msg=f"array {i}")
    (grey_file,) = enc.transform([grey_path])
    assert np.abs(grey_file - from_file).max() > 1e-3  # a different picture
    for i, d in enumerate(enc.transform([grey, grey[:, :, None], grey / 255.0, np.dstack([grey] * 3)])):
        np.testing.assert_allclose(d, grey_file, atol=1e-4, err_msg=f"grey array {i}")
    # floats outside [0, 1] are refused, naming the image, the range and the conventions
    with pytest.raises(ValueError, match=r"image 1 is a float array that has values in \[0, 255\].*uint8 arrays in 0\.\.255 or float arrays in \[0, 1\]"):
        enc.transform([rgb, rgb.astype(np.float64)])
    with pytest.raises(ValueError, match=r"image 0 is a float array that has values in \[-0\.5, 0\.5\]"):
        enc.transform([np.full((20, 20), -0.5, np.float32) + (np.arange(400) % 2).reshape(20, 20)])
    bad = (rgb / 255.0).copy()
    bad[3, 4, 1] = np.nan
    with pytest.raises(ValueError, match="image 0 is a float array that has the non-finite value NaN"):
        enc.transform([bad])
    with pytest.raises(ValueError, match=r"image 0 is an integer array \(int16\) with values in \[-1, 3\]"):
        enc.transform([np.array([[-1, 3], [0, 0]], np.int16)])


def test_an_unreadable_image_is_skipped_and_counted(images, tmp_path):
    train, test = images
    import shutil

    t2 = tmp_path / "train"
    shutil.copytree(train, t2)
    (t2 / "bag" / "zz-corrupt.png").write_bytes(b"\x89PNG broken")
    report = fisherkit.pipeline.run(t2, test, no_cache=True, **OPTIONS)
    assert [p for p, _ in report["dataset"]["skipped"]] == [str(t2 / "bag" / "zz-corrupt.png")]
    assert report["dataset"]["n_train"] == 24


def test_the_paper_pipeline_from_the_estimators(images):
    """docs/python.md: the same stages as scikit-learn objects, so that one
    can be swapped (here the SVM's C is cross-validated by scikit-learn)."""
    sk = peer("sklearn.model_selection")
    from sklearn.pipeline import make_pipeline

    train, _ = images
    paths = sorted(train.rglob("*.png"))
    y = np.array([p.parent.name for p in paths])
    bags = fisherkit.cnn.Descriptors(scales=[28]).transform(paths)
    pca = fisherkit.PCA(n_components=10).fit(np.vstack(bags))
    bags = [pca.transform(b) for b in bags]
    gmm = fisherkit.GaussianMixture(n_components=3, random_state=0).fit(np.vstack(bags))
    model = make_pipeline(fisherkit.FisherVector(gmm, parts=("var",)), fisherkit.LinearSVC(C=1.0))
    scores = sk.cross_val_score(model, bags, y, cv=2)
    assert scores.shape == (2,) and np.all(scores > 1 / 3), scores  # better than chance on 3 classes
