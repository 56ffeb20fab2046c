#!/usr/bin/env bash
# Interleaved before/after timings of two fisherkit-bench binaries on the same
# cached data: each round runs OLD then NEW; prints the best and the median of
# the rounds' per-run minima, per binary. One thread unless THREADS is given.
#   bash docs/evidence/ab-2026-12-05.sh WORK OLD NEW DATA_DIR [ROUNDS] [THREADS]
# WORK: mfa-fs | mfa-em | fv. DATA_DIR: a folder written by scripts/bench.py, e.g.
# bench-out/data/mfa_d500_k50_r10_n100000_b10x1000_s0_g20_v1 (MFA) or
# bench-out/data/real_d500_k256_n100000_b20x1000_s0_v2 (GMM).
set -euo pipefail
work=$1; old=$2; new=$3; d=$4; rounds=${5:-5}; thr=${6:-1}
case $work in
  mfa-fs) args=(mfa-fs --reps 9 --bags "$d/bags.npy" --weights "$d/w.npy" --means "$d/mu.npy" --loadings "$d/lam.npy" --psi "$d/psi.npy"); key=per_bag_s_all ;;
  mfa-em) args=(mfa-em --reps 3 --x "$d/x.npy" --weights "$d/w0.npy" --means "$d/mu0.npy" --loadings "$d/lam0.npy" --psi "$d/psi0.npy"); key=iteration_s_all ;;
  fv) args=(fv --reps 9 --bags "$d/bags.npy" --weights "$d/w.npy" --means "$d/mu.npy" --variances "$d/var.npy"); key=per_bag_s_all ;;
  *) echo "unknown work $work (mfa-fs, mfa-em or fv)" >&2; exit 2 ;;
esac
for _ in $(seq "$rounds"); do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    RAYON_NUM_THREADS=$thr "$bin" "${args[@]}" |
      python3 -c "import json, sys; print('$side', min(json.load(sys.stdin)['$key']) * 1e3)"
  done
done | python3 -c "
import sys, collections
d = collections.defaultdict(list)
for line in sys.stdin:
    side, t = line.split()
    d[side].append(float(t))
for side in ('old', 'new'):
    v = sorted(d[side])
    print(f'$work {side}: best {v[0]:.3f} ms, median {v[len(v) // 2]:.3f} ms over {len(v)} rounds')"
