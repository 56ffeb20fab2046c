#!/usr/bin/env bash
# The paper-sized evidence run (MIT-Indoor-shaped object-scene set, defaults + Table 1/2/3 rows).
exec /usr/bin/time -v "$FK" run --cnn squeezenet --train /work/scenes/train --test /work/scenes/test \
  --cache /work/evidence/cache-full --report report.json --sample-images 500 --compact-pca 5000 \
  --encoders 'cnn-global,gmm-fv:mean,gmm-fv:var,mfa-fs:mean,mfa-fs:loading,mfa-fs:loading&cnn-global'
