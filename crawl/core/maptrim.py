"""Keep an LMDB memory map from inflating a process's RSS (Linux).

LMDB reads through a read-only shared memory map of ``data.mdb``. Every page
a process touches stays mapped into it, so a long ``crawl run`` over a 2 GB
frontier ends up with ~2 GB of *file-backed* resident pages (more than it
reads: the kernel's fault-around maps up to 16 cached neighbours of every
page faulted in). They are page
cache, reclaimable at any time, but RSS counts them and operators (and OOM
dashboards) read RSS. :class:`MapTrimmer` drops this process's mapping of the
pages with ``madvise(MADV_DONTNEED)`` once they exceed a budget; the data stays
in the kernel's page cache, so the next access is a minor fault, not a read
from disk. LMDB never writes through its map unless opened with
``writemap=True`` (we never do), so this cannot lose or corrupt anything.

The budget is the whole process's file-backed RSS (what ``statm`` reports),
so a trim lets go of *every* LMDB data file the process maps, not only the
one whose trimmer noticed: a parse process reads five environments (seen,
dedupe, recrawl, graph, frontier), and trimming only the frontier while the
recrawl map held 160 MB left it over budget for good (issue 19's 2,000-host
memory figure).

Anywhere ``/proc`` or ``madvise`` is missing, trimming is a no-op.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_MADV_DONTNEED = 4
# File-backed RSS a process keeps before it lets go of its LMDB pages: the
# shared libraries are ~23 MB of it (Python, numpy, lxml, OpenSSL), so this
# leaves ~17 MB of maps. A trim costs minor faults to map pages again, and on
# random keys each fault maps 64 KB (the kernel's fault-around ignores
# MADV_RANDOM). 2,000 realistic hosts, 30 s (issue 19), both processes' peak
# RSS summed: 430-450 MB untrimmed; 319-323 MB at 64 MB and 293-301 MB at 40,
# at 5.53-5.69 and 5.46-5.74 CPU-ms per page (three interleaved rounds, load
# 2.2-2.7): no cost the machine could tell from noise.
MAP_BUDGET = 40 << 20
LMDB_DATA = "/data.mdb"  # how an LMDB environment's mapping shows in /proc/self/maps
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

try:
    # the process's own symbols (libc among them): find_library("c") would run
    # `ldconfig -p` in a subprocess, ~20 ms of every command's start
    _libc = ctypes.CDLL(None, use_errno=True)
    _madvise = _libc.madvise
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover - not Linux/glibc
    _madvise = None


def file_backed_bytes() -> int | None:
    """Resident file-backed + shared memory of this process (statm 'shared')."""
    try:  # os-level: called every ~100 records of a frontier batch
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            fields = os.read(fd, 256).split()
        finally:
            os.close(fd)
    except OSError:
        return None
    return int(fields[2]) * _PAGE


class MapTrimmer:
    """Trim the resident pages of this process's LMDB maps when its file-backed
    RSS exceeds ``budget`` bytes (every map, see the module's doc).

    Args:
        budget: file-backed bytes this process may keep resident; None disables.
        every: check the budget once per this many :meth:`maybe_trim` calls.
    """

    def __init__(self, budget: int | None, every: int = 1) -> None:
        self.budget = budget
        self.every = max(every, 1)
        self.calls = 0
        self.trims = 0

    def maybe_trim(self) -> bool:
        if self.budget is None or _madvise is None:
            return False
        self.calls += 1
        if self.calls % self.every:
            return False
        used = file_backed_bytes()
        if used is None or used <= self.budget:
            return False
        return self.trim()

    def trim(self) -> bool:
        """Drop every resident page of this process's LMDB maps."""
        if _madvise is None:
            return False
        try:
            maps = Path("/proc/self/maps").read_text().splitlines()
        except OSError:
            return False
        done = False
        for line in maps:
            if not line.endswith(LMDB_DATA):
                continue
            lo, _, hi = line.split(None, 1)[0].partition("-")
            start, end = int(lo, 16), int(hi, 16)
            if _madvise(start, end - start, _MADV_DONTNEED) == 0:
                done = True
        self.trims += done
        return done
