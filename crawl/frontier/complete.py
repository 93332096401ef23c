"""What a fetch result does to the frontier: the disposition rules.

Split from crawl/frontier/db.py because this is the policy a reader looks for
("why was this URL retried / dropped / why is this host parked"), while
frontier.py is the queue machinery. Runs inside the caller's write
transaction (``_Tx``); returns one ``event`` record per fetch record.

Dispositions:

``done``      the URL is finished for this cycle (ok, not-modified, redirect,
              robots-disallowed, 4xx, too-large, ...). Redirects and robots
              outcomes are recorded here, never retried: the redirect target
              comes back through ``crawl parse`` as a link.
``backoff``   429 or 503: the URL goes back to the head of its queue, the
              host (and every host on its IP) waits Retry-After exactly or an
              exponential backoff, capped at a day.
``retry``     transport error or other 5xx: the URL goes back with its failure
              count, due when the host is; the host backs off.
``deferred``  the fetcher spent the lease on a prerequisite (robots.txt): the
              URL goes back to the head of its queue with no failure
              counted; the host is released with the normal delay.
``robots-wait`` robots.txt could not be read (5xx, timeout): nothing may be
              fetched from the host, but nothing is lost either. The URL
              goes back to the head of its queue (the host's other URLs
              never left it), neither an attempt nor a failure counted, and
              the host is released when the fetcher checks robots.txt again
              (its ``retry_after``: the answer's Retry-After, or a backoff).
              The wait is kept in the ``robots`` table until a result gets
              past robots.txt (crawl/frontier/robotswait.py).
``dropped``   the URL failed ``max_retries`` times: recorded, not retried in
              this cycle.
A host with ``park_after`` consecutive failures is parked for ``park_seconds``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import xxhash

from crawl.core import Record, records

from . import delays, robotswait
from . import hostqueue as hq
from .leases import TRANSIENT, answer_times, outcome_code, parse_lease
from .politeness import DAY, backoff_delay, parse_retry_after, release_delay

if TYPE_CHECKING:
    from .tx import Tx

_RATE_LIMIT = frozenset({429, 503})
_BACK = frozenset({"backoff", "retry", "deferred", "robots-wait"})  # dispositions that put the URL back
_OUTCOMES = frozenset(records.OUTCOMES)


def _event(t: Tx, rec: Record, event: str, **fields: Any) -> Record:
    out = {"kind": "event", "v": records.VERSION, "ts": t.now, "event": event, "url": rec.get("url"),
           "lease": rec.get("lease")}
    out.update(fields)
    return out


def _check(rec: Record) -> str | None:
    """Why a fetch record cannot be applied, or None if it can."""
    if rec.get("kind") != "fetch":
        return f'expected a fetch record, got kind {rec.get("kind")!r}'
    if not isinstance(rec.get("url"), str) or not rec["url"]:
        return 'no "url" string'
    if rec.get("outcome") not in _OUTCOMES:
        return f'unknown outcome {rec.get("outcome")!r} (expected one of {", ".join(records.OUTCOMES)})'
    status = rec.get("status")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999):
        return f"bad status {status!r} (expected an HTTP status code 100..999 or null)"
    if "lease" not in rec:
        return 'no "lease" field: only leased URLs can be completed (crawl frontier next hands them out)'
    return None


def complete_one(t: Tx, rec: Record, _fp: Any = xxhash.xxh3_64_intdigest,
                 _head: Any = hq.LEASE_HEAD.unpack_from, _at: int = hq.LEASE_HEAD.size) -> Record:
    get: Any = rec.get  # (what it returns is checked just below)
    url, outcome, status, name = get("url"), get("outcome"), get("status"), get("lease")
    # What a fetcher sends passes this quick test; anything else gets its exact verdict from _check.
    if not (get("kind") == "fetch" and type(url) is str and url and outcome in _OUTCOMES and name is not None
            and (status is None or (type(status) is int and 100 <= status <= 999))):
        problem = _check(rec)
        if problem is not None:
            return _event(t, rec, "frontier.bad-record", error=problem)
    lease_id = parse_lease(name)
    lkey = hq.u64(lease_id) if lease_id is not None else None
    # One search, not a get and a delete; a batch's leases are neighbours, and
    # a positioned cursor finds the next one on its page without descending.
    raw = t.cursor("leases").pop(lkey) if lkey is not None else None
    if raw is None:
        return _event(
            t, rec, "frontier.unknown-lease",
            error=f"lease {rec['lease']!r} is unknown or expired; its URL was (or will be) leased again",
        )
    hid, prio, seq, deadline, leased_at, fp = _head(raw)
    if _fp(url.encode("utf-8", "surrogatepass")) != fp:  # the lease keeps its URL's 64-bit fingerprint
        t.txn.put(lkey, raw, db=t.dl)  # changes nothing after all
        leased = hq.decode_entry(raw[_at:], t.read_host(hid).name).url
        return _event(t, rec, "frontier.bad-record",
                      error=f"url does not match lease {rec['lease']} (leased {leased!r})")
    h = t.host(hid)
    # Released at the end of its answer (crawl/frontier/handoff.py): the host is
    # free, or another lease's already; only the URL's state is left to record.
    released = h.lease != lease_id
    allowed = h.next_allowed
    backing_off = h.backoff > 0  # then a cause is noted in delays (crawl/frontier/delays.py)
    attempts, fails = raw[_at + 1], raw[_at + 2]
    t.drop_deadline(hq.time_key(hq.ms_up(deadline), lease_id))
    cfg, now = t.cfg, t.now
    # Every wait below runs from the end of the answer as the fetcher received it
    # (ended_at: last body byte or the error), not from now: results can sit in a
    # spool or a batch. Kept between the lease and now, so a skewed or made-up
    # clock can neither push a host back into the past nor into the future.
    base, rt, crawl_delay = answer_times(rec, leased_at, now)
    if not released:  # (a released lease's were kept at its release; a later answer's may be newer)
        if crawl_delay is not None:
            h.crawl_delay = crawl_delay
        if rt is not None:
            h.last_response = rt
    old_ip = h.ip
    new_ip = get("ip")
    ra = get("retry_after")
    parked = False
    counted = attempts

    # A backoff never undercuts the host's normal delay (Crawl-delay included):
    # Retry-After: 0 or a tiny --backoff-base must not make us less polite.
    floor = release_delay(cfg, rt, h.crawl_delay if h.crawl_delay >= 0 else None)
    if status in _RATE_LIMIT:
        h.backoff += 1
        delay = max(floor, backoff_delay(cfg, h.backoff, parse_retry_after(ra, base) if ra is not None else None))
        h.next_allowed = base + delay
        if old_ip:  # everyone on this machine slows down, not just this name
            inflight, slow = t.ip_state(old_ip)
            t.put_ip(old_ip, inflight, max(slow, base + delay))
        disposition = "backoff"
        t.count("backoffs")
    elif outcome == "robots-unreachable":
        # Not the URL's failure nor the pages': no failure count, no parking, and
        # other hosts on the address carry on. The fetcher's retry_after is when
        # it checks robots.txt again, so it is kept exactly (not cut to
        # --backoff-cap: leasing sooner would only find the same verdict, and
        # keep the crawl from ever being idle); without one (a record not from
        # our fetcher) the host's own backoff says when.
        # Counted from now, not from the answer's end: the fetcher's retry_after is
        # its robots cache's expiry less the time it made the record (after the
        # answer ended), so from the end the host came due just before the cache
        # expired, and its next lease found the cached verdict, a "failed check"
        # that asked nothing. Now is later than both: never a shorter wait.
        h.backoff += 1
        wait = parse_retry_after(ra, now) if ra is not None else None
        delay = min(wait, DAY) if wait is not None else backoff_delay(cfg, h.backoff)
        h.next_allowed = now + max(floor, delay)
        counted = attempts - 1 if attempts else 0  # a lease spent waiting is not an attempt
        disposition = "robots-wait"
        t.count("robots_waits")
    elif outcome in TRANSIENT or (outcome == "http-error" and isinstance(status, int) and status >= 500):
        h.backoff += 1
        h.failures += 1
        delay = max(floor, backoff_delay(cfg, h.backoff, parse_retry_after(ra, base) if ra is not None else None))
        if h.failures >= cfg.park_after:
            h.parked_until = base + cfg.park_seconds
            delay = max(delay, cfg.park_seconds)
            parked = True
        h.next_allowed = base + delay
        fails += 1
        if fails >= cfg.max_retries:
            disposition = "dropped"
            t.count("dropped")
        else:
            disposition = "retry"
            t.count("retried")
    else:
        h.backoff = 0
        h.failures = 0
        h.parked_until = 0.0
        h.next_allowed = base + floor
        disposition = "deferred" if outcome == "deferred" else "done"
        t.count(disposition)

    if released:  # its delay ran from the same end; a later lease's is not undone
        h.next_allowed = max(h.next_allowed, allowed)
    else:  # free the IP slot taken at lease time, then learn the (new) address
        h.lease = 0
        if old_ip:
            t.release_ip(old_ip)
    if type(new_ip) is str and new_ip and len(new_ip) <= 64:
        h.ip = new_ip
    if disposition != "done" and disposition != "deferred":
        delays.note(t, hid, h, disposition, status, outcome, ra, floor, parked)
    elif backing_off:
        delays.clear(t, hid)
    if disposition in _BACK:
        entry = raw[_at:]
        t.back_to_queue(hq.Lease(hid, prio, seq, deadline, leased_at, fp, entry), h,
                        hq.with_counts(entry, counted, fails))
    else:
        t.set_known(hid, fp, hq.DONE if disposition == "done" else hq.DROPPED, outcome_code(outcome))
        t.reschedule(hid, h)
    event: Record = {"kind": "event", "v": records.VERSION, "ts": now, "event": "frontier.complete",
                     "url": url, "lease": name, "disposition": disposition,
                     "next_allowed": h.next_allowed, "outcome": outcome, "status": status, "host": h.name,
                     "attempt": attempts}
    if parked:
        event["parked_until"] = h.parked_until
    if outcome == "robots-unreachable" or t.robots_any is not False:
        said = robotswait.note(t, hid, h, rec, outcome)
        if said:
            event.update(said)
    return event
