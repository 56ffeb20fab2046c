#!/usr/bin/env bash
# The quarter-size evidence run again after the fused EfficientNet-Lite0 kernels (stop 17):
# the settings of object-scenes-quarter-effnet.sh, a fresh cache, run 2026-12-02 from a folder
# that then holds report.json; /usr/bin/time -v output in its log. Machine otherwise idle.
exec /usr/bin/time -v "$FK" run --cnn efficientnet-lite0 --train /work/scenes-quarter/train --test /work/scenes-quarter/test \
  --cache /work/evidence/cache-quarter-effnet-2 --report report.json --sample-images 500 --compact-pca 5000 \
  --encoders 'cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
