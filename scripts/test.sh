#!/usr/bin/env bash
# The whole test suite (the README's test command): installs the peers the tests
# compare against, then runs the Rust tests. With FISHERKIT_REQUIRE_PEERS=1
# (set here) a test whose peer is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-peers.sh
export FISHERKIT_REQUIRE_PEERS=1
cargo test --workspace
