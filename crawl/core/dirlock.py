"""One crawl directory, one writer: who holds ``D/crawl.lock``, and who may not start.

Two ``crawl run`` on one directory used to both run, overwrite each
other's ``run-status.json`` and exit 0. Now ``crawl run`` holds an
exclusive ``flock`` on ``D/crawl.lock`` for as long as it runs and writes
who it is into the file (pid, host, start time, command line); a second
run, a repair (``crawl check --repair``, also exclusive) or a ``crawl
frontier next`` (shared: several may lease side by side, never beside a
run, whose resume returns the leases a dead run left) is refused with one
line naming the holder, exit 2. The kernel drops a ``flock`` however the
process ends (SIGKILL included), so a dead run never blocks the next one,
and "the lock is held" is the truth about liveness on this machine.

Readers (``crawl stats``, ``why``, ``report``, ``frontier stats/dump``)
never lock. Stage commands that only add or complete (``frontier add``,
``frontier complete``, ``seen``, ``recrawl --enqueue``) do not either:
LMDB serialises their writes with the run's, adding a known URL is a no-op,
and completing someone else's lease is refused by the frontier itself.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from .errors import ExitStatus, StateError
from .state import open_env

LOCK_NAME = "crawl.lock"


class DirBusy(StateError):
    """Another process holds the crawl directory: try again once it has ended (exit 2)."""

    exit_status = ExitStatus.USAGE


def command_line(argv: list[str] | None = None) -> str:
    """The command as the operator typed it (``crawl run --dir D ...``), for the holder line."""
    args = list(sys.argv if argv is None else argv)
    if args:  # the program's name, as typed (python -m crawl runs crawl/__main__.py)
        name = os.path.basename(args[0])
        args[0] = "crawl" if name == "__main__.py" else name or args[0]
    return " ".join(shlex.quote(a) for a in args)


def me(what: str) -> dict[str, Any]:
    """Who this process is, as written into the lock file and the run status."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": round(time.time(), 3),
            "what": what, "cmd": command_line()}


def iso_utc(ts: object) -> str:
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        return "?"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_holder(info: dict[str, Any] | None) -> str:
    """``crawl run (pid 4242 on box, started 2026-12-02T00:12:03Z: crawl run --dir D ...)``."""
    if not info:
        return "another process (it did not say who)"
    cmd = str(info.get("cmd") or "")
    return (f"{info.get('what') or 'a crawl command'} (pid {info.get('pid', '?')} on "
            f"{info.get('host', '?')}, started {iso_utc(info.get('started'))}"
            + (f": {cmd[:2000]}" if cmd else "") + ")")


def _read_info(fd: int) -> dict[str, Any] | None:
    try:
        raw = os.pread(fd, 8192, 0)
    except OSError:
        return None
    line = raw.split(b"\n", 1)[0]
    try:
        info = orjson.loads(line) if line else None
    except orjson.JSONDecodeError:
        return None
    return info if isinstance(info, dict) else None


def _lock(fd: int, how: int, patience: float = 0.5) -> bool:
    """Take the lock, or give up after ``patience`` seconds. A moment of patience,
    not a wait: ``crawl stats`` probes the lock (:func:`holder`) for microseconds,
    and a run started by cron in the same second must not be refused for that."""
    deadline = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def _blocker(fd: int, wanted_exclusive: bool) -> str:
    """Who keeps ``fd``'s lock from us: an exclusive holder names itself in the file;
    shared holders (``crawl frontier next``) do not, and the file may name a
    holder long gone, so it is read only when a shared lock is refused too."""
    if wanted_exclusive:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            return "crawl frontier next (one or more; they hold it shared while they lease)"
    return describe_holder(_read_info(fd))


class DirLock:
    """One process's hold on a crawl directory; :meth:`release` (or exit) lets go.

    ``exclusive`` holders write who they are into the file, so the refused
    can name them; shared holders leave the file as it is.
    """

    def __init__(self, root: Path, *, exclusive: bool, what: str = "crawl run",
                 refused: str = "") -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if not _lock(self.fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH):
            who = _blocker(self.fd, exclusive)
            os.close(self.fd)
            self.fd = -1
            raise DirBusy(f"{self.root} is in use by {who}; {refused or 'wait for it to end'}") from None
        self.info: dict[str, Any] | None = None
        if exclusive:
            self.info = me(what)
            data = orjson.dumps(self.info) + b"\n"
            try:
                os.pwrite(self.fd, data, 0)  # no truncate first: a reader never sees an empty file
                os.ftruncate(self.fd, len(data))
            except OSError:
                pass  # a full disk: the lock holds all the same, the refused cannot name us


    def release(self) -> None:
        if self.fd >= 0:
            if self.info is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, 0)  # no one holds it now: name no one
            os.close(self.fd)
            self.fd = -1


def hold_dir(root: Path) -> DirLock:
    """The exclusive hold of ``crawl run``: refused while another run, a repair or a
    ``crawl frontier next`` holds the directory."""
    return DirLock(root, exclusive=True, what="crawl run",
                   refused="one crawl run per directory: wait for it to end, or stop it "
                           "(kill PID: it finishes in-flight fetches and commits), then run again")


def share_dir(root: Path) -> DirLock:
    """The shared hold of ``crawl frontier next``: many side by side, none beside a run."""
    return DirLock(root, exclusive=False,
                   refused="crawl frontier next does not lease beside a run or a repair (a run "
                           "returns the leases a dead run left, and could not tell them from these): "
                           "feed a running crawl with crawl frontier add, or stop it first")


def own_dir(root: Path) -> DirLock:
    """The exclusive hold of a repair: refused while any crawl run holds the directory."""
    return DirLock(root, exclusive=True, what="crawl check --repair", refused="stop it, then repair")


def holder(root: Path) -> dict[str, Any] | None:
    """Who holds ``root`` exclusively right now (a run or a repair), or None.

    Creates nothing (``crawl stats`` only reads): no lock file, no holder.
    The answer is the kernel's, so a SIGKILLed run is never reported alive.
    """
    try:
        fd = os.open(Path(root) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# -- leases handed out by ``crawl frontier next`` ------------------------------
#
# A run returns the leases a dead run left (crawl/run/resume.py), but must keep
# those of a pipeline still fetching. Every ``crawl frontier next`` notes the
# time it leased at (the latest, in the run state's meta table), so a lease
# taken after that time is a run's: dead, once a new run holds the lock.

_STAGE_KEY = b"stage-leased"


def _runstate_meta(root: Path) -> tuple[Any, Any]:
    env = open_env(Path(root) / "runstate", max_dbs=4)
    return env, env.open_db(b"meta")


def note_stage_leases(root: Path, now: float) -> None:
    """Called by ``crawl frontier next`` after it leased at ``now`` and before it
    prints the leases (a crash in between leaves leases no one was told of,
    which a later run may rightly return)."""
    env, meta = _runstate_meta(root)
    with env.begin(write=True) as txn:
        raw = txn.get(_STAGE_KEY, db=meta)
        if raw is None or float(bytes(raw)) < now:
            txn.put(_STAGE_KEY, repr(now).encode(), db=meta)


def stage_leased(root: Path) -> float:
    """When a ``crawl frontier next`` last leased in ``root`` (0: never)."""
    env, meta = _runstate_meta(root)
    with env.begin() as txn:
        raw = txn.get(_STAGE_KEY, db=meta)
    return float(bytes(raw)) if raw is not None else 0.0
