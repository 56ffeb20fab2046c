#!/usr/bin/env bash
# Byte-compares what two fisherkit binaries compute, to show that a refactoring
# did not change behaviour: GMM, k-means and MFA fits, Fisher vectors (every
# part, VLFeat skips, fast), VLAD and MFA Fisher scores, in float32 and float64,
# on planted data far from the origin (numpy, seeded).
#
#   bash scripts/byte_compare.sh OLD/fisherkit NEW/fisherkit [--demo]
#
# --demo also compares the reports of `fisherkit demo` (the whole pipeline).
# Prints one line per output (`same` or `DIFFERENT`) and exits 1 if any differ.
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); demo=${3:-}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
k, d = 6, 24
means = rng.normal(0, 3, (k, d)) + 40.0           # far from the origin
for dtype in ("float32", "float64"):
    lab = rng.integers(0, k, 6000)
    x = (means[lab] + rng.normal(0, 1, (6000, d)) * rng.uniform(0.5, 2, d)).astype(dtype)
    np.save(f"{out}/x_{dtype}.npy", x)
    bags = {f"b{i}": x[i * 300:(i + 1) * 300 + 37 * i] for i in range(8)}
    np.savez(f"{out}/bags_{dtype}.npz", **bags)
PY
status=0
compare() { # name, then the command line after the binary (with @OUT@ for the output folder)
  local name=$1; shift
  for side in old new; do
    mkdir -p "$work/$side"
    local bin; [ $side = old ] && bin=$old || bin=$new
    "$bin" --quiet "${@//@OUT@/$work/$side}" >/dev/null
  done
  if cmp -s "$work/old/$name" "$work/new/$name"; then echo "same       $name"; else echo "DIFFERENT  $name$(ulps "$work/old/$name" "$work/new/$name")"; status=1; fi
}
ulps() { # for two .npy files of the same shape: the largest difference in units in the last place
  case $1 in *.npy) ;; *) return 0 ;; esac
  python3 -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind != 'f':
    sys.exit()
i = np.dtype('i%d' % a.dtype.itemsize)
def ordered(x):  # the float's position on the number line as an integer
    v = x.view(i).astype(np.int64)
    return np.where(v < 0, np.iinfo(i).min - v, v)
d = np.abs(ordered(a) - ordered(b))
print(f' (max {d.max()} ulp, {np.count_nonzero(d)} of {d.size} values differ)')" "$1" "$2"
}
for t in float32 float64; do
  x=$work/x_$t.npy; b=$work/bags_$t.npz
  compare gmm_$t.safetensors gmm fit --input "$x" --components 6 --seed 3 --output @OUT@/gmm_$t.safetensors
  compare km_$t.npy kmeans fit --input "$x" --clusters 6 --seed 3 --output @OUT@/km_$t.npy
  compare mfa_$t.safetensors mfa fit --input "$x" --components 4 --factors 3 --seed 3 --output @OUT@/mfa_$t.safetensors
  # The encoders read the old side's models, so only the encoders differ.
  for side in new; do cp "$work/old/gmm_$t.safetensors" "$work/old/mfa_$t.safetensors" "$work/old/km_$t.npy" "$work/$side/"; done
  compare fv_$t.npy encode --model @OUT@/gmm_$t.safetensors --input "$b" --parts prior,mean,var --output @OUT@/fv_$t.npy
  compare fvraw_$t.npy encode --model @OUT@/gmm_$t.safetensors --input "$b" --parts prior,mean,var --power 1 --no-l2 --output @OUT@/fvraw_$t.npy
  compare fvskip_$t.npy encode --model @OUT@/gmm_$t.safetensors --input "$b" --vlfeat-skips --output @OUT@/fvskip_$t.npy
  compare fvfast_$t.npy encode --model @OUT@/gmm_$t.safetensors --input "$b" --fast --output @OUT@/fvfast_$t.npy
  compare vlad_$t.npy encode --encoder vlad --model @OUT@/km_$t.npy --input "$b" --output @OUT@/vlad_$t.npy
  compare fs_$t.npy encode --model @OUT@/mfa_$t.safetensors --input "$b" --parts mean,loading --power 1 --no-l2 --output @OUT@/fs_$t.npy
done
if [ "$demo" = --demo ]; then
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    # the same output folder for both (the report and the model record their paths)
    rm -rf "$work/demo"
    "$bin" --quiet demo --out "$work/demo" >/dev/null
    mv "$work/demo" "$work/$side/demo"
    # timings (the top-level table and each result's *_seconds) and memory vary run to run
    python3 -c "
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ('timings', 'peak_rss_mb') and not k.endswith('_seconds')}
    return [strip(x) for x in v] if isinstance(v, list) else v
json.dump(strip(json.load(open(sys.argv[1]))), open(sys.argv[2], 'w'), sort_keys=True)" "$work/$side/demo/report.json" "$work/$side/demo.json"
  done
  if cmp -s "$work/old/demo.json" "$work/new/demo.json"; then echo "same       demo report (timings and memory left out)"; else echo "DIFFERENT  demo report"; status=1; fi
  if cmp -s "$work/old/demo/scene.safetensors" "$work/new/demo/scene.safetensors"; then echo "same       demo classifier"; else echo "DIFFERENT  demo classifier"; status=1; fi
fi
exit $status
