"""The records a web's shape is made of, and the seeded generator behind them.

Kept apart from ``generator`` so that the page profiles (``realistic``)
build the same records without importing the :class:`Web` that calls them.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

CHANGE_PERIODS = (None, None, 3600, 86400, 7 * 86400)


@dataclass(frozen=True)
class Host:
    index: int
    name: str
    address: str
    behaviour: str
    robots: str
    mirror_of: int | None = None  # a "mirror" host serves this host's bytes


@dataclass(frozen=True)
class Link:
    url: str  # absolute, resolved, with port: what a correct parser extracts
    href: str  # as written in the HTML
    tag: str = "a"  # a, img, link
    rel: tuple[str, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class PageSpec:
    """One ordinary page: everything but its bytes."""

    host: int
    k: int
    path: str
    size: int
    change_period: int | None
    phase: int
    meta_robots: str | None
    base_href: str | None
    links: tuple[Link, ...] = field(default=())
    kind: str = ""  # realistic pages: prose, code, table or index


def _rng(*parts: object) -> random.Random:
    """A generator seeded by ``parts``: stable across runs and Python versions."""
    key = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(key, "little"))


def digest(*parts: object) -> str:
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).hexdigest()
