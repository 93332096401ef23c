"""A bound on the work a test does, in this process's CPU seconds.

The tests that guard against quadratic (or worse) regressions once carried a
``pytest.mark.timeout`` of 20-60 s: a wall-clock bound, which two xdist
workers beside other load stretched 15-fold (1.4 CPU-s took 21 s at load 30).
CPU time counts the work, not the waiting for a core; the regressions these
tests guard against took minutes of it. pytest's own timeout (300 s) still
catches a hang.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cpu_seconds_at_most(limit: float) -> Iterator[None]:
    """Fail if the block used more than ``limit`` CPU seconds of this process."""
    t0 = time.process_time()
    yield
    used = time.process_time() - t0
    assert used <= limit, f"{used:.1f} CPU-s, more than {limit} s: no longer linear?"
