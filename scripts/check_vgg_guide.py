#!/usr/bin/env python3
"""Runs docs/backbones.md "The paper's VGG-16 on your own machine" end to end, with random
seeded weights in place of torchvision's ImageNet ones (which cannot be downloaded here), and
checks fisherkit against PyTorch on the exported models.

A manual check, not a test: neither CI nor the test suite runs it. It needs a Python with
torch, torchvision, onnxscript (the default exporter's dependency; it brings onnx), numpy,
pillow and scikit-image (for its bundled `chelsea` photo), optionally onnxruntime; and a
release build of fisherkit with the `onnx` feature and the `onnx_descriptors` example:

    python3 -m venv VENV && VENV/bin/pip install torch torchvision onnxscript onnxruntime scikit-image
    cargo build --release -p fisherkit-cli --features onnx
    cargo build --release -p fisherkit-cnn --features onnx --example onnx_descriptors
    VENV/bin/python scripts/check_vgg_guide.py --work /tmp/vgg-check [--exporter dynamo|legacy]

What it does, in WORK/<exporter>/:
 1. Takes the guide's Python block from docs/backbones.md as it stands, replaces only the
    line that loads the ImageNet weights by a seeded random VGG-16 (`torch.manual_seed(0)`,
    `vgg16(weights=None)`, biases drawn too: torchvision initialises them to 0 and the
    exporter then drops them, which would leave the bias path unchecked) and runs it
    (`--exporter legacy` adds `dynamo=False` to the two export calls). Reports the opset,
    the input shape and whether the weights went to an external `.onnx.data` file.
 2. A real photo: scikit-image's `chelsea` (300x451), centre square resized to 224 and to 320
    px (PIL bilinear), written as PNG.
 3. fisherkit's descriptors (the `onnx_descriptors` example: `OnnxCnn::load` with the default
    options, `extract` at patch side 224) against PyTorch's module on the same pixels:
      (b) vgg16_conv.onnx, dense: 224 image -> 1 descriptor (log-softmax of the logits);
          320 image -> the 4x4 cells of fc8's score map;
      (a) vgg16.onnx, exact patches: 224 image -> 1 patch; 320 image, stride 0.5 -> the one
          centred 224 crop (offset 48).
    Random weights give nearly uniform class probabilities, so log-probabilities are
    compared after removing each row's mean (what varies between classes):
    max |fisherkit - torch| / max |torch|, bound 1e-4. onnxruntime on the same ONNX files is
    reported too when installed.
 4. `fisherkit run` on a tiny object-scene set (scripts/make_object_scenes.py: 3 classes x
    (4 train + 2 test) images of 256-320 px, patch side 128) with each model, under
    /usr/bin/time -v: wall time and peak RSS (accuracy means nothing with random weights).

Writes WORK/<exporter>/summary.json and prints the numbers; exits 1 if a comparison exceeds
its bound or a step fails.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "backbones.md")
SECTION = "### The paper's VGG-16 on your own machine"
WEIGHTS_LINE = 'vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").eval()'
SEEDED = """def _seeded_vgg16():
    torch.manual_seed(0)
    v = torchvision.models.vgg16(weights=None)
    with torch.no_grad():
        for m in v.modules():
            if getattr(m, "bias", None) is not None:
                m.bias.normal_(0.0, 0.1)
    return v
vgg = _seeded_vgg16().eval()"""
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
BOUND = 1e-4


def guide_code():
    """The first ```python block after SECTION in docs/backbones.md."""
    text = open(GUIDE, encoding="utf-8").read()
    start = text.index(SECTION)
    m = re.search(r"```python\n(.*?)```", text[start:], re.S)
    return m.group(1)


def export(workdir, exporter):
    """Runs the guide's code in workdir; returns (the VggConv class, the seeded vgg, log)."""
    code = guide_code()
    if WEIGHTS_LINE not in code:
        sys.exit(f"the guide no longer has the line {WEIGHTS_LINE!r}; update this script")
    code = code.replace(WEIGHTS_LINE, SEEDED)
    if exporter == "legacy":
        code = code.replace("opset_version=", "dynamo=False, opset_version=")
    os.makedirs(workdir, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(workdir)
    ns = {}
    t = time.time()
    try:
        exec(compile(code, "docs/backbones.md (guide)", "exec"), ns)
    finally:
        os.chdir(cwd)
    return ns["VggConv"], ns["vgg"], time.time() - t


def describe_onnx(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    inits = {i.name for i in g.initializer}
    inp = [i for i in g.input if i.name not in inits][0]
    dims = [d.dim_value or d.dim_param for d in inp.type.tensor_type.shape.dim]
    ext = sorted({e.value for i in g.initializer for e in i.external_data if e.key == "location"})
    files = [os.path.basename(path)] + ext
    size = sum(os.path.getsize(os.path.join(os.path.dirname(path), f)) for f in files)
    ops = [n.op_type for n in g.node]
    return {
        "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "input": dims,
        "files": files,
        "bytes": size,
        "last_ops": ops[-4:],
    }


def photos(workdir):
    """chelsea's centre square at 224 and 320 px: {side: (path, uint8 HxWx3)}."""
    from PIL import Image
    from skimage import data
    img = data.chelsea()
    h, w, _ = img.shape
    s = min(h, w)
    y, x = (h - s) // 2, (w - s) // 2
    square = Image.fromarray(img[y:y + s, x:x + s])
    out = {}
    for side in (224, 320):
        p = os.path.join(workdir, f"chelsea_{side}.png")
        a = np.asarray(square.resize((side, side), Image.BILINEAR))
        Image.fromarray(a).save(p)
        out[side] = (p, np.asarray(Image.open(p).convert("RGB")))
    return out


def to_input(pixels):
    """fisherkit's (and torchvision's) preprocessing: (pixel / 255 - mean) / std, (1, 3, H, W)."""
    x = (pixels.astype(np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)[None].copy()


def log_softmax(s):
    s = s.astype(np.float64)
    m = s.max(axis=1, keepdims=True)
    return s - m - np.log(np.exp(s - m).sum(axis=1, keepdims=True))


def compare(got, want):
    """got, want: (n, C) log-probabilities. Relative difference of the row-centred values."""
    g = got - got.mean(axis=1, keepdims=True)
    w = want - want.mean(axis=1, keepdims=True)
    return {
        "rows": int(want.shape[0]),
        "rel_centred": float(np.abs(g - w).max() / np.abs(w).max()),
        "max_abs_logprob": float(np.abs(got - want).max()),
        "torch_logprob_range": [float(want.min()), float(want.max())],
    }


def fisherkit_descriptors(binary, model, image, out, mode, stride=0.5):
    cmd = [binary, model, image, "--scales", "224", "--mode", mode, "--stride", str(stride),
           "--reps", "3", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return np.load(out + "-224.npy").astype(np.float64), r.stdout


def time_v(cmd, log):
    """Runs cmd under /usr/bin/time -v; (exit code, wall s, peak RSS MB, stderr tail)."""
    t = time.time()
    with open(log, "w") as f:
        r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=f, stderr=subprocess.STDOUT)
    wall = time.time() - t
    text = open(log).read()
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return r.returncode, wall, (int(rss.group(1)) / 1024 if rss else None), text


def main():
    args = parse_args()

    import torch
    import torchvision
    torch.set_num_threads(2)
    work = os.path.abspath(os.path.join(args.work, args.exporter))
    os.makedirs(work, exist_ok=True)
    summary = {"torch": torch.__version__, "torchvision": torchvision.__version__,
               "exporter": args.exporter}
    try:
        import onnx
        summary["onnx"] = onnx.__version__
    except ImportError:
        pass
    failures = []

    VggConv, vgg, a_path, b_path = guide_exports(args, work, summary)
    torch_map, torch_fc = torch_references(VggConv, vgg)
    imgs = photo_checks(args, work, a_path, b_path, torch_map, torch_fc, summary, failures)
    onnxruntime_check(imgs, a_path, b_path, torch_map, torch_fc, summary)
    if not args.skip_run:
        scene_runs(args, work, a_path, b_path, summary, failures)
    finish(work, summary, failures)


def parse_args():
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True, help="scratch folder (models, images, runs)")
    ap.add_argument("--exporter", choices=["dynamo", "legacy"], default="dynamo",
                    help="dynamo: the guide as written (torch's default exporter); legacy: dynamo=False")
    ap.add_argument("--fisherkit", default=os.path.join(ROOT, "target/release/fisherkit"))
    ap.add_argument("--descriptors", default=os.path.join(ROOT, "target/release/examples/onnx_descriptors"))
    ap.add_argument("--skip-run", action="store_true", help="skip step 4 (fisherkit run)")
    return ap.parse_args()


def guide_exports(args, work, summary):
    """Step 1: the guide's exports, described in summary; (VggConv, vgg, path of (a), path of (b))."""
    import torch
    import torchvision

    # 1. The guide's exports.
    VggConv, vgg, secs = export(work, args.exporter)
    summary["export_seconds"] = round(secs, 1)
    a_path, b_path = os.path.join(work, "vgg16.onnx"), os.path.join(work, "vgg16_conv.onnx")
    summary["models"] = {"a": describe_onnx(a_path), "b": describe_onnx(b_path)}
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, exporter "
          f"{args.exporter}: exported in {secs:.1f} s")
    for k, v in summary["models"].items():
        print(f"  ({k}) {v}")
    return VggConv, vgg, a_path, b_path


def torch_references(VggConv, vgg):
    """The torch references: (torch_map, torch_fc), functions of a (1, 3, H, W) input."""
    import torch

    # The torch references: (a) the module itself, (b) VggConv's fc8 score map (before its mean).
    conv = VggConv(vgg).eval()

    def torch_map(x):
        with torch.no_grad():
            t = torch.relu(conv.fc7(torch.relu(conv.fc6(conv.features(torch.from_numpy(x))))))
            return conv.fc8(t)[0].numpy()  # (1000, h, w)

    def torch_fc(x):
        with torch.no_grad():
            return vgg(torch.from_numpy(x)).numpy()  # (1, 1000)

    return torch_map, torch_fc


def photo_checks(args, work, a_path, b_path, torch_map, torch_fc, summary, failures):
    """Steps 2-3: fisherkit against torch on the photo; returns the photos."""
    # 2.-3. One real photo, fisherkit against torch.
    imgs = photos(work)
    cases = [
        ("b dense 224", b_path, 224, "dense", lambda p: torch_map(to_input(p)).reshape(1000, -1).T),
        ("b dense 320", b_path, 320, "dense", lambda p: torch_map(to_input(p)).reshape(1000, -1).T),
        ("a exact 224", a_path, 224, "exact", lambda p: torch_fc(to_input(p))),
        ("a exact 320", a_path, 320, "exact", lambda p: torch_fc(to_input(p[48:272, 48:272]))),
    ]
    summary["compare"] = {}
    for name, model, side, mode, ref in cases:
        path, pixels = imgs[side]
        got, out = fisherkit_descriptors(args.descriptors, model, path,
                                         os.path.join(work, name.replace(" ", "_")), mode)
        want = log_softmax(ref(pixels))
        if got.shape != want.shape:
            failures.append(name)
            print(f"  {name}: fisherkit gave {got.shape[0]} descriptors, torch {want.shape[0]}  FAIL")
            for line in out.strip().splitlines():
                print(f"      {line}")
            summary["compare"][name] = {"rows": int(got.shape[0]), "torch_rows": int(want.shape[0]),
                                        "fisherkit": out.strip().splitlines()}
            continue
        c = compare(got, want)
        c["fisherkit"] = out.strip().splitlines()
        summary["compare"][name] = c
        ok = c["rel_centred"] <= BOUND
        if not ok:
            failures.append(name)
        print(f"  {name}: {c['rows']} descriptors, centred rel diff {c['rel_centred']:.2e}, "
              f"max |d log p| {c['max_abs_logprob']:.2e}, torch log p in "
              f"[{c['torch_logprob_range'][0]:.3f}, {c['torch_logprob_range'][1]:.3f}]"
              f"{'' if ok else '  FAIL'}")
        for line in c["fisherkit"]:
            print(f"      {line}")
    return imgs


def onnxruntime_check(imgs, a_path, b_path, torch_map, torch_fc, summary):
    """onnxruntime against torch at 224, when it is installed."""
    try:
        import onnxruntime as ort
        x = to_input(imgs[224][1])
        want = {"a": log_softmax(torch_fc(x)), "b": log_softmax(torch_map(x).reshape(1000, -1).T)}
        summary["onnxruntime"] = {"version": ort.__version__}
        for k, p in (("a", a_path), ("b", b_path)):
            s = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
            got = log_softmax(s.run(None, {s.get_inputs()[0].name: x})[0])
            summary["onnxruntime"][k] = compare(got, want[k])["rel_centred"]
        print(f"  onnxruntime {ort.__version__} vs torch at 224: centred rel diff "
              f"(a) {summary['onnxruntime']['a']:.2e}, (b) {summary['onnxruntime']['b']:.2e}")
    except ImportError:
        pass


def scene_runs(args, work, a_path, b_path, summary, failures):
    """Step 4: `fisherkit run` with each model on a tiny scene set, under /usr/bin/time -v."""
    # 4. fisherkit run on a tiny scene set.
    scenes = os.path.join(os.path.dirname(work), "scenes")
    if not os.path.isdir(os.path.join(scenes, "test")):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/make_object_scenes.py"),
                        "--out", scenes, "--classes", "3", "--train-per-class", "4",
                        "--test-per-class", "2", "--min-side", "256", "--max-side", "320"],
                       check=True, stdout=subprocess.DEVNULL)
    summary["run"] = {}
    for name, model in (("b dense", b_path), ("a exact", a_path)):
        tag = name.replace(" ", "_")
        report = os.path.join(work, f"run_{tag}.json")
        cmd = [args.fisherkit, "run", "--train", os.path.join(scenes, "train"),
               "--test", os.path.join(scenes, "test"), "--cnn", model, "--scales", "128",
               "--pca-dim", "32", "--gmm-components", "4", "--mfa-components", "2",
               "--mfa-factors", "2", "--c-grid", "1", "--cv-folds", "2", "--no-cache",
               "--encoders", "cnn-global,gmm-fv:mean,mfa-fs:loading", "--report", report]
        code, wall, rss, text = time_v(cmd, os.path.join(work, f"run_{tag}.log"))
        info = [ln.strip() for ln in text.splitlines() if "ONNX model" in ln or "exact patches" in ln]
        summary["run"][name] = {"command": " ".join(cmd), "exit": code, "wall_s": round(wall, 1),
                                "peak_rss_mb": rss and round(rss), "fisherkit_says": info,
                                "images": 18, "s_per_image": round(wall / 18, 2)}
        if code != 0:
            failures.append(f"run {name}")
            print(text[-3000:])
        print(f"  fisherkit run ({name}): exit {code}, {wall:.1f} s, peak RSS "
              f"{rss and round(rss)} MB; {' | '.join(info)}")
        if code == 0:
            rep = json.load(open(report))
            summary["run"][name]["report_excerpt"] = {
                k: rep[k] for k in ("cnn", "timings", "results") if k in rep}


def finish(work, summary, failures):
    """Writes summary.json, prints the verdict and exits 1 on any failure."""
    summary["failures"] = failures
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {os.path.join(work, 'summary.json')}; "
          f"{'all within bounds' if not failures else 'FAILED: ' + ', '.join(failures)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
