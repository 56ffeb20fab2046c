#!/usr/bin/env bash
# The whole test suite (the README's test command). Installs the peers the tests
# compare against (scripts/setup-peers.sh), then runs:
#   1. the Rust tests of every crate, with the feature onnx of fisherkit-cnn and
#      fisherkit-cli (tract; `--cnn model.onnx`) and the tests against VLFeat's C
#      library (feature vlfeat-tests of fisherkit, links -lvl) on: one build with
#      one feature resolution (a separate `-p …` run would rebuild faer, rayon &
#      co., whose features tract changes); the build without the features is
#      checked by `cargo clippy --workspace` (.ci/run),
#   2. the Python module: pip install . and pytest tests/python (if present),
#   3. the doc check: the commands of README.md and docs/guide.md on the bundled
#      data with the binary step 1 built, and the links of every Markdown page
#      (scripts/doc_check.py, a few minutes).
# FISHERKIT_REQUIRE_PEERS=1 makes a test whose peer is missing fail instead of skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-peers.sh
export FISHERKIT_REQUIRE_PEERS=1
cargo test --workspace --features fisherkit-cnn/onnx,fisherkit-cli/onnx,fisherkit/vlfeat-tests
if [ -f pyproject.toml ] && [ -d tests/python ]; then
  python3 -m pip install -q --disable-pip-version-check .
  python3 -m pytest -q tests/python
fi
python3 scripts/doc_check.py
