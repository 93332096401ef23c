"""Why canonicalisation changed or refused a URL, in words for people.

The WHATWG parser answers only yes (with a new href) or no. For the
``error``/``detail`` of a reject record and for ``crawl canon --explain``,
these helpers look at the input again and name the part that made the
parse fail, or the changes the parse made. They are off the hot path: only
rejections and ``--explain`` call them. Part of :mod:`crawl.canon`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ada_url._ada_wrapper import lib

_SCHEME_RE = re.compile(r"[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")
_AUTHORITY_RE = re.compile(r"[/\\]*([^/\\?#]*)")
_DOT_SEGMENT_RE = re.compile(r"(^|/)(\.|%2e){1,2}(/|$)", re.IGNORECASE)


def refusal(text: str, base: str | None) -> tuple[str, str]:
    """``(reason, detail)`` for an input the WHATWG parser refused."""
    m = _SCHEME_RE.match(text)
    if m is None:
        if base is None:
            return "relative-without-base", "relative URL and no base to resolve it"
        raw = base.encode()
        if not lib.ada_can_parse(raw, len(raw)):
            return "invalid-base", f"base {base[:100]!r} is not a valid URL"
        return "invalid-url", "cannot be resolved against the base"
    scheme = m.group(1).lower()
    if scheme not in ("http", "https"):
        return "unsupported-scheme", f"scheme {scheme[:40]!r} is not http or https"
    authority = _AUTHORITY_RE.match(text, m.end()).group(1)  # type: ignore[union-attr]
    hostport = authority.rpartition("@")[2]
    _, colon, port = hostport.rpartition(":")
    if colon and "]" not in port and (not port.isascii() or not port.isdigit()
                                      or int(port) > 65535):
        return "invalid-port", f"port {port[:20]!r} is not a number up to 65535"
    return "invalid-host", f"host {hostport[:100]!r} is not a valid host name"


def parse_notes(url: str, base: str | None, host: str, port: str, is_ip: bool) -> list[str]:
    """What the WHATWG parse changed, from the input and the parsed host/port."""
    notes: list[str] = []
    try:
        s = urlsplit(url.strip())
        raw_host, raw_port = s.hostname or "", s.port
    except ValueError:  # urllib is stricter than WHATWG about ports and brackets
        return ["normalised by WHATWG parsing"]
    if not s.scheme:
        return [f"resolved against base {base}"]
    m = _SCHEME_RE.match(url)
    if m and m.group(1) != m.group(1).lower():
        notes.append("scheme lowercased")
    netloc_host = s.netloc.rpartition("@")[2].rpartition(":")[0] or s.netloc
    if not raw_host.isascii():
        notes.append("host converted to IDNA (punycode)")
    elif is_ip and host[0] != "[" and raw_host != host:
        notes.append("IPv4 address normalised")
    elif host[0] == "[" and raw_host != host.strip("[]"):
        notes.append("IPv6 address normalised")
    elif any(c.isupper() for c in netloc_host):
        notes.append("host lowercased")
    if raw_port is not None and not port:
        notes.append(f"default port {raw_port} dropped")
    if not s.path:
        notes.append("empty path became /")
    elif _DOT_SEGMENT_RE.search(s.path):
        notes.append("dot segments resolved")
    if not (s.path + s.query).isascii() or " " in url.strip():
        notes.append("characters percent-encoded")
    return notes or ["normalised by WHATWG parsing"]
