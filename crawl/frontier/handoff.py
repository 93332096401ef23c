"""The hand-off: a host freed at the end of its answer, not at its completion.

A lease is completed (``complete``) only once its result is durable: the WARC
record fsynced, the result in the ``fetched`` spool, the crawl log written.
On one host at delay 0 that chain, five commits, stood between the end of
one answer and the next request to the host (issue 19: 15 ms where wget
takes under 1). Politeness needs none of it: the host may be asked again
its delay after the answer *ended*, and that time is known as soon as the
answer is in.

So the fetch side hands a result over twice. At the end of the answer,
:func:`release_early` frees the host (its delay counted from ``ended_at``,
its address's slot given back) and, in the same transaction, the host's
next URL may be leased (``Tx.lease_this``): one commit between an answer
and the next request, and the new lease is durable before that request
(DESIGN invariant 1). The lease of the answer just received stays in the
``leases`` table until its completion, which then records the URL's state
and leaves the host alone. A crash in between loses nothing: the old lease
expires (or the next run releases it) and its URL is fetched again.

Only answers whose completion would be a plain release are handed off
early (:func:`releasable`); a 429, a 5xx, a transport error or an
unreadable robots.txt keep the host until their completion, whose backoff
rules need the whole record. How the two ends tell each other apart: a
host's ``lease`` field names its lease until the host is released; a lease
in the table that its host no longer names was released early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawl.core import Record

from . import hostqueue as hq
from .leases import TRANSIENT, answer_times, fingerprint, number, parse_lease
from .politeness import Politeness, release_delay

if TYPE_CHECKING:
    from .tx import Tx

_NOT_EARLY = frozenset({"robots-unreachable", "deferred"}) | TRANSIENT
# Hosts whose delay is this long or longer are left to the completion, which
# comes tens of milliseconds after the answer (more under load) and so still
# frees them in time. A hand-off is one more commit per answer, serialised
# with every other writer of the frontier: worth it where the delay is short
# (one site crawled fast), not for thousands of hosts at the default 1 s.
HORIZON = 0.5


def releasable(rec: Record) -> bool:
    """Whether the completion of ``rec`` would release its host with the normal
    delay (a page, a redirect, a 4xx, a refusal by robots.txt), so the host
    may be released now."""
    outcome, status = rec.get("outcome"), rec.get("status")
    if rec.get("kind") != "fetch" or not isinstance(outcome, str) or outcome in _NOT_EARLY:
        return False
    if status in (429, 503):
        return False
    return not (outcome == "http-error" and isinstance(status, int) and status >= 500)


def worth_it(cfg: Politeness, rec: Record) -> bool:
    """Whether to hand ``rec`` off at all: releasable, and its host's delay
    (as far as the record tells: its answer's time, robots.txt's Crawl-delay)
    under :data:`HORIZON`."""
    if not releasable(rec):
        return False
    timings = rec.get("timings")
    rt = number(timings.get("total")) if type(timings) is dict else None
    return release_delay(cfg, rt, number(rec.get("crawl_delay"))) < HORIZON


def release_early(t: Tx, rec: Record) -> int | None:
    """Free the host of ``rec``'s lease as its completion would; the host's id,
    or None when nothing was released (not releasable, unknown lease, already
    released)."""
    if not releasable(rec):
        return None
    lease_id = parse_lease(rec.get("lease"))
    url = rec.get("url")
    if lease_id is None or not isinstance(url, str):
        return None
    raw = t.cursor("leases").get(hq.u64(lease_id))
    if raw is None:
        return None
    hid, _prio, _seq, _deadline, leased_at, fp = hq.LEASE_HEAD.unpack_from(raw)
    if fingerprint(url) != fp:
        return None
    h = t.read_host(hid)
    if h.lease != lease_id:
        return None
    t.dirty.add(hid)
    base, rt, crawl_delay = answer_times(rec, leased_at, t.now)
    if crawl_delay is not None:
        h.crawl_delay = crawl_delay
    if rt is not None:
        h.last_response = rt
    h.next_allowed = base + release_delay(t.cfg, rt, h.crawl_delay if h.crawl_delay >= 0 else None)
    h.lease = 0
    if h.ip:
        t.release_ip(h.ip)
    new_ip = rec.get("ip")
    if type(new_ip) is str and new_ip and len(new_ip) <= 64:
        h.ip = new_ip
    t.reschedule(hid, h)
    t.count("released_early")
    return hid
