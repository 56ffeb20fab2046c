#!/usr/bin/env python3
"""Writes ONNX exports of fisherkit's built-in networks (from the repository's weights, with
scripts/onnx_graphs.py) and a few malformed models, for `fisherkit run --cnn FILE.onnx` and the
tests of fisherkit-cnn's `onnx` feature (crates/fisherkit-cnn/tests/onnx.rs).

    python3 scripts/export_onnx.py OUT_DIR [--only squeezenet,efficientnet_lite0,...]

Files written in OUT_DIR (each on its own name with --only):
  squeezenet.onnx         SqueezeNet v1.1, input (1, 3, H, W) free, output `scores` (1, 1000)
                          = GlobalAveragePool of the score map `conv10.out`; fisherkit runs it
                          densely. Preprocessing: BGR, 0-255 minus (104.006, 116.669, 122.679).
  efficientnet_lite0.onnx EfficientNet-Lite0 likewise (`fc.out` before the pool); RGB, (x-127)/128.
  squeezenet_227.onnx     SqueezeNet with a fixed 1x3x227x227 input: exact patches only.
  squeezenet_softmax.onnx squeezenet.onnx with a Softmax on the scores (output `probs`).
  no_image_input.onnx     input (1, 1000) -> Softmax: no 4-D image input.
  one_class.onnx          input (1, 3, H, W) -> ReduceMean over channels (1, 1, H, W): one class.
  rank1.onnx              input (1, 3, H, W) -> ReduceMean to shape (1): not class scores.

Exits with status 3 (after a message) if numpy or onnx cannot be imported.
"""
import argparse
import os
import sys

try:
    import numpy as np  # noqa: F401
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:
    print(f"export_onnx.py needs numpy and onnx (pip install onnx): {e}")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_graphs  # noqa: E402

FREE = (1, 3, "H", "W")


def tiny(name, inputs, outputs, nodes, opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def with_softmax(model):
    g = model.graph
    g.node.append(helper.make_node("Softmax", ["scores"], ["probs"], axis=1))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 1000]))
    onnx.checker.check_model(model)
    return model


def image_input():
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, list(FREE))


MODELS = {
    "squeezenet": lambda: onnx_graphs.network_model("squeezenet"),
    "efficientnet_lite0": lambda: onnx_graphs.network_model("efficientnet-lite0"),
    "squeezenet_227": lambda: onnx_graphs.network_model("squeezenet", (1, 3, 227, 227)),
    "squeezenet_softmax": lambda: with_softmax(onnx_graphs.network_model("squeezenet")),
    "no_image_input": lambda: tiny(
        "no_image_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)]),
    "one_class": lambda: tiny(
        "one_class", [image_input()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_node("ReduceMean", ["input"], ["y"], axes=[1], keepdims=1)]),
    "rank1": lambda: tiny(
        "rank1", [image_input()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [helper.make_node("ReduceMean", ["input"], ["y"], axes=[1, 2, 3], keepdims=0)]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        path = os.path.join(args.out_dir, name + ".onnx")
        onnx.save(MODELS[name](), path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
