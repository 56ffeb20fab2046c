#!/usr/bin/env python3
"""Where each background model of a run would have stopped under another EM rule.

    python3 docs/evidence/em-rules.py REPORT.json [REPORT.json ...]

Reads the report's `models` (each with `log_likelihood_history`, every
iteration's mean log-likelihood per sample row) and applies the library's
stopping rule (fisherkit::stream::em_stopping_rule) offline: iteration t stops
the fit when the change from l_{t-1} to l_t is below the tolerance — absolute
|l_t - l_{t-1}| (the library's default, 1e-3, scikit-learn's) or relative
|l_t - l_{t-1}| / max(|l_{t-1}|, 1) (the pipeline's, 1e-6). (A component
re-seeded at that iteration keeps a real fit going; the history does not
record re-seeds, so "stops at t" is the earliest it could have stopped.)

A model the other rule would also have run to its cap is the same model bit
for bit (same data, same seed, same iterations), so its encodings and every
accuracy row built on it are the same.
"""
import json
import sys


def first_stop(history, tol, relative):
    """The 1-based iteration at which the rule is first met, or None."""
    for t in range(1, len(history)):
        prev, ll = history[t - 1], history[t]
        change = abs(ll - prev) / max(abs(prev), 1.0) if relative else abs(ll - prev)
        if change < tol:
            return t + 1
    return None


def main():
    rules = [("relative 1e-6 (pipeline)", 1e-6, True), ("absolute 1e-3 (library)", 1e-3, False)]
    print("| report | model | iterations (cap) | " + " | ".join(f"stops under {r[0]}" for r in rules)
          + " | smallest absolute change |")
    print("|---|---|---|" + "---|" * len(rules) + "---|")
    for path in sys.argv[1:]:
        with open(path) as f:
            report = json.load(f)
        for m in report["models"]:
            h = m.get("log_likelihood_history") or []
            if len(h) < 2:
                print(f"| {path} | {m['name']} | no history | | |")
                continue
            stops = [first_stop(h, tol, rel) for _, tol, rel in rules]
            smallest = min(abs(h[t] - h[t - 1]) for t in range(1, len(h)))
            cells = [f"iteration {s}" if s else f"no (cap {m['max_iter']})" for s in stops]
            print(f"| {path} | {m['name']} | {m['iterations']} ({m['max_iter']}) | "
                  + " | ".join(cells) + f" | {smallest:.2e} |")


if __name__ == "__main__":
    main()
