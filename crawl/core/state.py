"""LMDB environments: the one place that knows how state is opened.

Every durable structure (frontier, seen set, robots and DNS caches, host
state, history, simhash tables, spools) is an LMDB environment under the
crawl directory. LMDB gives us what the invariants need: a single writer
with crash-safe, fsynced commits, readers that never block, and a memory
map that the OS pages in and out, so RAM use does not grow with the data.
"""

from __future__ import annotations

import os
from pathlib import Path

import lmdb

from . import envcheck
from .errors import StateError
from .guard import GuardedEnv, damaged, failure

# Sparse on 64-bit Linux: the map size reserves address space, not disk.
DEFAULT_MAP_SIZE = 1 << 40  # 1 TiB


_OPEN: dict[str, GuardedEnv] = {}


def open_env(
    path: str | os.PathLike[str],
    *,
    max_dbs: int = 16,
    map_size: int = DEFAULT_MAP_SIZE,
    readonly: bool = False,
    sync: bool = True,
) -> GuardedEnv:
    """Open (creating it if needed) the LMDB environment directory ``path``.

    One environment is shared per path within a process (LMDB does not allow
    two handles), so close it with :func:`close_env`, never twice.
    ``sync=True`` (the default) fsyncs every commit: a command writes its
    output only after the state change it reports is on disk. Pass
    ``sync=False`` only for caches that can be rebuilt.

    The data file is checked before it is mapped (:mod:`.envcheck`): one that
    is cut short or has overwritten meta pages is refused with a
    :class:`~crawl.core.errors.DamagedState` naming it, where LMDB would die
    of SIGBUS or fail deep inside a stage. The environment comes back wrapped
    (:class:`~crawl.core.guard.GuardedEnv`), so damage LMDB finds later, or a
    full disk, is reported the same way by every command.
    """
    p = Path(path)
    key = str(p.resolve())
    env = _OPEN.get(key)
    if env is not None:
        # LMDB forbids opening one environment twice in a process; share it.
        try:
            env.info()
            return env
        except lmdb.Error:
            del _OPEN[key]
    problem = envcheck.problem(p)
    if problem is not None:
        raise damaged(p, problem)
    try:
        if not readonly:
            p.mkdir(parents=True, exist_ok=True)
        raw = lmdb.open(
            str(p),
            map_size=map_size,
            max_dbs=max_dbs,
            readonly=readonly,
            sync=sync,
            metasync=sync,
            lock=True,
            readahead=False,
            max_readers=512,
            subdir=True,
        )
    except lmdb.Error as exc:
        err = failure(p, exc)
        if err is not None:
            raise err from exc
        raise StateError(
            f"cannot open state at {p}: {exc}. Is --dir a crawl directory you can write to?"
        ) from exc
    env = GuardedEnv(raw, p)
    _OPEN[key] = env
    return env


_LIVE_TRIES = 5  # walks of a file a writer keeps growing before its findings are taken as they are


def verify_live(path: str | os.PathLike[str]) -> list[str]:
    """:func:`~crawl.core.envcheck.verify_env`, safe beside a writer: a read
    transaction is held while the file is walked, so no page of the commit
    being read (or of any newer one) can be reused under the walk, and a live
    crawl cannot make a sound file look damaged.

    One race is left to the walk itself: the verifier measures the file, then
    reads the newest commit, which a writer may have made meanwhile on pages
    past that length ("overflow page N beyond EOF", about one walk in a
    hundred beside a busy writer). So findings count only from a walk during
    which the file did not grow; damage stays, a race does not."""
    p = Path(path)
    if envcheck.problem(p) is not None or not (p / envcheck.DATA_FILE).exists():
        return envcheck.verify_env(p)
    shared = str(p.resolve()) in _OPEN
    try:
        env = open_env(p)
    except StateError:
        return envcheck.verify_env(p)
    data = p / envcheck.DATA_FILE
    try:
        with env.begin():
            for _ in range(_LIVE_TRIES):
                before = data.stat().st_size
                found = envcheck.verify_env(p)
                if not found or data.stat().st_size == before:
                    return found
            return found
    finally:
        if not shared:
            close_env(env)


def close_env(env: GuardedEnv) -> None:
    """Close an environment opened with :func:`open_env` (shared per process)."""
    for key, e in list(_OPEN.items()):
        if e is env:
            del _OPEN[key]
    env.close()


class CrawlDir:
    """Names of everything inside one crawl directory (``--dir``).

    Only paths live here; each module opens its own environment through
    :func:`open_env`, so one concern's state can be copied or rebuilt alone.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def sub(self, name: str) -> Path:
        """A path inside the crawl directory. ``name`` is ours, never a URL's."""
        return self.root / name

    @property
    def frontier(self) -> Path:
        return self.sub("frontier")

    @property
    def seen(self) -> Path:
        return self.sub("seen")

    @property
    def fetchstate(self) -> Path:
        """Robots cache, DNS cache and per-URL fetch history."""
        return self.sub("fetchstate")

    @property
    def dedupe(self) -> Path:
        return self.sub("dedupe")

    @property
    def warc(self) -> Path:
        return self.sub("warc")

    @property
    def log(self) -> Path:
        return self.sub("log")

    @property
    def graph(self) -> Path:
        """The link graph: each parsed page's out-links, for ``crawl report`` and ``crawl why``."""
        return self.sub("graph")

    @property
    def spools(self) -> Path:
        return self.sub("spool")
