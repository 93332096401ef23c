"""Names that the lease side (:mod:`.tx`) and the completion side (:mod:`.complete`) share.

A lease travels as a 16-hex-digit name and comes back inside its fetch
record; outcomes are stored as small codes in the ``known`` table. Both
sides read and write these, so they live here, below both.
"""

from __future__ import annotations

import xxhash

from crawl.core import Record, records

# Outcomes after which the URL goes back for another try (with backoff).
TRANSIENT = frozenset({"timeout", "connect-error", "dns-error", "protocol-error"})
_OUTCOME_CODE = {name: i + 1 for i, name in enumerate(records.OUTCOMES)}
_OUTCOME_NAME = {i: name for name, i in _OUTCOME_CODE.items()}


def fingerprint(url: str) -> int:
    """64-bit xxh3 of the (already canonical) URL, as crawl.canon defines it."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass"))


def lease_name(lease_id: int) -> str:
    return f"{lease_id:016x}"


def parse_lease(value: object) -> int | None:
    """The lease id a record names, or None when it names none (or garbles it)."""
    if not isinstance(value, str) or len(value) != 16:
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def number(value: object) -> float | None:
    """A record's numeric field, or None: not a bool, not NaN (records come from
    other processes and files, so a field may be anything)."""
    t = type(value)
    if (t is float or t is int) and value == value:
        return float(value)  # type: ignore[arg-type]
    return None


def answer_times(rec: Record, leased_at: float, now: float) -> tuple[float, float | None, float | None]:
    """What a fetch result tells the host's next delay: when it starts (the end of
    the answer as the fetcher received it, ``ended_at``, kept between the lease and
    now, so a skewed or made-up clock can push a host neither into the past nor
    the future; now without it), the answer's time, and robots.txt's Crawl-delay.
    The completion and the early release (handoff.py) read a result alike."""
    ended = number(rec.get("ended_at"))
    base = now if ended is None else min(now, max(ended, leased_at))
    timings = rec.get("timings")
    rt = number(timings.get("total")) if type(timings) is dict else None
    return base, rt, number(rec.get("crawl_delay"))


def outcome_name(code: int) -> str | None:
    return _OUTCOME_NAME.get(code)


def outcome_code(name: str) -> int:
    return _OUTCOME_CODE.get(name, 0)
