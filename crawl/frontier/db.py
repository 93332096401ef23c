"""The durable frontier and host scheduler (Mercator shape, all on disk).

One LMDB environment (``CrawlDir.frontier``) holds named databases:

``queue``     back queues: (host id, priority, seq) -> compact URL entry.
              One contiguous key range per host, highest priority first,
              FIFO within a priority.
``delayed``   URLs not due yet: (due ms, seq) -> host id, priority, entry.
``sched``     the host schedule, one range per priority level (the front
              queues): (priority, next-allowed ms, host id). A host is in it
              iff it has a ready URL and nothing in flight.
``hosts``     host id -> HostState; ``hostid`` host name -> host id.
``leases``    lease id -> the leased entry; ``deadlines`` (ms, lease id) for
              expiry.
``known``     (host id, URL fingerprint) -> queued / done / dropped + cycle (a
              leased URL stays "queued" here; its lease is in ``leases``).
              Host first, so one host's URLs share pages.
``ips``       per-IP leases in flight and slow-down; ``ipwait`` hosts that are
              ready but whose IP is at its cap.
``meta``      counters, the cycle number, idle-time accounting, the layout
              version (crawl/frontier/hostqueue.py ``LAYOUT``).
``robots``    hosts waiting on an unreachable robots.txt: host id -> since,
              next check, last status and error (crawl/frontier/robotswait.py).
              Added without a layout change: an older frontier gets it empty.
``delays``    hosts backing off: host id -> why their next-allowed time is what it
              is (Retry-After, backoff, robots wait, parked; crawl/frontier/delays.py).
              Added the same way.

Where the time goes: a batch touches neighbouring B-tree pages, not one
random page per URL. A random page costs ~3 us to copy on first write and
~5-10 us more to write and fsync at commit; the same update on a page the
batch already dirtied ~2 us in all. So keys start with the host id (queue,
known), host ids are handed out in order of first sight, leases and
deadlines are appended in key order, and a released host needs only its own
state (``HostState.head``), not its queue. What a batch writes in many
places (host and address states, known states, schedule entries, deadline
deletions) is collected and written once, at ``Tx.flush``, in key order
through one cursor: LMDB skips the descent from the root when the next key
is on the page the cursor is at. And a transaction starts from the host and
address states this process's previous one committed, if no other writer
committed in between (``tx.Carry``, at most 4,096 hosts): a
completion does not read back and decode the hosts its lease batch wrote.

A lease ends twice when ``crawl run`` fetches: ``handoff`` frees its host at
the end of the answer (and may lease the host's next URL in the same
commit), ``complete`` records the URL once the result is durable
(crawl/frontier/handoff.py); a lease its host no longer names was handed off.

Every public method runs in ONE write transaction and commits (fsynced)
before it returns, so a caller writes its output only after the state it
reports is durable (invariant 1). LMDB serialises writers across processes,
so several ``next``/``complete`` processes can share a frontier and never
lease one host twice (invariant 2). RAM holds only one batch (invariant 5).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from typing import Any

from crawl.core import MAP_BUDGET, MapTrimmer, Record, StateError, close_env, open_env

from . import delays, robotswait
from . import hostqueue as hq
from .complete import complete_one
from .handoff import release_early, worth_it
from .leases import fingerprint, lease_name
from .politeness import DEFAULT, Politeness, host_of
from .tx import Carry, Tx, get_int

__all__ = ["Frontier", "fingerprint", "lease_name"]

DEFAULT_MAP_BUDGET = MAP_BUDGET
ADD_CHUNK = 10_000  # records per add transaction: bounds its dirty (anonymous) pages
# Records between two looks at the map's resident pages inside a transaction:
# each record reads a few random pages and the kernel maps ~16 cached
# neighbours of each, so the map budget is checked while a batch runs, not
# only between transactions (reading the old map is safe mid-transaction).
TRIM_EVERY = 100
HID_CACHE = 1 << 17  # host ids this process remembers (~15 MB at most)

_DBS = ("meta", "queue", "delayed", "sched", "hosts", "hostid", "leases", "deadlines", "known", "ips", "ipwait",
        robotswait.TABLE, delays.TABLE)


class Frontier:
    """Add URLs, lease them politely, complete them. ``now`` is always passed in.

    Args:
        path: the LMDB directory, normally ``CrawlDir(dir).frontier``.
        politeness: delays, caps and backoff (see crawl/frontier/politeness.py).
        sync: fsync every commit (keep True outside benchmarks of raw speed).
        map_budget: bytes of the LMDB map this process keeps resident before
            it lets go of them (crawl/core/maptrim.py), so RSS stays bounded however
            large the frontier grows; None to never trim.
    """

    def __init__(self, path: str | os.PathLike[str], politeness: Politeness = DEFAULT, *, sync: bool = True,
                 map_budget: int | None = DEFAULT_MAP_BUDGET):
        self.cfg = politeness
        self.env = open_env(path, max_dbs=len(_DBS) + 1, sync=sync)
        # Free reader slots left by killed processes: they would pin old pages
        # (the file grows) and, in the end, fill the reader table.
        self.env.reader_check()
        self.db = {name: self.env.open_db(name.encode()) for name in _DBS}
        self._check_layout()
        self.trimmer = MapTrimmer(map_budget)
        # host name -> host id of committed hosts: ids are never reused or
        # changed, so the cache stays true whatever other processes do.
        self.hid_cache: dict[str, int] = {}
        # Host and address states of this process's last committed write
        # (tx.Carry): the next transaction reuses them only if no
        # other one committed in between.
        self._carry: Carry | None = None
        # A shared crawl (crawl/cluster) leases only hosts this says yes to,
        # and gives an address whose hosts k nodes hold per_ip // k slots.
        self.lease_filter: Callable[[str], bool] | None = None
        self.ip_share: dict[str, int] = {}

    def _check_layout(self) -> None:
        """Stamp a new frontier with this code's layout; refuse one of another layout."""
        meta = self.db["meta"]
        with self.env.begin() as txn:
            v = txn.get(b"layout", db=meta)
            used = txn.get(b"seq", db=meta) is not None or txn.stat(self.db["hostid"])["entries"] > 0
        if v is None and not used:
            with self.env.begin(write=True) as txn:
                txn.put(b"layout", hq.u64(hq.LAYOUT), overwrite=False, db=meta)
            return
        found = hq.from_u64(v) if v is not None else 1
        if found != hq.LAYOUT:
            path = self.env.path()
            close_env(self.env)
            raise StateError(
                f"the frontier in {path} has layout {found}, this version of crawl reads "
                f"layout {hq.LAYOUT}; finish that crawl with the version that started it, or start "
                "this one in a new crawl directory (or delete its frontier/ and add the seeds again)")

    def _tx(self, txn: Any, now: float) -> Tx:
        """A transaction helper for ``txn``, given what the last one left if it may."""
        carry, self._carry = self._carry, None
        return Tx(self, txn, now, carry)

    def remember_hid(self, name: str, hid: int) -> None:
        if len(self.hid_cache) >= HID_CACHE:
            self.hid_cache.clear()
        self.hid_cache[name] = hid

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        close_env(self.env)

    # ---- public API ------------------------------------------------------

    def add(self, recs: Iterable[Record], now: float, rejects: list[Record] | None = None) -> dict[str, int]:
        """Queue URL records; a URL already queued, leased or done this cycle is a no-op.

        Returns counts: added, known (no-op), dropped_host_cap, rejected. A
        record whose URL has no usable host is rejected (appended to
        ``rejects`` with the reason) and changes nothing. Commits every
        ``ADD_CHUNK`` records (all committed when this returns), which bounds
        the memory one call needs however many records it is given.
        """
        counts = {"added": 0, "known": 0, "dropped_host_cap": 0, "rejected": 0}
        it = iter(recs)
        while True:
            chunk = list(itertools.islice(it, ADD_CHUNK))
            if not chunk:
                break
            with self.env.begin(write=True) as txn:
                t = self._tx(txn, now)
                for lo in range(0, len(chunk), TRIM_EVERY):
                    t.add_many(chunk[lo : lo + TRIM_EVERY], rejects, counts)
                    self.trimmer.maybe_trim()
                t.flush()
            self._carry = t.carry()  # committed
            for name, hid in t.hids.items():  # committed now
                self.remember_hid(name, hid)
            self.trimmer.maybe_trim()
        return counts

    def next(self, n: int, lease_seconds: float, now: float) -> list[Record]:
        """Lease up to ``n`` URLs, at most one per host, only from hosts that are due.

        Expired leases are returned to their queues first and URLs whose due
        time has come are moved into their host queues.
        """
        with self.env.begin(write=True) as txn:
            t = self._tx(txn, now)
            t.requeue_expired()
            t.promote_due()
            out = t.lease(n, lease_seconds) if n > 0 else []
            if len(out) < n:
                t.wake_stranded()
                out += t.lease(n - len(out), lease_seconds)
            t.observe_idle(n > 0 and not out)
            t.flush()
        self._carry = t.carry()
        self.trimmer.maybe_trim()
        return out

    def complete(self, recs: Iterable[Record], now: float) -> list[Record]:
        """Record fetch results and release their hosts; one event per record.

        An unknown or expired lease, a URL that does not match its lease or
        an unreadable outcome/status gives an event with ``error`` and
        changes nothing.
        """

        with self.env.begin(write=True) as txn:
            t = self._tx(txn, now)
            t.requeue_expired()
            out = []
            for i, rec in enumerate(recs, 1):
                out.append(complete_one(t, rec))
                if not i % TRIM_EVERY:
                    self.trimmer.maybe_trim()
            t.flush()
        self._carry = t.carry()
        self.trimmer.maybe_trim()
        return out

    def handoff(self, rec: Record, now: float, lease_seconds: float = 0.0) -> tuple[bool, Record | None]:
        """At the end of an answer, before its result is durable: release its host
        as its completion would and, with ``lease_seconds``, lease the host's next
        URL if it is due now (crawl/frontier/handoff.py). One commit, and none
        for a host whose delay is half a second or more (``handoff.HORIZON``:
        its completion frees it in time). Returns
        (released, the new lease or None); a result not released here (a
        failure, a 429...) waits for ``complete`` as before.
        """
        if not worth_it(self.cfg, rec):  # no transaction at all
            return False, None
        with self.env.begin(write=True) as txn:
            t = self._tx(txn, now)
            hid = release_early(t, rec)
            nxt = t.lease_this(hid, lease_seconds) if hid is not None and lease_seconds > 0 else None
            t.flush()
        self._carry = t.carry()
        return hid is not None, nxt

    def requeue_expired(self, now: float) -> int:
        """Return URLs of leases past their deadline to their hosts' queues."""
        with self.env.begin(write=True) as txn:
            t = self._tx(txn, now)
            n = t.requeue_expired()
            t.flush()
        self._carry = t.carry()
        return n

    def release_leases(self, now: float, taken_after: float) -> dict[str, Any]:
        """Return to their queues the leases taken after ``taken_after`` (unix time),
        as if they had expired now: the caller knows their holder is dead (a
        ``crawl run`` that holds the directory lock, whose predecessor was
        killed). Each host waits its normal delay first, as after an expiry.

        Returns ``released``, ``dropped`` (URLs out of lease attempts,
        ``--max-leases``), and the leases ``kept`` with the latest deadline
        among them, ``kept_until`` (None when none are kept).
        """
        with self.env.begin(write=True) as txn:
            t = self._tx(txn, now)
            dropped = t.counter("dropped")
            n = t.requeue_expired(taken_after)
            dropped = t.counter("dropped") - dropped
            t.flush()
        self._carry = t.carry()
        kept, until = 0, None
        with self.env.begin() as txn:
            for raw in txn.cursor(db=self.db["leases"]).iternext(keys=False):
                kept += 1
                deadline = hq.decode_lease(raw).deadline
                until = deadline if until is None else max(until, deadline)
        return {"released": n - dropped, "dropped": dropped, "kept": kept, "kept_until": until}

    def new_cycle(self) -> int:
        """Start a new crawl cycle: URLs done or dropped before may be added again."""
        with self.env.begin(write=True) as txn:
            cycle = get_int(txn, self.db["meta"], b"cycle") + 1
            txn.put(b"cycle", hq.u64(cycle), db=self.db["meta"])
        return cycle

    def pending(self) -> dict[str, int]:
        """URLs queued (ready or delayed) and leases in flight: the frontier is
        finished when both are 0."""
        with self.env.begin() as txn:
            return {
                "queued": get_int(txn, self.db["meta"], b"queued"),
                "in_flight": txn.stat(self.db["leases"])["entries"],
            }

    def next_due(self, now: float) -> float | None:
        """When the next lease could be handed out (``now`` if already), or None if
        nothing is queued or delayed. Leases in flight may still add work."""
        with self.env.begin() as txn:
            return Tx(self, txn, now).next_due()

    def stats(self, now: float) -> dict[str, Any]:
        """Counts for ``crawl frontier stats`` and ``crawl stats``."""
        from .report import stats  # noqa: PLC0415  (read-only views load lazily)

        out = stats(self, now)
        w = robotswait.waiting(self, now, limit=0)
        out.update(hosts_waiting_robots=w["hosts"], urls_waiting_robots=w["urls"])
        return out

    def robots_waiting(self, now: float, limit: int = 20) -> dict[str, Any]:
        """Hosts whose URLs wait on an unreachable robots.txt: counts, and the
        ``limit`` largest with their next check (crawl/frontier/robotswait.py)."""
        return robotswait.waiting(self, now, limit)

    def dump(self, host: str, now: float, limit: int = 1000) -> dict[str, Any]:
        """One host's state and queue, for ``crawl frontier dump --host``."""
        from .report import dump

        out = dump(self, host, now, limit)
        if out.get("known"):
            out["robots_wait"] = robotswait.state_of(self, out["host"])
        return out

    def state_of(self, url: str) -> str | None:
        """queued / leased / done / dropped, or None if the frontier never saw it."""
        try:
            name = host_of(url)
        except ValueError:
            return None
        fp = fingerprint(url)
        with self.env.begin() as txn:
            hid = txn.get(name.encode(), db=self.db["hostid"])
            v = txn.get(hq.known_key(hq.from_hid(hid), fp), db=self.db["known"]) if hid else None
            if not v:
                return None
            state = hq.decode_known(v)[0]
            if state == hq.QUEUED:  # a leased URL keeps "queued" in known: look for its lease
                fp_le = fp.to_bytes(8, "little")
                for raw in txn.cursor(db=self.db["leases"]).iternext(keys=False):
                    if raw[hq.LEASE_FP] == fp_le:
                        return "leased"
        return hq.STATE_NAMES[state]


