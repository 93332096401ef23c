"""Replacing a small file whole: a temp file, fsync, rename, and never a temp left behind.

Why one helper: the Bloom filter, the run status and the CDXJ index are each
rewritten whole, and each did the temp-and-rename dance by hand. On a full
disk every copy left its temp file (``bloom.bin.tmp<pid>``) and raised a bare
``OSError`` from deep in a stage. Here the temp file is removed on any
failure, a full disk becomes one :class:`~crawl.core.errors.NoSpace` that
names the file, and temp files left by processes that were killed before
they could clean up are removed the next time the same file is written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .guard import is_no_space, no_space


def temp_name(path: Path, pid: int | None = None) -> Path:
    """The temp file a process writes ``path`` through (one per process: two writers never share it)."""
    return path.with_name(f"{path.name}.tmp{os.getpid() if pid is None else pid}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(path: Path) -> int:
    """Delete ``path``'s temp files whose writer is gone (killed mid-write); how many."""
    gone = 0
    prefix = f"{path.name}.tmp"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(prefix) or not name[len(prefix):].isdigit():
            continue
        pid = int(name[len(prefix):])
        if pid != os.getpid() and pid_alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)
            gone += 1
    return gone


def replace_file(path: Path, write: Callable[[BinaryIO], None], *, sync: bool = True) -> None:
    """Write ``path`` anew through ``write(file)``: readers see the old file or the
    whole new one, a crash leaves the old one, and no failure leaves a temp file."""
    path = Path(path)
    remove_stale_temps(path)
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and is_no_space(exc):
            raise no_space(path) from exc
        raise
