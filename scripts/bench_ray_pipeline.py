#!/usr/bin/env python3
"""Ray's overhead on the whole pipeline: fisherkit.pipeline.run (one process,
all cores) against fisherkit.ray.run_pipeline (a local Ray cluster with the
same cores, one CPU per task) on the same image folders and options, each
with a fresh cache. Prints the wall times, the ratio, the stage timings of
both reports and whether the results agree.

    python3 scripts/bench_ray_pipeline.py --data /work/scenes-ray --cpus 2 \\
        --option pca_dim=100 --option gmm_components=16
"""

import argparse
import json
import os
import tempfile
import time


def parse_option(text):
    name, _, value = text.partition("=")
    if "," in value:
        return name, [float(v) if "." in v else int(v) for v in value.split(",")]
    for cast in (int, float):
        try:
            return name, cast(value)
        except ValueError:
            pass
    return name, value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with train/ and test/")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--images-per-task", type=int, default=16)
    ap.add_argument("--option", action="append", default=[], help="NAME=VALUE, a fisherkit run option")
    ap.add_argument("--out", default=None, help="write both reports here (JSON)")
    a = ap.parse_args()
    options = dict(parse_option(o) for o in a.option)
    import ray

    import fisherkit.pipeline
    import fisherkit.ray

    train, test = os.path.join(a.data, "train"), os.path.join(a.data, "test")
    work = tempfile.mkdtemp(prefix="fk-bench-ray-")
    t = time.perf_counter()
    local = fisherkit.pipeline.run(train, test, cache=os.path.join(work, "local"), **options)
    t_local = time.perf_counter() - t

    temp = tempfile.mkdtemp(prefix="fkr", dir="/tmp")
    t = time.perf_counter()
    ray.init(num_cpus=a.cpus, include_dashboard=False, _temp_dir=temp, log_to_driver=False)
    t_init = time.perf_counter() - t
    t = time.perf_counter()
    dist = fisherkit.ray.run_pipeline(train, test, cache=os.path.join(work, "ray"),
                                      images_per_task=a.images_per_task, **options)
    t_ray = time.perf_counter() - t
    ray.shutdown()

    def rows(r):
        return [(x["spec"], x["whitened"], x["scale"], x["compact"], x["accuracy"], x["c"]) for x in r["results"]]

    print(f"images: {local['dataset']['n_train']} train + {local['dataset']['n_test']} test, cpus {a.cpus}")
    print(f"single process  {t_local:8.1f} s")
    print(f"ray             {t_ray:8.1f} s  (+ {t_init:.1f} s ray.init)   ratio {t_ray / t_local:.3f}")
    print("same results:", rows(local) == rows(dist))
    for name, r in (("single process", local), ("ray", dist)):
        print(f"stages ({name}):")
        for stage, secs in r["timings"]:
            if not stage.startswith("kernel "):
                print(f"  {stage:<48} {secs:8.1f} s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"single_process_s": t_local, "ray_s": t_ray, "ray_init_s": t_init,
                       "local": local, "ray": dist}, f, indent=1)


if __name__ == "__main__":
    main()
