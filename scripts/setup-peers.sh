#!/usr/bin/env bash
# Installs what the test suite compares against: VLFeat (Debian's libvlfeat-dev),
# Debian's Fashion-MNIST, and the Python peers (numpy, scikit-learn, scikit-image).
# Safe to run again: it skips what is already there.
set -euo pipefail
need_apt=()
[ -f /usr/include/vl/fisher.h ] || need_apt+=(libvlfeat-dev)
[ -d /usr/share/datasets/fashion-mnist ] || need_apt+=(dataset-fashion-mnist)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../requirements-test.txt"
