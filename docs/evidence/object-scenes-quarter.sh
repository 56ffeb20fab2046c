#!/usr/bin/env bash
# The quarter-size evidence run (1/4 of the MIT-Indoor-shaped object-scene set), same settings as the full run. SqueezeNet, the default CNN when it ran.
exec /usr/bin/time -v "$FK" run --cnn squeezenet --train /work/scenes-quarter/train --test /work/scenes-quarter/test \
  --cache /work/evidence/cache-quarter --report report.json --sample-images 500 --compact-pca 5000 \
  --encoders 'cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
