"""Names that the lease side (:mod:`.tx`) and the completion side (:mod:`.complete`) share.

A lease travels as a 16-hex-digit name and comes back inside its fetch
record; outcomes are stored as small codes in the ``known`` table. Both
sides read and write these, so they live here, below both.
"""

from __future__ import annotations

import xxhash

from crawl.core import records

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


def outcome_name(code: int) -> str | None:
    return _OUTCOME_NAME.get(code)


def outcome_code(name: str) -> int:
    return _OUTCOME_CODE.get(name, 0)
