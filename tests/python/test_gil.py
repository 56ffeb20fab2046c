"""The native calls release the GIL: a Python thread keeps running during them."""

import sys
import threading
import time

import numpy as np

import fisherkit


def _python_progress_during(fn):
    """Increments made by a busy Python thread while ``fn`` runs in this thread."""
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
        fn()
        elapsed = time.perf_counter() - start
        during = count[0] - before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    return during, elapsed


def test_gil_released_during_em_and_encoding():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 32))
    gmm = fisherkit.GaussianMixture(16, max_iter=1).fit(X[:2000])
    bags = [X[i * 500 : (i + 1) * 500] for i in range(40)]
    enc = fisherkit.FisherVector(gmm)
    for fn in (lambda: fisherkit.GaussianMixture(16, max_iter=3, tol=0).fit(X), lambda: enc.transform(bags * 5)):
        during, elapsed = _python_progress_during(fn)
        assert elapsed > 0.05, "the call is too short to tell"
        # with the GIL held, the spinning thread could only run in the ~1 ms
        # switch intervals around the call (a few thousand increments)
        assert during > 100_000, (during, elapsed)
        print(f"{during} Python increments during a {elapsed:.2f} s native call")
