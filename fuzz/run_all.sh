#!/usr/bin/env bash
# Runs every fuzz target for SECONDS_PER_TARGET seconds (default 600), one at a
# time, on its corpus (fuzz/corpus-raw/<target>, seeded from fuzz/corpus/<target>
# and fuzz/seed_corpora.py). Needs nightly and cargo-fuzz:
#   cargo install cargo-fuzz && bash fuzz/run_all.sh [targets...]
set -uo pipefail
cd "$(dirname "$0")/.."
T=${SECONDS_PER_TARGET:-600}
targets=${*:-npy npz model image classifier}
declare -A maxlen=([npy]=4096 [npz]=8192 [model]=4096 [image]=16384 [classifier]=16384)
for t in $targets; do
  mkdir -p fuzz/corpus-raw/$t
  [ -d fuzz/corpus/$t ] && cp -n fuzz/corpus/$t/* fuzz/corpus-raw/$t/ 2>/dev/null
  echo "=== $t: $T s"
  cargo +nightly fuzz run "$t" fuzz/corpus-raw/$t -- \
    -max_total_time=$T -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -max_len=${maxlen[$t]} -print_final_stats=1 2>&1 | tail -n 60 > fuzz/last-run-$t.log
  echo "exit $? for $t"
done
