"""robots.txt text -> groups of rules (RFC 9309 section 2), leniently.

The parsing half of the robots.txt support, kept apart from matching as
google/robotstxt keeps ``ParseRobotsTxt`` apart from ``RobotsMatcher``:
this module turns bytes into plain data (groups, rules, sitemaps) and
never raises on content; :mod:`crawl.robots` compiles and matches it.

Leniency follows Google's reference parser (the de facto standard the RFC
was written from): a byte order mark is skipped, CR, LF and CRLF all end a
line, a missing colon is tolerated when the line is exactly ``key value``,
common misspellings of the directives are accepted, and invalid UTF-8 is
kept as the raw bytes (percent-encoded when matched).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

# RFC 9309 section 2.5: "the parsing limit MUST be at least 500 kibibytes".
MAX_BYTES = 500 * 1024

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
# RFC 9309 section 2.2.1: the product token is letters, "_" and "-".
_TOKEN = re.compile(r"[^\s/]*")

# Directive spellings, matched case-insensitively as prefixes of the key
# (as google/robotstxt does, so "Disallowed:" still disallows).
_USER_AGENT = ("user-agent", "useragent", "user agent")
_ALLOW = ("allow",)
_DISALLOW = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")
_SITEMAP = ("sitemap", "site-map")
_CRAWL_DELAY = ("crawl-delay", "crawl_delay", "crawldelay", "crawl delay")
_REQUEST_RATE = ("request-rate", "request_rate", "requestrate", "request rate")
_ALL_KEYS = _USER_AGENT + _DISALLOW + _ALLOW + _SITEMAP + _CRAWL_DELAY + _REQUEST_RATE


class RawRule(NamedTuple):
    """One allow/disallow line as written, with its 1-based line number."""

    allow: bool
    value: str
    line: int


class RequestRate(NamedTuple):
    """A Request-rate line: ``requests`` per ``seconds``, maybe only between
    ``start_time`` and ``end_time`` ("HH:MM", UTC)."""

    requests: int
    seconds: float
    start_time: str | None = None
    end_time: str | None = None


@dataclass(slots=True)
class RawGroup:
    """A group (RFC 9309 section 2.1): user-agent lines, then their rules.

    ``agents`` holds lowercase product tokens; ``"*"`` is the wildcard.
    """

    agents: list[str] = field(default_factory=list)
    agent_lines: list[str] = field(default_factory=list)
    rules: list[RawRule] = field(default_factory=list)
    # Crawl-delay and Request-rate are not part of RFC 9309: they apply to
    # the user-agent lines just above them (first value wins per agent).
    delays: dict[str, float] = field(default_factory=dict)
    rates: dict[str, RequestRate] = field(default_factory=dict)
    line: int = 0


@dataclass(slots=True)
class Parsed:
    groups: list[RawGroup]
    sitemaps: list[str]
    truncated: bool
    size: int


def to_bytes(body: bytes | str) -> bytes:
    """The body as bytes; a str keeps any smuggled raw bytes (surrogates)."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    try:
        return body.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return body.encode("utf-8", "replace")


def _strip_bom(data: bytes) -> bytes:
    # google/robotstxt skips a BOM, even a truncated prefix of one.
    for bom in (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"):
        if data.startswith(bom):
            return data[len(bom):]
    return data


def split_lines(body: bytes | str, limit: int = MAX_BYTES) -> tuple[list[str], bool, int]:
    """Decode, truncate at ``limit`` bytes and split into lines.

    Returns (lines, truncated, size). When the body is cut, the partial last
    line is dropped: half a rule could widen what an Allow allows.
    """
    data = to_bytes(body)
    size = len(data)
    truncated = size > limit
    if truncated:
        data = data[:limit]
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: cut + 1] if cut >= 0 else b""
    data = _strip_bom(data)
    text = data.decode("utf-8", "surrogateescape")
    return _LINE_SPLIT.split(text), truncated, size


def key_value(line: str) -> tuple[str, str] | None:
    """Split one line into (lowercase key, value), or None if it has none."""
    hash_at = line.find("#")
    if hash_at >= 0:
        line = line[:hash_at]
    line = line.strip()
    if not line:
        return None
    sep = line.find(":")
    if sep < 0:
        # A missing colon is tolerated after a known directive ("user agent
        # foo") or in a line of exactly two words ("disallow /x").
        lower = line.lower()
        for name in _ALL_KEYS:
            if lower.startswith(name) and line[len(name) : len(name) + 1].isspace():
                return name, line[len(name) :].strip()
        parts = line.split()
        if len(parts) != 2:
            return None
        return parts[0].lower(), parts[1]
    key = line[:sep].strip().lower()
    if not key:
        return None
    return key, line[sep + 1 :].strip()


_KINDS = (("user-agent", _USER_AGENT), ("disallow", _DISALLOW), ("allow", _ALLOW),
          ("sitemap", _SITEMAP), ("crawl-delay", _CRAWL_DELAY), ("request-rate", _REQUEST_RATE))


@functools.lru_cache(maxsize=1024)
def directive(key: str) -> str | None:
    """The directive a (lowercase) key spells, or None for an unknown one.

    Keys are matched as prefixes, so "disallowed" is "disallow"; "disallow"
    is tried before "allow" for the same reason.
    """
    for name, spellings in _KINDS:
        if key.startswith(spellings):
            return name
    return None


def agent_token(value: str) -> str:
    """The product token a user-agent value names ("*" for the wildcard).

    RFC 9309 section 2.2.1 matches groups on the product token, compared
    case-insensitively: "Googlebot/2.1 (+http://...)" names "googlebot".
    The RFC's token is letters, "_" and "-"; real files also use digits and
    non-ASCII letters ("1bot", "Jävla-Foobot"), so the token here runs up
    to the first white space or "/", which keeps such names distinct
    instead of cutting "Rule1Bot" and "Rule2Bot" down to the same "rule".
    """
    value = value.strip()
    if value.startswith("*") and (len(value) == 1 or value[1].isspace()):
        return "*"
    m = _TOKEN.match(value)
    return m.group(0).lower() if m else ""


_COMPATIBLE = re.compile(r"\(compatible;\s*([^;/\s)]+)", re.IGNORECASE)


def agent_tokens(agent: str) -> list[str]:
    """Candidate product tokens of a crawler's User-Agent, best first.

    The first product ("crawl" in "crawl/0.1 (+https://...)"), then the one
    named after "compatible;" ("Mozilla/5.0 (compatible; FooBot/1.1)").
    """
    first = agent_token(agent)
    tokens = [first] if first else []
    for m in _COMPATIBLE.finditer(agent):
        tok = m.group(1).lower()
        if tok not in tokens:
            tokens.append(tok)
    return tokens


def parse_delay(value: str) -> float | None:
    try:
        delay = float(value.strip().rstrip("sS"))
    except ValueError:
        return None
    if delay != delay or delay < 0 or delay == float("inf"):
        return None
    return delay


_RATE = re.compile(
    r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)(?:\s*([smhd])(?![a-z]))?(?:\s+(\d\d):?(\d\d)\s*-\s*(\d\d):?(\d\d))?",
    re.IGNORECASE,
)
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_rate(value: str) -> RequestRate | None:
    """"1/10s", "100/15m", "10/60", "1/10s 1820-1940" (requests/period [window])."""
    m = _RATE.match(value)
    if not m:
        return None
    n, secs = int(m.group(1)), float(m.group(2)) * _UNIT[(m.group(3) or "").lower()]
    if n <= 0 or secs <= 0:
        return None
    start = end = None
    if m.group(4):
        start, end = f"{m.group(4)}:{m.group(5)}", f"{m.group(6)}:{m.group(7)}"
    return RequestRate(n, secs, start, end)


def parse_text(body: bytes | str, limit: int = MAX_BYTES) -> Parsed:
    """Group the lines of a robots.txt (RFC 9309 section 2.1).

    A group is one or more user-agent lines followed by rules. Only an
    allow or disallow line ends the run of user-agent lines, so an unknown
    line between two user-agent lines does not split the group (section
    2.2.4). Rules before the first user-agent line belong to no group and
    are ignored; sitemap lines belong to the file, not a group.
    """
    lines, truncated, size = split_lines(body, limit)
    groups: list[RawGroup] = []
    sitemaps: list[str] = []
    current: RawGroup | None = None
    in_agents = False
    run: list[str] = []  # the latest run of user-agent lines
    run_closed = False  # an extension line came after that run
    # Whether the run has had its Crawl-delay / Request-rate: the first one sets every
    # agent of the run (first value wins), so later ones would only repeat that walk,
    # and n agents followed by n delay lines cost n*n steps (a hostile file of 500 KiB:
    # half a minute of one fetcher's time).
    run_delay = run_rate = False
    for lineno, raw in enumerate(lines, 1):
        kv = key_value(raw)
        if kv is None:
            continue
        key, value = kv
        kind = directive(key)
        if kind == "user-agent":
            if current is None or not in_agents:
                current = RawGroup(line=lineno)
                groups.append(current)
                in_agents = True
                run, run_closed = [], False
                run_delay = run_rate = False
            if run_closed:
                run, run_closed = [], False
                run_delay = run_rate = False
            run.append(agent_token(value))
            current.agents.append(run[-1])
            current.agent_lines.append(value)
        elif kind == "disallow" or kind == "allow":
            if current is None:
                continue
            in_agents = False
            current.rules.append(RawRule(kind == "allow", value, lineno))
        elif kind == "sitemap":
            if value:
                sitemaps.append(value)
        elif kind is not None and current is not None:
            # Crawl-delay, Request-rate: not in RFC 9309. They never end a
            # group (section 2.2.4); they attach to the latest user-agent run.
            run_closed = True
            if kind == "crawl-delay":
                delay = None if run_delay else parse_delay(value)
                if delay is not None:
                    run_delay = True
                    for a in run:
                        current.delays.setdefault(a, delay)
            elif not run_rate:
                rate = parse_rate(value)
                if rate is not None:
                    run_rate = True
                    for a in run:
                        current.rates.setdefault(a, rate)
    return Parsed(groups, sitemaps, truncated, size)
