"""Hosts whose robots.txt cannot be read: their URLs wait, they are not dropped.

RFC 9309 2.3.1.4 says a robots.txt that answers 5xx (or cannot be reached)
means "fetch nothing" -- for now. Completing such a host's URLs as done
would lose them for the cycle, and nothing would say so. Instead
(:func:`crawl.frontier.complete.complete_one`, disposition ``robots-wait``)
the leased URL goes back to the head of its queue, the rest never leave it,
and the host is released at the fetcher's next robots.txt check. This
module keeps the ``robots`` table in step -- host id -> since, next check,
last status and error, failed checks -- from a host's first
``robots-unreachable`` result to its first result that got past
robots.txt, and reads it back for the operator (``crawl stats``, the run
summary, the message on stderr).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson

from crawl.core import Record

from . import hostqueue as hq

if TYPE_CHECKING:
    from .db import Frontier
    from .hostqueue import HostState
    from .tx import Tx

TABLE = "robots"
# Results that never reached the robots.txt check (the name did not resolve,
# or the URL could not be fetched at all): they say nothing about it.
_BEFORE_ROBOTS = frozenset({"dns-error", "private-address", "invalid-url"})


def note(t: Tx, hid: int, h: HostState, rec: Record, outcome: str) -> dict[str, Any] | None:
    """Record or end a host's wait after one completion; what the event should say, if anything.

    Called after the host state is updated, so ``h.queued`` counts the URL
    put back and ``h.next_allowed`` is the next check.
    """
    key = hq.hid_key(hid)
    if outcome == "robots-unreachable":
        old = t.txn.get(key, db=t.drw)
        prev = orjson.loads(old) if old else None
        robots = rec.get("robots")
        robots = robots if type(robots) is dict else {}
        state = {"since": prev["since"] if prev else t.now, "next_check": h.next_allowed,
                 "status": robots.get("status"), "error": robots.get("error"),
                 "checks": (prev["checks"] if prev else 0) + 1}
        t.txn.put(key, orjson.dumps(state), db=t.drw)
        t.robots_any = True
        return {"robots_wait": {**state, "urls": h.queued, "new": prev is None}}
    if outcome in _BEFORE_ROBOTS or not t.robots_waiting():
        return None
    old = t.txn.pop(key, db=t.drw)
    if old is None:
        return None
    prev = orjson.loads(old)
    return {"robots_resumed": {"since": prev["since"], "checks": prev["checks"], "urls": h.queued}}


def waiting(fr: Frontier, now: float, limit: int = 20) -> dict[str, Any]:
    """Every waiting host counted, the ``limit`` holding most URLs listed.

    Each listed host: host, urls (queued, plus one if a lease is out),
    next_check (unix s: when the frontier leases it again, so when
    robots.txt is asked again), since, checks (failed in a row), status
    and error of the last check.
    """
    hosts: list[dict[str, Any]] = []
    total = 0
    n = 0
    with fr.env.begin() as txn:
        for key, value in txn.cursor(db=fr.db[TABLE]):
            raw = txn.get(key, db=fr.db["hosts"])
            if raw is None:
                continue
            h = hq.decode_host(raw)
            st = orjson.loads(value)
            urls = h.queued + (1 if h.lease else 0)
            n += 1
            total += urls
            hosts.append({"host": h.name, "urls": urls, "next_check": h.next_allowed,
                          "in_flight": bool(h.lease), "since": st.get("since"),
                          "checks": st.get("checks"), "status": st.get("status"), "error": st.get("error")})
            if len(hosts) > 4 * limit:  # keep the largest few, not the whole table, in memory
                hosts.sort(key=lambda x: (-x["urls"], x["host"]))
                del hosts[limit:]
    hosts.sort(key=lambda x: (-x["urls"], x["host"]))
    nxt = min((x["next_check"] for x in hosts), default=None)
    return {"hosts": n, "urls": total, "next_check": nxt, "list": hosts[:limit]}


def state_of(fr: Frontier, host: str) -> dict[str, Any] | None:
    """One host's wait (since, next_check, status, error, checks), or None if it is not waiting."""
    with fr.env.begin() as txn:
        hid = txn.get(host.encode(), db=fr.db["hostid"])
        value = txn.get(hid, db=fr.db[TABLE]) if hid is not None else None
        return orjson.loads(value) if value is not None else None


def plural(n: int, what: str) -> str:
    """``1 URL``, ``12,345 URLs``."""
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _when(ts: float, now: float) -> str:
    wait = max(0.0, ts - now)
    clock = time.strftime("%H:%M:%S", time.localtime(ts))
    return f"{clock} (in {wait:.0f} s)" if wait < 120 else f"{clock} (in {wait / 60:.0f} min)"


def describe_wait(w: dict[str, Any], now: float) -> str:
    """One waiting host as a line for people: host, URLs, next check, why."""
    why = w.get("error") or (f"status {w['status']}" if w.get("status") else "unreachable")
    when = "now (checking)" if w.get("in_flight") else _when(w["next_check"], now)
    return f"{w['host']}: {plural(w['urls'], 'URL')} waiting, next check {when}; last check: {why}"


def wait_notice(event: Record, now: float) -> str | None:
    """The stderr line for a completion event that starts or ends a wait (None for others)."""
    host = event.get("host")
    w = event.get("robots_wait")
    if w and w.get("new"):
        return (f"robots.txt of {host} is unreachable ({w.get('error') or w.get('status')}): "
                f"nothing is fetched there, {plural(w['urls'], 'URL')} kept queued; next check "
                f"{_when(w['next_check'], now)}")
    r = event.get("robots_resumed")
    if r:
        return (f"robots.txt of {host} can be read again after {plural(r['checks'], 'failed check')}; "
                f"crawling its {plural(r['urls'], 'URL')} now")
    return None
