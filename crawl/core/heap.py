"""How many malloc arenas a long-running process may keep (glibc).

glibc gives each thread that allocates while another holds the main arena an
arena of its own, up to 8 per core, and memory freed in one is kept there for
that arena's next allocations. ``crawl run`` hands LMDB commits, WARC writes
and compression to trio's worker threads (about twenty of them on 2,000 hosts),
so the fetch process ended up holding ~50 MB of free memory spread over its
arenas (mallinfo2: 15 MB in use of 65 MB). Two arenas cost nothing measurable
here (the threads mostly wait on the GIL or the disk) and took the fetch
process from ~100 to ~70 MB of anonymous memory (issue 19: 2,000 realistic
hosts). Elsewhere (no glibc), this does nothing.
"""

from __future__ import annotations

import ctypes

_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_arenas(arenas: int = 2) -> bool:
    """Cap this process's malloc arenas (before its threads start); True if glibc took it."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(_M_ARENA_MAX, arenas) == 1
