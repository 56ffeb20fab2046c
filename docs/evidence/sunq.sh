#!/usr/bin/env bash
# SUN397-shaped descriptor files at a quarter of the images (397 x (13 + 13), D = 512, ~100 per image;
# scripts/make_sun397_descriptors.py --fraction 0.25 --out /tmp/sun397-q), defaults otherwise
# (PCA 500, GMM 50, MFA 50/10), q8 stores: the primal path on real widths (25 000 and 250 000).
cd /work/evidence/sunq
exec /usr/bin/time -v ${FK:-fisherkit} run --train-descriptors /tmp/sun397-q/train.npz \
  --test-descriptors /tmp/sun397-q/test.npz --encoders gmm-fv:var,mfa-fs:loading --store q8 \
  --cache /work/evidence/cache-sunq --report report.json
