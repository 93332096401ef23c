"""Why a host waits: the cause of its next-allowed time, named and kept.

A host's state (crawl/frontier/hostqueue.py ``HostState``) holds the time
it may be asked again, its backoff level and its failures, but not *why*
that time was chosen: a 429 that said ``Retry-After: 120`` and a third
503 in a row without one can leave the same figures. ``crawl why`` and
the report must say which rule decided, so a completion that does not
release the host with its normal delay notes the cause here:

``delays``  host id -> ``{"v": 1, "cause", "at", "until", "delay",
            "status", "outcome", "retry_after", "level", "failures",
            "floor"}`` (orjson), where ``cause`` is ``retry-after``,
            ``backoff`` (429/503 without a usable Retry-After),
            ``error-backoff`` (a transport error or another 5xx),
            ``robots-wait`` or ``parked``.

The table only holds hosts that are backing off: the first normal
completion deletes the entry (a host with backoff level 0 has none, so the
common completion costs no lookup). It is a table of its own, added without
a layout change (an older frontier gets it empty), and its values carry a
version so a later cause can be added without breaking older readers.

A normal release needs no note: its cause follows from the stored state,
the largest of the base delay, ``k`` x the last response time and the
host's Crawl-delay (:func:`release_cause`, the same formula as
:func:`crawl.frontier.politeness.release_delay`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from . import hostqueue as hq
from .leases import TRANSIENT
from .politeness import DAY, Politeness, backoff_delay, parse_retry_after, release_delay

if TYPE_CHECKING:
    from .hostqueue import HostState
    from .tx import Tx

TABLE = "delays"
VERSION = 1
# Causes a completion notes (the table) and causes of a normal release (derived).
NOTED = ("retry-after", "backoff", "error-backoff", "robots-wait", "parked")
RELEASE = ("base-delay", "response-time", "crawl-delay", "max-delay")


class Cause(NamedTuple):
    """A delay and the rule that set it, with the figures each candidate gave."""

    delay: float
    cause: str
    terms: dict[str, float]


def release_cause(cfg: Politeness, response_time: float | None, crawl_delay: float | None) -> Cause:
    """The normal release delay and which term decided it.

    The delay itself is :func:`release_delay`'s, so the figure shown is the
    one the frontier used; the cause is the term that gave it (on a tie the
    more specific one: Crawl-delay, then the response time), or
    ``max-delay`` when the ceiling cut it.
    """
    delay = release_delay(cfg, response_time, crawl_delay)
    terms = {"base-delay": cfg.default_delay}
    if response_time is not None and response_time > 0:
        terms["response-time"] = cfg.response_factor * response_time
    if crawl_delay is not None and crawl_delay > 0:
        terms["crawl-delay"] = crawl_delay
    best = max(("crawl-delay", "response-time", "base-delay"), key=lambda k: terms.get(k, -1.0))
    cause = best if abs(terms[best] - delay) < 1e-9 else "max-delay"
    return Cause(delay, cause, terms)


class Replayed(NamedTuple):
    """What one completion did to its host, replayed from the crawl log."""

    cause: str
    delay: float
    level: int  # backoff level after it
    failures: int  # consecutive failures after it
    retry_after: float | None


def replay_delay(cfg: Politeness, level: int, failures: int, outcome: str, status: object,
           retry_after: float | None, response_time: float | None, crawl_delay: float | None) -> Replayed:
    """The delay one completion set and its cause, from what the crawl log keeps of it.

    The branches of :func:`crawl.frontier.complete.complete_one`, in its
    order, on the figures a fetch event carries (``retry_after`` already in
    seconds): ``crawl why --host`` walks a host's events through it to show
    how its delay changed and why (tests/report/test_why.py holds it to the
    frontier's own figures). ``level`` and ``failures`` are the host's
    before the completion.
    """
    floor = release_delay(cfg, response_time, crawl_delay)
    ra = retry_after if retry_after is not None and retry_after >= 0 else None
    if status in (429, 503):
        level += 1
        delay = max(floor, backoff_delay(cfg, level, ra))
        cause = "retry-after" if ra is not None and ra >= floor else "backoff"
        return Replayed(cause, delay, level, failures, ra)
    if outcome == "robots-unreachable":
        level += 1
        delay = max(floor, min(ra, DAY) if ra is not None else backoff_delay(cfg, level))
        return Replayed("robots-wait", delay, level, failures, ra)
    if outcome in TRANSIENT or (outcome == "http-error" and isinstance(status, int) and status >= 500):
        level += 1
        failures += 1
        delay = max(floor, backoff_delay(cfg, level, ra))
        if failures >= cfg.park_after:
            return Replayed("parked", max(delay, cfg.park_seconds), level, failures, ra)
        cause = "retry-after" if ra is not None and ra >= floor else "error-backoff"
        return Replayed(cause, delay, level, failures, ra)
    why = release_cause(cfg, response_time, crawl_delay)
    return Replayed(why.cause, why.delay, 0, 0, None)


def note(t: Tx, hid: int, h: HostState, disposition: str, status: object, outcome: object,
         retry_after: object, floor: float, parked: bool) -> None:
    """Keep the cause of a completion that did not release the host normally.

    Called at the end of :func:`crawl.frontier.complete.complete_one`, once
    ``h`` holds the new next-allowed time.
    """
    ra = parse_retry_after(retry_after, t.now) if retry_after is not None else None
    if disposition == "robots-wait":
        cause = "robots-wait"
    elif parked:
        cause = "parked"
    elif ra is not None and ra >= floor:
        cause = "retry-after"
    elif status in (429, 503):
        cause = "backoff"
    else:
        cause = "error-backoff"
    value = {"v": VERSION, "cause": cause, "at": t.now, "until": h.next_allowed,
             "delay": round(h.next_allowed - t.now, 3), "status": status, "outcome": outcome,
             "retry_after": ra, "level": h.backoff, "failures": h.failures, "floor": round(floor, 3)}
    t.txn.put(hq.hid_key(hid), orjson.dumps(value), db=t.fr.db[TABLE])


def clear(t: Tx, hid: int) -> None:
    """A normal completion ended the host's backoff: its noted cause is history."""
    t.txn.delete(hq.hid_key(hid), db=t.fr.db[TABLE])


def decode(value: bytes | None) -> dict[str, Any] | None:
    """A stored cause, or None (none kept, or written by a newer version that
    this code cannot read: the caller then derives what it can)."""
    if value is None:
        return None
    try:
        got = orjson.loads(bytes(value))
    except orjson.JSONDecodeError:
        return None
    return got if isinstance(got, dict) and got.get("v") == VERSION else None
