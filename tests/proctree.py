"""Which processes a test started, read from /proc (Linux), for orphan tests.

A test starts its command with ``start_new_session=True``, so everything the
command starts (children, the forkserver, multiprocessing's resource tracker)
shares its process group until it dies, whoever its parent becomes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a live process, None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[2])


def group(pgid: int) -> set[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[2] == pgid and st[0] != "Z":
                out.add(int(name))
    return out


def alive(pids: set[int], pgid: int) -> set[int]:
    """Those of ``pids`` still running in group ``pgid`` (a zombie has ended)."""
    out = set()
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[2] == pgid and st[0] != "Z":
            out.add(pid)
    return out


def parent(pid: int) -> int:
    """The parent of ``pid`` (0 if it is gone)."""
    st = _stat(pid)
    return st[1] if st is not None else 0


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def wait_for(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def kill_leftovers(pids: set[int], pgid: int) -> None:
    """SIGKILL what is left of the processes this test started (and only those)."""
    for pid in alive(pids, pgid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
