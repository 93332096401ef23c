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


# -- leases ahead ---------------------------------------------------------------
#
# The release above still stands between an answer and the next request to its
# host: one commit (its fsync) and a trip to a worker thread and back, 3-5 ms
# of a 2 ms budget (issue 19). So a host whose delay is short gets its next
# URLs leased *while* its current request is in flight (:func:`lease_ahead`),
# durable before their requests as every lease; at the answer's end the
# fetcher only checks the answer (:func:`follow_at`) and starts the next
# request, and the next commit runs while requests are in flight. One commit
# may lease several (a commit under load takes longer than a loopback page).
#
# The host is then held by a chain of leases fetched one after another by one
# fetch worker: the host's ``lease`` field names the newest, so the frontier
# leases it to nobody else, and the earlier ones are completed as released
# early (their host already names a later lease). The chain keeps the one
# address slot its first lease took. An answer that may not be followed at
# once (a 429, a 5xx, a transport error, a deferral, a long delay, a stop) has
# the leases after it given back (:func:`give_back`) before its own result
# goes to be stored, so its completion finds its host named by it again and
# applies its backoff as always. A crash leaves the chain's leases in the
# table: the next run returns their URLs, and the host, named by the newest,
# waits its delay.


def follow_at(cfg: Politeness, rec: Record) -> float | None:
    """When (unix time) the host of the answer ``rec`` may be asked again by a
    lease leased ahead of it, or None if the leases ahead must be given back
    (its completion would not be a plain release, or the delay is
    :data:`HORIZON` or more). The delay runs from the answer's end as the
    completion's would."""
    if not releasable(rec):
        return None
    ended = number(rec.get("ended_at"))
    timings = rec.get("timings")
    rt = number(timings.get("total")) if type(timings) is dict else None
    delay = release_delay(cfg, rt, number(rec.get("crawl_delay")))
    if ended is None or delay >= HORIZON:
        return None
    return ended + delay


def _lease_of(t: Tx, rec: Record) -> tuple[int, tuple[int, ...]] | None:
    """(lease id, its LEASE_HEAD fields) of a lease record still in the table, its URL checked."""
    lease_id = parse_lease(rec.get("lease"))
    url = rec.get("url")
    if lease_id is None or not isinstance(url, str):
        return None
    raw = t.cursor("leases").get(hq.u64(lease_id))
    if raw is None:
        return None
    head = hq.LEASE_HEAD.unpack_from(raw)
    if fingerprint(url) != head[5]:
        return None
    return lease_id, head


def promising(t: Tx, newest: Record, prev: Record | None) -> bool:
    """Whether :func:`lease_ahead` may lease anything after ``newest`` (read
    only: a host at the default 1 s delay costs a read, not a commit)."""
    if t.fr.lease_filter is not None:
        return False
    found = _lease_of(t, newest)
    if found is None:
        return False
    h = t.read_host(found[1][0])
    if h.lease != found[0] or h.head == hq.NO_HEAD:
        return False
    rt: float | None = h.last_response if h.last_response >= 0 else None
    crawl_delay = h.crawl_delay if h.crawl_delay >= 0 else None
    if prev is not None:
        _base, prt, pcd = answer_times(prev, 0.0, t.now)
        rt = prt if prt is not None else rt
        crawl_delay = pcd if pcd is not None else crawl_delay
    return rt is not None and release_delay(t.cfg, rt, crawl_delay) < HORIZON


def lease_ahead(t: Tx, newest: Record, prev: Record | None, lease_seconds: float, n: int = 1) -> list[Record]:
    """While its chain is fetched: lease up to ``n`` more URLs of the host of
    ``newest`` (the chain's newest lease, its host's), to be fetched after it
    in order (see above); none if ``newest`` is not its host's newest lease,
    the host's delay is unknown or :data:`HORIZON` or more, nothing is
    queued, the host or its address is slowed down, or in a shared crawl.

    ``prev`` is the chain's latest answer, if any: its times are kept as the
    host's (its completion, a released lease's, does not), so the next
    decision sees the latest answer's time."""
    if t.fr.lease_filter is not None:
        return []
    found = _lease_of(t, newest)
    if found is None:
        return []
    lease_id, (hid, *_rest) = found
    h = t.read_host(hid)
    if h.lease != lease_id:
        return []
    if prev is not None:
        before = _lease_of(t, prev)
        if before is not None and before[1][0] == hid:
            t.dirty.add(hid)
            base, rt, crawl_delay = answer_times(prev, before[1][4], t.now)
            if crawl_delay is not None:
                h.crawl_delay = crawl_delay
            if rt is not None:
                h.last_response = rt
            delay = release_delay(t.cfg, rt, h.crawl_delay if h.crawl_delay >= 0 else None)
            h.next_allowed = max(h.next_allowed, base + delay)
    if h.last_response < 0 or h.parked_until > t.now:
        return []
    if release_delay(t.cfg, h.last_response, h.crawl_delay if h.crawl_delay >= 0 else None) >= HORIZON:
        return []
    out: list[Record] = []
    t.lease_id = t.counter("lease")
    deadline = t.now + lease_seconds
    while len(out) < n and h.head != hq.NO_HEAD:
        ip = t.ip_state(h.ip) if h.ip else None
        if ip is not None and (ip[1] > t.now or ip[0] - 1 >= t.ip_cap(h.ip)):
            break
        # lease_host waits for the host's next_allowed: here that is the
        # fetcher's job (follow_at, from the answer's end): lifted for the call
        allowed, held = h.next_allowed, h.lease
        h.next_allowed = 0.0
        if ip is not None:  # the chain's slot passes to the new lease (lease_host takes one)
            t.put_ip(h.ip, ip[0] - 1, ip[1])
        t.dirty.add(hid)
        rec = t.lease_host(hid, deadline, hq.ms_up(deadline))
        h.next_allowed = allowed
        if rec is None:  # (its queue was empty after all): the chain keeps the host
            h.lease, h.sched = held, hq.NOT_SCHEDULED
            t.sched_puts.pop(hid, None)
            if ip is not None:
                t.put_ip(h.ip, ip[0], ip[1])
            break
        out.append(rec)
    if out:
        t.write_leases(len(out))
        t.count("leased_ahead", len(out))
    return out


def give_back(t: Tx, ahead: list[Record], behind: Record) -> int:
    """Undo :func:`lease_ahead`: the URLs of ``ahead`` (never requested, in chain
    order) go back to the head of their host's queue in that order, not
    counted as attempts, and the host is named by ``behind`` again, so that
    answer's completion does what it would have done (backoff, Retry-After,
    the delay) and frees the address slot the chain holds. Returns how many
    were still in the table (not expired)."""
    given = 0
    for rec in reversed(ahead):  # each goes to the head: the first ends up first
        found = _lease_of(t, rec)
        if found is None:
            continue
        lease_id, (hid, prio, seq, deadline, leased_at, fp) = found
        raw = t.cursor("leases").pop(hq.u64(lease_id))
        t.drop_deadline(hq.time_key(hq.ms_up(deadline), lease_id))
        h = t.host(hid)
        if h.lease == lease_id:
            prior = _lease_of(t, behind)
            # the answer behind holds the host (and the slot) until its completion
            h.lease = prior[0] if prior is not None and prior[1][0] == hid else 0
            if not h.lease and h.ip:
                t.release_ip(h.ip)
        entry = bytes(raw[hq.LEASE_HEAD.size:])
        attempts, fails = entry[1], entry[2]
        t.back_to_queue(hq.Lease(hid, prio, seq, deadline, leased_at, fp, entry), h,
                        hq.with_counts(entry, attempts - 1 if attempts else 0, fails))
        given += 1
    if given:
        t.count("leased", -given)
        t.count("given_back", given)
    return given
