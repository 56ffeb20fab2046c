"""scripts/make_object_scenes.py: the folder layout, image sizes and format, determinism,
the train/test split of the source objects, --fraction, and that no single object category
identifies a class. Needs Debian's dataset-fashion-mnist: skipped without it, failed
without it under FISHERKIT_REQUIRE_PEERS=1."""

import importlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
SCRIPT = os.path.join(SCRIPTS, "make_object_scenes.py")
TINY = ["--classes", "4", "--train-per-class", "3", "--test-per-class", "2", "--min-side", "64", "--max-side", "96"]


@pytest.fixture(scope="module")
def m():
    """The script as a module (its directory on sys.path for make_fashion_subset)."""
    sys.path.insert(0, SCRIPTS)
    try:
        mod = importlib.import_module("make_object_scenes")
    finally:
        sys.path.remove(SCRIPTS)
    return mod


@pytest.fixture(scope="module")
def source(m):
    """Skips (fails under FISHERKIT_REQUIRE_PEERS=1) without the Debian Fashion-MNIST files."""
    if not m.source_available():
        msg = f"Fashion-MNIST files missing in {m.SRC}; apt-get install {m.SOURCE_PACKAGE}"
        if os.environ.get("FISHERKIT_REQUIRE_PEERS") == "1":
            pytest.fail(msg + " [FISHERKIT_REQUIRE_PEERS=1]")
        pytest.skip(msg)
    return {split: m.load_split(split) for split in m.SOURCE_FILES}


def generate(out, *args):
    """Runs the script; returns the output folder."""
    subprocess.run([sys.executable, SCRIPT, "--out", str(out), *TINY, *args], check=True, capture_output=True)
    return out


def files(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


@pytest.fixture(scope="module")
def runs(source, tmp_path_factory):
    """Seed 3 twice (2 jobs, then 1 job), seed 4 once, and seed 3 at --fraction 0.5."""
    base = tmp_path_factory.mktemp("scenes")
    return {
        "a": generate(base / "a", "--seed", "3", "--jobs", "2"),
        "b": generate(base / "b", "--seed", "3", "--jobs", "1"),
        "c": generate(base / "c", "--seed", "4", "--jobs", "2"),
        "half": generate(base / "half", "--seed", "3", "--fraction", "0.5"),
    }


def test_layout(runs):
    out = runs["a"]
    meta = json.loads((out / "classes.json").read_text())
    names = [d["name"] for d in meta["classes"]]
    assert len(names) == 4 and len(set(names)) == 4
    for split, n in (("train", 3), ("test", 2)):
        assert sorted(os.listdir(out / split)) == sorted(names)
        for name in names:
            assert sorted(os.listdir(out / split / name)) == [f"{i:04d}.jpg" for i in range(n)]
    assert meta["images_per_class"] == {"train": 3, "test": 2}
    assert meta["options"]["seed"] == 3
    for f in ("classes.json", "manifest-train.json", "manifest-test.json", "LICENSE", "README.md"):
        assert (out / f).is_file()


def test_images_are_rgb_jpegs_within_bounds(runs):
    from PIL import Image

    sizes = set()
    for rel, data in files(runs["a"]).items():
        if not rel.endswith(".jpg"):
            continue
        im = Image.open(io.BytesIO(data))
        assert im.format == "JPEG" and im.mode == "RGB", rel
        im.load()
        assert 64 <= im.width <= 96 and 64 <= im.height <= 96, (rel, im.size)
        assert np.asarray(im).std() > 3, f"{rel} is flat"
        sizes.add(im.size)
    assert len(sizes) > 1, "canvas sizes do not vary"


def test_deterministic_and_seeded(runs):
    a, b, c = files(runs["a"]), files(runs["b"]), files(runs["c"])
    assert a.keys() == b.keys()
    for rel in a:
        assert a[rel] == b[rel], f"{rel} differs between two runs with the same seed (--jobs 2 vs 1)"
    jpgs = [r for r in a if r.endswith(".jpg")]
    assert all(a[r] != c[r] for r in jpgs), "another seed wrote an identical image"
    assert a["classes.json"] != c["classes.json"]


def test_fraction_is_a_prefix_of_the_full_set(runs):
    full, half = files(runs["a"]), files(runs["half"])
    jpgs = sorted(r for r in half if r.endswith(".jpg"))
    assert len(jpgs) == 4 * (2 + 1)  # round(3 / 2) = 2 train, round(2 / 2) = 1 test per class
    for r in jpgs:
        assert half[r] == full[r], r


def test_objects_come_from_their_own_split(m, source, runs):
    out = runs["a"]
    meta = json.loads((out / "classes.json").read_text())
    by_name = {d["name"]: (k, d) for k, d in enumerate(meta["classes"])}
    for split, n_source in (("train", 60000), ("test", 10000)):
        lab = source[split][1]
        assert len(lab) == n_source and len(source[split][0]) == n_source
        man = json.loads((out / f"manifest-{split}.json").read_text())
        assert man["split"] == split
        assert man["source_file"].startswith(m.SOURCE_FILES[split] + "-")
        assert len(man["scenes"]) == 4 * (3 if split == "train" else 2)
        n_obj = 0
        for scene in man["scenes"]:
            assert scene["file"].startswith(split + "/") and (out / scene["file"]).is_file()
            lo, hi = by_name[scene["class"]][1]["count_range"]
            assert lo <= len(scene["objects"]) <= hi
            for index, cat, x0, y0, size in scene["objects"]:
                assert 0 <= index < n_source
                # The recorded category is the label of that index in THIS split's file: with
                # dozens of objects, indices into the other file would not keep matching.
                assert lab[index] == cat, (split, scene["file"], index)
                assert 0 <= x0 <= scene["width"] - size and 0 <= y0 <= scene["height"] - size
                n_obj += 1
        assert n_obj >= 4 * 3 * 2
        # The file is exactly what rendering this split's source objects gives; the same
        # indices into the other split's file would give another image.
        own_images, own_labels = source[split]
        by_cat = [np.flatnonzero(own_labels == c) for c in range(10)]
        scene = man["scenes"][-1]
        k, d = by_name[scene["class"]]
        i = int(os.path.basename(scene["file"])[:4])
        img, objects = m.render_scene(d, m.scene_rng(3, split, k, i), own_images, by_cat, 64, 96)
        assert objects == scene["objects"]
        assert m.jpeg_bytes(img) == (out / scene["file"]).read_bytes()
        other_images = source["test" if split == "train" else "train"][0]
        if max(o[0] for o in objects) < len(other_images):
            img_other, _ = m.render_scene(d, m.scene_rng(3, split, k, i), other_images, by_cat, 64, 96)
            assert m.jpeg_bytes(img_other) != (out / scene["file"]).read_bytes()


def check_definitions(m, classes, min_classes):
    """Probabilities, core sets, unique signatures, and each category core in >= min_classes."""
    for d in classes:
        p = d["category_probabilities"]
        assert abs(sum(p.values()) - 1) < 1e-4 and all(v > 0 for v in p.values())
        core = [c for c, v in p.items() if v >= m.NONTRIVIAL]
        assert sorted(core) == d["core_categories"] and len(core) >= 3, d["name"]
        assert max(p.values()) < 0.6, f"{d['name']} is dominated by one category"
        lo, hi = d["count_range"]
        assert 1 <= lo < hi
        s_lo, s_hi = d["size_range"]
        assert m.OBJECT_MIN_PX <= s_lo < s_hi <= m.OBJECT_MAX_PX
        assert d["layout"]["name"] in m.LAYOUTS
    sigs = [(tuple(d["core_categories"]), d["layout"]["name"]) for d in classes]
    assert len(set(sigs)) == len(sigs)
    counts = m.category_class_counts(classes)
    assert all(n >= min_classes for n in counts.values()), counts
    return counts


def test_no_single_category_identifies_a_class(m, runs):
    # The default, paper-sized definitions (67 classes), for a few seeds.
    for seed in (0, 1, 2):
        classes = m.generate_classes(67, seed)
        counts = check_definitions(m, classes, min_classes=m.MIN_CLASSES_PER_CATEGORY)
        assert min(counts.values()) >= 20, counts  # in fact each category is core in ~27 classes
        posterior = m.class_posterior_given_category(classes)
        assert max(posterior.values()) < 0.25, posterior  # one object's category: a weak clue
        layouts = [d["layout"]["name"] for d in classes]
        assert min(layouts.count(name) for name in m.LAYOUTS) >= 5  # nor does a layout
    # The seeded definitions are the ones written to classes.json, and they are seeded.
    meta = json.loads((runs["a"] / "classes.json").read_text())
    assert meta["classes"] == m.generate_classes(4, 3)
    assert m.generate_classes(4, 3) != m.generate_classes(4, 4)
    counts = check_definitions(m, meta["classes"], min_classes=m.required_classes_per_category(meta["classes"]))
    assert meta["classes_per_category"] == counts
