"""Who is using a crawl directory: ``crawl run`` shares it, ``crawl check --repair`` owns it.

A repair moves damaged environments aside, cuts torn tails off WARC and log
files and re-queues pages: a crawl writing the same files meanwhile would
lose what it writes. So ``crawl run`` (and each of its parse processes)
holds a shared ``flock`` on ``D/crawl.lock`` for as long as it runs, and a
repair takes it exclusively or refuses. The kernel drops the lock however a
process ends (SIGKILL included), so a dead crawl never blocks a repair.
Separate stage commands do not take it; stop a pipeline by hand before
repairing its directory.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import StateError

LOCK_NAME = "crawl.lock"


class DirLock:
    """One process's hold on a crawl directory; :meth:`release` (or exit) lets go."""

    def __init__(self, root: Path, *, exclusive: bool) -> None:
        self.path = Path(root) / LOCK_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            if exclusive:
                raise StateError(f"a crawl run is using {root} (it holds {self.path}); stop it, "
                                 "then repair") from None
            raise StateError(f"crawl check --repair is working on {root}; run again when it "
                             "has finished") from None

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def share_dir(root: Path) -> DirLock:
    """The shared hold ``crawl run`` keeps while it runs."""
    return DirLock(root, exclusive=False)


def own_dir(root: Path) -> DirLock:
    """The exclusive hold of a repair: refused while any crawl run holds the directory."""
    return DirLock(root, exclusive=True)
