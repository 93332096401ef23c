"""Path normalisation and pattern matching for robots.txt rules (RFC 9309 2.2).

The matching half of the robots.txt support (google/robotstxt's
``RobotsMatchStrategy``): how a URL becomes the path rules see, how both
sides are brought to one percent-encoding, and how a pattern is compiled
into a matcher once so the per-URL cost is a ``startswith`` or a few
``str.find`` calls. No regular expressions run on untrusted patterns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from operator import methodcaller

_HEX = "0123456789ABCDEF"
_HEXSET = frozenset(b"0123456789abcdefABCDEF")
# RFC 3986 unreserved characters: their encoded and plain forms are the same.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Inside a query ":", "/", "?" and "@" delimit nothing, so "%3A" == ":" there
# (RFC 9309 section 2.2.2, figure 4, second row). In the path "%2F" != "/".
_QUERY_PLAIN = frozenset(b":/?@")
# Characters a URL never carries unencoded (RFC 3986 excludes them).
_ALWAYS_ENCODE = frozenset(b'"<>\\^`{|}')
# Anything outside plain printable ASCII, or one of "% * $" and the above.
_NEEDS_WORK = re.compile(r'[^\x21-\x7e]|[%*$"<>\\^`{|}]')


def _pct(b: int) -> str:
    return "%" + _HEX[b >> 4] + _HEX[b & 15]


def _canon(data: bytes, pattern: bool) -> str:
    out: list[str] = []
    in_query = False
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b == 0x25:  # "%"
            if i + 2 < n and data[i + 1] in _HEXSET and data[i + 2] in _HEXSET:
                v = int(data[i + 1 : i + 3], 16)
                if v in _UNRESERVED or (in_query and v in _QUERY_PLAIN):
                    out.append(chr(v))
                else:
                    out.append(_pct(v))
                i += 3
                continue
            out.append("%25")
        elif b == 0x2A and pattern:
            out.append("*")  # the wildcard; a literal "*" is "%2A"
        elif 0x21 <= b <= 0x7E and b not in _ALWAYS_ENCODE and b != 0x2A and b != 0x24:
            out.append(chr(b))
            if b == 0x3F:
                in_query = True
        else:
            out.append(_pct(b))
        i += 1
    return "".join(out)


def normalize(text: str, pattern: bool = False) -> str:
    """Bring a path (or a rule pattern) to one canonical spelling.

    RFC 9309 section 2.2.2 compares paths after percent-encoding octets
    outside US-ASCII and decoding encoded unreserved characters; we also
    upper-case hex digits, encode characters a URL may not carry plainly,
    and spell a literal "*" or "$" as "%2A" / "%24" (section 2.2.3), so
    both sides can be compared as plain text. With ``pattern`` a raw "*"
    stays the wildcard.
    """
    if text.isascii() and not _NEEDS_WORK.search(text):
        return text  # the common case: nothing to do
    try:
        data = text.encode("utf-8", "surrogateescape")  # raw bytes from parse()
    except UnicodeEncodeError:  # a lone surrogate in a caller's string
        data = text.encode("utf-8", "surrogatepass")
    return _canon(data, pattern)


def path_of(url: str) -> str:
    """The path, params and query of a URL, as robots.txt rules see it.

    A port of google/robotstxt's GetPathParamsQuery: the fragment is dropped,
    a missing path is "/", and a bare path or "?query" is accepted too.
    """
    start = 2 if url.startswith("//") else 0
    early = _find_any(url, start)
    proto = url.find("://", start)
    if proto < 0 or (early >= 0 and early < proto):
        proto = start
    else:
        proto += 3
    path_start = _find_any(url, proto)
    if path_start < 0:
        return "/"
    hash_at = url.find("#", start)
    if 0 <= hash_at < path_start:
        return "/"
    end = len(url) if hash_at < 0 else hash_at
    path = url[path_start:end]
    return path if path.startswith("/") else "/" + path


_DELIMS = re.compile(r"[/?;]")


def _find_any(s: str, start: int) -> int:
    m = _DELIMS.search(s, start)
    return m.start() if m else -1


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled allow/disallow rule."""

    allow: bool
    pattern: str  # as written in the file
    line: int | None
    priority: int  # octets of the normalised pattern (RFC 9309 section 2.2.2)
    match: Callable[[str], bool]
    rank: int  # priority * 2 + allow: the higher rank wins (Allow wins a tie)
    key: str | None  # the character after the leading "/", if literal (for indexing)

    @property
    def text(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern}"


def compile_rule(allow: bool, pattern: str, line: int | None) -> Rule | None:
    """Compile a pattern; None for an empty one (it matches nothing).

    "*" matches any run of characters and a final "$" anchors the end
    (section 2.2.3); "%2A" and "%24" are the literal characters. A pattern
    not starting with "/" or "*" gets a "/" in front, as lenient parsers do.
    The priority is the length of the normalised pattern in octets, so the
    same rule weighs the same however it was percent-encoded.
    """
    if not pattern:
        return None
    anchored = pattern.endswith("$")
    body = normalize(pattern[:-1] if anchored else pattern, pattern=True)
    if not body.startswith(("/", "*")):
        body = "/" + body
    priority = len(body) + anchored
    parts = body.split("*")
    if len(parts) > 1:
        # "**" is one "*"; an unanchored trailing "*" adds nothing to a prefix match.
        parts = [parts[0], *(p for p in parts[1:-1] if p), parts[-1]]
        if not anchored and parts[-1] == "":
            parts.pop()
    fn = _matcher(parts, anchored)
    key = body[1] if len(body) > 1 and body[0] == "/" and body[1] != "*" else None
    return Rule(allow, pattern, line, priority, fn, priority * 2 + allow, key)


def _matcher(parts: list[str], anchored: bool) -> Callable[[str], bool]:
    """The cheapest function that decides this pattern (the hot path)."""
    first = parts[0]
    if len(parts) == 1:
        return first.__eq__ if anchored else methodcaller("startswith", first)
    if len(parts) == 2:  # one "*": the common "/*.pdf$", "/*?sort="
        last = parts[1]
        if anchored:
            need = len(first) + len(last)
            return lambda p: len(p) >= need and p.startswith(first) and p.endswith(last)
        k = len(first)
        return lambda p: p.startswith(first) and p.find(last, k) >= 0
    return _glob(parts, anchored)


def _glob(parts: list[str], anchored: bool) -> Callable[[str], bool]:
    """Match literal parts separated by "*" in linear time.

    Not a regular expression: a hostile "a*a*a*...b" pattern would make a
    backtracking engine take exponential time. Placing each middle part at
    its leftmost occurrence is optimal for "*"-only patterns, so one
    ``str.find`` per part decides.
    """
    first, mids, last = parts[0], tuple(parts[1:-1]), parts[-1]

    def match(path: str) -> bool:
        if not path.startswith(first):
            return False
        pos = len(first)
        for seg in mids:
            at = path.find(seg, pos)
            if at < 0:
                return False
            pos = at + len(seg)
        if anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return path.find(last, pos) >= 0

    return match


def glob_match(pattern: str, text: str) -> bool:
    """Whole-string match of a "*" pattern (used for user-agent names)."""
    return _glob(pattern.split("*"), anchored=True)(text)
