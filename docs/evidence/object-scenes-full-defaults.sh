#!/usr/bin/env bash
# The 60-minute target of issue #9: `fisherkit run` with every setting at its default
# (EfficientNet-Lite0, 3 dense scales 96/128/160, PCA 500, GMM K=50, MFA K=50 R=10, encoders
# gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading) on the full MIT-Indoor-shaped object-scene set
# (python3 scripts/make_object_scenes.py --out /work/scenes), a fresh run folder, from a folder that
# then holds report.json; /usr/bin/time -v output at the end of its log.
set -euo pipefail
rm -rf /work/evidence/cache-full-defaults
exec /usr/bin/time -v "$FK" run --train /work/scenes/train --test /work/scenes/test \
  --cache /work/evidence/cache-full-defaults --report report.json
