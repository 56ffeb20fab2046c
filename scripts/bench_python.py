#!/usr/bin/env python3
"""Python-level benchmark of fisherkit against scikit-image and scikit-learn.

1. Fisher vector encoding of bags of 1000 descriptors, D=500, K=256, float32,
   fisherkit.FisherVector vs skimage.feature.fisher_vector on the same GMM
   (both produce the [prior, mean, var] blocks, improved normalisation).
2. One EM iteration of a diagonal GMM, N=100000, D=500, K=50 (default),
   float32: fisherkit.GaussianMixture vs sklearn.mixture.GaussianMixture, both
   started from the same parameters ("random_from_data"/"given" starts, so no
   k-means in the timed region); per-iteration time = (t(m iters) - t(1 iter)) / (m - 1).

Single-threaded by default (RAYON_NUM_THREADS=1 and BLAS limited to one thread
with threadpoolctl); `--threads N` changes both. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed from the environment before numpy is imported, so
that the peers' OpenBLAS picks its best kernel for this CPU (as
scripts/bench.py does; fisherkit itself uses no BLAS); the kernel in use is
printed. Prints a table and, with --json PATH, writes the numbers.

    python3 scripts/bench_python.py               # the full benchmark
    python3 scripts/bench_python.py --quick       # smaller sizes, a smoke run
    python3 scripts/bench_python.py --gap 20      # scripts/bench.py's soft-posterior data
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

PEER_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def main() -> int:
    args = parse_args()
    removed = set_thread_env(args.threads)
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    import fisherkit
    from skimage.feature import fisher_vector as sk_fisher_vector
    from sklearn.mixture import GaussianMixture as SkGMM

    limits = threadpool_limits(limits=args.threads)
    blas = [
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} ({i.get('num_threads')} thr)"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    print(f"peers' BLAS: {'; '.join(blas) or 'unknown'}"
          + (f" (removed from the environment: {removed})" if removed else ""), flush=True)
    results: dict[str, object] = {"blas": blas, "removed_env": removed}
    rng = np.random.default_rng(0)

    live, err = bench_fv(args, rng, results, fisherkit, sk_fisher_vector, SkGMM)
    st_time, sk_best = bench_em(args, rng, results, fisherkit, SkGMM)

    limits.unregister() if hasattr(limits, "unregister") else None
    print_table(args, results, fisherkit, live, err, st_time, sk_best)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), **results}, f, indent=2)
    return 0


def parse_args():
    """The command line; --quick shrinks every size."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bags", type=int, default=20, help="bags encoded by fisherkit (skimage: --skimage-bags)")
    ap.add_argument("--skimage-bags", type=int, default=5)
    ap.add_argument("--bag-size", type=int, default=1000)
    ap.add_argument("--fv-dim", type=int, default=500)
    ap.add_argument("--fv-k", type=int, default=256)
    ap.add_argument("--em-n", type=int, default=100_000)
    ap.add_argument("--em-dim", type=int, default=500)
    ap.add_argument("--em-k", type=int, default=50)
    ap.add_argument("--em-iters", type=int, default=4, help="m: iterations of the long run")
    ap.add_argument("--gap", type=float, default=None,
                    help="draw the FV model and bags, and the EM data, as scripts/bench.py does: component means "
                         "about GAP nats apart (20 there), so a descriptor has many non-negligible posteriors "
                         "(default: well separated components, nearly hard posteriors)")
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    if args.quick:
        args.bags, args.skimage_bags, args.bag_size = 4, 2, 200
        args.fv_dim, args.fv_k, args.em_n, args.em_dim, args.em_k, args.em_iters = 64, 16, 5000, 32, 8, 3
    return args


def set_thread_env(threads):
    """Sets the thread counts and drops PEER_UNSET in the environment; returns what was dropped."""
    # must precede fisherkit's first parallel call
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    # numpy's OpenBLAS reads these when it is loaded: an inherited core type
    # (e.g. forced to an older CPU) would slow the peers down
    removed = {v: os.environ.pop(v) for v in PEER_UNSET if v in os.environ}
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(threads)
    return removed


def best_of(fn, repeat=3):
    """The shortest wall time of `repeat` calls of fn."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_fv(args, rng, results, fisherkit, sk_fisher_vector, SkGMM):
    """FV encoding, fisherkit vs scikit-image; fills results, returns (live components, max |diff|)."""
    import numpy as np

    # ------------------------------------------------------------ FV encoding
    d, k, n = args.fv_dim, args.fv_k, args.bag_size
    if args.gap is None:
        pool = rng.standard_normal((20 * k, d)).astype(np.float32) * rng.uniform(0.5, 2.0, d).astype(np.float32)
        means = pool[rng.choice(len(pool), k, replace=False)]
        variances = np.tile(pool.var(0), (k, 1)) * rng.uniform(0.3, 1.0, (k, d)).astype(np.float32)
        weights = rng.uniform(0.5, 1.5, k).astype(np.float32)
        weights /= weights.sum()
    else:
        weights, means, variances = soft_gmm(rng, d, k, args.gap)
    gmm = fisherkit.GaussianMixture(k)
    gmm._set_model(weights, means, variances.astype(np.float32))
    sk = SkGMM(k, covariance_type="diag")
    sk.weights_, sk.means_, sk.covariances_ = weights.astype(np.float64), means.astype(np.float64), variances.astype(np.float64)
    sk.precisions_cholesky_ = 1.0 / np.sqrt(sk.covariances_)
    if args.gap is None:
        bags = [
            (means[rng.integers(0, k, n)] + np.sqrt(variances[0]) * rng.standard_normal((n, d)).astype(np.float32)).astype(np.float32)
            for _ in range(args.bags)
        ]
    else:
        bags = [sample_gmm(rng, weights, means, variances, n) for _ in range(args.bags)]
    live = (gmm.predict_proba(bags[0]) > 1e-6).sum(1).mean()
    results["fv_live_components_per_descriptor"] = float(live)
    enc = fisherkit.FisherVector(gmm, parts=("prior", "mean", "var"))
    enc.transform(bags[:1])  # warm-up
    t_fk = best_of(lambda: enc.transform(bags)) / len(bags)
    sk_bags = bags[: args.skimage_bags]
    t_sk32 = best_of(lambda: [sk_fisher_vector(b, sk, improved=True) for b in sk_bags], repeat=2) / len(sk_bags)
    # scikit-image's GMM is float64: with float32 descriptors numpy's mixed-dtype
    # products leave BLAS, so also time it on a float64 copy and keep its best
    sk_bags64 = [b.astype(np.float64) for b in sk_bags]
    t_sk64 = best_of(lambda: [sk_fisher_vector(b, sk, improved=True) for b in sk_bags64], repeat=2) / len(sk_bags)
    t_sk = min(t_sk32, t_sk64)
    results.update(fv_ms_skimage_f32_input=1e3 * t_sk32, fv_ms_skimage_f64_input=1e3 * t_sk64)
    # sanity: the same vectors (skimage's var block has the opposite sign)
    ref = sk_fisher_vector(bags[0], sk, improved=True)
    ref[k + k * d :] *= -1
    err = float(np.abs(enc.transform(bags[:1])[0] - ref).max())
    results.update(fv_ms_fisherkit=1e3 * t_fk, fv_ms_skimage=1e3 * t_sk, fv_speedup=t_sk / t_fk, fv_max_abs_diff=err)
    print(f"FV: fisherkit {1e3 * t_fk:.2f} ms/bag, skimage {1e3 * t_sk32:.2f} ms/bag (float32 input), "
          f"{1e3 * t_sk64:.2f} ms/bag (float64 input)", flush=True)
    return live, err


def bench_em(args, rng, results, fisherkit, SkGMM):
    """One EM iteration, fisherkit vs scikit-learn; fills results, returns (statistics + M-step s, sklearn's dtype)."""
    import numpy as np

    # ------------------------------------------------------------- EM iteration
    d, k, n, m = args.em_dim, args.em_k, args.em_n, args.em_iters
    if args.gap is None:
        centres = 3.0 * rng.standard_normal((k, d)).astype(np.float32)
        X = (centres[rng.integers(0, k, n)] + rng.standard_normal((n, d)).astype(np.float32)).astype(np.float32)
    else:
        X = sample_gmm(rng, *soft_gmm(rng, d, k, args.gap), n)
    w0 = np.full(k, 1.0 / k)
    m0 = X[rng.choice(n, k, replace=False)].astype(np.float64)
    v0 = np.tile(X.var(0).astype(np.float64), (k, 1))
    given = (w0.astype(np.float32), m0.astype(np.float32), v0.astype(np.float32))

    def fk_run(iters):
        return fisherkit.GaussianMixture(k, tol=0)._fit(X, iters, given=given)

    def sk_run(data, iters):
        model = SkGMM(
            k, covariance_type="diag", tol=0, max_iter=iters, init_params="random_from_data",
            weights_init=w0, means_init=m0, precisions_init=1.0 / v0, reg_covar=1e-6,
        )
        return model.fit(data)

    fk_run(1)
    t1, tm = best_of(lambda: fk_run(1), 2), best_of(lambda: fk_run(m), 2)
    em_fk = (tm - t1) / (m - 1)
    st_time = best_of(lambda: gmm_fit_step(fisherkit, X, k, given), 2)
    import warnings

    # scikit-learn on float32 data and on a float64 copy, keeping its best: with
    # float32 data its float64 responsibilities meet float32 arrays in the
    # M-step's products, which leave BLAS; and its float32 variances can go
    # negative (its issue 30382), which fails the fit
    sk_times = {}
    for dtype in (np.float32, np.float64):
        data = X if dtype == np.float32 else X.astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning of the short runs
            try:
                s1, sm = best_of(lambda: sk_run(data, 1), 2), best_of(lambda: sk_run(data, m), 2)
            except ValueError as e:
                print(f"sklearn on {np.dtype(dtype).name} data failed: {e}", flush=True)
                continue
        sk_times[np.dtype(dtype).name] = (sm - s1) / (m - 1)
        print(f"EM: sklearn {sk_times[np.dtype(dtype).name]:.3f} s/iteration ({np.dtype(dtype).name} data)", flush=True)
    sk_best = min(sk_times, key=sk_times.get)
    em_sk = sk_times[sk_best]
    results["em_sklearn_dtype"] = sk_best
    results.update({f"em_s_sklearn_{dt}": t for dt, t in sk_times.items()})
    results.update(em_s_fisherkit=em_fk, em_s_fisherkit_stats_plus_mstep=st_time, em_s_sklearn=em_sk, em_speedup=em_sk / em_fk)
    return st_time, sk_best


def print_table(args, results, fisherkit, live, err, st_time, sk_best):
    """The summary table on stdout."""
    print(f"threads={args.threads}  fisherkit {fisherkit.__version__}")
    print(f"FV   D={args.fv_dim} K={args.fv_k} N={args.bag_size} float32 (prior+mean+var, improved), "
          f"{live:.1f} components with posterior > 1e-6 per descriptor:")
    print(f"     fisherkit {results['fv_ms_fisherkit']:.2f} ms/bag   skimage (best input dtype) {results['fv_ms_skimage']:.2f} ms/bag   "
          f"speed-up {results['fv_speedup']:.1f}x   (max |diff| {err:.2e})")
    print(f"EM   N={args.em_n} D={args.em_dim} K={args.em_k} float32, one iteration:")
    print(f"     fisherkit {results['em_s_fisherkit']:.3f} s  (statistics + M-step {st_time:.3f} s)   "
          f"sklearn (best data dtype) {results['em_s_sklearn']:.3f} s ({sk_best} data)   speed-up {results['em_speedup']:.1f}x")


def soft_gmm(rng, d, k, gap):
    """scripts/bench.py's model: per-dimension variance profile s ~ U(0.5, 2),
    means centre + tau sqrt(s) g with tau^2 = gap / D (components about `gap`
    nats apart), Dirichlet(5) weights; float32 (weights, means, variances)."""
    import numpy as np

    s = rng.uniform(0.5, 2.0, d)
    centre = rng.uniform(-3.0, 3.0, d)
    tau = np.sqrt(gap / d)
    w = rng.dirichlet(np.full(k, 5.0))
    mu = centre + tau * np.sqrt(s) * rng.standard_normal((k, d))
    var = s * np.exp(rng.uniform(-0.1, 0.1, (k, d)))
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    return f32(w / w.sum()), f32(mu), f32(var)


def sample_gmm(rng, w, mu, var, n):
    """n rows (float32) drawn from the diagonal GMM (w, mu, var)."""
    import numpy as np

    z = rng.choice(len(w), size=n, p=w.astype(np.float64) / w.astype(np.float64).sum())
    return (mu[z] + np.sqrt(var[z]) * rng.standard_normal((n, mu.shape[1]), dtype=np.float32)).astype(np.float32)


def gmm_fit_step(fisherkit, X, k, given):
    g = fisherkit.GaussianMixture(k)
    g._set_model(*given)
    return g.update_from_statistics(g.sufficient_statistics(X))


if __name__ == "__main__":
    sys.exit(main())
