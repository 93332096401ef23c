"""Per-IP politeness for the frontier's transaction: slots in flight, slow-downs, waiters.

Many hosts can share one machine (shared hosting), so besides one lease per
host the frontier allows at most ``per_ip`` leases per resolved address, and a
429/503 from one host slows every host on its address (seeds: "treat a 429
or 503 from any host on that IP as a signal to back off all of them").

``ips``     address -> (leases in flight, slowed down until), only while
            either matters: an address with nothing in flight and no
            slow-down ahead has no entry, so the table holds about one entry
            per lease in flight and a batch of leases dirties a few pages of
            it rather than one page per address.
``ipwait``  address + host id: hosts that were due while their address was full

Address states are cached in the transaction like host states and written
once each, in key order, by :meth:`IpSlots.flush_ips` (called from
``Tx.flush``).

A mixin of :class:`crawl.frontier.tx.Tx`, split out only to keep each module
about one concern.
"""

from __future__ import annotations

import struct
from typing import Any

from . import hostqueue as hq

_IPVAL = struct.Struct("<Id")  # leases in flight, slowed down until
_NONE = (0, 0.0)  # an address without an entry


class IpSlots:
    txn: Any
    cfg: Any
    fr: Any
    now: float
    _waiters: bool | None
    dip: Any
    dipw: Any
    ips: dict[str, tuple[int, float]]
    prev_ips: dict[str, tuple[int, float]]
    dirty_ips: set[str]
    wrote: bool

    def host(self, hid: int) -> hq.HostState:  # provided by Tx
        raise NotImplementedError

    def cursor(self, name: str) -> Any:  # provided by Tx
        raise NotImplementedError

    def reschedule(self, hid: int, h: hq.HostState) -> None:  # provided by Tx
        raise NotImplementedError

    def ip_cap(self, ip: str) -> int:
        """Leases allowed in flight on ``ip``: ``per_ip``, or this node's share of it
        when the address's hosts are spread over several nodes (crawl/cluster)."""
        share = self.fr.ip_share.get(ip) if self.fr.ip_share else None
        return max(1, self.cfg.per_ip // share) if share else self.cfg.per_ip

    def ip_state(self, ip: str) -> tuple[int, float]:
        st = self.ips.get(ip)
        if st is None:
            st = self.prev_ips.get(ip)
            if st is None:
                v = self.cursor("ips").get(ip.encode())
                st = _NONE if v is None else _IPVAL.unpack(v)
            self.ips[ip] = st
        return st

    def put_ip(self, ip: str, inflight: int, slow_until: float) -> None:
        """Change an address's state; written once per transaction, by :meth:`flush_ips`."""
        self.ips[ip] = (inflight if inflight > 0 else 0, slow_until)
        self.dirty_ips.add(ip)

    def flush_ips(self) -> None:
        now, ips, puts = self.now, self.ips, []
        cur = self.cursor("ips")
        for ip in sorted(self.dirty_ips):  # in key order: neighbouring pages
            inflight, slow = ips[ip]
            if inflight <= 0 and slow <= now:
                if cur.set_key(ip.encode()):
                    cur.delete()
                ips[ip] = _NONE
            else:
                puts.append((ip.encode(), _IPVAL.pack(inflight, slow)))
        if puts:
            self.txn.cursor(db=self.dip).putmulti(puts)
        self.dirty_ips.clear()
        self.wrote = True

    def has_waiters(self) -> bool:
        """Whether any host waits for an address (checked once per transaction)."""
        w = self._waiters
        if w is None:
            w = self._waiters = self.txn.stat(self.dipw)["entries"] > 0
        return w

    def release_ip(self, ip: str) -> None:
        """One lease on ``ip`` ended: free its slot and wake one waiting host."""
        if not ip:
            return
        inflight, slow = self.ip_state(ip)
        inflight = max(inflight - 1, 0)
        self.put_ip(ip, inflight, slow)
        if inflight < self.ip_cap(ip) and self.has_waiters():
            cur = self.txn.cursor(db=self.dipw)
            prefix = ip.encode() + b"\0"
            if cur.set_range(prefix) and cur.key().startswith(prefix):
                hid = int.from_bytes(cur.key()[len(prefix) :], "big")
                cur.delete()
                h = self.host(hid)
                h.sched = hq.NOT_SCHEDULED
                self.reschedule(hid, h)

    def wake_stranded(self, limit: int = 256) -> None:
        """Put hosts waiting for an IP that has free slots back on the schedule.

        Each release wakes one waiter already; this sweep only repairs what a
        change of --per-ip between processes could leave behind.
        """
        cur = self.txn.cursor(db=self.dipw)
        wake, free = [], {}
        if cur.first():
            for key in cur.iternext(values=False):
                if len(wake) >= limit:
                    break
                ip = key[:-5].decode()
                if ip not in free:
                    free[ip] = self.ip_cap(ip) - self.ip_state(ip)[0]
                if free[ip] > 0:
                    free[ip] -= 1
                    wake.append((key, int.from_bytes(key[-4:], "big")))
        for key, hid in wake:
            self.txn.delete(key, db=self.dipw)
            h = self.host(hid)
            h.sched = hq.NOT_SCHEDULED
            self.reschedule(hid, h)
