#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (small valid files, plus a few
near-misses) into fuzz/corpus-raw/<target>/. Run once before fuzzing:

    python3 fuzz/seed_corpora.py
"""
import io
import json
import os
import struct
import subprocess
import zipfile

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus-raw")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def npz_bytes(compressed, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


rng = np.random.default_rng(0)
a32 = rng.standard_normal((3, 2)).astype(np.float32)
a64 = rng.standard_normal((2, 4))

# --- npy
put("npy", "f32_3x2", npy_bytes(a32))
put("npy", "f64_2x4", npy_bytes(a64))
put("npy", "f32_0x3", npy_bytes(np.zeros((0, 3), np.float32)))
put("npy", "f64_v2", npy_bytes(a64, version=(2, 0)))
put("npy", "f64_v3", npy_bytes(a64, version=(3, 0)))
put("npy", "i64_1d", npy_bytes(np.arange(5)))
put("npy", "f32_fortran", npy_bytes(np.asfortranarray(rng.standard_normal((3, 3)).astype(np.float32))))
put("npy", "f64_bigendian", npy_bytes(a64.astype(">f8")))
put("npy", "f32_3d", npy_bytes(np.zeros((2, 2, 2), np.float32)))
# A header that claims 10^12 elements over a few bytes of data.
big = npy_bytes(np.zeros((1, 1), np.float32)).replace(b"(1, 1)", b"(1000000, 1000000)")
put("npy", "claims_1e12", big)

# --- npz
put("npz", "two_f32", npz_bytes(False, a=a32, b=a32[:1]))
put("npz", "two_f64_deflated", npz_bytes(True, x=a64, y=a64))
put("npz", "mixed_dtypes", npz_bytes(False, a=a32, b=a64[:, :2]))
put("npz", "mixed_dims", npz_bytes(False, a=a32, b=a64))
put("npz", "empty", npz_bytes(False))
zb = io.BytesIO()
with zipfile.ZipFile(zb, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("big.npy", big)
put("npz", "claims_1e12_deflated", zb.getvalue())


# --- model (safetensors, laid out as fisherkit-io writes it)
def safetensors(meta, tensors):
    header = {"__metadata__": meta}
    data = b""
    for name in sorted(tensors):
        arr = tensors[name]
        dt = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}[arr.dtype]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def meta(kind, dtype):
    return {"kind": kind, "format_version": "1", "fisherkit_version": "0.1.0", "dtype": dtype}


for dt, name in [(np.float32, "float32"), (np.float64, "float64")]:
    w = np.array([0.25, 0.75], dt)
    m = rng.standard_normal((2, 3)).astype(dt)
    v = (0.5 + rng.random((2, 3))).astype(dt)
    put("model", f"gmm_{name}", safetensors(meta("gmm", name), {"weights": w, "means": m, "variances": v}))
    lam = rng.standard_normal((2, 3, 1)).astype(dt)
    psi = (0.1 + rng.random(3)).astype(dt)
    put("model", f"mfa_shared_{name}",
        safetensors(meta("mfa", name), {"weights": w, "means": m, "loadings": lam, "psi": psi}))
    put("model", f"mfa_per_component_{name}",
        safetensors(meta("mfa", name), {"weights": w, "means": m, "loadings": lam, "psi": v}))
put("model", "gmm_no_version",
    safetensors({"kind": "gmm"}, {"weights": np.ones(1), "means": np.zeros((1, 1)), "variances": np.ones((1, 1))}))
put("model", "gmm_bad_weights",
    safetensors(meta("gmm", "float64"),
                {"weights": np.array([0.5, 0.6]), "means": np.zeros((2, 1)), "variances": np.ones((2, 1))}))
put("model", "mfa_r_equals_d",
    safetensors(meta("mfa", "float64"),
                {"weights": np.ones(1), "means": np.zeros((1, 2)), "loadings": np.ones((1, 2, 2)), "psi": np.ones(2)}))


# --- image
def img_bytes(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


rgb = Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8), "RGB")
put("image", "rgb.png", img_bytes(rgb, "PNG"))
put("image", "rgb.jpg", img_bytes(rgb, "JPEG", quality=80))
put("image", "rgb_progressive.jpg", img_bytes(rgb, "JPEG", quality=60, progressive=True))
put("image", "grey.png", img_bytes(rgb.convert("L"), "PNG"))
put("image", "grey.jpg", img_bytes(rgb.convert("L"), "JPEG"))
put("image", "rgba.png", img_bytes(rgb.convert("RGBA"), "PNG"))
put("image", "palette.png", img_bytes(rgb.convert("P"), "PNG"))
put("image", "grey16.png", img_bytes(Image.fromarray(rng.integers(0, 65536, (4, 3), dtype=np.uint16)), "PNG"))
put("image", "one_pixel.png", img_bytes(Image.new("RGB", (1, 1), (10, 20, 30)), "PNG"))
put("image", "wide_1x600.png", img_bytes(Image.new("L", (600, 1), 7), "PNG"))
fm = os.path.join(os.path.dirname(ROOT), "..", "data", "fashion-mnist-demo", "test", "bag")
first = sorted(os.listdir(fm))[0]
with open(os.path.join(fm, first), "rb") as f:
    put("image", "fashion_mnist.png", f.read())

# --- classifier (scene-classifier files are easiest to make with the writer
# itself: crates/fisherkit-io/examples/classifier_seeds.rs, valid files of
# several shapes plus truncated, bit-flipped and tampered variants)
subprocess.run(
    ["cargo", "run", "-q", "-p", "fisherkit-io", "--example", "classifier_seeds", "--",
     os.path.join(ROOT, "classifier")],
    cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), check=True)
print("seeded", ROOT)
