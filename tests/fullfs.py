"""A real file system that fills up: a small tmpfs mounted for one test.

Disk-full handling is tested against the kernel's own ENOSPC (short writes,
failed fsyncs, LMDB commits refused), not a patched ``os.write``. Mounting
needs root (or CAP_SYS_ADMIN); elsewhere the tests that need it are skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(point: Path, size: str) -> None:
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode}): "
                    "the disk-full tests need root")


def resize(point: Path, size: str) -> None:
    """Give the file system more (or less) room, as freeing space would."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(point)], check=True,
                   capture_output=True, timeout=30)


@contextlib.contextmanager
def small_fs(point: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``point`` (created) for the block; always unmounted."""
    if os.geteuid() != 0:
        pytest.skip("the disk-full tests mount a tmpfs, which needs root")
    point.mkdir(parents=True, exist_ok=True)
    _mount(point, size)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=30)


def fill(point: Path, leave: int = 0) -> Path:
    """Fill the file system up to ``leave`` free bytes with one file; returns it
    (delete it to free the space again)."""
    filler = point / "filler"
    st = os.statvfs(point)
    free = st.f_bavail * st.f_frsize
    with open(filler, "ab", buffering=0) as f:
        todo = max(0, free - leave)
        chunk = b"\0" * (1 << 16)
        try:
            while todo > 0:
                todo -= f.write(chunk[: min(len(chunk), todo)]) or 0
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler
