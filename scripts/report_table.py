#!/usr/bin/env python3
"""Prints the paper's Table 1/2/3 rows from a `fisherkit run --report` JSON file as Markdown.

One row per encoder: mean per-class accuracy per scale (the report's per-scale rows) and over
all scales, the compact "+ PCA" variant when the run had `--compact-pca`, each with its standard
error sqrt(p (1 - p) / n_test) (binomial, on the test images), then the stage timings and the
peak memory the report recorded.

    python3 scripts/report_table.py report.json
    python3 scripts/report_table.py docs/evidence/object-scenes-full.report.json.gz   # gzip-compressed reports too
"""
import gzip
import json
import math
import sys


def se(p, n):
    return 100.0 * math.sqrt(max(p * (1.0 - p), 0.0) / max(n, 1))


def main(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        r = json.load(f)
    n_test = r["dataset"]["n_test"]
    scales = [row["scale"] for row in r["results"] if row.get("scale")]
    scales = list(dict.fromkeys(scales))
    specs = []
    for row in r["results"]:
        key = (row["spec"], row["whitened"])
        if key not in specs:
            specs.append(key)
    head = ["encoder"] + [f"scale {s}" for s in scales] + ["all scales", "dim", "+ PCA (dim)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for spec, whitened in specs:
        rows = [x for x in r["results"] if x["spec"] == spec and x["whitened"] == whitened]
        cell = lambda x: f"{100 * x['accuracy']:.1f} ± {se(x['accuracy'], n_test):.1f}"
        per = {x["scale"]: x for x in rows if x.get("scale") and not x.get("compact")}
        main_row = [x for x in rows if not x.get("scale") and not x.get("compact")]
        compact = [x for x in rows if x.get("compact")]
        line = [spec + (" (whitened)" if whitened else "")]
        line += [cell(per[s]) if s in per else "–" for s in scales]
        line += [cell(main_row[0]) if main_row else "–", str(main_row[0]["dim"]) if main_row else "–"]
        line += [f"{cell(compact[0])} ({compact[0]['compact']})" if compact else "–"]
        print("| " + " | ".join(line) + " |")
    d = r["dataset"]
    print()
    print(
        f"{len(d['classes'])} classes, {d['n_train']} training and {n_test} test images, "
        f"{len(d['skipped'])} skipped; descriptors per image and scale "
        f"{[round(v) for v in d['descriptors_per_image']]}; PCA dims {d['pca_dims']}; "
        f"peak RSS {r.get('peak_rss_mb') or 0:.0f} MB (the process's own VmHWM)"
    )
    print()
    print("| stage | seconds |")
    print("|---|---|")
    for name, secs in r["timings"]:
        print(f"| {name} | {secs:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
