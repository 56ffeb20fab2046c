#!/usr/bin/env python3
"""Write a seeded, class-balanced subset of Fashion-MNIST as PNG files.

Source: Debian package ``dataset-fashion-mnist`` (Zalando Research, MIT/Expat),
``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``.

Output layout (the usual image-folder layout)::

    OUT/train/<class_name>/<index>.png   # --train-per-class images per class, from the train file
    OUT/test/<class_name>/<index>.png    # --test-per-class images per class, from the t10k file
    OUT/LICENSE, OUT/README.md

``<index>`` is the image's 0-based position in its source file, zero-padded to 5 digits.

Deterministic: the selection depends only on ``--seed`` (each class's indices are
ordered by SHA-256 of "seed:split:index" and the first ones are taken), and the PNG
encoder is written here with fixed zlib settings, so the same command writes the
same bytes on every run and machine. Only the Python standard library is used; no
network access.

    python3 scripts/make_fashion_subset.py                                   # the bundled demo
    python3 scripts/make_fashion_subset.py --train-per-class 500 \\
        --test-per-class 200 --out /tmp/fashion-500                          # a larger split
"""

import argparse
import gzip
import hashlib
import os
import shutil
import struct
import sys
import zlib

SRC = "/usr/share/datasets/fashion-mnist"
CLASSES = [
    "t-shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
]
SOURCE_PACKAGE = "dataset-fashion-mnist"
SOURCE_VERSION = "0.0~git20200523.55506a9-1"

LICENSE_TEXT = """The MIT License (MIT)

Copyright (c) 2017 Zalando SE

Permission is hereby granted, free of charge, to any person obtaining a
copy of this software and associated documentation files (the "Software"),
to deal in the Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, sublicense,
and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included
in all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS
OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.
IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY
CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT,
TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE
SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


def read_idx(path, magic_expected):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != magic_expected:
        sys.exit(f"{path}: magic {magic:#x}, expected {magic_expected:#x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return dims, data[4 + 4 * ndim :]


def load(split):
    prefix = "train" if split == "train" else "t10k"
    (n, h, w), pixels = read_idx(os.path.join(SRC, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    (nl,), labels = read_idx(os.path.join(SRC, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    if n != nl or len(pixels) != n * h * w or len(labels) != n:
        sys.exit(f"{split}: inconsistent image/label files")
    return n, h, w, pixels, labels


def png_grey(width, height, pixels):
    """8-bit greyscale PNG, filter 0 on every row, zlib level 9: deterministic bytes."""

    def chunk(tag, body):
        return (
            struct.pack(">I", len(body))
            + tag
            + body
            + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)
        )

    raw = b"".join(b"\x00" + pixels[r * width : (r + 1) * width] for r in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def select(labels, per_class, seed, split):
    """Per class, the `per_class` indices with the smallest SHA-256("seed:split:index")."""
    by_class = {c: [] for c in range(len(CLASSES))}
    for i, c in enumerate(labels):
        by_class[c].append(i)
    chosen = {}
    for c, idx in by_class.items():
        if per_class > len(idx):
            sys.exit(f"{split}: class {CLASSES[c]} has only {len(idx)} images, asked {per_class}")
        key = lambda i: hashlib.sha256(f"{seed}:{split}:{i}".encode()).digest()  # noqa: E731
        chosen[c] = sorted(sorted(idx, key=key)[:per_class])
    return chosen


def write_split(out, split, per_class, seed):
    n, h, w, pixels, labels = load(split)
    chosen = select(labels, per_class, seed, split)
    dst_split = "train" if split == "train" else "test"
    for c, idx in chosen.items():
        d = os.path.join(out, dst_split, CLASSES[c])
        os.makedirs(d, exist_ok=True)
        for i in idx:
            img = pixels[i * h * w : (i + 1) * h * w]
            with open(os.path.join(d, f"{i:05d}.png"), "wb") as f:
                f.write(png_grey(w, h, img))
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-per-class", type=int, default=100)
    ap.add_argument("--test-per-class", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fashion-mnist-demo"))
    a = ap.parse_args()
    if a.train_per_class < 1 or a.test_per_class < 1:
        sys.exit("--train-per-class and --test-per-class must be >= 1")
    out = os.path.normpath(a.out)
    for sub in ("train", "test"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    n_train = write_split(out, "train", a.train_per_class, a.seed)
    n_test = write_split(out, "t10k", a.test_per_class, a.seed)
    with open(os.path.join(out, "LICENSE"), "w") as f:
        f.write(LICENSE_TEXT)
    cmd = "python3 scripts/make_fashion_subset.py"
    if (a.train_per_class, a.test_per_class, a.seed) != (100, 50, 0):
        cmd += f" --train-per-class {a.train_per_class} --test-per-class {a.test_per_class} --seed {a.seed}"
    readme = f"""# Fashion-MNIST demo subset

A seeded, class-balanced subset of Fashion-MNIST (Zalando Research; Han Xiao, Kashif Rasul,
Roland Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning
Algorithms", arXiv:1708.07747), as 28x28 8-bit greyscale PNG files in the image-folder layout
`{{train,test}}/<class_name>/<index>.png`, `<index>` being the image's 0-based position in its
source file.

- Source: Debian package `{SOURCE_PACKAGE}` version `{SOURCE_VERSION}`,
  files `{SRC}/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte.gz`
  ({n_train} training and {n_test} test images).
- Generated by: `{cmd}` (seed {a.seed}; deterministic, same bytes every run).
- Selection: for each class, the indices with the smallest SHA-256 of `"<seed>:<split>:<index>"`.
- Counts: train {a.train_per_class} per class ({a.train_per_class * len(CLASSES)} images) from the
  training file; test {a.test_per_class} per class ({a.test_per_class * len(CLASSES)} images) from
  the t10k file.
- Classes (label 0..9): {", ".join(CLASSES)}.
- Licence: MIT, Copyright (c) 2017 Zalando SE (see `LICENSE`).
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme)
    print(f"wrote {out}: {a.train_per_class * 10} train + {a.test_per_class * 10} test images")


if __name__ == "__main__":
    main()
