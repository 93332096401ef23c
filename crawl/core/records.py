"""The records that cross stage boundaries: one JSON object per line.

Every record is a plain ``dict`` with ``kind`` and ``v`` (schema version).
Plain dicts, not classes, because the rule that matters most is that *fields
are additive*: a stage reads the keys it owns, adds its own, and passes every
other key through untouched. A dict does that for free and costs nothing to
encode with orjson (measured against msgspec in scripts/bench_records.py).

Kinds (``v`` = 1); fields marked * are required:

``url``     a URL to consider for crawling.
            url*, priority (0 high .. 9 low, default 1), depth (0 for seeds),
            due (unix seconds, earliest fetch), parent, reason, fp (the
            canonical URL's XXH3-64 as 16 hex digits), surt, canon_v, hops
            (redirects in a row that led here; absent means 0).
            ``crawl recrawl`` emits reason ping / hint / recrawl with etag,
            last_modified (for a conditional GET), rate, importance.
``link``    a URL discovered on a page (same fields as ``url``, plus
            position, rel, anchor, trap). Accepted wherever ``url`` is.
            A redirect's target carries the redirected URL's hops + 1;
            every other link starts again at 0 (no ``hops`` field).
            ``crawl parse`` also sets source (a, area, link, iframe, frame,
            meta-refresh, redirect, sitemap, sitemap-index), host, canon_v,
            and lastmod, changefreq, sitemap_priority (0.0 .. 1.0) for
            sitemap entries.
``lease``   a URL handed out by the frontier for one fetch.
            lease*, url*, host*, attempt*, deadline* (unix seconds), plus the
            url record's fields.
``fetch``   the outcome of one fetch attempt.
            url*, outcome*, host, lease, ip, status, retry_after, bytes,
            timings {dns, connect, first_byte, total} (seconds), content_type,
            location (redirects), etag, last_modified, digest, warc {file,
            offset, length}, fetched_at, ended_at (unix seconds: the last
            answer's last byte read, or its error; a host's delay runs from
            it), truncated, error, crawl_delay.
            ``crawl dedupe`` adds simhash, duplicate_of, distance.
``reject``  an input that could not become a URL: input*, error*.
``event``   one line of the crawl log: ts*, event*, url, plus details.
``stats``   a command's summary (also written to stderr / --stats FILE).

A plain text line (not starting with ``{``) is read as ``{"kind": "url",
"url": <line>}`` wherever a URL record is expected, so ``cat seeds.txt |
crawl seen`` works.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from .errors import BadRecord

VERSION = 1
_SPACE = re.compile(r"\s")  # same answer as str.isspace per character, in C

Record = dict[str, Any]

URL_KINDS = frozenset({"url", "link"})
KINDS = frozenset({"url", "link", "lease", "fetch", "reject", "event", "stats"})

# Every outcome a fetch can have. Failures are data, never exceptions.
OUTCOMES = (
    "ok",
    "not-modified",
    "redirect",
    "http-error",
    "robots-disallowed",
    "timeout",
    "connect-error",
    "dns-error",
    "too-large",
    "skipped-content-type",
    "private-address",
    "invalid-url",
    "protocol-error",
    "deferred",  # the lease was spent on robots.txt; the URL goes back, no failure counted
    # New outcomes go at the end: the frontier stores an outcome as its index here.
    "redirect-limit",  # a redirect after MAX_REDIRECTS in a row: recorded, not followed
    "robots-unreachable",  # robots.txt answered 5xx or timed out: the URL waits for a re-check
)

# Redirects followed in a row (DESIGN invariant 4, "redirect cap"). The count
# rides in the records (``hops``), so it holds across hosts and across the
# separate commands as well as in ``crawl run``.
MAX_REDIRECTS = 5

_REQUIRED: dict[str, tuple[str, ...]] = {
    "url": ("url",),
    "link": ("url",),
    "lease": ("lease", "url", "host", "attempt", "deadline"),
    "fetch": ("url", "outcome"),
    "reject": ("input", "error"),
    "event": ("ts", "event"),
    "stats": (),
}


def make(kind: str, **fields: Any) -> Record:
    """Build a record of ``kind`` with the current schema version."""
    rec: Record = {"kind": kind, "v": VERSION}
    rec.update(fields)
    return rec


def derive(parent: Record, kind: str, **fields: Any) -> Record:
    """A new record that keeps every field of ``parent`` it does not replace.

    This is how a stage passes through what it does not understand.
    """
    rec = dict(parent)
    rec["kind"] = kind
    rec["v"] = VERSION
    rec.update(fields)
    return rec


def check(rec: Any, accept: frozenset[str] | None, lineno: int = 0) -> Record:
    """Validate one decoded record; raise BadRecord with a reason otherwise."""
    if not isinstance(rec, dict):
        raise BadRecord(lineno, f"expected a JSON object, got {type(rec).__name__}")
    kind = rec.get("kind")
    if kind is None and "url" in rec:
        # A bare {"url": ...} is a URL record: be lenient with hand-made input.
        rec["kind"] = kind = "url"
    if not isinstance(kind, str):
        raise BadRecord(lineno, 'missing "kind" field')
    if accept is not None and kind not in accept:
        want = ", ".join(sorted(accept))
        raise BadRecord(lineno, f'record kind "{kind}" not accepted here (expected {want})')
    for field in _REQUIRED.get(kind, ()):
        if field not in rec:
            raise BadRecord(lineno, f'{kind} record has no "{field}" field')
    if kind in URL_KINDS or kind == "lease":
        if not isinstance(rec["url"], str) or not rec["url"]:
            raise BadRecord(lineno, '"url" must be a non-empty string')
    return rec


def decode(line: bytes, accept: frozenset[str] | None, lineno: int = 0) -> Record:
    """Decode one input line (without its newline) into a checked record.

    A plain text line becomes a ``url`` record when URL records are accepted.
    """
    stripped = line.strip()
    if not stripped:
        raise BadRecord(lineno, "empty line")
    if stripped[:1] not in (b"{", b"[", b'"'):
        if accept is None or "url" in accept:
            try:
                text = stripped.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRecord(lineno, "plain URL line is not valid UTF-8") from None
            if _SPACE.search(text):
                raise BadRecord(lineno, "plain URL line contains white space")
            return {"kind": "url", "v": VERSION, "url": text}
        raise BadRecord(lineno, "not a JSON object (a plain URL is not accepted here)")
    try:
        obj = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        # orjson's own text says "line 1": of this one line, which read as the input's line 1
        raise BadRecord(lineno, f"invalid JSON: {exc.msg} (at character {exc.pos + 1})") from None
    return check(obj, accept, lineno)


def encode(rec: Record) -> bytes:
    """One record as a compact JSON line, newline included."""
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


def encode_many(recs: Iterable[Record]) -> bytes:
    return b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in recs)
