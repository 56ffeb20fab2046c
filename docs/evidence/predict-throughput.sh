#!/usr/bin/env bash
# Issue 30's throughput target: `fisherkit predict` against the CNN pass alone on the same photos
# and threads (examples/cnn_pass.rs: the same batches, descriptor settings and global vector as
# predict, without encoding and SVM), one after the other on an otherwise idle machine.
#   MODEL: a classifier saved by `fisherkit run --save-model` (docs/evidence/classifier-q.sh's
#          settings on the quarter-size MIT-shaped set: mfa-fs:loading&cnn-global, 751 000 dims,
#          67 classes, EfficientNet-Lite0, 3 scales);
#   OLD:   optionally a fisherkit binary to compare with (e.g. one before the batched SVM scores).
# Build: cargo build --release -p fisherkit-cli && cargo build --release -p fisherkit-pipeline --example cnn_pass
set -euo pipefail
FK=${FK:-target/release/fisherkit}
CNN_PASS=${CNN_PASS:-target/release/examples/cnn_pass}
MODEL=${MODEL:-scene-q.safetensors}
PHOTOS=${PHOTOS:-/work/scenes-quarter/test}
uptime
if [ -n "${OLD:-}" ]; then
  /usr/bin/time -v "$OLD" predict --model "$MODEL" "$PHOTOS" -o pred-old.csv 2> log-predict-old.txt
fi
/usr/bin/time -v "$FK" predict --model "$MODEL" "$PHOTOS" -o pred-new.csv 2> log-predict-new.txt
/usr/bin/time -v "$CNN_PASS" "$MODEL" "$PHOTOS" > cnn-pass.txt 2> log-cnn-pass.txt
[ -z "${OLD:-}" ] || cmp <(cut -d, -f2 pred-old.csv) <(cut -d, -f2 pred-new.csv) && echo "same labels"
grep -E "Elapsed|Maximum resident|User time|System time" log-predict-*.txt log-cnn-pass.txt
cat cnn-pass.txt
uptime
