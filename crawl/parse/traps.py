"""Spider-trap heuristics: URL shapes that grow without end.

Some sites generate infinite URLs: calendars that always have a "next
month", symlink loops that nest a path in itself, faceted search that adds
one more filter per click. Each rule below looks at one canonical URL (and
the depth at which it was found) and returns a reason when it looks like a
trap. The rules are a small ordered tuple: the first that fires wins, so
its reason is the one recorded in the link's ``trap`` field.

Policy (documented in README, "crawl parse"):

- **drop** when the shape can only come from a generator: a path deeper
  than 15 segments, a path that repeats itself (``/a/b/a/b``, one segment
  three times), a calendar view dated outside the present's window.
- **demote** (lower priority by one step) when the shape is often legitimate
  but also often a trap: more than 5 query parameters, a calendar view near
  the present (10 years back, 1 ahead), a page number over 100
  (``?page=101``), a link more than 15 hops from its seed.

``TrapPolicy.mode`` can turn every drop into a demote ("demote") or switch
the heuristics off ("off").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

DROP = "drop"
DEMOTE = "demote"


@dataclass(frozen=True, slots=True)
class TrapPolicy:
    """Thresholds for the rules, and what to do when one fires.

    ``year`` is the present year for the calendar rule's window: by default
    the UTC year when the policy is made (once, not per URL); pass a year for
    a deterministic rule, or ``None`` to disable the far-date part.
    """

    mode: str = "default"  # "default" | "demote" | "off"
    max_path_segments: int = 15
    max_query_params: int = 5
    max_depth: int = 15
    max_page: int = 100
    year: int | None = field(default_factory=lambda: time.gmtime().tm_year)
    years_back: int = 10
    years_ahead: int = 1


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str
    action: str  # DROP or DEMOTE


class UrlShape(NamedTuple):
    """The parts of a canonical URL the rules look at, split once.

    A NamedTuple, not a frozen dataclass: it is built once per link and a
    frozen dataclass's ``__init__`` costs several times more.
    """

    segments: list[str]
    path: str
    query: str
    depth: int


def shape(url: str, depth: int = 0) -> UrlShape:
    """Split a canonical absolute URL (no fragment) into path segments and query."""
    start = url.find("//")
    slash = url.find("/", start + 2 if start >= 0 else 0)
    if slash < 0:
        q = url.find("?")
        return UrlShape([], "/", url[q + 1 :] if q >= 0 else "", depth)
    path, _, query = url[slash:].partition("?")
    segments = path.split("/")
    if "" in segments:
        segments = [s for s in segments if s]
    return UrlShape(segments, path, query, depth)


def _path_depth(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    if len(u.segments) > p.max_path_segments:
        return Verdict(f"path-depth>{p.max_path_segments}", DROP)
    return None


def _repeated_segments(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    segs = u.segments
    n = len(segs)
    if n < 3:
        return None
    counts: dict[str, int] = {}
    for s in segs:
        c = counts.get(s, 0) + 1
        if c >= 3:
            return Verdict("repeated-segments", DROP)
        counts[s] = c
    # A run of two or more segments immediately repeated: /a/b/a/b.
    for size in range(2, n // 2 + 1):
        for i in range(0, n - 2 * size + 1):
            if segs[i : i + size] == segs[i + size : i + 2 * size]:
                return Verdict("repeated-segments", DROP)
    return None


# A date at the end of the path (/2024/05/, /2024/05/17, /cal/2024-05-17):
# a calendar *view*. A date followed by a slug (/2024/05/my-post) is a post.
_PATH_DATE = re.compile(
    r"/([1-9]\d\d\d)(?:[/\-](0?[1-9]|1[0-2])(?:[/\-](0?[1-9]|[12]\d|3[01]))?)?/?$"
)
_DATE_KEYS = frozenset(
    {"date", "day", "month", "mon", "year", "yr", "week", "cal", "calendar", "ym", "ymd", "dt"}
)
_YEAR_IN_VALUE = re.compile(r"(?<!\d)([1-9]\d\d\d)(?!\d)")


def _query_date_year(query: str) -> int | None:
    """The year named by a date-like query parameter; -1 if it has none."""
    found: int | None = None
    for part in query.split("&"):
        key, _, value = part.partition("=")
        key = key.lower()
        if key in _DATE_KEYS or key.endswith(("_date", "-date", ".date")):
            y = _YEAR_IN_VALUE.search(value)
            if y:
                return int(y.group(1))
            found = -1
    return found


def _calendar(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    m = _PATH_DATE.search(u.path)
    if m and m.group(2):
        year: int | None = int(m.group(1))
    elif u.query:
        year = _query_date_year(u.query)
        if year is None:
            return None
    else:
        return None
    assert year is not None
    if p.year is not None and year > 0:
        if year > p.year + p.years_ahead or year < p.year - p.years_back:
            return Verdict("calendar-far", DROP)
    return Verdict("calendar", DEMOTE)


def _query_params(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    if u.query and u.query.count("&") + 1 > p.max_query_params:
        n = sum(1 for part in u.query.split("&") if part)
        if n > p.max_query_params:
            return Verdict(f"query-params>{p.max_query_params}", DEMOTE)
    return None


_PAGE_KEYS = frozenset({"page", "p", "pg", "paged", "pagenum", "page_no", "offset", "start"})


def _deep_pagination(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    # "next page" links that never run out (faceted search, empty archives)
    if not u.query:
        return None
    for part in u.query.split("&"):
        key, _, value = part.partition("=")
        if key.lower() in _PAGE_KEYS and value.isdigit() and len(value) < 12:
            if int(value) > p.max_page:
                return Verdict(f"page>{p.max_page}", DEMOTE)
    return None


def _link_depth(u: UrlShape, p: TrapPolicy) -> Verdict | None:
    if u.depth > p.max_depth:
        return Verdict(f"depth>{p.max_depth}", DEMOTE)
    return None


Rule = Callable[[UrlShape, TrapPolicy], "Verdict | None"]

# Order matters: the first rule that fires names the trap. Drops come first
# so a URL that is both deep and repetitive is dropped, not merely demoted.
RULES: tuple[Rule, ...] = (
    _path_depth,
    _repeated_segments,
    _calendar,
    _query_params,
    _deep_pagination,
    _link_depth,
)


_DEFAULT = TrapPolicy()

# A query key that a rule reads (a date or a page number): only then does a
# query need the rules. Keys compare lower-cased, as the rules do.
_KEY_RULES = re.compile(
    "[?&](?:" + "|".join(re.escape(k) for k in sorted(_DATE_KEYS | _PAGE_KEYS))
    + r"|[^&=]*[_.\-]date)(?:=|&|$)", re.IGNORECASE)


def _clean(url: str, depth: int, p: TrapPolicy) -> bool:
    """True when no rule can fire: the common case, decided without the rules.

    Each test is a necessary condition of a rule (more '/' than segments
    allowed, a path ending in a digit, a segment seen twice, more '&' than
    parameters allowed, a date or page key), so a False only means "ask the
    rules". tests/parse/test_traps.py checks it against them.
    """
    if depth > p.max_depth:
        return False
    start = url.find("//")
    slash = url.find("/", start + 2 if start >= 0 else 0)
    if slash < 0:
        return False
    end = url.find("?", slash)
    if end < 0:
        end = len(url)
    elif end + 1 < len(url) and (url.count("&", end) >= p.max_query_params
                                 or _KEY_RULES.search(url, end)):
        return False
    last = url[end - 1]  # the path's: a calendar view ends in a digit, or a digit and '/'
    if last.isdigit() or (last == "/" and url[end - 2].isdigit()):
        return False
    n = url.count("/", slash, end)
    if n > p.max_path_segments:
        return False
    if n >= 3:
        segs = url[slash:end].split("/")
        if "" in segs:
            segs = [x for x in segs if x]
        if len(set(segs)) != len(segs):
            return False
    return True


def check(url: str, depth: int = 0, policy: TrapPolicy | None = None) -> Verdict | None:
    """The first trap rule ``url`` trips, with the action the policy gives it."""
    if policy is None:
        policy = _DEFAULT
    if policy.mode == "off" or _clean(url, depth, policy):
        return None
    u = shape(url, depth)
    for rule in RULES:
        v = rule(u, policy)
        if v is not None:
            if policy.mode == "demote" and v.action == DROP:
                return Verdict(v.reason, DEMOTE)
            return v
    return None
