#!/usr/bin/env python3
"""em-rules.py for the model files of a run folder (their metadata key
`log_likelihood_history`), when the run was stopped before its report:

    python3 docs/evidence/em-rules-models.py RUN_FOLDER
"""
import glob
import json
import struct
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from importlib import import_module

first_stop = import_module("em-rules").first_stop

for path in sorted(glob.glob(f"{sys.argv[1]}/*-K*.safetensors")):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    h = [float(v) for v in meta["log_likelihood_history"].split(",")]
    smallest = min(abs(h[t] - h[t - 1]) for t in range(1, len(h)))
    stops = [first_stop(h, 1e-6, True), first_stop(h, 1e-3, False)]
    print(f"{path.rsplit('/', 1)[1]}: {len(h)} iterations (cap {meta['max_iter']}); "
          f"relative 1e-6 stops at {stops[0]}, absolute 1e-3 stops at {stops[1]}; "
          f"smallest absolute change {smallest:.2e}")
