"""Politeness and priority formulas: pure functions, no state, no clock.

The frontier (crawl/frontier/db.py) is the one place that enforces politeness
(DESIGN.md invariant 2); the numbers it uses come from here so they can be
read, tested in tables and reused by ``crawl run`` without touching LMDB.

The release formula follows the seeds and heritrix's
``DispositionProcessor.politenessDelayFor``::

    next_allowed = ended_at + min(max_delay, max(crawl_delay, default_delay,
                                                 response_factor * last_response_time))

where ``ended_at`` is the end of the answer as the fetcher received it (its
last body byte, or the error), not when the result reached the frontier:
crawl/frontier/complete.py. Backoff and Retry-After run from there too.

with ``response_factor`` k = 5 (heritrix's ``delayFactor``): a host that
takes 0.4 s to answer is asked again after 2 s, so slow hosts are crawled
more slowly without anyone having to configure them.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass

from crawl.canon import fast_host as fast_host
from crawl.canon import host_key

host_of = host_key  # the frontier's name for it

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Politeness:
    """How gently the frontier treats hosts. One value, shared by every command.

    Args:
        default_delay: seconds between two requests to one host (seeds: 1 s).
        response_factor: k in ``k x last response time``.
        max_delay: ceiling for the normal release delay, including robots
            Crawl-delay (heritrix ``respectCrawlDelayUpToSeconds``, 300 s).
        per_ip: leases in flight at once per resolved IP address.
        host_queue_cap: pending URLs per host; more are dropped and counted.
        max_retries: transport failures before a URL is dropped for the cycle.
        max_leases: leases of one URL that expired uncompleted before it is
            dropped for the cycle (a URL that crashes every fetcher).
        backoff_base: first backoff step after a 429/503/transport error.
        backoff_cap: backoff never exceeds this (seeds: "up to a day").
        park_after: consecutive failures after which a host is parked.
        park_seconds: how long a parked host is left alone ("for hours").
    """

    default_delay: float = 1.0
    response_factor: float = 5.0
    max_delay: float = 300.0
    per_ip: int = 4
    host_queue_cap: int = 100_000
    max_retries: int = 3
    max_leases: int = 10
    backoff_base: float = 2.0
    backoff_cap: float = DAY
    park_after: int = 10
    park_seconds: float = 6 * 3600.0


DEFAULT = Politeness()


def release_delay(cfg: Politeness, response_time: float | None, crawl_delay: float | None) -> float:
    """Seconds until a host may be asked again after a normal response.

    Crawl-delay is not in RFC 9309 (section 2.2.4 leaves other records to
    implementers); we honour it up to ``max_delay`` so a robots.txt cannot
    stall a host for days.
    """
    delay = cfg.default_delay
    if response_time is not None and response_time > 0:
        delay = max(delay, cfg.response_factor * response_time)
    if crawl_delay is not None and crawl_delay > 0:
        delay = max(delay, crawl_delay)
    return min(delay, max(cfg.max_delay, cfg.default_delay))


def backoff_delay(cfg: Politeness, level: int, retry_after: float | None = None) -> float:
    """Seconds a host waits after its ``level``-th consecutive 429/503/failure.

    Retry-After (RFC 9110 section 10.2.3) is honoured exactly, only capped at
    ``backoff_cap``; otherwise the delay doubles per level from
    ``backoff_base`` and never drops below the normal ``default_delay``.
    """
    if retry_after is not None and retry_after >= 0:
        return min(max(retry_after, 0.0), cfg.backoff_cap)
    step = cfg.backoff_base * (2.0 ** max(level - 1, 0)) if level < 64 else cfg.backoff_cap
    return min(max(step, cfg.default_delay), cfg.backoff_cap)


def parse_retry_after(value: object, now: float) -> float | None:
    """Retry-After as seconds from ``now``; None when absent or unreadable.

    RFC 9110 section 10.2.3: either delay-seconds or an HTTP-date. A date in
    the past means "now" (0 s).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


# Priority: 0 (most urgent) .. 9 (least). Records default to 1.
MIN_PRIORITY, MAX_PRIORITY, DEFAULT_PRIORITY = 0, 9, 1


def effective_priority(url: str, priority: object = None, depth: object = None) -> int:
    """The front-queue level of a URL: its priority, lowered by depth and queries.

    Seeds: "priority within a host favours shallow paths and few parameters".
    One level lower per 3 levels of link depth, one more for 3+ query
    parameters and another for 6+ (the shape of faceted-search traps).
    """
    # type() is int: JSON gives plain ints, and True/False are not priorities.
    p = DEFAULT_PRIORITY if type(priority) is not int else priority if 0 <= priority <= MAX_PRIORITY \
        else min(max(priority, MIN_PRIORITY), MAX_PRIORITY)
    if type(depth) is int and depth > 0:
        p += depth // 3
    q = url.find("?")
    if q >= 0:
        params = url.count("&", q) + 1
        p += (params >= 3) + (params >= 6)
    return p if p < MAX_PRIORITY else MAX_PRIORITY


