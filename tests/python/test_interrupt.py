"""Ctrl-C during long native calls: a KeyboardInterrupt within seconds, never
a panic. Each case runs in a child process that starts a call lasting far
longer than the test (so a call that ignored the signal would be seen), gets
SIGINT once the call is under way, and must exit through KeyboardInterrupt."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "data" / "fashion-mnist-demo"

PRELUDE = """
import sys, time
import numpy as np
import fisherkit, fisherkit.cnn
"""

CASES = {
    # the first Descriptors.transform of the process, on paths: numpy's C API
    # is first needed for its output (the case that used to panic with
    # "Failed to access NumPy array API capsule")
    "descriptors": f"""
paths = sorted(str(p) for p in __import__("pathlib").Path({str(DEMO / "train")!r}).rglob("*.png")) * 200
work = lambda: fisherkit.cnn.Descriptors(scales=[28], cnn="squeezenet").transform(paths)
""",
    "gmm": """
X = np.random.default_rng(0).standard_normal((200_000, 64))
work = lambda: fisherkit.GaussianMixture(64, max_iter=100_000, tol=0, init_params="random").fit(X)
""",
    "mfa": """
X = np.random.default_rng(0).standard_normal((100_000, 32))
work = lambda: fisherkit.MixtureOfFactorAnalyzers(16, 4, max_iter=100_000, tol=0).fit(X)
""",
}

RUN = """
print("ready", flush=True)
t = time.monotonic()
try:
    work()
except KeyboardInterrupt:
    print("KeyboardInterrupt after %.2f s" % (time.monotonic() - t), flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_ctrl_c_raises_keyboard_interrupt_promptly(case):
    child = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + CASES[case] + RUN],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RUST_BACKTRACE": "1"},
        # A shell without job control starts background commands with SIGINT
        # ignored, and Python keeps an inherited SIG_IGN: restore the default
        # so that the child gets its KeyboardInterrupt handler wherever the
        # suite runs from.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(1.5)  # the call is under way
        assert child.poll() is None, "the call ended before the signal"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert "PanicException" not in err and "panicked" not in err, err
    assert child.returncode == 3 and "KeyboardInterrupt" in out, (child.returncode, out, err)
    assert waited < 5.0, f"{case}: KeyboardInterrupt {waited:.1f} s after the signal"
