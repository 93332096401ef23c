"""Counting the work a call does, without a clock: for the growth tests.

Two counts, both the same on every run of the same input:

* ``ops``: Python-level steps in the code under test (every call and every
  line executed), by ``sys.settrace``. A loop that runs n times per input
  byte shows up.
* ``alloc``: bytes allocated, by tracemalloc: at every counted step the rise
  of the peak since the step before is added, and the peak reset. Work done
  inside one C call is invisible to ``ops`` but not what it allocates, so a
  loop that copies the rest of a buffer each turn (``buf = buf[n:]``,
  ``pending += chunk`` then ``split``, zlib's ``unused_data``) shows up here.

Neither sees C code that works without allocating through Python (libxml2
has its own allocator, regex backtracking allocates nothing); that needs an
instruction count, which this machine's virtualised CPU does not offer and
valgrind makes too slow for the test suite.

Only frames whose file lies under one of ``include`` are traced; others
(trio's scheduler, the test itself) run untraced, though what they
allocate still counts at the next traced step.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import warcio

CRAWL = str(Path(__file__).resolve().parent.parent.parent / "crawl")
WARCIO = str(Path(warcio.__file__).resolve().parent)


@dataclass(frozen=True)
class Work:
    ops: int
    alloc: int


def measure(fn: Callable[[], Any], include: Iterable[str] = (CRAWL,)) -> Work:
    """The work ``fn()`` does in the code under ``include`` (default: the crawl package)."""
    roots = tuple(include)
    ops = 0
    alloc = 0
    last = 0
    mine: dict[Any, bool] = {}  # code object -> traced or not

    get, reset = tracemalloc.get_traced_memory, tracemalloc.reset_peak

    def step() -> None:
        nonlocal ops, alloc, last
        ops += 1
        current, peak = get()
        if peak > last:
            alloc += peak - last
        reset()
        last = current

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            step()
        return local

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        traced = mine.get(code)
        if traced is None:
            traced = mine[code] = code.co_filename.startswith(roots)
        if not traced:
            return None
        step()
        return local

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    last = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    sys.settrace(on_call)
    try:
        fn()
    finally:
        sys.settrace(None)
        step()  # what the last line allocated
        if started:
            tracemalloc.stop()
    return Work(ops, alloc)
