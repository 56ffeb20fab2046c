#!/usr/bin/env bash
# f32 vs q8 encoding stores on the quarter-size MIT-shaped object-scene set: one run with exact
# stores (CNN + encoding), then the same settings with q8 stores, which import the f32 encodings
# (no CNN again) and redo the classifier stage. Defaults otherwise (EfficientNet-Lite0, 3 scales).
set -euo pipefail
FK=/work/main/target/release/fisherkit
cd /work/evidence
[ -d /work/scenes-quarter/train ] || python3 /work/main/scripts/make_object_scenes.py --out /work/scenes-quarter --fraction 0.25
ENC='cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
for fmt in f32 q8; do
  /usr/bin/time -v "$FK" run --train /work/scenes-quarter/train --test /work/scenes-quarter/test \
    --cache /work/evidence/cache-q8cmp --report report-$fmt.json --sample-images 500 --store $fmt \
    --encoders "$ENC" > log-$fmt.txt 2>&1
done
du -sh cache-q8cmp/runs/*/*.store >> du.txt
