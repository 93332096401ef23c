"""Which node a host belongs to: the virtual shard of its host key, and the map of owners.

A host's shard is ``crc32(host_key) % V`` with the same ``host[:port]`` key
the politeness queues use (:func:`crawl.canon.host_key`), so a shard holds
whole politeness queues: aliases of one queue can never land on two nodes
(StormCrawler#2122 split them by keying the partitioner and the queues
differently). ``V`` is fixed when the cluster is created.

The bridge process writes ``D/cluster/map.json`` whole (atomic replace)
whenever the shard map changes; the crawl process reads it through
:class:`ShardMap`, which re-reads only when the file was replaced (one
``stat`` per lease round), and answers the questions the lease loop asks:
is this shard mine, may I lease it now (not draining, not fenced)? Each
answer reads one attribute that a refresh replaces whole, so the lease
thread and the admission thread never see half of a new map.

A host of a small per-IP group may be **re-homed** to its group's home
vshard (``D/cluster/homes.json``, from the KV overrides: crawl/cluster/kv.py);
its shard is then that vshard for routing, leasing, handoffs and sweeps
alike. An override never changes once written, so a node that learns one
from a record (a re-homed host's URLs carry ``home``) may keep it.
"""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path
from typing import Any

import orjson

from crawl.canon import host_key

DEFAULT_V = 1024

# Files under D/cluster/ (the contract between the crawl process and the bridge).
CLUSTER = "cluster"
OUTBOX = "outbox"
INBOX = "inbox"
MAP = "map.json"
HANDOFF_OUT = "handoff-out"
HANDOFF_DONE = "handoff-done.json"
BRIDGE_STATUS = "bridge-status.json"
HOMES = "homes.json"  # re-homed hosts -> home vshard (small per-IP groups), written by the bridge
PLACED = "placed"  # spool: the bridge's answers to this node's first sightings of hosts' addresses


def vshard(key: str, v: int = DEFAULT_V) -> int:
    """The virtual shard of a host key (``host[:port]``, as :func:`crawl.canon.host_key` gives)."""
    return zlib.crc32(key.encode()) % v


def vshard_of_url(url: str, v: int = DEFAULT_V) -> int:
    """The virtual shard of a URL's host (ValueError for a URL without a host)."""
    return zlib.crc32(host_key(url).encode()) % v


def cluster_dir(crawl_dir: str | os.PathLike[str]) -> Path:
    """``D/cluster``: where a node's spools and the map the bridge writes live."""
    return Path(crawl_dir) / CLUSTER


class ShardMap:
    """The node's view of ``D/cluster/map.json``, re-read only when the file changes.

    No file yet (the bridge has not joined) means nothing is owned: a node
    that does not know its shards must lease nothing rather than guess.
    """

    def __init__(self, crawl_dir: str | os.PathLike[str], hold: float = 0.0) -> None:
        self.path = cluster_dir(crawl_dir) / MAP
        # A shard this node gains while running is leased only ``hold`` seconds
        # later: links for its hosts may reach the stream before the previous
        # owner's slice (with each host's next-allowed time) does, and a host
        # its previous owner fetched a moment ago must not be asked again at
        # once. At start every shard counts as gained: a node cannot tell its
        # own resumed shards from ones handed to it while it was away.
        self.hold = hold
        self.gained: dict[int, float] = {}
        self._sig: tuple[int, int, int] | None = None
        self.data: dict[str, Any] = {}
        self.owned: frozenset[int] = frozenset()
        self.draining: frozenset[int] = frozenset()
        self.leasable: frozenset[int] = frozenset()
        self.owner: dict[int, str] = {}
        self.ip_share: dict[str, int] = {}
        self.fenced = False
        self.local: frozenset[int] = frozenset()
        self._leasable: frozenset[int] = frozenset()
        self.ts = 0.0
        self.fence_after = 0.0
        self.epoch = -1
        self.v = DEFAULT_V
        self.node = ""
        self.crawl = ""
        self.homes_path = cluster_dir(crawl_dir) / HOMES
        self._homes_sig: tuple[int, int, int] | None = None
        self.homes: dict[str, int] = {}  # host key -> home vshard (re-homed hosts only)
        self.refresh()

    def refresh(self) -> bool:
        """Re-read the map if it was replaced since the last look; True when it changed."""
        homes = self._refresh_homes()
        return self._refresh_map() or homes

    def _refresh_homes(self) -> bool:
        try:
            st = os.stat(self.homes_path)
        except FileNotFoundError:
            return False
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._homes_sig:
            return False
        try:
            data = orjson.loads(self.homes_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False
        if not isinstance(data, dict) or not isinstance(data.get("homes"), dict):
            return False
        self._homes_sig = sig
        # merged, never replaced: an override learnt from a record stays (they never change)
        new = {str(h): int(v) for h, v in data["homes"].items()}
        if all(self.homes.get(h) == v for h, v in new.items()):
            return False
        self.homes = {**self.homes, **new}
        return True

    def learn(self, host: str, v: int) -> None:
        """Keep an override seen on a record (its sender knew it; it never changes)."""
        if self.homes.get(host) != v:
            self.homes = {**self.homes, host: v}

    def _refresh_map(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._sig is None and not self.data:
                return False
            self._sig = None
            self._load({})
            return True
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._sig:
            self.leasable = self._current(time.time())
            return False
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False  # replaced again under us, or half-written by hand: keep the last view
        if not isinstance(data, dict):
            return False
        self._sig = sig
        self._load(data)
        return True

    def _load(self, data: dict[str, Any]) -> None:
        self.data = data
        self.v = int(data.get("V") or DEFAULT_V)
        self.epoch = int(data.get("epoch", -1))
        self.node = str(data.get("node", ""))
        self.crawl = str(data.get("crawl", ""))
        self.owned = frozenset(int(s) for s in data.get("owned") or ())
        self.draining = frozenset(int(s) for s in data.get("draining") or ())
        self.fenced = bool(data.get("fenced", False))
        self.owner = {int(k): str(n) for k, n in (data.get("owner") or {}).items()}
        self.ip_share = {str(ip): max(1, int(k)) for ip, k in (data.get("ip_share") or {}).items()}
        self.ts = float(data.get("ts") or 0.0)
        self.fence_after = float(data.get("fence_after") or 0.0)
        local = self.owned - self.draining
        now = time.time()
        if self.hold:  # shards gained since the last map (all, at start) wait (see __init__)
            for shard in local - self.local:
                self.gained[shard] = now + self.hold
        self.gained = {k: t for k, t in self.gained.items() if t > now and k in local}
        self.local = local  # shards whose links are admitted here
        self._leasable = frozenset() if self.fenced else local
        self.leasable = self._current(now)

    def _current(self, now: float) -> frozenset[int]:
        if self.stale(now):
            return frozenset()
        if self.gained:
            held = {k for k, t in self.gained.items() if t > now}
            if held:
                return self._leasable - held
            self.gained = {}
        return self._leasable

    def stale(self, now: float | None = None) -> bool:
        """The bridge has not renewed the map for ``fence_after`` seconds: its heartbeat
        may be failing unseen (or the bridge is gone), so this node must stop leasing."""
        if not self.fence_after:
            return False
        return (time.time() if now is None else now) - self.ts > self.fence_after

    def shard(self, key: str) -> int:
        """The vshard of a host key under this map's ``V``: its home's when re-homed."""
        home = self.homes.get(key)
        return zlib.crc32(key.encode()) % self.v if home is None else home

    def natural(self, key: str) -> int:
        """The vshard of a host key by its hash alone (ignoring a re-homing)."""
        return zlib.crc32(key.encode()) % self.v

    def owns(self, shard: int) -> bool:
        """Whether this node owns ``shard`` in the current epoch (draining ones included)."""
        return shard in self.owned

    def owns_host(self, key: str) -> bool:
        return self.shard(key) in self.owned

    def may_lease(self, key: str) -> bool:
        """Whether the host's queue may be leased now: owned, not draining, not fenced
        (as of the last :meth:`refresh`)."""
        return self.shard(key) in self.leasable

    def owner_of(self, shard: int) -> str | None:
        return self.owner.get(shard)

    def share(self, ip: str) -> int:
        """How many nodes hold hosts on ``ip`` (1 when it is not shared)."""
        return self.ip_share.get(ip, 1)
