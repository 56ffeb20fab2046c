#!/usr/bin/env bash
# The quarter-size evidence run with EfficientNet-Lite0: the settings of object-scenes-quarter.sh
# with --cnn efficientnet-lite0 (the default of `fisherkit run` since). Run 2026-12-02 from a folder
# holding report.json, /usr/bin/time -v output in its log; the machine was shared with compile jobs.
exec /usr/bin/time -v "$FK" run --cnn efficientnet-lite0 --train /work/scenes-quarter/train --test /work/scenes-quarter/test \
  --cache /work/evidence/cache-quarter-effnet --report report.json --sample-images 500 --compact-pca 5000 \
  --encoders 'cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
