"""Robots rule matching and trap classification: the ground truth's small rule book.

Kept apart from the generator so the audit and the tests can use it alone.
"""

from __future__ import annotations

import functools
import re

TRAP_NAMES = ("calendar", "session", "deep", "facets")


def rules_disallow(rules: list[tuple[str, str]] | list[list[str]], path: str) -> bool:
    """RFC 9309 2.2.2: the longest matching rule wins; allow wins a tie.

    ``path`` is the path and query of the URL; patterns use ``*`` and a
    final ``$`` (RFC 9309 2.2.3). Our rules are plain ASCII, so no
    percent-encoding normalisation is needed here.
    """
    best: tuple[int, bool] | None = None
    for kind, pattern in rules:
        if _pattern_re(pattern).match(path):
            cand = (len(pattern), kind == "allow")
            if best is None or cand > best:
                best = cand
    return best is not None and not best[1]


@functools.lru_cache(maxsize=256)
def _pattern_re(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    rx = ".*".join(re.escape(part) for part in body.split("*"))
    return re.compile(rx + ("$" if anchored else ""))


def trap_of(path: str) -> str | None:
    """Which trap a path on a "traps" host belongs to (None if it is no trap)."""
    if path.startswith("/calendar/"):
        return "calendar"
    if path.startswith("/s/"):
        return "session"
    if path.startswith("/deep/"):
        return "deep"
    if path.startswith("/search"):
        return "facets"
    return None


TRAP_PATTERNS = {
    "calendar": r"^/calendar/\d{4}/\d{2}/",
    "session": r"^/s/[0-9a-f]+/",
    "deep": r"^/deep/([ab]/)+",
    "facets": r"^/search\?",
}
