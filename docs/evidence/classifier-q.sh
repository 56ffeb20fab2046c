#!/usr/bin/env bash
# The saved classifier on the quarter-size MIT-shaped object-scene set (67 classes,
# 1 340 training and 335 test photos; scripts/make_object_scenes.py --fraction 0.25):
#   1. `run --save-model` with the settings of docs/evidence/q8-compare.sh's f32 run,
#      whose run folder (models, f32 stores, kernels) it reuses, so only the classifier
#      stage runs again;
#   2. `predict` on the 335 test photos and on all 1 675 photos (throughput, peak RSS);
#   3. the CNN pass alone on the same photos (fisherkit.cnn.Descriptors, the same
#      network, scales and threads), for the predict/CNN throughput ratio;
#   4. `evaluate` on the test split, and the time to load the classifier.
# Resumable: each step is skipped when its output exists.
set -euo pipefail
FK=${FK:-/work/main/target/release/fisherkit}
DATA=/work/scenes-quarter
cd /work/evidence
ENC='cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
[ -f report-model.json ] || /usr/bin/time -v "$FK" run --train $DATA/train --test $DATA/test \
    --cache /work/evidence/cache-q8cmp --report report-model.json --sample-images 500 --store f32 \
    --encoders "$ENC" --save-model scene-q.safetensors > log-model.txt 2>&1
[ -f pred-test.csv ] || /usr/bin/time -v "$FK" predict --model scene-q.safetensors $DATA/test \
    -o pred-test.csv > log-predict-test.txt 2>&1
[ -f pred-all.csv ] || /usr/bin/time -v "$FK" predict --model scene-q.safetensors $DATA/train $DATA/test \
    -o pred-all.csv > log-predict-all.txt 2>&1
[ -f eval-test.json ] || "$FK" evaluate --model scene-q.safetensors --test $DATA/test \
    --report eval-test.json > log-eval.txt 2>&1
[ -f cnn-alone.txt ] || python3 - > cnn-alone.txt <<'PY'
import glob, time, fisherkit.cnn
paths = sorted(glob.glob("/work/scenes-quarter/test/*/*"))
d = fisherkit.cnn.Descriptors(scales=(96, 128, 160), cnn="efficientnet-lite0", global_descriptor=True)
t = time.perf_counter()
for i in range(0, len(paths), 8):
    d.transform(paths[i:i + 8])
s = time.perf_counter() - t
print(f"CNN alone: {len(paths)} photos in {s:.1f} s, {len(paths) / s:.2f} photos/s")
PY
python3 - > load-time.txt <<'PY'
import time, fisherkit
t = time.perf_counter()
c = fisherkit.SceneClassifier.load("/work/evidence/scene-q.safetensors")
print(f"load: {time.perf_counter() - t:.3f} s, encoder {c.encoder_}, {c.n_features_} dims, {len(c.classes_)} classes")
PY
ls -la scene-q.safetensors
