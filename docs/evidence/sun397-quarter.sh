#!/usr/bin/env bash
# The same run as sun397-full.sh at a quarter of the images (397 classes x (13 + 13), 10 322
# images; python3 scripts/make_sun397_descriptors.py --fraction 0.25 --out /tmp/sun397-q), from an
# empty run folder: every stage, for the peak RSS at two sizes.
set -e
mkdir -p /work/evidence/sun397-quarter && cd /work/evidence/sun397-quarter
exec /usr/bin/time -v ${FK:-fisherkit} run --train-descriptors /tmp/sun397-q/train.npz \
  --test-descriptors /tmp/sun397-q/test.npz --store q8 --cache cache --report report.json
