"""Moving hosts out of a frontier whole: their queued URLs, politeness state and done URLs.

When a crawl is shared by several machines (crawl/cluster), each host
belongs to one node. A shard handed to another node leaves with everything
its new owner needs to carry on politely and without repeats: the URLs
still queued (ready or delayed, with their fields), the host's
next-allowed time (so the new owner does not ask sooner than the old one
would have), and the fingerprints of URLs already done or dropped (so they
are not fetched again). :func:`take_hosts` reads and removes them in ONE
frontier transaction and hands the records to the caller's ``sink``
before that transaction commits: the sink writes them durably (a spool
put), so a crash loses nothing; at worst the next try exports the same
records again, which the importer's seen set and the frontier's own
"already known" check make harmless.

A host with a lease in flight is left alone (``busy``): it moves once its
fetch has completed, never in the middle of one.

The importer cannot count on the slice coming first: links for a shard
being handed over wait in the stream while its old owner no longer reads
them, and reach the new owner before the slice does, past a seen set that
does not know them yet. :func:`merge_done` makes the slice's done URLs win
whatever came first: a copy already queued here leaves its queue, and the
URL is marked done here for the rest of the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import xxhash

from crawl.core import Record, records

from . import hostqueue as hq

Sink = Callable[[list[Record]], None]


def host_names(fr: Any) -> list[str]:
    """Every host the frontier has seen (for picking the hosts of a shard)."""
    with fr.env.begin() as txn:
        return [bytes(k).decode() for k in txn.cursor(db=fr.db["hostid"]).iternext(values=False)]


def take_hosts(fr: Any, names: Iterable[str], now: float, sink: Sink) -> dict[str, Any]:
    """Export and remove the given hosts' slice; returns counts and the hosts left (busy).

    The records, in this order per host: one ``host`` record (its
    politeness state), its ``url`` records (queued and delayed, with
    ``priority`` and, for a delayed one, ``due``), then one ``seen`` record
    with the hex fingerprints of its URLs done or dropped this cycle. The
    host keeps its id and an empty queue: URLs added later are queued
    afresh, and its next-allowed time goes with the ``host`` record (a host
    moved twice is not announced twice).
    """
    out: list[Record] = []
    counts = {"hosts": 0, "urls": 0, "seen": 0}
    busy: list[str] = []
    with fr.env.begin(write=True) as txn:
        t = fr._tx(txn, now)
        hids: dict[int, str] = {}
        for name in names:
            raw = txn.get(name.encode(), db=fr.db["hostid"])
            if raw is None:
                continue
            hid = hq.from_hid(raw)
            if t.read_host(hid).lease:
                busy.append(name)
                continue
            hids[hid] = name
        delayed = _take_delayed(t, hids)
        for hid in sorted(hids):
            name = hids[hid]
            h = t.host(hid)
            urls = _take_queue(t, hid, name) + delayed.get(hid, [])
            fps = _take_known(t, hid)
            if not urls and not fps and h.next_allowed <= now:
                continue
            out.append(records.make("host", host=name, next_allowed=max(h.next_allowed, h.parked_until),
                                    crawl_delay=h.crawl_delay if h.crawl_delay >= 0 else None,
                                    backoff=h.backoff, ip=h.ip or None))
            out.extend(urls)
            if fps:
                out.append(records.make("seen", host=name, fps=[f"{fp:016x}" for fp in fps]))
            t.unschedule(hid, h)
            t.count("queued", -len(urls))
            h.queued, h.head, h.tail_prio, h.tail_seq = 0, hq.NO_HEAD, hq.NO_HEAD, 0
            h.next_allowed = 0.0  # its time left with it (should the host come back, so does its state)
            counts["hosts"] += 1
            counts["urls"] += len(urls)
            counts["seen"] += len(fps)
        t.flush()
        if out:
            sink(out)  # durable before the removal commits
    fr._carry = None
    return {**counts, "busy": busy, "records": len(out)}


def _take_queue(t: Any, hid: int, name: str) -> list[Record]:
    cur, prefix, recs = t.qcur, hq.hid_key(hid), []
    if not cur.set_range(prefix):
        return recs
    while cur.key()[:4] == prefix:
        prio = cur.key()[4]
        for raw in hq.block_entries(bytes(cur.value())):
            recs.append(_url_record(hq.decode_entry(raw, name), prio))
        if not cur.delete() or not cur.key():
            break
    return recs


def _take_delayed(t: Any, hids: dict[int, str]) -> dict[int, list[Record]]:
    """The delayed URLs of the given hosts (one pass over the delayed table)."""
    found: dict[int, list[Record]] = {}
    if not hids:
        return found
    gone = []
    for key, value in t.txn.cursor(db=t.dd):
        hid = int.from_bytes(value[:4], "big")
        if hid in hids:
            rec = _url_record(hq.decode_entry(bytes(value[5:]), hids[hid]), value[4])
            rec["due"] = hq.unpack_time_key(key)[0] / 1000.0
            found.setdefault(hid, []).append(rec)
            gone.append(bytes(key))
    for key in gone:
        t.txn.delete(key, db=t.dd)
    return found


def _take_known(t: Any, hid: int) -> list[int]:
    """Delete the host's known entries; the fingerprints of those done or dropped."""
    cur, prefix, fps = t.cursor("known"), hq.hid_key(hid), []
    if not cur.set_range(prefix):
        return fps
    while cur.key()[:4] == prefix:
        state = hq.decode_known(bytes(cur.value()))[0]
        if state in (hq.DONE, hq.DROPPED):
            fps.append(int.from_bytes(cur.key()[4:12], "big"))
        if not cur.delete() or not cur.key():
            break
    return fps


def _url_record(e: hq.Entry, prio: int) -> Record:
    rec = e.record()
    rec.setdefault("priority", prio)
    return records.make("url", **rec)


def merge_done(fr: Any, recs: Iterable[Record], now: float) -> dict[str, int]:
    """Take over the URLs a previous owner did (``seen`` records of a slice).

    Each is marked done in this cycle (a later link to it is a no-op), and a
    copy that an earlier link queued here is taken out of its host's queue
    (ready or delayed): it was fetched already, by the node that owned the
    host then. A copy leased here already is left to its lease (too late to
    take back; the caller counts it). Returns ``done`` (marked) and
    ``unqueued`` (copies removed) and ``leased`` (copies in flight).
    """
    wanted: dict[str, set[int]] = {}
    for rec in recs:
        name, fps = rec.get("host"), rec.get("fps")
        if isinstance(name, str) and name and isinstance(fps, list):
            wanted.setdefault(name, set()).update(int(f, 16) for f in fps if isinstance(f, str))
    counts = {"done": 0, "unqueued": 0, "leased": 0}
    if not wanted:
        return counts
    with fr.env.begin(write=True) as txn:
        t = fr._tx(txn, now)
        queued: dict[int, set[int]] = {}  # host id -> fingerprints queued here
        names: dict[int, str] = {}
        for name, fps in wanted.items():
            hid = t.host_id(name)
            for fp in sorted(fps):
                old = txn.get(hq.known_key(hid, fp), db=t.dk)
                state = hq.decode_known(old)[0] if old is not None else 0
                if state == hq.QUEUED:  # (leased ones too: see lease_host)
                    queued.setdefault(hid, set()).add(fp)
                    names[hid] = name
                elif state not in (hq.DONE, hq.DROPPED):
                    t.set_known(hid, fp, hq.DONE)
                    counts["done"] += 1
        for hid, fps in sorted(queued.items()):
            gone = _unqueue(t, hid, names[hid], fps)
            gone |= _undelay(t, hid, names[hid], fps - gone)
            for fp in gone:
                t.set_known(hid, fp, hq.DONE)
            counts["done"] += len(gone)
            counts["unqueued"] += len(gone)
            counts["leased"] += len(fps - gone)
            if gone:
                h = t.host(hid)
                h.queued -= len(gone)
                t.count("queued", -len(gone))
                if h.head == hq.NO_HEAD:
                    if not h.lease:
                        t.unschedule(hid, h)
                elif h.sched < hq.WAITING_IP:
                    t.reschedule(hid, h)  # its first ready URL may be of another priority now
        t.flush()
    fr._carry = None
    return counts


def _fp(entry: bytes, name: str) -> int:
    return xxhash.xxh3_64_intdigest(hq.entry_url(entry, name)[0].encode("utf-8", "surrogatepass"))


def _unqueue(t: Any, hid: int, name: str, fps: set[int]) -> set[int]:
    """Take the entries with these fingerprints out of the host's ready queue; the ones found.
    Blocks are rewritten in place (emptied ones deleted); the host's head and tail follow."""
    cur, prefix, gone = t.qcur, hq.hid_key(hid), set()
    edits: list[tuple[bytes, bytes]] = []
    if cur.set_range(prefix):
        while cur.key()[:4] == prefix:
            items = [(e, _fp(e, name)) for e in hq.block_entries(bytes(cur.value()))]
            keep = [e for e, fp in items if fp not in fps]
            if len(keep) != len(items):
                gone.update(fp for _, fp in items if fp in fps)
                edits.append((bytes(cur.key()), b"".join(hq.block_item(e) for e in keep)))
            if not cur.next():
                break
    for key, block in edits:
        if block:
            t.txn.put(key, block, db=t.dq)
        else:
            t.txn.delete(key, db=t.dq)
    if edits:
        h = t.host(hid)
        first = cur.key() if cur.set_range(prefix) else b""
        h.head = first[4] if first[:4] == prefix else hq.NO_HEAD
        h.tail_prio, h.tail_seq = hq.NO_HEAD, 0  # the next add finds its tail block by a search
    return gone


def _undelay(t: Any, hid: int, name: str, fps: set[int]) -> set[int]:
    """Take the host's delayed entries with these fingerprints out; the ones found."""
    if not fps:
        return set()
    prefix, gone, keys = hq.hid_key(hid), set(), []
    for key, value in t.txn.cursor(db=t.dd):
        if value[:4] == prefix:
            fp = _fp(bytes(value[5:]), name)
            if fp in fps:
                gone.add(fp)
                keys.append(bytes(key))
    for key in keys:
        t.txn.delete(key, db=t.dd)
    return gone


def merge_host_state(fr: Any, recs: Iterable[Record], now: float) -> int:
    """Take over hosts' politeness state from their previous owner: their next-allowed
    time only moves later, and a known Crawl-delay or backoff level is kept. Returns how many."""
    n = 0
    with fr.env.begin(write=True) as txn:
        t = fr._tx(txn, now)
        for rec in recs:
            name = rec.get("host")
            if not isinstance(name, str) or not name:
                continue
            hid = t.host_id(name)
            h = t.host(hid)
            na = rec.get("next_allowed")
            if isinstance(na, int | float) and na > h.next_allowed:
                h.next_allowed = float(na)
            cd = rec.get("crawl_delay")
            if isinstance(cd, int | float) and cd > h.crawl_delay:
                h.crawl_delay = float(cd)
            bo = rec.get("backoff")
            if isinstance(bo, int) and bo > h.backoff:
                h.backoff = bo
            if not h.ip and isinstance(rec.get("ip"), str):
                h.ip = rec["ip"]
            if h.sched < hq.WAITING_IP:
                t.reschedule(hid, h)  # later, if its next-allowed time moved
            n += 1
        t.flush()
    fr._carry = None
    return n
