#!/usr/bin/env bash
# Before/after timings of the MFA sparse path (docs/math.md §4.6), interleaved:
# each round runs the old and the new fisherkit-bench on the same data, one after
# the other, and the best time of all rounds is kept per binary.
#   OLD=<fisherkit-bench of 7f80bd6> NEW=<fisherkit-bench of this commit> \
#     bash docs/evidence/bench-2026-12-04-mfa.sh DATA_DIR [THREADS] [ROUNDS]
# DATA_DIR: a folder written by scripts/bench.py (x.npy, bags.npy, w/mu/lam/psi(0).npy),
# e.g. bench-out/data/real_mfa_d500_k50_r10_n20000_b4x1000_s0_v1 after
# `python3 scripts/bench.py --mfa-only --data both --quick`.
set -euo pipefail
dir=$1; thr=${2:-1}; rounds=${3:-3}
m1=(--weights "$dir/w.npy" --means "$dir/mu.npy" --loadings "$dir/lam.npy" --psi "$dir/psi.npy")
m0=(--weights "$dir/w0.npy" --means "$dir/mu0.npy" --loadings "$dir/lam0.npy" --psi "$dir/psi0.npy")
best() { python3 -c "import json,sys; d=json.load(sys.stdin); print(min(d['$1']) * 1e3)"; }
declare -A fs em
for r in $(seq "$rounds"); do
  for which in OLD NEW; do
    bin=${!which}
    t=$(RAYON_NUM_THREADS=$thr "$bin" mfa-fs --reps 5 --bags "$dir/bags.npy" "${m1[@]}" | best per_bag_s_all)
    fs[$which]=$(python3 -c "print(min(${fs[$which]:-1e9}, $t))")
    t=$(RAYON_NUM_THREADS=$thr "$bin" mfa-em --reps 3 --x "$dir/x.npy" "${m0[@]}" | best iteration_s_all)
    em[$which]=$(python3 -c "print(min(${em[$which]:-1e9}, $t))")
  done
done
printf '%s, %s thread(s), best of %s rounds: MFA-FS per bag %.2f -> %.2f ms; MFA EM iteration %.1f -> %.1f ms\n' \
  "$(basename "$dir")" "$thr" "$rounds" "${fs[OLD]}" "${fs[NEW]}" "${em[OLD]}" "${em[NEW]}"
