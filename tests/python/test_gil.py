"""The native calls release the GIL: a Python thread keeps running during them."""

import sys
import threading
import time

import numpy as np

import fisherkit


def _python_progress_during(fn, min_seconds=0.3):
    """Increments a busy Python thread makes while this thread repeats ``fn``
    for at least ``min_seconds``, and the rate the same thread reaches alone.

    Returns ``(during, elapsed, alone_rate)``: increments during the calls,
    their wall time in seconds, increments per second while this thread sleeps.
    """
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-3)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = count[0]
        start = time.perf_counter()
        time.sleep(0.1)
        alone_rate = (count[0] - before) / (time.perf_counter() - start)
        before = count[0]
        start = time.perf_counter()
        while time.perf_counter() - start < min_seconds:
            fn()
        elapsed = time.perf_counter() - start
        during = count[0] - before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    return during, elapsed, alone_rate


def test_gil_released_during_em_and_encoding():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 32))
    gmm = fisherkit.GaussianMixture(16, max_iter=1).fit(X[:2000])
    bags = [X[i * 500 : (i + 1) * 500] for i in range(40)]
    enc = fisherkit.FisherVector(gmm)
    for fn in (lambda: fisherkit.GaussianMixture(16, max_iter=3, tol=0).fit(X), lambda: enc.transform(bags * 5)):
        during, elapsed, alone_rate = _python_progress_during(fn)
        # With the GIL held, the spinning thread could only run in the ~1 ms
        # switch gaps between repeated calls (each call takes tens of ms), a
        # few per cent of its lone rate. Released, it keeps running: at worst
        # it shares a core with one of the native threads (about half).
        share = during / (alone_rate * elapsed)
        print(f"spinner ran at {share:.0%} of its lone rate during {elapsed:.2f} s of native calls")
        assert share > 0.2, (during, elapsed, alone_rate)
