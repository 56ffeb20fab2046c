#!/usr/bin/env python3
"""Write SUN397-shaped descriptor files with planted class structure (synthetic, no images).

SUN397 has 397 scene classes with 50 training + 50 test images per class and
split. This script writes descriptor files of that shape, OUT/train.npz and
OUT/test.npz, so that the stages after the CNN (`fisherkit run
--train-descriptors OUT/train.npz --test-descriptors OUT/test.npz`: PCA, GMM or
MFA, Fisher vectors, SVM) can be measured at full size without hours of CNN.
At the defaults (397 classes, 50 + 50 images, D = 512, ~100 descriptors per
image) that is ~1.98 million rows and 4.07 GB of float32 per file.

LICENCE: the data are PURELY SYNTHETIC — drawn from numpy's random generators
by the code below, with no third-party data, images, models or weights in them.
They are not SUN397 (only its class and image counts are borrowed) and
accuracies measured on them are not SUN397 results.

Format (docs/formats.md §4, the stacked layout), one uncompressed zip (ZIP64,
stored) per split with, in this order:

    descriptors.npy   (N_rows, D) float32, little-endian, C order
    image_index.npy   (N_rows,) int32: each row's image, 0..n_images-1, non-decreasing
    labels.npy        (n_images,) numpy str (<U…): class names scene_000 … scene_396

Images are class-major (all images of scene_000, then scene_001, …). The .npz is
written streaming — the .npy header first (the shape is known because every
image's descriptor count is drawn before any descriptor), then blocks of rows —
so memory stays at a few tens of MB whatever the size. Each file is written to
a temporary name beside the target and renamed when complete.

The planted structure (a bag-of-descriptors model of scenes made of objects):

* a shared pool of K "object" prototypes (K = round(0.5 * classes), 198 for
  397 classes; --prototypes): prototype j is a Gaussian in D dimensions over
  *logits*, mean = a shared base vector + 2-5 strong "concept" peaks + a small
  prototype-specific offset, covariance = a random rank-6 part + isotropic
  noise. A descriptor is the log-softmax of such logits, so rows look like the
  log class-probabilities of a CNN (all <= 0, a few near 0, most around -7).
* scene groups (like SUN397's indoor / nature / urban … hierarchy): about 16
  classes per group (25 groups for 397), each group with a pool of 12
  prototypes, pools chosen least-used first so that they overlap evenly.
* every class is a seeded sparse mixture over the prototypes: 3-6 "core"
  prototypes from its group's pool (balanced within the group, no two classes
  with the same core set, so no single prototype identifies a class: the class
  lives in the combination and the proportions, as in the scenes of
  scripts/make_object_scenes.py) carrying 30-55 % of the mass; the rest is
  clutter: 30 % of it spread over the group's pool, 70 % a global Zipf law
  over all prototypes (background objects frequent in every class).
* every image perturbs its class's weights (Dirichlet with concentration 10
  around them), draws its descriptor count (uniform in mean*[0.8, 1.2]; 80-120
  at the default mean 100) and each descriptor's prototype from these weights,
  and adds one image-wide nuisance offset (a random combination of 4 shared
  directions, like lighting or style) to all its logits.

So a bag-of-descriptors classifier is well above chance but far from perfect;
the confusions are mostly within a group. Measured at seed 0:

    set                          classifier                                  accuracy  chance
    20 x (20 + 20), D = 32       nearest class mean of the bag means          0.18     0.05
                                 linear SVM (C = 0.1) on the bag means        0.38
                                 fisherkit run, PCA 32, GMM 12, gmm-fv:mean   0.225
    397 x (13 + 13), D = 512     fisherkit run, PCA 64, GMM 32, gmm-fv:mean   0.42     0.0025
    (--fraction 0.25)                                        gmm-fv:var       0.36
    397 x (50 + 50)              the bags' true prototype histograms (an      0.65
                                 ideal codebook), sqrt, linear SVM (C = 1)

tests/python/test_sun397_generator.py checks the first line's bounds.

Deterministic: the classes and prototypes depend on (seed, classes, dim,
prototypes), every image on (seed, split, class, image number) only, so the same
seed and options give byte-identical files, and a --fraction set's images are
the full set's first ones per class (the same rows). Single-threaded (BLAS
threads are set to 1 unless set already). Measured on the 2-core development
machine (another build running): the defaults (2 x 4.07 GB) in 78 s wall (46 s
user + 24 s system), peak RSS 94 MB; --fraction 0.25 (397 x (13 + 13), 2 x 1.06
GB) in 20 s, peak RSS 92 MB (160 MB with --check, which streams the rows).

    python3 scripts/make_sun397_descriptors.py --out /tmp/sun397              # 397 x (50 + 50), 8.15 GB
    python3 scripts/make_sun397_descriptors.py --out /tmp/sun397-q --fraction 0.25   # 397 x (13 + 13)
    python3 scripts/make_sun397_descriptors.py --out /tmp/s --classes 5 --train-per-class 4 \\
        --test-per-class 4 --dim 16 --check
    fisherkit run --train-descriptors /tmp/sun397/train.npz --test-descriptors /tmp/sun397/test.npz
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # deterministic sums, and the machine has other work

import argparse
import math
import sys
import time
import zipfile

import numpy as np

SPLIT_CODE = {"train": 1, "test": 2}  # part of each image's seed
DEFAULTS = dict(classes=397, train_per_class=50, test_per_class=50, dim=512, descriptors_per_image=100, seed=0)
PROTOTYPES_PER_CLASS = 0.5  # default K = round(0.5 * classes)
CLASSES_PER_GROUP = 16  # classes per scene group (25 groups for 397 classes)
POOL_SIZE = 12  # prototypes in a group's pool
CORE_SIZES = (3, 4, 5, 6)  # core prototypes per class, from its group's pool
CORE_MASS = (0.30, 0.55)
GROUP_CLUTTER = 0.3  # share of the non-core mass spread evenly over the group's pool
POPULARITY_EXPONENT = 0.8  # the rest follows a global Zipf law over the prototypes
RANK = 6  # rank of each prototype's covariance part
LOWRANK_SCALE = 0.8  # std per dimension of the low-rank part (logits)
NOISE = 0.7  # isotropic std (logits)
PEAKS = (2, 5)  # concept peaks per prototype
PEAK_HEIGHT = (3.0, 7.0)
NUISANCE_DIRS = 4
NUISANCE_SCALE = 0.5  # std per dimension of one image-wide nuisance direction
IMAGE_CONCENTRATION = 10.0  # Dirichlet concentration of an image's weights around its class's
COUNT_SPREAD = 0.2  # descriptor counts uniform in mean * [1 - s, 1 + s]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
BLOCK_BYTES = 16 << 20  # rows generated and written per block


# --------------------------------------------------------------------------- the model


def class_name(k, n_classes):
    """scene_00 … scene_66, scene_000 … scene_396: zero-padded to the largest number's width, so
    that text order (fisherkit's class order) is number order; the names of
    scripts/make_object_scenes.py."""
    return f"scene_{k:0{max(2, len(str(n_classes - 1)))}d}"


def default_prototypes(n_classes):
    """K for n_classes when --prototypes is not given."""
    return max(POOL_SIZE, int(round(PROTOTYPES_PER_CLASS * n_classes)))


def build_model(n_classes, dim, n_protos, seed):
    """The prototypes and class mixtures: a dict of float32/float64 arrays.

    mu (K, D) and W (K, RANK, D) float32: prototype means and low-rank factors (logits);
    nuisance (NUISANCE_DIRS, D) float32; weights (classes, K) float64: class mixtures;
    core: list of each class's core prototypes."""
    rng = np.random.default_rng([seed, 1, n_classes, dim, n_protos])
    base = rng.normal(0.0, 1.0, dim)
    mu = base + rng.normal(0.0, 0.4, (n_protos, dim))
    for j in range(n_protos):
        peaks = rng.choice(dim, size=int(rng.integers(PEAKS[0], PEAKS[1] + 1)), replace=False)
        mu[j, peaks] += rng.uniform(*PEAK_HEIGHT, size=len(peaks))
    w_lr = rng.normal(0.0, LOWRANK_SCALE / math.sqrt(RANK), (n_protos, RANK, dim))
    nuisance = rng.normal(0.0, NUISANCE_SCALE, (NUISANCE_DIRS, dim))

    crng = np.random.default_rng([seed, 2, n_classes, n_protos])
    popularity = 1.0 / np.arange(1, n_protos + 1) ** POPULARITY_EXPONENT
    popularity = popularity[crng.permutation(n_protos)]
    popularity /= popularity.sum()
    # Scene groups (like SUN397's indoor / nature / urban … hierarchy): each has a pool of
    # prototypes, chosen least-used first so that pools overlap evenly.
    n_groups = max(1, int(round(n_classes / CLASSES_PER_GROUP)))
    pool_size = min(n_protos, POOL_SIZE)
    usage = np.zeros(n_protos, np.int64)
    pools = []
    for _ in range(n_groups):
        pool = np.lexsort((crng.random(n_protos), usage))[:pool_size]  # least used, random ties
        usage[pool] += 1
        pools.append(np.sort(pool))
    group_of = crng.permutation(np.arange(n_classes) % n_groups)
    pool_usage = [np.zeros(pool_size, np.int64) for _ in range(n_groups)]
    seen = set()
    weights = np.zeros((n_classes, n_protos))
    cores, groups = [], []
    for k in range(n_classes):
        g = int(group_of[k])
        for _ in range(1000):
            size = min(int(crng.choice(CORE_SIZES)), pool_size - 1)
            order = np.lexsort((crng.random(pool_size), pool_usage[g]))
            core = tuple(sorted(int(pools[g][j]) for j in order[:size]))
            if core not in seen:
                break
            pool_usage[g][crng.choice(order[:size])] += 1  # perturb the ranking and retry
        else:
            sys.exit(f"could not find a new core set for class {k}: more --prototypes")
        seen.add(core)
        pool_usage[g][order[:size]] += 1
        cores.append(list(core))
        groups.append(g)
        mass = crng.uniform(*CORE_MASS)
        w = (1.0 - mass) * ((1.0 - GROUP_CLUTTER) * popularity)
        w[pools[g]] += (1.0 - mass) * GROUP_CLUTTER / pool_size
        w[list(core)] += mass * crng.dirichlet(np.full(size, 2.0))
        weights[k] = w / w.sum()
    return {
        "mu": mu.astype(np.float32),
        "W": w_lr.astype(np.float32),
        "nuisance": nuisance.astype(np.float32),
        "weights": weights,
        "core": cores,
        "group": groups,
    }


def image_rng(seed, split, k, i):
    """The generator of one image: depends only on these four numbers."""
    return np.random.default_rng([seed, SPLIT_CODE[split], k, i])


def draw_count(rng, mean):
    """An image's descriptor count (the first draw of its generator)."""
    lo = max(1, int(round(mean * (1 - COUNT_SPREAD))))
    hi = max(lo, int(round(mean * (1 + COUNT_SPREAD))))
    return int(rng.integers(lo, hi + 1))


class Split:
    """The images of one split: their classes, numbers and descriptor counts."""

    def __init__(self, split, n_classes, per_class, mean, seed):
        self.split = split
        self.mean = mean
        self.classes = np.repeat(np.arange(n_classes), per_class)
        self.numbers = np.tile(np.arange(per_class), n_classes)
        self.counts = np.array(
            [draw_count(image_rng(seed, split, int(k), int(i)), mean) for k, i in zip(self.classes, self.numbers)],
            np.int64,
        )

    @property
    def rows(self):
        """Total number of descriptor rows."""
        return int(self.counts.sum())


def image_rows(model, rng, k, n, dim, out):
    """Fills out (n, D) float32 with the logits of one image of class k (rng after draw_count);
    returns the rows' prototypes."""
    w = rng.dirichlet(IMAGE_CONCENTRATION * model["weights"][k] + 1e-3)
    protos = rng.permutation(np.repeat(np.arange(len(w)), rng.multinomial(n, w / w.sum())))
    z = rng.standard_normal((n, RANK), dtype=np.float32)
    offset = rng.standard_normal(NUISANCE_DIRS, dtype=np.float32) @ model["nuisance"]
    rng.standard_normal((n, dim), dtype=np.float32, out=out)
    out *= np.float32(NOISE)
    out += model["mu"][protos]
    out += offset
    for j in np.unique(protos):
        sel = protos == j
        out[sel] += z[sel] @ model["W"][j]
    return protos


def log_softmax_(x, tmp):
    """Row-wise log-softmax of x (float32) in place; tmp is scratch of x's shape."""
    x -= x.max(axis=1, keepdims=True)
    np.exp(x, out=tmp)
    x -= np.log(tmp.sum(axis=1, keepdims=True))


# --------------------------------------------------------------------------- writing


def _zinfo(name):
    """A stored zip entry with a fixed timestamp and mode (byte-identical archives)."""
    zi = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    zi.compress_type = zipfile.ZIP_STORED
    zi.external_attr = 0o644 << 16
    return zi


def _npy_header(f, descr, shape):
    np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})


def write_split(path, model, sp, n_classes, dim, seed, progress=True):
    """Writes one split's descriptor file (streaming); returns its size in bytes."""
    tmp = path + ".tmp"
    n_img, n_rows = len(sp.counts), sp.rows
    block_rows = max(int(sp.counts.max()), BLOCK_BYTES // (4 * dim))
    buf = np.empty((block_rows, dim), np.float32)
    scratch = np.empty_like(buf)
    t0 = time.time()
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open(_zinfo("descriptors.npy"), "w", force_zip64=True) as f:
            _npy_header(f, "<f4", (n_rows, dim))
            done_rows, img = 0, 0
            while img < n_img:
                used = 0
                while img < n_img and used + sp.counts[img] <= block_rows:
                    k, i, n = int(sp.classes[img]), int(sp.numbers[img]), int(sp.counts[img])
                    rng = image_rng(seed, sp.split, k, i)
                    assert draw_count(rng, sp.mean) == n  # the same first draw as in Split
                    image_rows(model, rng, k, n, dim, buf[used : used + n])
                    used += n
                    img += 1
                block = buf[:used]
                log_softmax_(block, scratch[:used])
                f.write(block.astype("<f4", copy=False).tobytes())
                done_rows += used
                if progress and sys.stderr.isatty():
                    print(f"\r  {sp.split}: {done_rows}/{n_rows} rows", end="", file=sys.stderr, flush=True)
            assert done_rows == n_rows
        with zf.open(_zinfo("image_index.npy"), "w", force_zip64=True) as f:
            _npy_header(f, "<i4", (n_rows,))
            f.write(np.repeat(np.arange(n_img, dtype="<i4"), sp.counts).tobytes())
        labels = np.array([class_name(int(k), n_classes) for k in sp.classes])
        with zf.open(_zinfo("labels.npy"), "w", force_zip64=True) as f:
            _npy_header(f, labels.dtype.str, labels.shape)
            f.write(labels.tobytes())
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)
    os.replace(tmp, path)
    size = os.path.getsize(path)
    print(f"wrote {path}: {n_img} images, {n_rows} x {dim} descriptors, {size} bytes "
          f"({size / 1e9:.2f} GB) in {time.time() - t0:.1f} s", flush=True)
    return size


# --------------------------------------------------------------------------- checking


def check_file(path, n_classes, per_class, dim, counts):
    """Re-reads a written file: numpy loads labels and image_index; the descriptors are
    streamed (any size) and checked for shape, dtype, finiteness and log-probability
    range (<= 0, each row's exponentials summing to ~1). Exits on a mismatch."""
    problems = []
    with np.load(path) as z:
        if sorted(z.files) != ["descriptors", "image_index", "labels"]:
            problems.append(f"arrays {z.files}")
        labels, index = z["labels"], z["image_index"]
    names = [class_name(k, n_classes) for k in range(n_classes)]
    if labels.dtype.kind != "U" or labels.tolist() != [c for c in names for _ in range(per_class)]:
        problems.append(f"labels: dtype {labels.dtype}, {len(labels)} entries")
    if index.dtype != np.int32 or not np.array_equal(np.bincount(index, minlength=len(counts)), counts):
        problems.append("image_index does not match the descriptor counts")
    if np.any(np.diff(index) < 0):
        problems.append("image_index is not sorted")
    with zipfile.ZipFile(path) as zf, zf.open("descriptors.npy") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        if shape != (int(counts.sum()), dim) or fortran or dtype != np.dtype("<f4"):
            problems.append(f"descriptors: shape {shape}, dtype {dtype}, fortran {fortran}")
        else:
            left, step = shape[0], max(1, BLOCK_BYTES // (4 * dim))
            while left:
                n = min(step, left)
                raw = f.read(4 * dim * n)
                if len(raw) != 4 * dim * n:
                    problems.append("descriptors: truncated data")
                    break
                x = np.frombuffer(raw, "<f4").reshape(n, dim)
                if not np.isfinite(x).all() or x.max() > 1e-5:
                    problems.append("descriptors: non-finite or positive values")
                    break
                if np.abs(np.exp(x.astype(np.float64)).sum(1) - 1).max() > 1e-3:
                    problems.append("descriptors: rows are not log-probabilities")
                    break
                left -= n
            if f.read(1):
                problems.append("descriptors: extra data")
    if problems:
        sys.exit(f"{path}: CHECK FAILED: " + "; ".join(problems))
    print(f"checked {path}: {len(labels)} labels, {len(index)} rows, dtypes {labels.dtype}/{index.dtype}/float32, "
          "log-probability rows: OK")


# --------------------------------------------------------------------------- main


def kept(n, fraction):
    """How many of n images per class a --fraction keeps (at least 1)."""
    return max(1, int(math.floor(n * fraction + 0.5)))


def parse_args(argv=None):
    """Command-line options (see --help)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder: OUT/train.npz and OUT/test.npz are replaced")
    ap.add_argument("--classes", type=int, default=DEFAULTS["classes"], help="number of classes (default 397)")
    ap.add_argument("--train-per-class", type=int, default=DEFAULTS["train_per_class"],
                    help="training images per class before --fraction (default 50)")
    ap.add_argument("--test-per-class", type=int, default=DEFAULTS["test_per_class"],
                    help="test images per class before --fraction (default 50)")
    ap.add_argument("--dim", type=int, default=DEFAULTS["dim"], help="descriptor dimension D (default 512)")
    ap.add_argument("--descriptors-per-image", type=float, default=DEFAULTS["descriptors_per_image"],
                    help="mean descriptors per image; each image draws uniformly in mean*[0.8, 1.2] (default 100)")
    ap.add_argument("--prototypes", type=int, default=None,
                    help="number of shared object prototypes (default round(0.5 * classes), at least 12)")
    ap.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed (default 0)")
    ap.add_argument("--fraction", type=float, default=1.0,
                    help="keep round(n * f) images per class and split, e.g. 0.25 (the first ones)")
    ap.add_argument("--split", choices=["train", "test", "both"], default="both", help="write only one split")
    ap.add_argument("--check", action="store_true", help="re-read the written files and check them")
    a = ap.parse_args(argv)
    if a.classes < 2:
        ap.error("--classes must be >= 2")
    if a.train_per_class < 1 or a.test_per_class < 1:
        ap.error("--train-per-class and --test-per-class must be >= 1")
    if a.dim < 8:
        ap.error("--dim must be >= 8")
    if not a.descriptors_per_image >= 1:
        ap.error("--descriptors-per-image must be >= 1")
    if a.prototypes is None:
        a.prototypes = default_prototypes(a.classes)
    if a.prototypes < max(CORE_SIZES) + 2:
        ap.error(f"--prototypes must be >= {max(CORE_SIZES) + 2}")
    if not 0.0 < a.fraction <= 1.0:
        ap.error("--fraction must be in (0, 1]")
    return a


def splits(a):
    """{split: images per class} after --fraction and --split."""
    per = {"train": kept(a.train_per_class, a.fraction), "test": kept(a.test_per_class, a.fraction)}
    return {s: n for s, n in per.items() if a.split in (s, "both")}


def main(argv=None):
    """Writes the files; prints sizes and times."""
    a = parse_args(argv)
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    model = build_model(a.classes, a.dim, a.prototypes, a.seed)
    total = 0
    for split, per_class in splits(a).items():
        sp = Split(split, a.classes, per_class, a.descriptors_per_image, a.seed)
        path = os.path.join(a.out, f"{split}.npz")
        total += write_split(path, model, sp, a.classes, a.dim, a.seed)
        if a.check:
            check_file(path, a.classes, per_class, a.dim, sp.counts)
    print(f"done: {a.classes} classes, {a.prototypes} prototypes, D = {a.dim}, {total} bytes "
          f"({total / 1e9:.2f} GB) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
