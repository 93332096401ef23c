"""numpy's OpenBLAS starts no thread pool in crawl's processes (issue 19, CPU per page).

Its worker thread spins before it sleeps, ~50-90 ms of CPU at each process start,
and no stage calls a BLAS routine. The operator's own OPENBLAS_NUM_THREADS wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The command line's entry point, then numpy (as a command loads it later): the threads it left.
AFTER_MAIN = """
import os, sys
sys.argv = ["crawl", "--version"]
from crawl.commands import main
try:
    main()
except SystemExit:
    pass
import numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""

# A parse process as crawl run starts it: its environment, read from /proc.
CHILD_ENV = """
import time
from crawl.run.spawn import Children
kids = Children(1)
try:
    proc = f"/proc/{kids.procs[0].pid}"
    for _ in range(1000):  # until the exec shows (the environment is the new program's from then on)
        with open(f"{proc}/cmdline", "rb") as f:
            if b"crawl.run.child" in f.read():
                break
        time.sleep(0.01)
    with open(f"{proc}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\\0") if b"=" in v)
    print(env.get(b"OPENBLAS_NUM_THREADS", b"-").decode())
finally:
    kids.close()
"""


def _run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**base, **env}, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip().splitlines()[-1]


def test_the_command_line_leaves_numpy_no_blas_thread() -> None:
    assert _run(AFTER_MAIN) == "1 1"  # one thread: the main one


def test_the_operators_blas_threads_are_kept() -> None:
    assert _run(AFTER_MAIN, OPENBLAS_NUM_THREADS="2").split()[0] == "2"


def test_a_parse_process_is_started_without_a_blas_pool() -> None:
    assert _run(CHILD_ENV) == "1"
    assert _run(CHILD_ENV, OPENBLAS_NUM_THREADS="3") == "3"
