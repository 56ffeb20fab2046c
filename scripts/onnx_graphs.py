"""ONNX graphs of fisherkit's two built-in networks, built with onnx.helper from the repository's
safetensors weights (numpy and onnx only; used by scripts/bench_cnn.py and scripts/export_onnx.py).

SqueezeNet v1.1 (data/squeezenet/squeezenet1_1.safetensors): conv1 with auto_pad SAME_UPPER,
fire modules, conv10, then GlobalAveragePool and Flatten to the (1, 1000) scores; its input is
fisherkit's SqueezeNet input (BGR, 0-255 minus Caffe's mean).

EfficientNet-Lite0 (data/efficientnet-lite0/efficientnet_lite0.safetensors, batch norms folded):
Conv with auto_pad SAME_UPPER (TF "same": the extra padding pixel after), depthwise as
group = C Conv, ReLU6 as Clip(0, 6), the identity skips as Add, and the classifier as a per-cell
1x1 Conv before GlobalAveragePool, i.e. the same score map fisherkit computes; its input is RGB,
(x - 127) / 128 of 0-255 values.

Both take `input` of shape `input_shape` (default (1, 3, "H", "W"): a free image size) and give
`scores` (1, 1000), the spatial mean of the class-score map `conv10.out` / `fc.out`.
"""
import json
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEIGHTS = os.path.join(ROOT, "data", "squeezenet", "squeezenet1_1.safetensors")
EFFNET_WEIGHTS = os.path.join(ROOT, "data", "efficientnet-lite0", "efficientnet_lite0.safetensors")
EFFNET_STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                 (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
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


def build_model(w, input_shape=(1, 3, "H", "W")):
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
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def build_effnet_model(w, input_shape=(1, 3, "H", "W")):
    nodes, inits = [], []
    for name in ("relu6.min", "relu6.max"):
        inits.append(numpy_helper.from_array(
            np.array(0.0 if name.endswith("min") else 6.0, dtype=np.float32), name))

    def conv(name, x, relu6=True, group=1, stride=1):
        wt = w[name + ".weight"]
        inits.append(numpy_helper.from_array(wt, name + ".weight"))
        inits.append(numpy_helper.from_array(w[name + ".bias"], name + ".bias"))
        k = wt.shape[-1]
        y = name + ".out"
        nodes.append(helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [y],
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      group=group, auto_pad="SAME_UPPER"))
        if relu6:
            nodes.append(helper.make_node("Clip", [y, "relu6.min", "relu6.max"], [name + ".r6"]))
            y = name + ".r6"
        return y

    x = conv("stem", "input", stride=2)
    i, cin = 0, 32
    for e, k, s, cout, reps in EFFNET_STAGES:
        for rep in range(reps):
            stride = s if rep == 0 else 1
            p = f"blocks.{i}"
            y = conv(p + ".expand", x) if e != 1 else x
            y = conv(p + ".depthwise", y, group=cin * e, stride=stride)
            y = conv(p + ".project", y, relu6=False)
            if stride == 1 and cin == cout:
                nodes.append(helper.make_node("Add", [y, x], [p + ".add"]))
                y = p + ".add"
            x, cin, i = y, cout, i + 1
    x = conv("head", x)
    w = dict(w)
    w["fc.weight"] = w["fc.weight"].reshape(1000, 1280, 1, 1)
    x = conv("fc", x, relu6=False)  # the classifier on every cell: the score map
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["scores"]))
    graph = helper.make_graph(
        nodes, "efficientnet_lite0",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def network_model(cnn, input_shape=(1, 3, "H", "W")):
    """The ONNX graph of a built-in network ("squeezenet" or "efficientnet-lite0")."""
    if cnn == "efficientnet-lite0":
        return build_effnet_model(read_safetensors(EFFNET_WEIGHTS), input_shape)
    return build_model(read_safetensors(WEIGHTS), input_shape)
