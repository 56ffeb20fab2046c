#!/usr/bin/env bash
# Issue 29: the full SUN397-shaped image run at the pipeline's defaults (EfficientNet-Lite0, scales
# 96/128/160 dense, PCA 500, GMM K = 50, MFA K = 50 R = 10, the four encoders, q8 stores, C by 3-fold
# CV; 397 classes x (50 + 50) = 39 700 photos made by
#   python3 scripts/make_object_scenes.py --out /work/sun397-scenes --shape sun397 ),
# saving the classifier. Resumable: started again, the same command continues from its run folder
# (the CNN pass from its journals, the classifier stage from its kernel files). Every start appends
# its log and its /usr/bin/time -v block to run.log. FK names the binary (a copy, so that rebuilding
# does not disturb a running measurement).
set -euo pipefail
mkdir -p /work/evidence/sun-images
cd /work/evidence/sun-images
echo "=== start $(date -u +%FT%TZ) binary ${FK:-fisherkit} ($(cat "$(dirname "${FK:-/x}")/REV" 2>/dev/null || echo '?'))" >> run.log
exec /usr/bin/time -v "${FK:-fisherkit}" run --train /work/sun397-scenes/train \
  --test /work/sun397-scenes/test --cache cache --report report.json \
  --save-model sun397.safetensors >> run.log 2>&1
