"""The frontier's write transaction: queue, schedule, lease and expiry mechanics.

``Tx`` wraps one LMDB write transaction of :class:`crawl.frontier.Frontier`.
It caches the host states it touches and the counters it bumps, and writes
each once in :meth:`Tx.flush`, so a batch of 1,000 leases costs one put per
host rather than several. See crawl/frontier/db.py for the database layout and
crawl/frontier/complete.py for what a fetch result does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson
import xxhash

from crawl.core import Record, records

from . import hostqueue as hq
from .hostqueue import HostState
from .ipslots import IpSlots
from .politeness import MAX_PRIORITY, effective_priority, fast_host, host_of, release_delay


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _first(pair: tuple[bytes, bytes]) -> bytes:
    return pair[0]


def get_int(txn: Any, db: Any, key: bytes) -> int:
    v = txn.get(key, db=db)
    return hq.from_u64(v) if v else 0


# Host states a transaction may leave to the next: a lease batch's worth.
# More (an add of 10,000 URLs to as many hosts) would rarely be reused and
# keeps that many objects alive for the garbage collector to walk.
CARRY_HOSTS = 4096
# How long a host the lease filter refused stays off the schedule before it is asked again.
FILTER_RECHECK_MS = 1000


class Carry(NamedTuple):
    """Host and address states as one of this process's transactions committed them.

    LMDB gives each committed write transaction the next id, so the
    transaction numbered ``txn_id + 1`` knows that nobody else wrote in
    between and may take these instead of reading and decoding them again
    (a lease batch's hosts are exactly the ones its completion needs).
    Any other id, an abort or an exception, and they are dropped.
    """

    txn_id: int
    hosts: dict[int, HostState]
    ips: dict[str, tuple[int, float]]


class Tx(IpSlots):
    """One write transaction: caches host states and counters, writes them once."""

    def __init__(self, fr: Any, txn: Any, now: float, carry: Carry | None = None) -> None:
        self.fr, self.cfg, self.txn, self.now = fr, fr.cfg, txn, now
        self.now_ms = hq.ms_down(now)
        d = fr.db
        self.dq, self.dd, self.ds, self.dh = d["queue"], d["delayed"], d["sched"], d["hosts"]
        self.dl, self.ddl, self.dk, self.dm = d["leases"], d["deadlines"], d["known"], d["meta"]
        self.dip, self.dipw, self.dhid = d["ips"], d["ipwait"], d["hostid"]
        self.drw = d["robots"]
        self.robots_any: bool | None = None  # any host waiting on robots.txt? (robots_waiting)
        self.hosts: dict[int, HostState] = {}
        self.dirty: set[int] = set()
        self.ips: dict[str, tuple[int, float]] = {}  # address -> (in flight, slowed until)
        self.dirty_ips: set[str] = set()
        # What this process's previous transaction left, valid only if no
        # other transaction committed since (see Carry).
        self.txn_id: int = txn.id()
        self.prev_hosts: dict[int, HostState] = {}
        self.prev_ips: dict[str, tuple[int, float]] = {}
        if carry is not None and carry.txn_id + 1 == self.txn_id:
            self.prev_hosts, self.prev_ips = carry.hosts, carry.ips
        self.counters: dict[str, int] = {}
        self.qcur = txn.cursor(db=self.dq)  # one queue cursor, repositioned per use
        self.cursors: dict[str, Any] = {}  # (see cursor)
        self.new_leases: list[tuple[bytes, bytes]] = []
        self.lease_id = 0  # the last lease id handed out by lease()
        self.new_deadlines: list[tuple[bytes, bytes]] = []
        self.known_puts: list[tuple[bytes, bytes]] = []  # (see set_known)
        self.gone_deadlines: list[bytes] = []  # (see drop_deadline)
        self.sched_puts: dict[int, bytes] = {}  # host id -> its schedule key not yet written (see schedule)
        self.hids: dict[str, int] = {}
        self.delta: dict[str, int] = {}
        self.cycle = get_int(txn, self.dm, b"cycle")
        self.wrote = False
        self._waiters: bool | None = None  # any host in ipwait? (ipslots.has_waiters)

    # ---- small helpers -----------------------------------------------------

    def counter(self, name: str) -> int:
        if name not in self.counters:
            self.counters[name] = get_int(self.txn, self.dm, name.encode())
        return self.counters[name] + self.delta.get(name, 0)

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.delta[name] = self.delta.get(name, 0) + n

    def take(self, name: str) -> int:
        self.count(name)
        return self.counter(name)

    def robots_waiting(self) -> bool:
        """Whether any host waits on robots.txt: one look per transaction, so the
        common completion (no host waiting anywhere) costs no lookup."""
        if self.robots_any is None:
            self.robots_any = self.txn.stat(self.drw)["entries"] > 0
        return self.robots_any

    def cursor(self, name: str) -> Any:
        """One cursor per database for this transaction, kept where it was last used."""
        cur = self.cursors.get(name)
        if cur is None:
            cur = self.cursors[name] = self.txn.cursor(db=self.fr.db[name])
        return cur

    def host(self, hid: int) -> HostState:
        h = self.hosts.get(hid)
        if h is None:
            h = self.read_host(hid)
        self.dirty.add(hid)
        return h

    def read_host(self, hid: int) -> HostState:
        """The host's state, cached in this transaction (not marked dirty)."""
        h = self.prev_hosts.get(hid)
        if h is None:
            h = hq.decode_host(self.cursor("hosts").get(hq.hid_key(hid)))  # (see add_many)
        self.hosts[hid] = h
        return h

    def host_id(self, name: str) -> int:
        """The host's id, created (with an empty state) if it is new."""
        hid = self.fr.hid_cache.get(name)
        if hid is not None:
            return hid
        hid = self.hids.get(name)
        if hid is not None:
            return hid
        v = self.txn.get(name.encode(), db=self.dhid)
        if v is not None:
            # Committed by someone: a host's id never changes, so every
            # later transaction of this process may trust it.
            hid = int.from_bytes(v, "big")
            self.fr.remember_hid(name, hid)
            return hid
        hid = self.hids[name] = self.take("hid")
        self.txn.put(name.encode(), hq.hid_key(hid), db=self.dhid)
        self.hosts[hid] = HostState(name)
        self.dirty.add(hid)
        return hid

    def flush(self) -> None:
        hosts, key = self.hosts, hq.hid_key
        if self.dirty:
            self.txn.cursor(db=self.dh).putmulti([(key(hid), hosts[hid].encode()) for hid in sorted(self.dirty)])
        if self.dirty_ips:
            self.flush_ips()
        if self.known_puts:
            self.flush_known()
        if self.gone_deadlines:
            self.flush_deadlines()
        if self.sched_puts:
            self.flush_sched()
        for name in self.delta:
            self.txn.put(name.encode(), hq.u64(self.counter(name)), db=self.dm)
        self.wrote = self.wrote or bool(self.dirty or self.delta)  # (and flush_ips sets it)
        self.dirty.clear()
        self.delta.clear()
        self.counters.clear()

    def carry(self) -> Carry | None:
        """What the next transaction of this process may reuse, once this one
        has committed: only if it wrote (an empty commit does not take a
        transaction id, so a later writer's commit could take the id that
        would vouch for this one)."""
        if not self.wrote or len(self.hosts) > CARRY_HOSTS:
            return None
        return Carry(self.txn_id, self.hosts, self.ips)

    def set_known(self, hid: int, fp: int, state: int, outcome: int = 0) -> None:
        """Record a URL's state; written by :meth:`flush_known` (nothing reads it back before)."""
        self.known_puts.append((hq.known_key(hid, fp), hq.known_value(state, self.cycle, outcome)))

    def flush_known(self) -> None:
        # In key order through one cursor: LMDB skips the descent from the
        # root when the next key falls on the page the cursor is on. The sort
        # is stable, so of two states for one URL the later wins.
        puts, self.known_puts = self.known_puts, []
        puts.sort(key=_first)
        self.txn.cursor(db=self.dk).putmulti(puts)

    def drop_deadline(self, key: bytes) -> None:
        """Delete a lease's deadline entry; done by :meth:`flush_deadlines`."""
        self.gone_deadlines.append(key)

    def flush_deadlines(self) -> None:
        gone, self.gone_deadlines = self.gone_deadlines, []
        gone.sort()
        cur = self.txn.cursor(db=self.ddl)
        for key in gone:  # a batch's leases share a deadline: mostly the next entry, no search
            if cur.key() == key or cur.set_key(key):
                cur.delete()

    # ---- scheduling ------------------------------------------------------------

    def unschedule(self, hid: int, h: HostState) -> None:
        if h.sched < hq.WAITING_IP:
            if self.sched_puts.pop(hid, None) is None:  # not written yet: nothing to delete
                self.txn.delete(hq.sched_key(h.sched, h.sched_ms, hid), db=self.ds)
        elif h.sched == hq.WAITING_IP:
            self.txn.delete(h.ip.encode() + b"\0" + hq.hid_key(hid), db=self.dipw)
        h.sched = hq.NOT_SCHEDULED

    def schedule(self, hid: int, h: HostState, prio: int) -> None:
        """Put a host with a ready URL and nothing in flight on the schedule."""
        t_ms = hq.ms_up(max(h.next_allowed, h.parked_until))
        if h.sched == prio and h.sched_ms == t_ms:
            return
        self.unschedule(hid, h)
        self.sched_puts[hid] = hq.sched_key(prio, t_ms, hid)  # written by flush_sched
        h.sched, h.sched_ms = prio, t_ms

    def flush_sched(self) -> None:
        """Write the schedule entries made since the last call, in key order
        through one cursor (a batch's released hosts share a few pages)."""
        keys = sorted(self.sched_puts.values())
        self.sched_puts.clear()
        self.txn.cursor(db=self.ds).putmulti([(k, b"") for k in keys])

    def reschedule(self, hid: int, h: HostState) -> None:
        """Schedule a host with nothing in flight at the priority of its first ready URL."""
        if h.lease:
            return
        if h.head == hq.NO_HEAD:
            self.unschedule(hid, h)
        else:
            self.schedule(hid, h, h.head)

    def find_tail(self, hid: int, prio: int) -> tuple[bytes, bytes] | None:
        """(key, value) of the last block of the host's queue at ``prio``, or None,
        found by a cursor search (``append`` tries the block HostState names first)."""
        cur = self.qcur
        found = cur.set_range(hq.queue_key(hid, prio + 1, 0)) if prio < 255 else False
        found = cur.prev() if found else cur.last()
        if found:
            key = cur.key()
            if key[:5] == hq.queue_key(hid, prio, 0)[:5]:
                return key, cur.value()
        return None

    def append(self, hid: int, h: HostState, prio: int, items: list[bytes]) -> None:
        """Append block items (in order) to the tail of the host's queue at ``prio``."""
        tail = None
        if h.tail_prio == prio:  # the block the last add used (see HostState): one get
            key = hq.queue_key(hid, prio, h.tail_seq)
            block = self.qcur.get(key)  # (positioned there for the put below)
            if block is not None:
                tail = key, block
        if tail is None:
            tail = self.find_tail(hid, prio)
        i, n = 0, len(items)
        if tail is not None:
            key, block = tail
            size = len(block)
            if n == 1:  # one URL for this host in the batch (the common case)
                if size + len(items[0]) <= hq.BLOCK:
                    self.qcur.put(key, block + items[0])
                    i = 1
            else:
                grown = [block]
                while i < n and size + len(items[i]) <= hq.BLOCK:
                    grown.append(items[i])
                    size += len(items[i])
                    i += 1
                if i:
                    self.qcur.put(key, b"".join(grown))
        while i < n:  # new blocks: a fresh sequence number keeps them after every older one
            grown, size = [items[i]], len(items[i])
            i += 1
            while i < n and size + len(items[i]) <= hq.BLOCK:
                grown.append(items[i])
                size += len(items[i])
                i += 1
            seq = self.take("seq")
            self.txn.put(hq.queue_key(hid, prio, seq), b"".join(grown), db=self.dq)
            h.tail_prio, h.tail_seq = prio, seq
        if prio < h.head:
            h.head = prio
        if not h.lease and h.sched != hq.WAITING_IP and (h.sched == hq.NOT_SCHEDULED or prio < h.sched):
            self.schedule(hid, h, prio)

    # ---- add -----------------------------------------------------------------

    def add_many(self, recs: list[Record], rejects: list[Record] | None, counts: dict[str, int],
                 readd: bool = False) -> None:
        """Queue a batch of URL records (see Frontier.add); ``counts`` is updated.

        Each record is decided in input order (no-op, cap, reject); the
        accepted URLs of one host and priority are then appended to its
        queue with one read and one write of its tail block. ``readd``
        queues URLs that are done or dropped in this cycle too (crawl
        recrawl).
        """
        if self.known_puts:  # read below
            self.flush_known()
        txn, dk, hosts, cap = self.txn, self.dk, self.hosts, self.cfg.host_queue_cap
        prev_hosts = self.prev_hosts
        queued_v = hq.known_value(hq.QUEUED, self.cycle)
        cycle16 = self.cycle & 0xFFFF
        now, block_item, encode_entry = self.now, hq.block_item, hq.encode_entry
        hid_cache, host_id, xxh, known_key = self.fr.hid_cache, self.host_id, xxhash.xxh3_64_intdigest, hq.known_key
        dirty = self.dirty
        # Cursors, not txn.get/put: a batch's hosts and known keys come in
        # runs of neighbours, and a positioned cursor finds a key on the
        # page it is at without descending from the root.
        kput = self.cursor("known").put
        hget = self.cursor("hosts").get
        groups: dict[tuple[int, int], list[bytes]] = {}
        added = known = dropped = rejected = 0
        for rec in recs:
            url = rec.get("url")
            try:
                if not isinstance(url, str) or not url:
                    raise ValueError('no "url" string')
                name = fast_host(url) or host_of(url)  # (host_of tries fast_host first too)
                prio = effective_priority(url, rec.get("priority"), rec.get("depth"))
                due = rec.get("due")
                if due is not None:
                    due = _number(due)
            except ValueError as exc:
                rejected += 1
                self._reject(url, exc, rejects)
                continue
            hid = hid_cache.get(name)
            if hid is None:
                hid = host_id(name)
            fp = xxh(url.encode("utf-8", "surrogatepass"))  # fingerprint()
            h = hosts.get(hid)
            if h is None:  # read, not yet dirty: a no-op add leaves the host alone
                h = prev_hosts.get(hid)  # see Carry
                if h is None:
                    h = hq.decode_host(hget(hq.hid_key(hid)))
                hosts[hid] = h
            kkey = known_key(hid, fp)
            # Mark it queued in one step when it is new (the common case);
            # undone below if the URL is not queued after all.
            old = None
            if not kput(kkey, queued_v, overwrite=False):
                old = txn.get(kkey, db=dk)
                state, cycle, _ = hq.decode_known(old)
                if state == hq.QUEUED or state == hq.LEASED or (cycle == cycle16 and not readd):
                    known += 1
                    continue
                txn.put(kkey, queued_v, db=dk)
            if h.queued >= cap:
                self._unknow(kkey, old)
                dropped += 1
                continue
            try:
                entry = encode_entry(url, name, rec, 0, 0)
            except ValueError as exc:
                self._unknow(kkey, old)
                rejected += 1
                self._reject(url, exc, rejects)
                continue
            if due is not None and due > now:
                key = hq.time_key(hq.ms_up(due), self.take("seq"))
                txn.put(key, hq.hid_key(hid) + bytes([prio]) + entry, db=self.dd)
            else:
                group = groups.get((hid, prio))
                if group is None:
                    groups[(hid, prio)] = [block_item(entry)]
                else:
                    group.append(block_item(entry))
            dirty.add(hid)
            h.queued += 1
            added += 1
        for (hid, prio), items in sorted(groups.items()):  # queue pages in key order
            self.append(hid, hosts[hid], prio, items)
        self.count("queued", added)
        self.count("added", added)
        self.count("dropped_host_cap", dropped)
        counts["added"] += added
        counts["known"] += known
        counts["dropped_host_cap"] += dropped
        counts["rejected"] += rejected

    def _unknow(self, kkey: bytes, old: bytes | None) -> None:
        if old is None:
            self.txn.delete(kkey, db=self.dk)
        else:
            self.txn.put(kkey, old, db=self.dk)

    @staticmethod
    def _reject(url: object, exc: ValueError, rejects: list[Record] | None) -> str:
        if rejects is not None:
            rejects.append(records.make("reject", input=url, error=str(exc)))
        return "rejected"

    def promote_due(self) -> int:
        """Move delayed URLs whose due time has come into their host queues."""
        cur = self.txn.cursor(db=self.dd)
        moved = []
        if cur.first():
            for key, value in cur:
                t_ms, seq = hq.unpack_time_key(key)
                if t_ms > self.now_ms:
                    break
                moved.append((key, seq, value))
        for key, _seq, value in moved:
            self.txn.delete(key, db=self.dd)
            hid = int.from_bytes(value[:4], "big")
            self.append(hid, self.host(hid), value[4], [hq.block_item(value[5:])])
        return len(moved)

    # ---- next -----------------------------------------------------------------

    def lease(self, n: int, lease_seconds: float) -> list[Record]:
        if self.sched_puts:  # read below (the hosts it puts back go behind now: see lease_host)
            self.flush_sched()
        out: list[Record] = []
        cur = self.txn.cursor(db=self.ds)
        unpack, now_ms = hq.unpack_sched_key, self.now_ms
        deadline = self.now + lease_seconds
        deadline_ms = hq.ms_up(deadline)  # every lease of this call has the same deadline
        self.lease_id = self.counter("lease")  # lease_host hands out the next ids
        lease_host, trim = self.lease_host, self.fr.trimmer.maybe_trim
        for prio in range(MAX_PRIORITY + 1):
            start = bytes([prio])
            while len(out) < n:
                # Take a batch of due hosts off the schedule (the cursor
                # deletes them where it stands: no search per host), then
                # lease them; a host put back goes behind ``now``.
                batch: list[int] = []
                want = n - len(out)
                key = cur.key() if cur.set_range(start) else b""
                while key:
                    p, t_ms, hid = unpack(key)
                    if p != prio or t_ms > now_ms:
                        break
                    batch.append(hid)
                    cur.delete()  # the host leaves the schedule (h.sched in lease_host)
                    if len(batch) >= want:
                        break
                    key = cur.key()
                if not batch:
                    break
                for hid in batch:
                    rec = lease_host(hid, deadline, deadline_ms)
                    if rec is not None:
                        out.append(rec)
                        if not len(out) % 100:  # see Frontier.add
                            trim()
        self.write_leases(len(out))
        return out

    def write_leases(self, n: int) -> None:
        """Write the ``n`` leases lease_host made and count them."""
        # Lease ids only grow, and the deadlines share one ms: both in key order.
        if self.new_leases:
            self.txn.cursor(db=self.dl).putmulti(self.new_leases)
            self.txn.cursor(db=self.ddl).putmulti(self.new_deadlines)
            self.new_leases, self.new_deadlines = [], []
        self.count("lease", n)
        self.count("leased", n)
        self.count("queued", -n)

    def lease_this(self, hid: int, lease_seconds: float) -> Record | None:
        """Lease the first URL of one host, if it is due now and free (the hand-off:
        crawl/frontier/handoff.py), by the same rules as :meth:`lease`."""
        h = self.hosts.get(hid)
        if h is None:
            h = self.read_host(hid)
        if h.lease or h.head == hq.NO_HEAD or h.sched == hq.WAITING_IP \
                or max(h.next_allowed, h.parked_until) > self.now:
            return None
        self.unschedule(hid, h)  # lease_host schedules it again if it may not go now
        deadline = self.now + lease_seconds
        self.lease_id = self.counter("lease")
        rec = self.lease_host(hid, deadline, hq.ms_up(deadline))
        self.write_leases(1 if rec is not None else 0)
        return rec

    def lease_host(self, hid: int, deadline: float, deadline_ms: int,
                   _fp: Any = xxhash.xxh3_64_intdigest, _loads: Any = orjson.loads) -> Record | None:
        """Lease the first URL of a host just taken off the schedule (or put it back)."""
        h = self.hosts.get(hid)
        if h is None:
            h = self.read_host(hid)
        self.dirty.add(hid)
        h.sched = hq.NOT_SCHEDULED
        flt = self.fr.lease_filter
        if flt is not None and h.head != hq.NO_HEAD and not flt(h.name):
            # Not this process's to lease now (crawl/cluster: another node's
            # shard, or one being handed over): look again a little later.
            t_ms = max(hq.ms_up(max(h.next_allowed, h.parked_until)), self.now_ms + FILTER_RECHECK_MS)
            self.sched_puts[hid] = hq.sched_key(h.head, t_ms, hid)
            h.sched, h.sched_ms = h.head, t_ms
            return None
        now = self.now
        not_before = h.next_allowed if h.next_allowed > h.parked_until else h.parked_until
        ip = self.ip_state(h.ip) if h.ip else None
        if ip is not None and ip[1] > not_before:
            not_before = ip[1]
        if not_before > now:  # a key rounded to the same ms, or the IP is slowed down
            h.next_allowed = not_before
            self.reschedule(hid, h)
            return None
        if ip is not None and ip[0] >= self.ip_cap(h.ip):
            self.txn.put(h.ip.encode() + b"\0" + hq.hid_key(hid), b"", db=self.dipw)
            self._waiters = True
            h.sched = hq.WAITING_IP
            return None
        cur = self.qcur
        prefix = hq.hid_key(hid)
        key = cur.key() if cur.set_range(prefix) else b""
        if key[:4] != prefix:
            h.head = hq.NO_HEAD  # cannot happen while head says otherwise; heal
            return None
        first, rest = hq.block_split_first(cur.value())
        if rest:
            cur.put(key, rest)
        else:  # the block is used up: the next one (if this host's) has the new head
            cur.delete()
            nxt = cur.key()
            h.head = nxt[4] if nxt[:4] == prefix else hq.NO_HEAD
        name = h.name
        url, end = hq.entry_url(first, name)
        attempts = first[1] + 1
        self.lease_id = lease_id = self.lease_id + 1
        # The URL's known state stays "queued" while it is leased (add treats
        # both alike; state_of finds the lease): one random page less per lease.
        self.new_leases.append((hq.u64(lease_id), hq.lease_value_of(  # written by lease()
            key, deadline, now, _fp(url.encode("utf-8", "surrogatepass")), first, attempts)))
        self.new_deadlines.append((hq.time_key(deadline_ms, lease_id), b""))
        h.lease = lease_id
        h.queued -= 1
        if ip is not None:
            self.put_ip(h.ip, ip[0] + 1, ip[1])
        rec: Record = _loads(first[end:]) if end < len(first) else {}
        rec["url"] = url
        rec["kind"] = "lease"
        rec["v"] = records.VERSION
        rec["lease"] = f"{lease_id:016x}"
        rec["host"] = name
        rec["attempt"] = attempts
        rec["deadline"] = deadline
        return rec

    # ---- complete and expire -----------------------------------------------------------

    def requeue_expired(self, taken_after: float | None = None) -> int:
        """Leases past their deadline go back to their queues; with ``taken_after``,
        every lease taken after that time instead, whatever its deadline (the
        leases of a crawl run known to be dead: ``Frontier.release_leases``)."""
        if self.gone_deadlines:
            self.flush_deadlines()
        cur = self.txn.cursor(db=self.ddl)
        expired = []
        if cur.first():
            for key in cur.iternext(values=False):
                t_ms, lease_id = hq.unpack_time_key(key)
                if taken_after is None:
                    if t_ms > self.now_ms:
                        break
                else:
                    raw = self.txn.get(hq.u64(lease_id), db=self.dl)
                    if raw is None or hq.decode_lease(raw).leased_at <= taken_after:
                        continue
                expired.append((key, lease_id))
        for key, lease_id in expired:
            self.txn.delete(key, db=self.ddl)
            raw = self.txn.pop(hq.u64(lease_id), db=self.dl)
            if raw is None:
                continue
            lease = hq.decode_lease(raw)
            h = self.host(lease.hid)
            # Released at the end of its answer (crawl/frontier/handoff.py) and its
            # result never completed: the host is free, or held by a later lease,
            # and kept its delay from that answer; only the URL goes back.
            if h.lease == lease_id:
                # The fetcher may have reached the host just before it died (or its
                # answer may still be on its way here): wait the host's own delay,
                # Crawl-delay included, from the expiry, the last moment its answer
                # can have ended that the frontier knows of.
                floor = release_delay(self.cfg, h.last_response if h.last_response >= 0 else None,
                                      h.crawl_delay if h.crawl_delay >= 0 else None)
                h.next_allowed = max(h.next_allowed, self.now + floor)
                h.lease = 0
                self.release_ip(h.ip)
            if hq.decode_entry(lease.entry, h.name).attempts >= self.cfg.max_leases:
                self.set_known(lease.hid, lease.fp, hq.DROPPED)
                self.count("dropped")
                self.reschedule(lease.hid, h)
            else:
                self.back_to_queue(lease, h)
        self.count("expired", len(expired))
        return len(expired)

    def back_to_queue(self, lease: hq.Lease, h: HostState, entry: bytes | None = None) -> None:
        """Return a leased URL to the head of its host queue (host already freed)."""
        item = hq.block_item(entry or lease.entry)
        cur = self.qcur
        head = hq.queue_key(lease.hid, lease.prio, 0)
        if cur.set_range(head) and cur.key()[:5] == head[:5]:
            cur.put(cur.key(), item + cur.value())  # may exceed BLOCK by one entry
        else:
            self.txn.put(hq.queue_key(lease.hid, lease.prio, lease.seq), item, db=self.dq)
        if lease.prio < h.head:
            h.head = lease.prio
        h.queued += 1  # its known state stayed "queued" through the lease
        self.count("queued")
        self.reschedule(lease.hid, h)

    # ---- idle accounting and due times -------------------------------------------------

    def observe_idle(self, idle: bool) -> None:
        """Sample-and-hold: the time since the last ``next`` counts as idle when
        that call found no host ready."""
        raw = self.txn.get(b"idle", db=self.dm)
        last, was_idle, idle_s, span_s = orjson.loads(raw) if raw else (self.now, False, 0.0, 0.0)
        dt = max(0.0, self.now - last)
        span_s += dt
        if was_idle:
            idle_s += dt
        self.txn.put(b"idle", orjson.dumps([self.now, idle, idle_s, span_s]), db=self.dm)

    def next_due(self) -> float | None:
        if self.sched_puts:
            self.flush_sched()
        best: float | None = None
        cur = self.txn.cursor(db=self.ds)
        for prio in range(MAX_PRIORITY + 1):
            if cur.set_range(bytes([prio])) and cur.key()[0] == prio:
                t = hq.unpack_sched_key(cur.key())[1] / 1000.0
                best = t if best is None else min(best, t)
        cur = self.txn.cursor(db=self.dd)
        if cur.first():
            t = hq.unpack_time_key(cur.key())[0] / 1000.0
            best = t if best is None else min(best, t)
        return None if best is None else max(best, self.now)
