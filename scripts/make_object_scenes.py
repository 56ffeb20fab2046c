#!/usr/bin/env python3
"""Compose a paper-sized scene-classification benchmark from real Fashion-MNIST photos.

This is a SYNTHETIC set: every image is a photo-sized canvas (a smooth seeded
colour gradient with mild texture and noise) on which real Fashion-MNIST object
photos (Zalando Research, MIT licence; Debian package ``dataset-fashion-mnist``)
are upscaled, optionally tinted and pasted with their intensity as alpha. It is
not a set of real scenes; it stands in for MIT Indoor (67 classes, 80 training +
20 test images per class; the default, --shape mit-indoor) or SUN397 (397
classes, 50 training + 50 test images per class; --shape sun397) where real
scene data cannot be downloaded.

A scene class is a seeded, generated distribution over the 10 object categories,
the number of objects, their sizes and their placement (shelves, grid, clusters,
scattered, top- or bottom-heavy, diagonal, ring, and sizes growing or shrinking
with height). Each class has 3-5 "core" categories (the only ones with
probability >= 0.05) plus a little clutter from all the others; the core sets
are drawn so that every category is core in many classes and each layout is used
by many classes. So no single category (nor layout) identifies a class: the
class lives in the combination. Tints and backgrounds do not depend on the class.

With 397 classes (SUN397's shape) the 10 categories still give distinct
classes: 582 possible core sets (of 3, 4 or 5 categories) times 8 layouts, and
no two classes share a (core set, layout). Seed 0 gives 294 different core
sets (at most 4 classes share one, then with different layouts), every
category core in 159 classes, max P(class | one object's category) <= 0.02
(chance 0.0025), and each class's category distribution at total-variation
distance >= 0.078 from every other (median nearest 0.19; 67 classes: >= 0.097,
median 0.25). So SUN397-shaped classes are more confusable than the 67, as
SUN397's are: fine-grained classes differ in layout and object proportions more
than in which objects occur. Class names are zero-padded to the width of the
largest number (scene_00 … scene_66, scene_000 … scene_396) so that text order,
fisherkit's class order, is number order.

Training scenes take objects only from the Fashion-MNIST training file, test
scenes only from the t10k (test) file. Output::

    OUT/train/<class>/<nnnn>.jpg    OUT/test/<class>/<nnnn>.jpg   (RGB JPEG, quality 90)
    OUT/classes.json                 the generated class definitions, seed and options
    OUT/manifest-train.json          per scene: size and objects [index, category, x, y, size]
    OUT/manifest-test.json           (index = position in the split's source file)
    OUT/LICENSE, OUT/README.md

Deterministic: every scene has its own generator seeded by (seed, split, class,
image number), so the same seed and options give byte-identical files whatever
--jobs is, and a --fraction set is a prefix of the full set (same files).

    python3 scripts/make_object_scenes.py --out /work/scenes                  # 67 x (80 + 20)
    python3 scripts/make_object_scenes.py --out /work/scenes-quarter --fraction 0.25
    python3 scripts/make_object_scenes.py --out /work/sun397-scenes --shape sun397   # 397 x (50 + 50)
    fisherkit run --train /work/scenes/train --test /work/scenes/test --report report.json
"""

import argparse
import io
import json
import math
import multiprocessing
import os
import shutil
import sys
import time

import numpy as np
from PIL import Image

from make_fashion_subset import CLASSES as CATEGORIES
from make_fashion_subset import LICENSE_TEXT, SOURCE_PACKAGE, SOURCE_VERSION, SRC, read_idx

SOURCE_FILES = {"train": "train", "test": "t10k"}  # output split -> source file prefix
SPLIT_CODE = {"train": 1, "test": 2}  # part of each scene's seed
LAYOUTS = ["shelves", "grid", "clusters", "scattered", "top-heavy", "bottom-heavy", "diagonal", "ring"]
NONTRIVIAL = 0.05  # a category with at least this probability in a class is "core" there
MIN_CLASSES_PER_CATEGORY = 3  # every category must be core in at least this many classes
CORE_SIZES = (3, 4, 5)
OBJECT_MIN_PX, OBJECT_MAX_PX = 40, 160  # nominal object sizes (clamped to half the short side)
JPEG_QUALITY = 90
DEFAULTS = dict(classes=67, train_per_class=80, test_per_class=20, seed=0, min_side=384, max_side=512, fraction=1.0)
# --shape presets: the class and image counts of the benchmark a set stands in for.
SHAPES = {
    "mit-indoor": dict(classes=67, train_per_class=80, test_per_class=20),
    "sun397": dict(classes=397, train_per_class=50, test_per_class=50),
}


# --------------------------------------------------------------------------- source data


def load_split(split):
    """(images (n, 28, 28) uint8, labels (n,) uint8) of one Fashion-MNIST file ("train" or "test")."""
    prefix = SOURCE_FILES[split]
    (n, h, w), pixels = read_idx(os.path.join(SRC, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    (nl,), labels = read_idx(os.path.join(SRC, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    if n != nl or len(pixels) != n * h * w or len(labels) != n:
        sys.exit(f"{split}: inconsistent image/label files")
    return np.frombuffer(pixels, np.uint8).reshape(n, h, w), np.frombuffer(labels, np.uint8)


def source_available():
    """True when the Debian dataset files this script reads are all present."""
    return all(
        os.path.isfile(os.path.join(SRC, f"{p}-{kind}-ubyte.gz"))
        for p in SOURCE_FILES.values()
        for kind in ("images-idx3", "labels-idx1")
    )


# --------------------------------------------------------------------------- class definitions


def _least_used(rng, usage, k):
    """k distinct keys of `usage` with the smallest counts, ties broken at random."""
    keys = list(usage)
    jitter = rng.random(len(keys))
    order = sorted(range(len(keys)), key=lambda i: (usage[keys[i]], jitter[i]))
    return [keys[i] for i in order[:k]]


def _layout_params(rng, layout):
    """The class-level parameters of a layout (per-scene randomness is drawn later)."""
    if layout == "shelves":
        return {"rows": int(rng.integers(2, 5)), "jitter": round(float(rng.uniform(0.01, 0.04)), 3)}
    if layout == "grid":
        return {"jitter": round(float(rng.uniform(0.01, 0.05)), 3)}
    if layout == "clusters":
        return {"clusters": int(rng.integers(1, 4)), "spread": round(float(rng.uniform(0.06, 0.14)), 3)}
    if layout == "top-heavy":
        return {"beta": [1.2, round(float(rng.uniform(2.5, 4.5)), 2)]}
    if layout == "bottom-heavy":
        return {"beta": [round(float(rng.uniform(2.5, 4.5)), 2), 1.2]}
    if layout == "diagonal":
        return {"direction": str(rng.choice(["down", "up"])), "jitter": round(float(rng.uniform(0.04, 0.1)), 3)}
    if layout == "ring":
        return {"radius": round(float(rng.uniform(0.25, 0.35)), 3), "jitter": round(float(rng.uniform(0.02, 0.06)), 3)}
    return {}  # scattered


def generate_classes(n_classes, seed):
    """Seeded class definitions: a list of dicts (name, category_probabilities, core_categories,
    count_range, size_range, size_by_height, layout).

    Core categories and layouts are assigned greedily to the least-used ones (random ties),
    so each category is core in about n_classes * 4 / 10 classes and each layout is used
    about n_classes / 8 times; a (core set, layout) pair is never repeated (after 20
    collisions the layout and one core category are drawn freely instead). Probabilities:
    core categories share 85-94 % of the mass (each >= 8 %), the rest is clutter spread
    over the other categories (each < NONTRIVIAL).
    """
    rng = np.random.default_rng([seed, 0])
    width = max(2, len(str(n_classes - 1)))  # scene_00 … scene_66, scene_000 … scene_396
    cat_usage = {c: 0 for c in range(len(CATEGORIES))}
    layout_usage = {l: 0 for l in LAYOUTS}
    seen = set()
    classes = []
    for k in range(n_classes):
        for attempt in range(1000):
            n_core = int(rng.choice(CORE_SIZES))
            # The least-used categories (random ties): usage counts never differ by more than
            # one, and the varying core sizes keep the core sets from being a fixed rotation.
            core = _least_used(rng, cat_usage, n_core)
            layout = _least_used(rng, layout_usage, 1)[0]
            if attempt >= 20:  # the balanced choice keeps colliding: relax it a little
                layout = LAYOUTS[int(rng.integers(len(LAYOUTS)))]
                core[-1] = int(rng.choice([c for c in cat_usage if c not in core[:-1]]))
            signature = (frozenset(core), layout)
            if signature not in seen:
                break
        else:
            sys.exit(f"could not find a new (core set, layout) for class {k}")
        seen.add(signature)
        for c in core:
            cat_usage[c] += 1
        layout_usage[layout] += 1
        core_mass = float(rng.uniform(0.85, 0.94))
        core_p = 0.08 + (core_mass - 0.08 * n_core) * rng.dirichlet(np.full(n_core, 2.0))
        others = [c for c in range(len(CATEGORIES)) if c not in core]
        other_p = (1.0 - core_mass) * rng.dirichlet(np.full(len(others), 5.0))
        p = np.zeros(len(CATEGORIES))
        p[core] = core_p
        p[others] = np.minimum(other_p, NONTRIVIAL * 0.8)  # clutter stays below NONTRIVIAL
        p /= p.sum()
        lo = int(rng.integers(3, 9))
        centre = float(rng.uniform(56, 128))
        half = float(rng.uniform(14, 32))
        classes.append(
            {
                "name": f"scene_{k:0{width}d}",
                "category_probabilities": {CATEGORIES[c]: round(float(p[c]), 6) for c in range(len(CATEGORIES))},
                "core_categories": sorted(CATEGORIES[c] for c in core),
                "count_range": [lo, lo + int(rng.integers(2, 7))],
                "size_range": [int(max(OBJECT_MIN_PX, centre - half)), int(min(OBJECT_MAX_PX, centre + half))],
                "size_by_height": round(float(rng.choice([-0.6, 0.0, 0.0, 0.6])), 2),
                "layout": {"name": layout, **_layout_params(rng, layout)},
            }
        )
    return classes


def category_class_counts(classes):
    """For each category, the number of classes in which its probability is >= NONTRIVIAL."""
    return {
        cat: sum(1 for d in classes if d["category_probabilities"][cat] >= NONTRIVIAL) for cat in CATEGORIES
    }


def class_posterior_given_category(classes):
    """For each category, max over classes of P(class | one object of that category), uniform
    class prior (an object's category alone tells this much about the class)."""
    out = {}
    for cat in CATEGORIES:
        w = np.array([d["category_probabilities"][cat] * sum(d["count_range"]) / 2 for d in classes])
        out[cat] = round(float(w.max() / w.sum()), 4)
    return out


def required_classes_per_category(classes):
    """MIN_CLASSES_PER_CATEGORY, or what a balanced assignment can reach with so few classes."""
    slots = sum(len(d["core_categories"]) for d in classes)
    return min(MIN_CLASSES_PER_CATEGORY, slots // len(CATEGORIES))


def check_classes(classes):
    """Exits unless every category is core in enough classes and no two classes share a
    (core set, layout). Returns the per-category class counts."""
    counts = category_class_counts(classes)
    need = required_classes_per_category(classes)
    thin = {c: n for c, n in counts.items() if n < need}
    if thin:
        sys.exit(f"categories core in fewer than {need} classes: {thin}")
    sigs = [(tuple(d["core_categories"]), d["layout"]["name"]) for d in classes]
    if len(set(sigs)) != len(sigs):
        sys.exit("two classes share the same core categories and layout")
    return counts


# --------------------------------------------------------------------------- rendering


def _hsv_to_rgb(h, s, v):
    """One colour from hue/saturation/value in [0, 1] to RGB floats in [0, 255]."""
    i = int(h * 6.0) % 6
    f = h * 6.0 - int(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    r, g, b = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]
    return np.array([r, g, b]) * 255.0


def render_background(rng, width, height):
    """(height, width, 3) float32: a two-colour linear gradient at a random angle, plus smooth
    low-frequency colour texture and mild per-pixel noise."""
    c0 = _hsv_to_rgb(rng.random(), rng.uniform(0.1, 0.6), rng.uniform(0.15, 0.6))
    c1 = _hsv_to_rgb(rng.random(), rng.uniform(0.1, 0.6), rng.uniform(0.25, 0.7))
    theta = rng.uniform(0, 2 * math.pi)
    gx = (np.arange(width, dtype=np.float32) * np.float32(math.cos(theta) / width))[None, :]
    gy = (np.arange(height, dtype=np.float32) * np.float32(math.sin(theta) / height))[:, None]
    t = gx + gy
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    img = c0.astype(np.float32) + (c1 - c0).astype(np.float32) * t[..., None]
    for cells, sd in ((int(rng.integers(3, 7)), 9.0), (int(rng.integers(12, 24)), 5.0)):  # two octaves
        coarse = np.clip(128 + rng.normal(0, sd, size=(cells, cells, 3)), 0, 255).astype(np.uint8)
        img += np.asarray(Image.fromarray(coarse, "RGB").resize((width, height), Image.BICUBIC), np.float32) - 128
    img += rng.standard_normal((height, width, 3), dtype=np.float32) * np.float32(4.0)
    return img


def layout_positions(rng, layout, n):
    """(n, 2) object centres (x, y) in [0, 1] for one scene of a class layout."""
    name = layout["name"]
    if name == "shelves":
        rows = layout["rows"]
        row = rng.integers(0, rows, size=n)
        y = (row + 0.5) / rows + rng.normal(0, layout["jitter"], size=n)
        x = rng.uniform(0.08, 0.92, size=n)
    elif name == "grid":
        cols = int(math.ceil(math.sqrt(n)))
        nrows = int(math.ceil(n / cols))
        cells = rng.permutation(cols * nrows)[:n]
        x = (cells % cols + 0.5) / cols + rng.normal(0, layout["jitter"], size=n)
        y = (cells // cols + 0.5) / nrows + rng.normal(0, layout["jitter"], size=n)
    elif name == "clusters":
        centres = rng.uniform(0.2, 0.8, size=(layout["clusters"], 2))
        which = rng.integers(0, layout["clusters"], size=n)
        x, y = (centres[which] + rng.normal(0, layout["spread"], size=(n, 2))).T
    elif name in ("top-heavy", "bottom-heavy"):
        a, b = layout["beta"]
        x, y = rng.uniform(0.05, 0.95, size=n), rng.beta(a, b, size=n)
    elif name == "diagonal":
        t = rng.uniform(0.08, 0.92, size=n)
        x = t + rng.normal(0, layout["jitter"], size=n)
        y = (t if layout["direction"] == "down" else 1 - t) + rng.normal(0, layout["jitter"], size=n)
    elif name == "ring":
        angle = rng.uniform(0, 2 * math.pi, size=n)
        r = layout["radius"] + rng.normal(0, layout["jitter"], size=n)
        x, y = 0.5 + r * np.cos(angle), 0.5 + r * np.sin(angle)
    else:  # scattered
        x, y = rng.uniform(0.05, 0.95, size=n), rng.uniform(0.05, 0.95, size=n)
    return np.clip(np.stack([x, y], 1), 0.0, 1.0)


def paste_object(canvas, obj28, x0, y0, size, tint, flip):
    """Upscales a 28x28 object photo to size x size, tints it and alpha-blends it (alpha =
    its intensity) into canvas (float32 RGB, modified in place) with top-left (x0, y0)."""
    im = Image.fromarray(obj28, "L").resize((size, size), Image.BICUBIC)
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    v = np.asarray(im, np.float32)[..., None] / 255.0
    alpha = np.power(v, 0.75)  # intensity as alpha, slightly boosted so objects read as solid
    colour = tint.astype(np.float32)[None, None, :] * (0.45 + 0.55 * v)  # keep the photo's shading
    region = canvas[y0 : y0 + size, x0 : x0 + size]
    region *= 1.0 - alpha
    region += alpha * colour


def render_scene(definition, rng, images, by_category, min_side, max_side):
    """One scene of a class: (PIL RGB image, objects), objects = [index, category, x, y, size]
    per pasted object, index being its position in the split's source file."""
    width = int(rng.integers(min_side, max_side + 1))
    height = int(rng.integers(min_side, max_side + 1))
    canvas = render_background(rng, width, height)
    p = np.array([definition["category_probabilities"][c] for c in CATEGORIES])
    lo, hi = definition["count_range"]
    n = int(rng.integers(lo, hi + 1))
    cats = rng.choice(len(CATEGORIES), size=n, p=p / p.sum())
    centres = layout_positions(rng, definition["layout"], n)
    s_lo, s_hi = definition["size_range"]
    cap = max(8, min(width, height) // 2)  # only small test canvases hit this
    objects = []
    for cat, (cx, cy) in zip(cats, centres):
        pool = by_category[int(cat)]
        index = int(pool[rng.integers(0, len(pool))])
        nominal = rng.uniform(s_lo, s_hi) * (1.0 + definition["size_by_height"] * (cy - 0.5))
        size = int(round(min(max(nominal, OBJECT_MIN_PX), OBJECT_MAX_PX, cap)))
        x0 = int(round(min(max(cx * width - size / 2, 0), width - size)))
        y0 = int(round(min(max(cy * height - size / 2, 0), height - size)))
        if rng.random() < 0.3:
            tint = np.full(3, rng.uniform(200, 255))  # untinted: grey-white
        else:
            tint = _hsv_to_rgb(rng.random(), rng.uniform(0.3, 0.85), rng.uniform(0.75, 1.0))
        paste_object(canvas, images[index], x0, y0, size, tint, bool(rng.random() < 0.5))
        objects.append([index, int(cat), x0, y0, size])
    img = Image.fromarray(np.clip(np.rint(canvas), 0, 255).astype(np.uint8), "RGB")
    return img, objects


def scene_rng(seed, split, class_index, image_index):
    """The generator of one scene: depends only on these four numbers."""
    return np.random.default_rng([seed, SPLIT_CODE[split], class_index, image_index])


def jpeg_bytes(img):
    """RGB JPEG at JPEG_QUALITY with fixed encoder settings."""
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=JPEG_QUALITY, subsampling=0, optimize=False, progressive=False)
    return buf.getvalue()


# --------------------------------------------------------------------------- workers

# Per-process state filled once by the pool initializer (or directly with --jobs 1): the
# loaded source arrays and the run's settings, so they are not pickled with every task.
_WORKER = {}


def _init_worker(classes, out, seed, min_side, max_side):
    """Loads both source splits and keeps the run's settings for render_task."""
    data = {}
    for split in SOURCE_FILES:
        images, labels = load_split(split)
        by_cat = [np.flatnonzero(labels == c) for c in range(len(CATEGORIES))]
        data[split] = (images, by_cat)
    _WORKER.update(data=data, classes=classes, out=out, seed=seed, min_side=min_side, max_side=max_side)


def render_task(task):
    """Renders and writes one scene; returns its manifest entry."""
    split, k, i = task
    w = _WORKER
    images, by_cat = w["data"][split]
    definition = w["classes"][k]
    img, objects = render_scene(
        definition, scene_rng(w["seed"], split, k, i), images, by_cat, w["min_side"], w["max_side"]
    )
    rel = f"{split}/{definition['name']}/{i:04d}.jpg"
    with open(os.path.join(w["out"], rel), "wb") as f:
        f.write(jpeg_bytes(img))
    return {"file": rel, "class": definition["name"], "width": img.width, "height": img.height, "objects": objects}


# --------------------------------------------------------------------------- main


def kept(n, fraction):
    """How many of n images per class a --fraction keeps (at least 1)."""
    return max(1, int(math.floor(n * fraction + 0.5)))


def parse_args(argv=None):
    """Command-line options (see --help)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (its train/ and test/ are replaced)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="mit-indoor",
                    help="preset of --classes/--train-per-class/--test-per-class: mit-indoor (67 x (80 + 20), "
                    "the default) or sun397 (397 x (50 + 50)); the options given explicitly win")
    ap.add_argument("--classes", type=int, default=None, help="number of scene classes (default: --shape's, 67)")
    ap.add_argument("--train-per-class", type=int, default=None,
                    help="training scenes per class before --fraction (default: --shape's, 80)")
    ap.add_argument("--test-per-class", type=int, default=None,
                    help="test scenes per class before --fraction (default: --shape's, 20)")
    ap.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed of classes and scenes (default 0)")
    ap.add_argument("--min-side", type=int, default=DEFAULTS["min_side"], help="smallest canvas width/height (default 384)")
    ap.add_argument("--max-side", type=int, default=DEFAULTS["max_side"], help="largest canvas width/height (default 512)")
    ap.add_argument("--fraction", type=float, default=DEFAULTS["fraction"],
                    help="keep this fraction of the scenes per class, e.g. 0.25 (the first ones: a prefix of the full set)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: CPU count)")
    a = ap.parse_args(argv)
    for key, value in SHAPES[a.shape].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.classes < 2:
        ap.error("--classes must be >= 2")
    if a.train_per_class < 1 or a.test_per_class < 1:
        ap.error("--train-per-class and --test-per-class must be >= 1")
    if not 32 <= a.min_side <= a.max_side:
        ap.error("need 32 <= --min-side <= --max-side")
    if not 0.0 < a.fraction <= 1.0:
        ap.error("--fraction must be in (0, 1]")
    if a.jobs < 1:
        ap.error("--jobs must be >= 1")
    return a


def write_text(path, text):
    """Writes a text file (UTF-8, '\\n' line ends)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main(argv=None):
    """Generates the set; prints the per-category class counts and a summary."""
    a = parse_args(argv)
    if not source_available():
        sys.exit(f"Fashion-MNIST files not found in {SRC}: apt-get install {SOURCE_PACKAGE}")
    t0 = time.time()
    classes = generate_classes(a.classes, a.seed)
    counts = check_classes(classes)
    posterior = class_posterior_given_category(classes)
    print("classes in which each category has probability >= %.2f:" % NONTRIVIAL)
    print("  " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    print("  max P(class | one object's category): " + ", ".join(f"{c} {p:.3f}" for c, p in posterior.items()))

    out = os.path.normpath(a.out)
    n_split = {"train": kept(a.train_per_class, a.fraction), "test": kept(a.test_per_class, a.fraction)}
    for split in SOURCE_FILES:
        shutil.rmtree(os.path.join(out, split), ignore_errors=True)
        for d in classes:
            os.makedirs(os.path.join(out, split, d["name"]), exist_ok=True)
    tasks = [(s, k, i) for s in SOURCE_FILES for k in range(len(classes)) for i in range(n_split[s])]
    init = (classes, out, a.seed, a.min_side, a.max_side)
    if a.jobs == 1:
        _init_worker(*init)
        entries = [render_task(t) for t in tasks]
    else:
        with multiprocessing.get_context("fork").Pool(a.jobs, _init_worker, init) as pool:
            entries = list(pool.imap(render_task, tasks, chunksize=8))

    options = {k: getattr(a, k) for k in DEFAULTS}
    source = {"package": SOURCE_PACKAGE, "version": SOURCE_VERSION, "dir": SRC, "licence": "MIT, (c) 2017 Zalando SE"}
    for split in SOURCE_FILES:
        manifest = {
            "split": split,
            "source_file": f"{SOURCE_FILES[split]}-images-idx3-ubyte.gz",
            "object_fields": ["index", "category", "x0", "y0", "size"],
            "scenes": [e for e in entries if e["file"].startswith(split + "/")],
        }
        write_text(os.path.join(out, f"manifest-{split}.json"), json.dumps(manifest, separators=(",", ":")) + "\n")
    summary = {
        "generator": "scripts/make_object_scenes.py",
        "synthetic": "compositions of real Fashion-MNIST object photos on generated backgrounds, not real scenes",
        "options": options,
        "images_per_class": n_split,
        "source": source,
        "categories": CATEGORIES,
        "nontrivial_probability": NONTRIVIAL,
        "classes_per_category": counts,
        "max_class_posterior_given_category": posterior,
        "classes": classes,
    }
    write_text(os.path.join(out, "classes.json"), json.dumps(summary, indent=1) + "\n")
    write_text(os.path.join(out, "LICENSE"), "Object photos: Fashion-MNIST.\n\n" + LICENSE_TEXT)
    cmd = "python3 scripts/make_object_scenes.py --out OUT" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in options.items() if v != DEFAULTS[k]
    )
    write_text(
        os.path.join(out, "README.md"),
        f"""# Object scenes (synthetic)

Synthetic compositions of real Fashion-MNIST object photos (Zalando Research, MIT licence, see
`LICENSE`; Debian package `{SOURCE_PACKAGE}` {SOURCE_VERSION}) on generated backgrounds — not
real scenes. {len(classes)} classes, {n_split['train']} training + {n_split['test']} test images per
class in `train/<class>/` and `test/<class>/`; training scenes use objects from the training file
only, test scenes from the t10k file only. Class definitions: `classes.json`; the objects of each
scene: `manifest-train.json`, `manifest-test.json`.

Generated by `{cmd}` (deterministic: same bytes every run). See `docs/object-scenes.md`.
""",
    )
    n_img = len(entries)
    print(f"wrote {out}: {n_img} images ({len(classes)} classes x ({n_split['train']} train + "
          f"{n_split['test']} test)) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
