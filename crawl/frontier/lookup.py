"""One URL's or one host's place in the frontier, read without writing anything.

``crawl why`` and ``crawl report`` ask the frontier of a crawl that may be
running, or of a copy of its directory: what became of this URL (queued,
leased, delayed, done, dropped; its priority and attempts), and what holds
this host back (its next-allowed time and the cause noted for it, its
address's slots). :class:`FrontierView` opens the LMDB
environment read-only, never creates a table and never takes the write
lock, so it cannot slow a crawl down or change its state; tables an older
frontier lacks read as empty. It is never closed: environments are shared
per process (:func:`crawl.core.open_env`), and one a crawl in this process
holds must stay open.

The lookups scan where the layout gives no index (a host's queue for one
URL, the delayed table, the leases): fine for one URL or one host at a
time, which is what a debugging command asks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb

from crawl.core import open_env

from . import delays
from . import hostqueue as hq
from .ipslots import _IPVAL
from .leases import fingerprint, lease_name, outcome_name
from .politeness import host_of

_TABLES = ("meta", "queue", "delayed", "sched", "hosts", "hostid", "leases", "known", "ips", "ipwait",
           delays.TABLE)


class FrontierView:
    """A read-only window on ``D/frontier`` (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.env = open_env(self.path, max_dbs=32, readonly=True)
        self.db: dict[str, Any] = {}
        for name in _TABLES:
            try:
                self.db[name] = self.env.open_db(name.encode(), create=False)
            except (lmdb.NotFoundError, lmdb.ReadonlyError):
                continue  # a table an older frontier does not have: empty

    # -- helpers ------------------------------------------------------------

    def _get(self, txn: Any, table: str, key: bytes) -> bytes | None:
        db = self.db.get(table)
        if db is None:
            return None
        v = txn.get(key, db=db)
        return bytes(v) if v is not None else None

    def _host_keys(self, txn: Any, host: str) -> list[str]:
        """The host keys ``host`` names: itself if the frontier has it, else every
        ``host:PORT`` (a test web's hosts all carry a port)."""
        name = host.strip().lower()
        if "hostid" not in self.db:
            return []
        if self._get(txn, "hostid", name.encode()) is not None:
            return [name]
        if ":" in name.rsplit("]", 1)[-1]:
            return []  # a port was given and does not match
        prefix = (name + ":").encode()
        cur = txn.cursor(db=self.db["hostid"])
        out = []
        if cur.set_range(prefix):
            for key in cur.iternext(values=False):
                if not bytes(key).startswith(prefix):
                    break
                out.append(bytes(key).decode())
        return out

    def _hid(self, txn: Any, name: str) -> int | None:
        v = self._get(txn, "hostid", name.encode())
        return int.from_bytes(v, "big") if v is not None else None

    def _ip(self, txn: Any, ip: str) -> tuple[int, float]:
        v = self._get(txn, "ips", ip.encode()) if ip else None
        if v is None:
            return 0, 0.0
        inflight, slow = _IPVAL.unpack(v)
        return inflight, slow

    def cycle(self) -> int:
        with self.env.begin() as txn:
            v = self._get(txn, "meta", b"cycle")
            return hq.from_u64(v) if v else 0

    # -- one host -------------------------------------------------------------

    def host(self, host: str, now: float) -> dict[str, Any] | None:
        """What holds a host back: its state, lease, address and noted cause.

        ``host`` is a host key (``host[:port]``); a name without its port
        finds the one key with that name (``{"ambiguous": [keys]}`` if there
        are several). None if the frontier never saw it.
        """
        with self.env.begin() as txn:
            names = self._host_keys(txn, host)
            if len(names) > 1:
                return {"ambiguous": names}
            hid = self._hid(txn, names[0]) if names else None
            raw = self._get(txn, "hosts", hq.hid_key(hid)) if hid is not None else None
            if hid is None or raw is None:
                return None
            prefix = hq.hid_key(hid)
            n, first = 0, None
            if "delayed" in self.db:
                for key, value in txn.cursor(db=self.db["delayed"]):
                    if value[:4] == prefix:
                        n += 1
                        if first is None:  # keys are in due order: the first is the soonest
                            first = hq.unpack_time_key(key)[0] / 1000.0
            return self._state(txn, prefix, hq.decode_host(raw), now, n, first)

    def hosts(self, now: float) -> Iterator[dict[str, Any]]:
        """Every host's state as :meth:`host` gives it, in one read transaction."""
        if "hosts" not in self.db:
            return
        with self.env.begin() as txn:
            delayed: dict[bytes, tuple[int, float | None]] = {}  # host id -> (URLs, soonest due)
            if "delayed" in self.db:
                for key, value in txn.cursor(db=self.db["delayed"]):
                    hid = bytes(value[:4])
                    n, first = delayed.get(hid, (0, None))
                    delayed[hid] = (n + 1, first if first is not None else hq.unpack_time_key(key)[0] / 1000.0)
            for key, raw in txn.cursor(db=self.db["hosts"]):
                n, first = delayed.get(bytes(key), (0, None))
                yield self._state(txn, bytes(key), hq.decode_host(raw), now, n, first)

    def _state(self, txn: Any, key: bytes, h: hq.HostState, now: float, delayed: int,
               delayed_next: float | None) -> dict[str, Any]:
        out: dict[str, Any] = h.as_dict()
        inflight, slow = self._ip(txn, h.ip)
        out["ip_in_flight"] = inflight
        out["ip_slowed_until"] = slow if slow > now else None
        out["waiting_ip"] = h.sched == hq.WAITING_IP
        out["noted"] = delays.decode(self._get(txn, delays.TABLE, key))
        out["delayed"] = delayed
        out["delayed_next_due"] = delayed_next
        out["lease"] = None
        if h.lease:
            lraw = self._get(txn, "leases", hq.u64(h.lease))
            if lraw is not None:
                lease = hq.decode_lease(lraw)
                e = hq.decode_entry(lease.entry, h.name)
                out["lease"] = {"lease": lease_name(h.lease), "url": e.url, "leased_at": lease.leased_at,
                                "deadline": lease.deadline, "attempt": e.attempts}
        return out

    # -- one URL --------------------------------------------------------------

    def url(self, url: str, now: float) -> dict[str, Any]:
        """A (canonical) URL's state: ``unknown``, ``queued``, ``leased``,
        ``delayed`` (queued with a due time ahead), ``done`` or ``dropped``,
        with its priority, attempts and failures where the frontier keeps them,
        and (``fields``) what its record carried in (depth, parent, anchor...)."""
        try:
            name = host_of(url)
        except ValueError:
            return {"state": "unknown", "why": "the URL has no host"}
        fp = fingerprint(url)
        with self.env.begin() as txn:
            hid = self._hid(txn, name)
            known = self._get(txn, "known", hq.known_key(hid, fp)) if hid is not None else None
            if known is None:
                return {"state": "unknown", "host": name}
            state, cycle16, code = hq.decode_known(known)
            out: dict[str, Any] = {"host": name, "cycle": cycle16, "fp": f"{fp:016x}"}
            if state in (hq.DONE, hq.DROPPED):
                out.update(state=hq.STATE_NAMES[state], last_outcome=outcome_name(code))
                return out
            assert hid is not None
            fp_le = fp.to_bytes(8, "little")
            for value in txn.cursor(db=self.db["leases"]).iternext(keys=False):
                if value[hq.LEASE_FP] == fp_le:
                    lease = hq.decode_lease(bytes(value))
                    e = hq.decode_entry(lease.entry, name)
                    out.update(state="leased", priority=lease.prio, attempts=e.attempts, failures=e.fails,
                               leased_at=lease.leased_at, deadline=lease.deadline, fields=_fields(e))
                    return out
            prefix = hq.hid_key(hid)
            position = 0
            cur = txn.cursor(db=self.db["queue"])
            if cur.set_range(prefix):
                for key, block in cur:
                    if key[:4] != prefix:
                        break
                    _, prio, _ = hq.unpack_queue_key(bytes(key))
                    for item in hq.block_entries(bytes(block)):
                        position += 1
                        got, _ = hq.entry_url(item, name)
                        if got == url:
                            e = hq.decode_entry(item, name)
                            out.update(state="queued", priority=prio, attempts=e.attempts, failures=e.fails,
                                       position=position, fields=_fields(e))
                            return out
            if "delayed" in self.db:
                for key, value in txn.cursor(db=self.db["delayed"]):
                    if value[:4] == prefix:
                        e = hq.decode_entry(bytes(value[5:]), name)
                        if e.url == url:
                            out.update(state="delayed", priority=value[4], attempts=e.attempts, failures=e.fails,
                                       due=hq.unpack_time_key(bytes(key))[0] / 1000.0, fields=_fields(e))
                            return out
            out["state"] = "queued"  # known as queued but not found: a lease just ending (racing a writer)
            return out


def _fields(e: hq.Entry) -> dict[str, Any]:
    rec = e.record()
    rec.pop("url", None)
    return rec
