"""SUN397-shaped benchmark data: scripts/make_sun397_descriptors.py (descriptor files in the
stacked layout of docs/formats.md §4: format, streaming zip, determinism, --fraction, planted
and learnable class structure) and the 397-class definitions of scripts/make_object_scenes.py
(--shape sun397). Small sizes only: runs in a few seconds."""

import importlib
import os
import sys
import zipfile

import pytest

np = pytest.importorskip("numpy")

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
TINY = ["--classes", "5", "--train-per-class", "4", "--test-per-class", "3", "--dim", "16"]


def load_script(name):
    """A script of scripts/ as a module."""
    sys.path.insert(0, SCRIPTS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(SCRIPTS)


@pytest.fixture(scope="module")
def g():
    return load_script("make_sun397_descriptors")


def generate(g, out, *args):
    g.main(["--out", str(out), *args])
    return out


def read(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_format_is_the_stacked_descriptor_file(g, tmp_path, capsys):
    out = generate(g, tmp_path / "a", *TINY, "--check")
    assert "CHECK FAILED" not in capsys.readouterr().out
    for split, per in (("train", 4), ("test", 3)):
        path = out / f"{split}.npz"
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            assert [i.filename for i in infos] == ["descriptors.npy", "image_index.npy", "labels.npy"]
            assert all(i.compress_type == zipfile.ZIP_STORED and i.date_time == g.ZIP_DATE for i in infos)
        a = read(path)
        x, idx, labels = a["descriptors"], a["image_index"], a["labels"]
        assert x.dtype == np.float32 and x.ndim == 2 and x.shape[1] == 16 and x.flags.c_contiguous
        assert idx.dtype == np.int32 and idx.shape == (x.shape[0],)
        assert labels.dtype.kind == "U"
        assert labels.tolist() == [f"scene_{k:02d}" for k in range(5) for _ in range(per)]
        counts = np.bincount(idx, minlength=len(labels))
        assert len(counts) == len(labels) and np.all(np.diff(idx) >= 0)
        assert counts.min() >= 80 and counts.max() <= 120 and len(set(counts.tolist())) > 1
        # log-probability rows: finite, <= 0, exponentials summing to one
        assert np.isfinite(x).all() and x.max() <= 1e-5
        np.testing.assert_allclose(np.exp(x.astype(np.float64)).sum(1), 1.0, atol=1e-4)


def test_deterministic_seeded_and_fraction_is_a_prefix(g, tmp_path):
    a = generate(g, tmp_path / "a", *TINY)
    b = generate(g, tmp_path / "b", *TINY)
    c = generate(g, tmp_path / "c", *TINY, "--seed", "1")
    half = generate(g, tmp_path / "half", *TINY, "--fraction", "0.5")
    for split in ("train", "test"):
        assert (a / f"{split}.npz").read_bytes() == (b / f"{split}.npz").read_bytes()
        assert (a / f"{split}.npz").read_bytes() != (c / f"{split}.npz").read_bytes()
    full, part = read(a / "train.npz"), read(half / "train.npz")  # 4 -> 2 images per class
    assert len(part["labels"]) == 5 * 2
    for k in range(5):
        for i in range(2):
            rows_full = full["descriptors"][full["image_index"] == 4 * k + i]
            rows_part = part["descriptors"][part["image_index"] == 2 * k + i]
            np.testing.assert_array_equal(rows_full, rows_part)


def test_class_structure_is_learnable_but_not_trivial(g, tmp_path):
    """Nearest class mean of the bag means, 20 classes: measured 0.18 (chance 0.05)."""
    out = generate(g, tmp_path / "l", "--classes", "20", "--train-per-class", "20", "--test-per-class", "20",
                   "--dim", "32")

    def bag_means(path):
        a = read(path)
        n = len(a["labels"])
        sums = np.zeros((n, a["descriptors"].shape[1]))
        np.add.at(sums, a["image_index"], a["descriptors"].astype(np.float64))
        return sums / np.bincount(a["image_index"], minlength=n)[:, None], a["labels"]

    xtr, ytr = bag_means(out / "train.npz")
    xte, yte = bag_means(out / "test.npz")
    classes = np.unique(ytr)
    centres = np.stack([xtr[ytr == c].mean(0) for c in classes])
    pred = classes[((xte[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)]
    accuracy = float((pred == yte).mean())
    assert 0.12 <= accuracy <= 0.95, accuracy


def test_class_definitions_are_distinct(g):
    m = g.build_model(397, 16, g.default_prototypes(397), 0)
    assert m["weights"].shape == (397, 198)
    np.testing.assert_allclose(m["weights"].sum(1), 1.0)
    assert len({tuple(c) for c in m["core"]}) == 397
    groups = np.bincount(m["group"])
    assert len(groups) == 25 and groups.min() >= 15
    # every prototype that is core somewhere is core in several classes
    uses = np.bincount([j for c in m["core"] for j in c], minlength=198)
    assert np.median(uses[uses > 0]) >= 4


def test_object_scenes_sun397_shape():
    pytest.importorskip("PIL")
    m = load_script("make_object_scenes")
    a = m.parse_args(["--out", "x", "--shape", "sun397"])
    assert (a.classes, a.train_per_class, a.test_per_class) == (397, 50, 50)
    a = m.parse_args(["--out", "x", "--shape", "sun397", "--test-per-class", "7"])
    assert (a.classes, a.train_per_class, a.test_per_class) == (397, 50, 7)
    a = m.parse_args(["--out", "x"])
    assert (a.classes, a.train_per_class, a.test_per_class) == (67, 80, 20)
    classes = m.generate_classes(397, 0)
    counts = m.check_classes(classes)
    names = [d["name"] for d in classes]
    assert names == sorted(names) == [f"scene_{k:03d}" for k in range(397)]
    assert min(counts.values()) >= 150, counts
    assert max(m.class_posterior_given_category(classes).values()) < 0.03
    assert m.generate_classes(67, 0)[-1]["name"] == "scene_66"
