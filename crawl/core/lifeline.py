"""Worker processes that die with the process that started them.

A parse process of ``crawl run`` or a ``crawl dedupe --jobs`` worker that
outlives its parent (SIGKILL, the OOM killer, a crash) is reparented to
init, where nobody stops it: it keeps claiming spool batches and holding
LMDB environments, and with it the multiprocessing resource tracker, which
only exits once every process holding its pipe is gone.

Two guards, so that neither depends on the other:

* a lifeline: a pipe whose only write end stays in the parent. The kernel
  closes it however the parent ends, so a thread in the child sees end of
  file and leaves at once. It has no race (a parent already dead reads as
  end of file) and works wherever pipes do. The same pipe carries the
  parent's few control words (``crawl run`` tells its children to finish
  or to stop), which is why those need no multiprocessing semaphores.
* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the child
  when its parent thread ends, even while the child's threads are stuck in
  C code that would never let the watcher run.

A child killed this way is a crash, and every user of these workers is
built to survive one: unacknowledged spool claims return, LMDB rolls back an
open write transaction.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

ORPHANED = 75  # exit status of a child whose parent went away (EX_TEMPFAIL: run again)
_PR_SET_PDEATHSIG = 1


class Lifeline:
    """The parent's side: create it before the child starts, pass :attr:`reader`
    to the child (as a process argument or initializer argument; multiprocessing
    hands the descriptor over), keep it until the child has ended, then close it.

    One lifeline may serve many children (a pool) when only its end matters;
    messages go to whichever child reads first, so give each child its own
    lifeline when it is told things.
    """

    def __init__(self) -> None:
        self.reader, self._writer = multiprocessing.Pipe(duplex=False)

    def send(self, message: bytes) -> bool:
        """Tell the child something; False if it is gone already."""
        try:
            self._writer.send_bytes(message)
        except OSError:
            return False
        return True

    def drop_reader(self) -> None:
        """The parent's copy of the read end, no longer needed once the child has its own."""
        self.reader.close()

    def close(self) -> None:
        """Cut the line: a child still holding it exits."""
        self._writer.close()
        self.reader.close()


def hold_lifeline(reader: Connection, heard: Callable[[bytes], None] | None = None) -> None:
    """In the child, first thing: leave when the parent goes; pass its messages to ``heard``.

    ``heard`` runs on the watcher thread, so it should only set flags.
    """
    die_with_parent()

    def watch() -> None:
        while True:
            try:
                message = reader.recv_bytes()
            except (EOFError, OSError):
                os._exit(ORPHANED)
            if heard is not None:
                heard(message)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


def die_with_parent() -> bool:
    """Linux: ask the kernel to SIGKILL this process when its parent ends.

    Returns whether that was arranged (False elsewhere; the lifeline still
    works there).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
