"""Starting ``crawl run``'s parse processes, before the parent loads anything heavy.

A parse process (crawl/run/child.py) spends its first few hundred
milliseconds importing: lxml, numpy, the stages. Started from the loop, as
it once was, that time came after the parent's own imports and the opening
of the crawl directory, so the seed's links waited for the parent to parse
the seed itself (issue 19: the seed's links in the frontier within 50 ms of
its response, no waiting on a child to start). :class:`Children` starts
them first thing, on the other core, while the parent imports the fetch
side and opens the directory; a child imports, then blocks on its work
order (stdin), which the loop writes once the directory is the run's. A
child whose parent never sends one (a bad seed, a busy directory, Ctrl-C)
is killed by :meth:`Children.close` before it touched anything, or leaves
by itself at end of file.

This module imports only the standard library and crawl.core, so starting
children costs the parent a fork and an exec.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from multiprocessing import Pipe
from typing import Any

from crawl.core import Lifeline

DONE, STOP, MORE = b"done", b"stop", b"more"  # parent -> child (lifeline)
READY, LINKS = b"ready", b"links"  # child -> parent (news)
# What the child runs. It is born with SIGINT and SIGTERM blocked (Children), ignores them,
# then unblocks them: one that came meanwhile (Ctrl-C reaches the whole process group, and
# the child starts with the command) is dropped, not a KeyboardInterrupt in the middle of
# the interpreter's start-up ("Fatal Python error" on the operator's terminal, and a run
# that stops because its parse process died). The parent decides when the child stops.
BOOT = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM}); "
        "from crawl.run.child import main; main()")
_HELD = {signal.SIGINT, signal.SIGTERM}


def child_env() -> dict[str, str]:
    """The parse process's environment: this one's, with numpy's OpenBLAS asked for no
    thread pool unless the operator sized it (its spinning worker thread cost ~50-90 ms
    of CPU per process start; no stage calls BLAS). The command line sets the same in
    crawl/commands (one_blas_thread); this covers a run started from Python."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


class Child:
    """A parse process and the few ``multiprocessing.Process`` calls the loop makes of it."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.popen = popen
        self.pid: int | None = popen.pid

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()  # as multiprocessing's: -N for signal N

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        self.popen.kill()


class Children:
    """``n`` parse processes, each with its lifeline (parent -> child) and its
    news pipe (child -> parent); :meth:`send_order` starts their work.

    Not multiprocessing's spawn: that imports the loop's module in the child
    and starts a resource tracker beside it (crawl/run/child.py says why)."""

    def __init__(self, n: int) -> None:
        self.lines = [Lifeline() for _ in range(n)]
        self.news: list[tuple[Any, Any]] = [Pipe(duplex=False) for _ in self.lines]  # (parent's, child's)
        self.procs: list[Child] = []
        self.ordered = False
        # blocked in this thread while the children are made: they inherit the mask through
        # exec; a signal that arrives meanwhile waits for this thread (see BOOT)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            for i, (line, (_, w)) in enumerate(zip(self.lines, self.news, strict=True)):
                fds = (line.reader.fileno(), w.fileno())
                popen = subprocess.Popen([sys.executable, *subprocess._args_from_interpreter_flags(), "-c", BOOT,
                                          *map(str, fds)], stdin=subprocess.PIPE, pass_fds=fds, close_fds=True,
                                          env=child_env())
                self.procs.append(Child(f"crawl-parse-{i}", popen))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            for line, (_, w) in zip(self.lines, self.news, strict=True):
                line.drop_reader()
                w.close()  # each child has its own: end of file once every child is gone

    def send_order(self, order: bytes) -> None:
        """Each child's work order on its stdin (blocking: a big scope waits for the child to read)."""
        self.ordered = True
        for p in self.procs:
            assert p.popen.stdin is not None
            try:
                p.popen.stdin.write(order)
                p.popen.stdin.close()
            except OSError:
                pass  # it died at start: the loop's watcher says so

    def close(self) -> None:
        """Children never given an order are killed (they touched nothing); then every pipe is closed.
        Safe to call twice; the loop ends ordered children itself before this."""
        for p in self.procs:
            if not self.ordered and p.is_alive():
                p.kill()
            if p.popen.stdin is not None and not p.popen.stdin.closed:
                try:
                    p.popen.stdin.close()
                except OSError:
                    pass
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for line in self.lines:
            line.close()
        for r, _ in self.news:
            r.close()
