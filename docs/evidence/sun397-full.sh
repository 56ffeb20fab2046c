#!/usr/bin/env bash
# SUN397-shaped descriptor run at full size (issue 29's target): 397 classes x (50 + 50) images,
# D = 512, ~100 descriptors per image (8.15 GB of files, made by
#   python3 scripts/make_sun397_descriptors.py --out /work/evidence/sun397-full/data ),
# the pipeline's defaults (PCA 500, GMM K = 50, MFA K = 50 R = 10, the four encoders, C grid
# 0.01..10 by 3-fold CV) with --store q8. Resumable: run it again and it continues from its run
# folder. FK names the binary (a copy, so that rebuilding does not disturb a running measurement).
set -e
cd /work/evidence/sun397-full
exec /usr/bin/time -v ${FK:-fisherkit} run --train-descriptors data/train.npz \
  --test-descriptors data/test.npz --store q8 --cache cache --report report.json
