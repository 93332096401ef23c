"""crawl run caps malloc's arenas (crawl/core/heap.py): counted by glibc itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Eight threads allocating at once through ctypes (which lets go of the GIL, as
# LMDB, zstd and the sockets do in crawl run's worker threads), then glibc's own
# account of its arenas (malloc_info: one <heap> element an arena).
PROBE = r"""
import ctypes, os, sys, tempfile, threading
from crawl.core import limit_arenas
if sys.argv[1] == "capped":
    assert limit_arenas(2)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
start = threading.Barrier(8)
def work():
    start.wait()
    for _ in range(20000):
        libc.free(libc.malloc(2000))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
path = os.path.join(tempfile.mkdtemp(), "info.xml")
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, fp)
libc.fclose(fp)
print(open(path).read().count("<heap nr="))
"""


def arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_capped_process_keeps_at_most_two_arenas_where_threads_would_make_more() -> None:
    assert arenas("free") > 2  # the probe does make arenas: the cap below is what holds them
    assert arenas("capped") <= 2
