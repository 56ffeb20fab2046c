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
  external_data.onnx      input (1, 3, H, W) -> 1x1 Conv to 4 classes `map` -> GlobalAveragePool
                          -> Flatten `scores`, its weights in external_data.onnx.data (ONNX
                          external data, as PyTorch's exporter writes them).
  value_info.onnx         the same classifier (weights inside) with the graph's value_info
                          giving `map` the shape (1, 4, H, W) in the input's own symbols, as
                          PyTorch's dynamo exporter writes intermediate shapes.
  axes_constant.onnx      the same classifier (weights inside) at opset 18, its scores
                          ReduceMean(map, axes) with the axes (2, 3) from a Constant node, as
                          PyTorch's TorchScript exporter (dynamo=False) writes a spatial mean.
  valid_conv.onnx         input (1, 3, H, W) -> 7x7 Conv without padding (16 channels) -> 1x1
                          Conv to 10 classes `map` (H-6, W-6) -> ReduceMean over axes 2, 3:
                          smallest input 7 px (VGG-16's fc6 as a convolution, in small).

Exits with status 3 (after a message) if numpy or onnx cannot be imported.
"""
import argparse
import os
import sys

try:
    import numpy as np
    import onnx.numpy_helper
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


def axes_constant():
    """conv_classifier's network with its GlobalAveragePool written as opset 18's ReduceMean over
    axes from a Constant node (see the list above)."""
    model = conv_classifier()
    g = model.graph
    del g.node[1:]
    axes = onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    g.node.extend([helper.make_node("Constant", [], ["axes"], value=axes),
                   helper.make_node("ReduceMean", ["map", "axes"], ["scores"], keepdims=0)])
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", 18))
    onnx.checker.check_model(model)
    return model


def conv_classifier(value_info=False):
    """A dense 4-class classifier: 1x1 Conv `map` -> GlobalAveragePool -> Flatten `scores`;
    with value_info, `map`'s shape (1, 4, H, W) in the graph's value_info."""
    w = np.array([[1.0, 0.5, -0.25], [-1.0, 0.25, 0.5], [0.5, -0.5, 1.0], [0.0, 1.0, -1.0]],
                 np.float32).reshape(4, 3, 1, 1)
    b = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w", "b"], ["map"]),
         helper.make_node("GlobalAveragePool", ["map"], ["pooled"]),
         helper.make_node("Flatten", ["pooled"], ["scores"])],
        "conv_classifier", [image_input()],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 4])],
        initializer=[onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")],
        value_info=[helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 4, "H", "W"])]
        if value_info else None)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def valid_conv():
    """A dense 10-class classifier whose map is (H - 6, W - 6) (see the list above)."""
    rng = np.random.default_rng(0)
    w6 = rng.normal(0.0, 0.1, (16, 3, 7, 7)).astype(np.float32)
    w8 = rng.normal(0.0, 0.1, (10, 16, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w6"], ["fc6"]),
         helper.make_node("Relu", ["fc6"], ["relu6"]),
         helper.make_node("Conv", ["relu6", "w8"], ["map"]),
         helper.make_node("ReduceMean", ["map"], ["scores"], axes=[2, 3], keepdims=0)],
        "valid_conv", [image_input()],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 10])],
        initializer=[onnx.numpy_helper.from_array(w6, "w6"), onnx.numpy_helper.from_array(w8, "w8")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


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
    "external_data": conv_classifier,
    "value_info": lambda: conv_classifier(value_info=True),
    "valid_conv": valid_conv,
    "axes_constant": axes_constant,
}
# Saved with every tensor in NAME.onnx.data beside NAME.onnx.
EXTERNAL = {"external_data"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        path = os.path.join(args.out_dir, name + ".onnx")
        if name in EXTERNAL:
            onnx.save(MODELS[name](), path, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=name + ".onnx.data", size_threshold=0)
        else:
            onnx.save(MODELS[name](), path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
