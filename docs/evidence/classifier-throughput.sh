#!/usr/bin/env bash
# predict against the CNN pass alone on the same 335 photos, one after the other on an otherwise
# idle machine (the classifier of docs/evidence/classifier-q.sh), and the classifier's load time.
set -euo pipefail
FK=${FK:-/work/main/target/release/fisherkit}
cd /work/evidence
uptime
/usr/bin/time -v "$FK" predict --model scene-q.safetensors /work/scenes-quarter/test -o pred-test-quiet.csv \
  > log-predict-quiet.txt 2>&1
cmp <(cut -d, -f2 pred-test.csv) <(cut -d, -f2 pred-test-quiet.csv) && echo "same labels as the first predict"
/usr/bin/time -v python3 - > cnn-alone-quiet.txt 2> log-cnn-alone-quiet.txt <<'PY'
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
for _ in range(3):
    t = time.perf_counter()
    c = fisherkit.SceneClassifier.load("/work/evidence/scene-q.safetensors")
    print(f"load: {time.perf_counter() - t:.3f} s, encoder {c.encoder_}, {c.n_features_} dims, {len(c.classes_)} classes")
PY
grep -E "Elapsed|Maximum resident|User time|System time" log-predict-quiet.txt log-cnn-alone-quiet.txt
cat cnn-alone-quiet.txt load-time.txt
uptime
