"""What a failing state file means to the operator, in one line that names it.

LMDB reports a damaged page (``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND``,
``MDB_BAD_TXN``) or a full disk (``ENOSPC``) wherever the page happens to be
read or the commit happens to fail, deep inside whichever stage was running,
and says nothing of which file it was. Every environment
:func:`crawl.core.state.open_env` hands out is a :class:`GuardedEnv`, so any
command turns such an error into a :class:`~crawl.core.errors.DamagedState`
or :class:`~crawl.core.errors.NoSpace` that names the file and the crawl
directory and says what to do; errors that callers expect (a named database
that does not exist yet) pass through untouched.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb

from .errors import CrawlError, DamagedState, NoSpace, StateError

DATA_FILE = "data.mdb"

# The names CrawlDir gives the parts of a crawl directory (tests/core checks
# that they agree), so a file's message can say which crawl directory it is in.
SUBDIRS = frozenset({"frontier", "seen", "fetchstate", "dedupe", "warc", "log", "spool",
                     "recrawl", "runstate", "graph"})

# What each environment holds, for the messages and for crawl check.
ENV_ROLES = {
    "frontier": "the frontier: queues, leases, what is done",
    "seen": "the URL-seen set",
    "fetchstate": "robots.txt and DNS caches, per-URL fetch history",
    "dedupe": "the near-duplicate index",
    "recrawl": "the freshness model's change history",
    "runstate": "crawl run's counters",
    "graph": "the link graph",
}


def crawl_dir_of(path: Path) -> Path | None:
    """The crawl directory ``path`` lies in: the ancestor whose child on the way
    to ``path`` is a part of a crawl directory (frontier, warc, spool...)."""
    parts = Path(path).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in SUBDIRS:
            return Path(*parts[:i]) if i else Path(".")
    return None


def _where(path: Path) -> str:
    d = crawl_dir_of(path)
    return str(d) if d is not None else str(path.parent)


def damaged(env_dir: Path, why: str) -> DamagedState:
    """The one message for a damaged environment: which file, what it held, what to do."""
    role = ENV_ROLES.get(env_dir.name, "")
    held = f" ({role})" if role else ""
    return DamagedState(
        f"{env_dir / DATA_FILE}{held} is damaged: {why}. Restore the crawl directory "
        f"from a backup, or run `crawl check --dir "
        f"{_where(env_dir)} --repair`, which sets the damaged part aside and says what the "
        f"next run does without it", path=env_dir, why=why)


def no_space(file: Path, detail: str = "") -> NoSpace:
    """The one message for a full disk: which file, which crawl directory, what to do."""
    where = crawl_dir_of(file)
    in_dir = f" in the crawl directory {where}" if where is not None else ""
    extra = f" ({detail})" if detail else ""
    return NoSpace(
        f"no space left on the device writing {file}{in_dir}{extra}. What was committed "
        f"before is safe; free some space (df {where or file.parent}) and run the same "
        f"command again: it resumes where this one stopped", path=file)


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, lmdb.DiskError) or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)


# Errors that mean the file is not what LMDB wrote. BAD_TXN comes after a read
# of a damaged page that LMDB noted without reporting it (mdb_stat does that).
_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError,
           lmdb.VersionMismatchError, lmdb.BadTxnError, lmdb.BadChecksumError, lmdb.ProblemError)


def failure(env_dir: Path, exc: BaseException) -> CrawlError | None:
    """The operator's message for an LMDB error from this environment, or None for
    an error callers expect and handle (a named database that does not exist...)."""
    if isinstance(exc, _DAMAGE):
        return damaged(env_dir, f"LMDB says {_first_line(exc)}")
    if is_no_space(exc):
        return no_space(env_dir / DATA_FILE)
    if "Input/output error" in str(exc):
        # a commit cut short by a full disk can surface as EIO (a short write)
        try:
            full = shutil.disk_usage(env_dir).free < (1 << 20)
        except OSError:
            full = False
        if full:
            return no_space(env_dir / DATA_FILE, "the commit failed with an I/O error")
        return StateError(f"an I/O error writing {env_dir / DATA_FILE} ({_first_line(exc)}); "
                          f"check the disk, then `crawl check --dir {_where(env_dir)}`")
    if isinstance(exc, lmdb.MapFullError):
        return StateError(f"{env_dir / DATA_FILE} is full ({_first_line(exc)}): it holds "
                          "more than crawl maps for one environment; start a new crawl directory")
    if isinstance(exc, lmdb.PanicError):
        return StateError(f"LMDB stopped using {env_dir / DATA_FILE} after a failed write "
                          f"({_first_line(exc)}); run the command again, and if it fails the "
                          f"same way, `crawl check --dir {_where(env_dir)}`")
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def guarded(fn: Callable[[], Any], env_dir: Path) -> Any:
    """Run ``fn`` (an LMDB call, such as ``lmdb.open``), converting its errors as
    :class:`GuardedEnv` does."""
    try:
        return fn()
    except lmdb.Error as exc:
        err = failure(env_dir, exc)
        if err is None:
            raise
        raise err from exc


class _GuardedTxn:
    """``with env.begin() as txn`` yields the real transaction; errors convert on exit."""

    __slots__ = ("_txn", "_dir")

    def __init__(self, txn: lmdb.Transaction, env_dir: Path) -> None:
        self._txn = txn
        self._dir = env_dir

    def __enter__(self) -> lmdb.Transaction:
        return self._txn.__enter__()

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        try:
            self._txn.__exit__(et, ev, tb)  # commit, or abort after an error
        except lmdb.Error as exc:  # the commit failed: none of it was written
            err = failure(self._dir, exc)
            if err is None:
                raise
            raise err from exc
        if isinstance(ev, lmdb.Error):
            err = failure(self._dir, ev)
            if err is not None:
                raise err from ev
        return False

    def __getattr__(self, name: str) -> Any:  # a transaction used without ``with``
        return getattr(self._txn, name)


class GuardedEnv:
    """An ``lmdb.Environment`` whose failures name its file (see the module docstring).

    Everything else is the environment's own (``open_db``, ``info``, ``path``...),
    and ``begin`` yields the real transaction, so gets, puts and cursors run
    on py-lmdb's objects unchanged: the guard costs one call per transaction.
    """

    __slots__ = ("_env", "_dir")

    def __init__(self, env: lmdb.Environment, env_dir: Path) -> None:
        self._env = env
        self._dir = env_dir

    def begin(self, *args: Any, **kwargs: Any) -> _GuardedTxn:
        return _GuardedTxn(guarded(lambda: self._env.begin(*args, **kwargs), self._dir), self._dir)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._env, name)
        if not callable(value):
            return value
        env_dir = self._dir

        def call(*args: Any, **kwargs: Any) -> Any:
            return guarded(lambda: value(*args, **kwargs), env_dir)

        return call
