#!/usr/bin/env python3
"""Arithmetic of a `fisherkit run` on an image folder: how many multiply-adds
each stage must do, and the least wall time that implies at a given rate.

It reads only the image sizes (JPEG/PNG headers, via Pillow) and applies the
pipeline's geometry (docs/pipeline.md, docs/backbones.md): every image is
capped at --max-image-side, then each patch scale P gives a dense pass of the
CNN on the image resized by side/P (side = 224 for EfficientNet-Lite0, 227 for
SqueezeNet). Counted per stage:

* CNN: the network's multiply-adds on those inputs (every convolution with
  TensorFlow "same" geometry for EfficientNet-Lite0; the per-cell classifier
  1280 -> 1000 included), over the sample pass (--sample-images images run
  twice: once for the sample, once for the encoding) and the encode pass,
  plus the global descriptor's pass at the image's own size;
* encoding: MFA-FS = K*D*R*2 (projection and loading gradient) and GMM-FV =
  K*D*3 per descriptor and model (upper bounds: dense posteriors);
* kernels: the lower triangle of the N x N Gram matrix of every term of every
  scale (N = train + test images), K*D*R + K*D columns for MFA-FS, 2*K*D for
  GMM-FV, 1000 for the CNN's global vector.

The floor is MACs / rate: the rate is what you measured for the machine
(e.g. the f32 GEMM rate that `scripts/bench.py` prints, in GFLOP/s = 2 x
GMAC/s). A real run is slower: depthwise convolutions, image decoding and
resizing run far below the GEMM rate. No stage is left out that scales with
the data; EM (fixed sample size) and the SVM (n_train^2 per C) are not counted.

    python3 scripts/work_model.py --train /work/scenes/train --test /work/scenes/test \
        --gflops 116
"""
import argparse
import math
import pathlib
import sys

from PIL import Image

EFFNET_STAGES = [  # (expand, kernel, stride, out channels, repeats)
    (1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1),
]


def effnet_macs(h, w):
    """Multiply-adds of EfficientNet-Lite0 on an h x w input, score map included."""
    ceil = lambda n, s: -(-n // s)
    h, w = ceil(h, 2), ceil(w, 2)
    macs = h * w * 27 * 32  # stem 3x3/2, 3 -> 32
    cin = 32
    for e, k, s, cout, reps in EFFNET_STAGES:
        for r in range(reps):
            stride = s if r == 0 else 1
            cexp = cin * e
            if e != 1:
                macs += h * w * cin * cexp  # expand 1x1
            h, w = ceil(h, stride), ceil(w, stride)
            macs += h * w * k * k * cexp  # depthwise
            macs += h * w * cexp * cout  # project 1x1
            cin = cout
    macs += h * w * cin * 1280  # head 1x1
    macs += h * w * 1280 * 1000  # classifier per cell
    return macs, h * w


def squeezenet_macs(h, w):
    """Multiply-adds of SqueezeNet v1.1 (conv1 3x3/2 64, pools, 8 fire modules, conv10)."""
    pool = lambda n: (n - 3) // 2 + 1
    h, w = -(-h // 2), -(-w // 2)
    macs = h * w * 27 * 64
    h, w = pool(h), pool(w)
    cin = 64
    fires = [(16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool",
             (48, 192), (48, 192), (64, 256), (64, 256)]
    for f in fires:
        if f == "pool":
            h, w = pool(h), pool(w)
            continue
        sq, ex = f
        macs += h * w * (cin * sq + sq * ex + 9 * sq * ex)
        cin = 2 * ex
    macs += h * w * cin * 1000
    return macs, h * w


def dense_input(side, h, w, patch):
    m = min(h, w)
    if m < patch:
        f = patch / m
        h, w = max(round(h * f), patch), max(round(w * f), patch)
    f = side / patch
    return max(round(h * f), 1), max(round(w * f), 1)


def working_size(h, w, cap):
    if cap and max(h, w) > cap:
        f = cap / max(h, w)
        return max(round(h * f), 1), max(round(w * f), 1)
    return h, w


def sizes(folder):
    out = []
    for p in sorted(pathlib.Path(folder).rglob("*")):
        if p.suffix.lower() in (".jpg", ".jpeg", ".png"):
            with Image.open(p) as im:
                out.append((im.height, im.width))
    if not out:
        sys.exit(f"error: {folder}: no .jpg/.jpeg/.png images")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--cnn", choices=["efficientnet-lite0", "squeezenet"], default="efficientnet-lite0")
    ap.add_argument("--scales", default="96,128,160")
    ap.add_argument("--max-image-side", type=int, default=512)
    ap.add_argument("--sample-images", type=int, default=500)
    ap.add_argument("--pca-dim", type=int, default=500)
    ap.add_argument("--gmm-components", type=int, default=50)
    ap.add_argument("--mfa-components", type=int, default=50)
    ap.add_argument("--mfa-factors", type=int, default=10)
    ap.add_argument("--gflops", type=float, required=True,
                    help="sustained f32 rate of the machine in GFLOP/s (2 flops = 1 multiply-add)")
    a = ap.parse_args()
    side, net = (224, effnet_macs) if a.cnn == "efficientnet-lite0" else (227, squeezenet_macs)
    scales = [int(s) for s in a.scales.split(",")]
    train, test = sizes(a.train), sizes(a.test)
    n_train, n = len(train), len(train) + len(test)

    cnn = cells = 0
    for h, w in train + test:
        h, w = working_size(h, w, a.max_image_side)
        for p in scales:
            m, c = net(*dense_input(side, h, w, p))
            cnn += m
            cells += c
        gh, gw = dense_input(side, h, w, side)  # global descriptor: the image at its own size
        cnn += net(gh, gw)[0]
    per_image = cnn / n
    sample = min(a.sample_images, n_train) * per_image  # sample images run the CNN twice
    d, kg, km, r = a.pca_dim, a.gmm_components, a.mfa_components, a.mfa_factors
    enc = cells * (km * d * r * 2 + kg * d * 3)
    widths = {"mfa-fs (mean+loading)": km * d * r + km * d, "gmm-fv (mean+var)": 2 * kg * d,
              "cnn-global": 1000}
    gram = n * (n + 1) / 2 * (sum(widths[k] for k in widths if k != "cnn-global") * len(scales) + 1000)
    rate = a.gflops / 2 * 1e9  # MAC/s
    rows = [("CNN, encode pass", cnn), ("CNN, sample pass (again)", sample),
            ("encoding (MFA-FS + GMM-FV)", enc), ("kernels (Gram, all terms, all scales)", gram)]
    total = sum(m for _, m in rows)
    print(f"{n_train} + {n - n_train} images, {a.cnn}, scales {scales}, max side {a.max_image_side}")
    print(f"CNN: {per_image / 1e9:.1f} GMAC and {cells / n:.0f} descriptors per image (3 scales + global)")
    print(f"floor at {a.gflops:g} GFLOP/s ({rate / 1e9:g} GMAC/s sustained):")
    print("| stage | TMAC | floor (min) |\n|---|---|---|")
    for name, m in rows:
        print(f"| {name} | {m / 1e12:.1f} | {m / rate / 60:.1f} |")
    print(f"| total | {total / 1e12:.1f} | {total / rate / 60:.1f} |")


if __name__ == "__main__":
    main()
