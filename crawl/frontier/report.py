"""Read-only views of the frontier: ``stats`` and ``dump --host``.

These scan (hosts, the schedule) instead of keeping more counters on the hot
path; they read one LMDB snapshot and never block writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from crawl.core import UsageError

from . import hostqueue as hq
from .politeness import MAX_PRIORITY

if TYPE_CHECKING:
    from .db import Frontier

_COUNTERS = ("added", "leased", "done", "dropped", "retried", "backoffs", "robots_waits", "expired",
             "dropped_host_cap", "deferred")


def _int(txn: Any, db: Any, key: bytes) -> int:
    v = txn.get(key, db=db)
    return hq.from_u64(v) if v else 0


def stats(fr: Frontier, now: float) -> dict[str, Any]:
    """What the operator asks first: how much is queued, how much can go now.

    ``backlog`` counts URLs that are due (their own due time has passed) but
    not leased; ``idle_fraction`` is the share of time, as seen by ``next``
    calls, during which no host was ready.
    """
    db = fr.db
    now_ms = hq.ms_down(now)
    with fr.env.begin() as txn:
        queued = _int(txn, db["meta"], b"queued")
        delayed = txn.stat(db["delayed"])["entries"]
        in_queues = queued - delayed
        delayed_due = 0
        cur = txn.cursor(db=db["delayed"])
        if cur.first():
            for key in cur.iternext(values=False):
                if hq.unpack_time_key(key)[0] > now_ms:
                    break
                delayed_due += 1
        ready = scheduled = 0
        cur = txn.cursor(db=db["sched"])
        for prio in range(MAX_PRIORITY + 1):
            if not cur.set_range(bytes([prio])):
                break
            for key in cur.iternext(values=False):
                p, t_ms, _ = hq.unpack_sched_key(key)
                if p != prio:
                    break
                scheduled += 1
                ready += t_ms <= now_ms
        parked = hosts_with_urls = 0
        for i, value in enumerate(txn.cursor(db=db["hosts"]).iternext(keys=False)):
            h = hq.decode_host(value)
            if not i % 1000:  # a full scan: keep the map's resident pages within budget
                fr.trimmer.maybe_trim()
            parked += h.parked_until > now
            hosts_with_urls += h.queued > 0 or h.lease != 0
        raw = txn.get(b"idle", db=db["meta"])
        _, _, idle_s, span_s = orjson.loads(raw) if raw else (0, False, 0.0, 0.0)
        out: dict[str, Any] = {
            "queued": queued,
            "ready_queued": in_queues,
            "delayed": delayed,
            "backlog": in_queues + delayed_due,
            "hosts": txn.stat(db["hosts"])["entries"],
            "hosts_with_urls": hosts_with_urls,
            "hosts_scheduled": scheduled,
            "hosts_ready": ready,
            "hosts_waiting_ip": txn.stat(db["ipwait"])["entries"],
            "hosts_parked": parked,
            "in_flight": txn.stat(db["leases"])["entries"],
            "cycle": _int(txn, db["meta"], b"cycle"),
            "idle_fraction": round(idle_s / span_s, 4) if span_s > 0 else None,
            "idle_seconds": round(idle_s, 3),
        }
        out.update({name: _int(txn, db["meta"], name.encode()) for name in _COUNTERS})
        psize = fr.env.stat()["psize"]
        used = sum(txn.stat(d)["branch_pages"] + txn.stat(d)["leaf_pages"] + txn.stat(d)["overflow_pages"]
                   for d in db.values())
        # in use by the B-trees vs. the file's high-water mark (freed pages are reused)
        out["disk_bytes_used"] = used * psize
        out["disk_bytes_file"] = (fr.env.info()["last_pgno"] + 1) * psize
    return out


def host_keys(txn: Any, hostid_db: Any, host: str) -> list[str]:
    """The frontier's host keys (``host[:port]``) that ``--host`` names.

    The key carries a port other than the scheme's default, so ``h.test``
    alone finds ``h.test:8080`` when that is the only one; the exact key
    wins when there is one.
    """
    name = host.strip().lower()
    if txn.get(name.encode(), db=hostid_db) is not None:
        return [name]
    if ":" in name.rsplit("]", 1)[-1]:
        return []  # a port was given and does not match
    prefix = (name + ":").encode()
    out = []
    cur = txn.cursor(db=hostid_db)
    if cur.set_range(prefix):
        for key in cur.iternext(values=False):
            if not key.startswith(prefix):
                break
            out.append(bytes(key).decode())
    return out


def dump(fr: Frontier, host: str, now: float, limit: int = 1000) -> dict[str, Any]:
    """One host's state, its ready queue (in lease order), its delayed URLs and its lease."""
    from .leases import fingerprint, lease_name

    db = fr.db
    with fr.env.begin() as txn:
        names = host_keys(txn, db["hostid"], host)
        if len(names) > 1:
            raise UsageError(f"--host {host} names {len(names)} hosts in the frontier "
                             f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): "
                             "give one with its port")
        v = txn.get(names[0].encode(), db=db["hostid"]) if names else None
        if v is None:
            return {"host": host, "known": False}
        hid = int.from_bytes(v, "big")
        h = hq.decode_host(txn.get(hq.hid_key(hid), db=db["hosts"]))
        out: dict[str, Any] = {"known": True, **h.as_dict()}
        out["ready_now"] = h.lease == 0 and max(h.next_allowed, h.parked_until) <= now
        queue = []
        cur = txn.cursor(db=db["queue"])
        prefix = hq.hid_key(hid)
        if cur.set_range(prefix):
            for key, value in cur:
                if key[:4] != prefix or len(queue) >= limit:
                    break
                _, prio, _ = hq.unpack_queue_key(key)
                for item in hq.block_entries(value):
                    if len(queue) >= limit:  # a block holds many entries: stop inside it too
                        break
                    e = hq.decode_entry(item, h.name)
                    queue.append({"url": e.url, "priority": prio, "attempts": e.attempts,
                                  "failures": e.fails})
        out["queue"] = queue
        delayed = []
        for key, value in txn.cursor(db=db["delayed"]):
            if value[:4] == prefix and len(delayed) < limit:
                e = hq.decode_entry(value[5:], h.name)
                delayed.append({"url": e.url, "due": hq.unpack_time_key(key)[0] / 1000.0,
                                "priority": value[4], "failures": e.fails})
        out["delayed"] = delayed
        if h.lease:
            raw = txn.get(hq.u64(h.lease), db=db["leases"])
            if raw is not None:
                lease = hq.decode_lease(raw)
                e = hq.decode_entry(lease.entry, h.name)
                out["lease"] = {"lease": lease_name(h.lease), "url": e.url, "deadline": lease.deadline,
                                "leased_at": lease.leased_at, "attempt": e.attempts,
                                "fp": f"{fingerprint(e.url):016x}"}
    return out
