"""The frontier's write transaction: queue, schedule, lease and expiry mechanics.

``Tx`` wraps one LMDB write transaction of :class:`crawl.frontier.Frontier`.
It caches the host states it touches and the counters it bumps, and writes
each once in :meth:`Tx.flush`, so a batch of 1,000 leases costs one put per
host rather than several. See crawl/frontier.py for the database layout and
crawl/frontier_complete.py for what a fetch result does.
"""

from __future__ import annotations

from typing import Any

import orjson
import xxhash

from . import hostqueue as hq
from . import records
from .frontier_ip import IpSlots
from .hostqueue import HostState
from .politeness import MAX_PRIORITY, effective_priority, host_of
from .records import Record

# Outcomes after which the URL goes back for another try (with backoff).
TRANSIENT = frozenset({"timeout", "connect-error", "dns-error", "protocol-error"})
_OUTCOME_CODE = {name: i + 1 for i, name in enumerate(records.OUTCOMES)}
_OUTCOME_NAME = {i: name for name, i in _OUTCOME_CODE.items()}


def fingerprint(url: str) -> int:
    """64-bit xxh3 of the (already canonical) URL, as crawl.canon defines it."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass"))


def lease_name(lease_id: int) -> str:
    return f"{lease_id:016x}"


def _parse_lease(value: object) -> int | None:
    if not isinstance(value, str) or len(value) != 16:
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _get_int(txn: Any, db: Any, key: bytes) -> int:
    v = txn.get(key, db=db)
    return hq.from_u64(v) if v else 0


class Tx(IpSlots):
    """One write transaction: caches host states and counters, writes them once."""

    def __init__(self, fr: Any, txn: Any, now: float) -> None:
        self.fr, self.cfg, self.txn, self.now = fr, fr.cfg, txn, now
        self.now_ms = hq.ms_down(now)
        d = fr.db
        self.dq, self.dd, self.ds, self.dh = d["queue"], d["delayed"], d["sched"], d["hosts"]
        self.dl, self.ddl, self.dk, self.dm = d["leases"], d["deadlines"], d["known"], d["meta"]
        self.dip, self.dipw, self.dhid = d["ips"], d["ipwait"], d["hostid"]
        self.hosts: dict[int, HostState] = {}
        self.dirty: set[int] = set()
        self.counters: dict[str, int] = {}
        # (host id, priority) -> (key, size) of the last block, valid in this txn
        self.tails: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.hids: dict[str, int] = {}
        self.delta: dict[str, int] = {}
        self.cycle = _get_int(txn, self.dm, b"cycle")
        self._waiters: bool | None = None  # any host in ipwait? (frontier_ip.has_waiters)

    # ---- small helpers -----------------------------------------------------

    def counter(self, name: str) -> int:
        if name not in self.counters:
            self.counters[name] = _get_int(self.txn, self.dm, name.encode())
        return self.counters[name] + self.delta.get(name, 0)

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.delta[name] = self.delta.get(name, 0) + n

    def take(self, name: str) -> int:
        self.count(name)
        return self.counter(name)

    def host(self, hid: int) -> HostState:
        h = self.hosts.get(hid)
        if h is None:
            h = hq.decode_host(self.txn.get(hq.hid_key(hid), db=self.dh))
            self.hosts[hid] = h
        self.dirty.add(hid)
        return h

    def host_id(self, name: str, create: bool) -> int | None:
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
        if not create:
            return None
        hid = self.hids[name] = self.take("hid")
        self.txn.put(name.encode(), hq.hid_key(hid), db=self.dhid)
        self.hosts[hid] = HostState(name)
        self.dirty.add(hid)
        return hid

    def flush(self) -> None:
        for hid in self.dirty:
            self.txn.put(hq.hid_key(hid), self.hosts[hid].encode(), db=self.dh)
        for name in self.delta:
            self.txn.put(name.encode(), hq.u64(self.counter(name)), db=self.dm)
        self.dirty.clear()
        self.delta.clear()
        self.counters.clear()

    def set_known(self, fp: int, state: int, outcome: int = 0) -> None:
        self.txn.put(hq.u64(fp), hq.known_value(state, self.cycle, outcome), db=self.dk)

    # ---- scheduling ------------------------------------------------------------

    def unschedule(self, hid: int, h: HostState) -> None:
        if h.sched < hq.WAITING_IP:
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
        self.txn.put(hq.sched_key(prio, t_ms, hid), b"", db=self.ds)
        h.sched, h.sched_ms = prio, t_ms

    def head_priority(self, hid: int) -> int | None:
        cur = self.txn.cursor(db=self.dq)
        prefix = hq.hid_key(hid)
        if cur.set_range(prefix) and cur.key()[:4] == prefix:
            return hq.unpack_queue_key(cur.key())[1]
        return None

    def reschedule(self, hid: int, h: HostState) -> None:
        if h.lease:
            return
        prio = self.head_priority(hid) if h.queued > 0 else None
        if prio is None:
            self.unschedule(hid, h)
        else:
            self.schedule(hid, h, prio)

    def enqueue(self, hid: int, h: HostState, prio: int, seq: int, entry: bytes) -> None:
        """Append an entry to the tail block of the host's queue at ``prio``."""
        item = hq.block_item(entry)
        tail = self.tails.get((hid, prio))
        if tail is None:
            cur = self.txn.cursor(db=self.dq)
            found = cur.set_range(hq.queue_key(hid, prio + 1, 0)) if prio < 255 else False
            found = cur.prev() if found else cur.last()
            if found and cur.key()[:5] == hq.queue_key(hid, prio, 0)[:5]:
                tail = (cur.key(), len(cur.value()))
        if tail is not None and tail[1] + len(item) <= hq.BLOCK:
            key = tail[0]
            self.txn.put(key, self.txn.get(key, db=self.dq) + item, db=self.dq)
            self.tails[(hid, prio)] = (key, tail[1] + len(item))
        else:
            key = hq.queue_key(hid, prio, seq)
            self.txn.put(key, item, db=self.dq)
            self.tails[(hid, prio)] = (key, len(item))
        if not h.lease and h.sched != hq.WAITING_IP and (h.sched == hq.NOT_SCHEDULED or prio < h.sched):
            self.schedule(hid, h, prio)

    # ---- add -----------------------------------------------------------------

    def add_one(self, rec: Record, rejects: list[Record] | None) -> str:
        url = rec.get("url")
        try:
            if not isinstance(url, str) or not url:
                raise ValueError('no "url" string')
            name = host_of(url)
            fp = fingerprint(url)
            prio = effective_priority(url, rec.get("priority"), rec.get("depth"))
            due = _number(rec.get("due"))
        except ValueError as exc:
            return self._reject(url, exc, rejects)
        # Mark it queued in one step when it is new (the common case); undone
        # below if the URL is not queued after all.
        kkey, queued = hq.u64(fp), hq.known_value(hq.QUEUED, self.cycle)
        old = None
        if not self.txn.put(kkey, queued, overwrite=False, db=self.dk):
            old = self.txn.get(kkey, db=self.dk)
            state, cycle, _ = hq.decode_known(old)
            if state in (hq.QUEUED, hq.LEASED) or cycle == self.cycle & 0xFFFF:
                return "known"
            self.txn.put(kkey, queued, db=self.dk)
        try:
            hid = self.host_id(name, create=True)
            assert hid is not None
            h = self.host(hid)
            if h.queued >= self.cfg.host_queue_cap:
                self._unknow(kkey, old)
                return "dropped_host_cap"
            entry = hq.encode_entry(url, name, rec, 0, 0)
        except ValueError as exc:
            self._unknow(kkey, old)
            return self._reject(url, exc, rejects)
        seq = self.take("seq")
        if due is not None and due > self.now:
            key = hq.time_key(hq.ms_up(due), seq)
            self.txn.put(key, hq.hid_key(hid) + bytes([prio]) + entry, db=self.dd)
        else:
            self.enqueue(hid, h, prio, seq, entry)
        h.queued += 1
        self.count("queued")
        return "added"

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
        for key, seq, value in moved:
            self.txn.delete(key, db=self.dd)
            hid = int.from_bytes(value[:4], "big")
            self.enqueue(hid, self.host(hid), value[4], seq, value[5:])
        return len(moved)

    # ---- next -----------------------------------------------------------------

    def lease(self, n: int, lease_seconds: float) -> list[Record]:
        out: list[Record] = []
        cur = self.txn.cursor(db=self.ds)
        for prio in range(MAX_PRIORITY + 1):
            while len(out) < n:
                batch = []
                if cur.set_range(bytes([prio])):
                    for key in cur.iternext(values=False):
                        p, t_ms, hid = hq.unpack_sched_key(key)
                        if p != prio or t_ms > self.now_ms or len(batch) >= n - len(out):
                            break
                        batch.append(hid)
                if not batch:
                    break
                for hid in batch:
                    rec = self.lease_host(hid, lease_seconds)
                    if rec is not None:
                        out.append(rec)
                        if not len(out) % 100:  # see Frontier.add
                            self.fr.trimmer.maybe_trim()
        self.count("leased", len(out))
        return out

    def lease_host(self, hid: int, lease_seconds: float) -> Record | None:
        h = self.host(hid)
        self.unschedule(hid, h)
        not_before = max(h.next_allowed, h.parked_until)
        ip = self.ip_state(h.ip) if h.ip else None
        if ip is not None:
            not_before = max(not_before, ip[1])
        if not_before > self.now:  # a key rounded to the same ms, or the IP is slowed down
            h.next_allowed = not_before
            self.reschedule(hid, h)
            return None
        if ip is not None and ip[0] >= self.cfg.per_ip:
            self.txn.put(h.ip.encode() + b"\0" + hq.hid_key(hid), b"", db=self.dipw)
            self._waiters = True
            h.sched = hq.WAITING_IP
            return None
        cur = self.txn.cursor(db=self.dq)
        prefix = hq.hid_key(hid)
        if not (cur.set_range(prefix) and cur.key()[:4] == prefix):
            return None
        key = cur.key()
        _, prio, seq = hq.unpack_queue_key(key)
        first, rest = hq.block_split_first(cur.value())
        entry = hq.decode_entry(first, h.name)
        if rest:
            self.txn.put(key, rest, db=self.dq)
            if (hid, prio) in self.tails and self.tails[(hid, prio)][0] == key:
                self.tails[(hid, prio)] = (key, len(rest))
        else:
            cur.delete()
            self.tails.pop((hid, prio), None)
        attempts = entry.attempts + 1
        lease_id = self.take("lease")
        deadline = self.now + lease_seconds
        url = entry.url
        # The URL's known state stays "queued" while it is leased (add treats
        # both alike; state_of finds the lease): one random page less per lease.
        value = hq.lease_value(hid, prio, seq, deadline, self.now, fingerprint(url),
                               hq.with_counts(first, attempts, entry.fails))
        self.txn.put(hq.u64(lease_id), value, db=self.dl)
        self.txn.put(hq.time_key(hq.ms_up(deadline), lease_id), b"", db=self.ddl)
        h.lease = lease_id
        h.queued -= 1
        self.count("queued", -1)
        if ip is not None:
            self.put_ip(h.ip, ip[0] + 1, ip[1])
        rec: Record = orjson.loads(entry.extra) if entry.extra else {}
        rec["url"] = url
        rec["kind"] = "lease"
        rec["v"] = records.VERSION
        rec["lease"] = lease_name(lease_id)
        rec["host"] = h.name
        rec["attempt"] = attempts
        rec["deadline"] = deadline
        return rec

    # ---- complete and expire -----------------------------------------------------------

    def requeue_expired(self) -> int:
        cur = self.txn.cursor(db=self.ddl)
        expired = []
        if cur.first():
            for key in cur.iternext(values=False):
                t_ms, lease_id = hq.unpack_time_key(key)
                if t_ms > self.now_ms:
                    break
                expired.append((key, lease_id))
        for key, lease_id in expired:
            self.txn.delete(key, db=self.ddl)
            raw = self.txn.pop(hq.u64(lease_id), db=self.dl)
            if raw is None:
                continue
            lease = hq.decode_lease(raw)
            h = self.host(lease.hid)
            # The fetcher may have reached the host just before it died: wait a
            # normal delay before asking again.
            h.next_allowed = max(h.next_allowed, self.now + self.cfg.default_delay)
            h.lease = 0
            self.release_ip(h.ip)
            if hq.decode_entry(lease.entry, h.name).attempts >= self.cfg.max_leases:
                self.set_known(lease.fp, hq.DROPPED)
                self.count("dropped")
                self.reschedule(lease.hid, h)
            else:
                self.back_to_queue(lease, h)
        self.count("expired", len(expired))
        return len(expired)

    def back_to_queue(self, lease: hq.Lease, h: HostState, entry: bytes | None = None) -> None:
        """Return a leased URL to the head of its host queue (host already freed)."""
        item = hq.block_item(entry or lease.entry)
        cur = self.txn.cursor(db=self.dq)
        head = hq.queue_key(lease.hid, lease.prio, 0)
        if cur.set_range(head) and cur.key()[:5] == head[:5]:
            key, value = cur.key(), cur.value()
            self.txn.put(key, item + value, db=self.dq)  # may exceed BLOCK by one entry
            tail = self.tails.get((lease.hid, lease.prio))
            if tail is not None and tail[0] == key:
                self.tails[(lease.hid, lease.prio)] = (key, tail[1] + len(item))
        else:
            key = hq.queue_key(lease.hid, lease.prio, lease.seq)
            self.txn.put(key, item, db=self.dq)
            self.tails[(lease.hid, lease.prio)] = (key, len(item))
        h.queued += 1  # its known state stayed "queued" through the lease
        self.count("queued")
        self.reschedule(lease.hid, h)

    def complete_one(self, rec: Record) -> Record:
        from .frontier_complete import complete_one  # noqa: PLC0415  (it imports this module)

        return complete_one(self, rec)

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


def outcome_name(code: int) -> str | None:
    return _OUTCOME_NAME.get(code)


def outcome_code(name: str) -> int:
    return _OUTCOME_CODE.get(name, 0)

