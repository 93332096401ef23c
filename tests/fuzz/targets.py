"""Fuzz targets: one function per parser of untrusted bytes, each ``(data: bytes) -> None``.

A target feeds any bytes to the real parser and checks what must hold for
every input: only the parser's documented error comes out (anything else
escapes as a crash), and the result keeps the parser's own promises
(bounds, round trips, agreement between two ways to the same answer). An
``AssertionError`` is a found bug like any other exception.

The same functions run under atheris (coverage-guided, ``make fuzz``) and
under hypothesis (the fallback when atheris is missing), through
``tests/fuzz/fuzz.py``; each one's seed corpus is ``tests/fuzz/corpus/<name>``.
Several targets read a control byte or two from the front of the input
(which content coding, which WARC compression, how to split the bytes into
reads) so the fuzzer steers those choices like any other byte.
"""

from __future__ import annotations

import gzip
import itertools
import socket
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

import brotli
import trio

from crawl.canon import CanonError, Resolver, canonicalize
from crawl.core import CrawlError, records
from crawl.core.errors import BadRecord
from crawl.net import http1
from crawl.parse import links as linkmod
from crawl.robots import MAX_BYTES, parse
from crawl.robots.syntax import parse_text
from crawl.store import Bomb, Meter, read_response, scan
from crawl.store.codings import PIECE
from crawl.store.read import iter_records

# ---------------------------------------------------------------- robots.txt

_AGENTS = ("crawl", "crawl/0.1 (+https://example.test/bot)", "Mozilla/5.0 (compatible; FooBot/1.1)")


def robots(data: bytes) -> None:
    """crawl.robots: parse any bytes, then decide paths the file itself names."""
    r = parse(data)
    assert r.size == len(data)
    assert r.truncated == (len(data) > MAX_BYTES)
    raw = parse_text(data)
    paths = ["/", "/robots.txt", "/%2A?a=%3A", data.rsplit(b"\n", 1)[-1][:300].decode("utf-8", "replace")]
    rules = [rule for group in raw.groups[:4] for rule in group.rules[:4]]
    paths += [rule.value.rstrip("$").replace("*", "x") for rule in rules[:8]]
    agents = list(_AGENTS) + [a for a in r.agents()[:2]]
    for agent in agents:
        delay = r.crawl_delay(agent)
        assert delay is None or 0 <= delay < float("inf")
        rate = r.request_rate(agent)
        assert rate is None or (rate.requests > 0 and rate.seconds > 0)
        for path in paths:
            d = r.decide(path, agent)
            assert d.allowed == r.allowed(path, agent), (path, agent)
            if d.rule is None:
                assert d.allowed
            why = r.explain(path, agent)
            assert why["decision"] == ("allowed" if d.allowed else "disallowed")
            if d.rule is not None:  # the winner is among the matching rules, and the most specific
                matching = [m["rule"] for m in why["matching"]]
                assert d.rule in matching, (d, matching)
        assert r.allowed("/robots.txt", agent)


# ---------------------------------------------------------------- canonicaliser

def _canon_or_reason(url: str, base: str | None) -> object:
    try:
        return canonicalize(url, base)
    except CanonError as exc:
        assert exc.reason and "\n" not in str(exc)
        return exc.reason


def canon(data: bytes) -> None:
    """crawl.canon: every line a URL, alone and against the first line as a base.

    Checks idempotence (canonicalising a canonical URL changes nothing) and
    that the per-page :class:`Resolver` agrees with :func:`canonicalize`.
    """
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")[:64]
    base = lines[0]
    resolver = Resolver(base)
    for line in lines:
        for b in (None, base):
            got = _canon_or_reason(line, b)
            if isinstance(got, str):
                continue
            again = canonicalize(got.url)
            assert again == got, (line, b, got, again)
        expected = _canon_or_reason(line, base)
        try:
            fast: object = resolver(line)
        except CanonError as exc:
            fast = exc.reason
        assert fast == expected, (base, line, fast, expected)


# ---------------------------------------------------------------- records

_ACCEPTS = (None, records.URL_KINDS, frozenset({"fetch"}))


def record(data: bytes) -> None:
    """crawl.core.records.decode: a record or one BadRecord line, and records round-trip."""
    for accept in _ACCEPTS:
        try:
            rec = records.decode(data, accept, 7)
        except BadRecord as exc:
            assert exc.lineno == 7 and "\n" not in str(exc), str(exc)
            continue
        assert isinstance(rec, dict) and isinstance(rec.get("kind"), str)
        if accept is not None:
            assert rec["kind"] in accept
        line = records.encode(rec)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert records.decode(line[:-1], accept, 7) == rec


# ---------------------------------------------------------------- link extractor

_SOURCES = {"a", "area", "link", "iframe", "frame", "meta-refresh"}


def links(data: bytes) -> None:
    """crawl.parse.links: links in document order, and the stream counts what it skipped."""
    page = linkmod.extract(data)
    positions = [link.position for link in page.links]
    assert positions == sorted(set(positions)), positions
    for link in page.links:
        assert isinstance(link.href, str) and link.source in _SOURCES
    for link in page.links[:32]:
        assert len(linkmod.anchor_text(link.element, 80)) <= 80
    take = data[0] % 5 if data else 0
    _, stream = linkmod.scan(data)
    taken = list(itertools.islice(stream, take))
    assert len(taken) + stream.count_rest() == len(page.links)
    text = data[:5000].decode("utf-8", "replace")
    linkmod.refresh_target(text)
    linkmod.robots_directives([text], "crawl")


# ---------------------------------------------------------------- HTTP/1.1 reader

_HEAD = http1.request_head("/", [("Host", "fuzz.test")])


def _pieces(data: bytes) -> list[bytes]:
    """The response split into writes where the control byte says (0: one write)."""
    if not data:
        return []
    step, body = data[0], data[1:]
    if step == 0 or not body:
        return [body]
    return [body[i:i + step] for i in range(0, len(body), step)]


async def _serve(listener: socket.socket, pieces: list[bytes]) -> None:
    sock, _ = await trio.socket.from_stdlib_socket(listener).accept()
    with sock:
        got = b""
        while b"\r\n\r\n" not in got:  # read the request first: closing on unread bytes resets
            more = await sock.recv(65536)
            if not more:
                return
            got += more
        try:
            for piece in pieces:
                await sock.send(piece)
                await trio.sleep(0)
        except OSError:  # the client gave up first (a limit of its own): fine
            pass


async def _client(port: int, limit: int) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = http1.Connection(stream, ("http", "fuzz.test", port), "127.0.0.1", 0.0)
    try:
        resp = await conn.send(_HEAD)
        assert 0 <= resp.status < 1000 and not 100 <= resp.status < 200, resp.status
        got = 0
        async for chunk in resp:
            got += len(chunk)
            assert got <= limit, (got, limit)  # the body is never more than the server sent
        conn.finished(resp)
        if conn.keep:
            assert resp.complete
    except http1.WireError as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)
    finally:
        await conn.aclose()


def http(data: bytes) -> None:
    """crawl.net.http1: the bytes a server sends, over a real loopback TCP connection.

    The first byte sets how the server splits its writes. The exchange ends
    with a response or a WireError, never with anything else, and within
    the harness's per-input timeout.
    """
    pieces = _pieces(data)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    async def main() -> None:
        with trio.fail_after(20):  # a hang is a failure, not a stall of the whole run
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_serve, listener, pieces)
                await _client(port, len(data))

    try:
        trio.run(main)
    finally:
        listener.close()


# ---------------------------------------------------------------- content decoders

CODINGS = ("gzip", "deflate", "br", "x-gzip", "identity", "gzip, br", "br, gzip", "deflate, gzip",
           "gzip, gzip", "gzip, deflate, br, gzip", "gzip, gzip, gzip, gzip, gzip", "compress", "")
_STEPS = (1 << 16, 1, 7, 100, 4096, 1 << 20)
MAX_DECODED = 8 << 20


def _reference(kind: str, body: bytes) -> bytes | None:
    """The same body decoded by the standard library in one go (None: it refuses)."""
    try:
        if kind == "gzip":
            return gzip.decompress(body)
        if kind == "br":
            return brotli.decompress(body)
        if kind == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
    except (OSError, EOFError, zlib.error, brotli.error):
        return None
    return None


def codings(data: bytes) -> None:
    """crawl.store.codings.Meter: any bytes under any Content-Encoding end, bounded.

    Byte 0 picks the header (255: the header is the input up to its first
    newline), byte 1 the size of the pieces fed. Only :class:`Bomb` may
    come out; the decoded count and what is kept stay under their caps; a
    single gzip, deflate or br body the standard library also decodes comes
    out the same.
    """
    if len(data) < 2:
        data += b"\0\0"
    sel, step, body = data[0], _STEPS[data[1] % len(_STEPS)], data[2:]
    if sel == 255:
        head, _, body = body.partition(b"\n")
        header = head.decode("latin-1")
    else:
        header = CODINGS[sel % len(CODINGS)]
    keep = 1 << 16
    meter = Meter(header, MAX_DECODED, 200.0, keep=keep)
    bombed = False
    try:
        for i in range(0, len(body), step):
            meter.feed(body[i:i + step])
        meter.finish()
    except Bomb:
        bombed = True
    assert meter.raw == len(body)
    assert meter.decoded <= MAX_DECODED + max(PIECE, step)
    text = meter.text()
    assert len(text) <= keep
    if not bombed and not meter.broken and meter.trailing == 0 and meter.kind in ("gzip", "deflate", "br"):
        ref = _reference(meter.kind, body)
        if ref is not None:
            assert text == ref[:keep], (header, len(text), len(ref))
            assert meter.decoded == len(ref)


# ---------------------------------------------------------------- WARC reader

_SUFFIXES = (".warc", ".warc.gz", ".warc.zst")
_WARC_DIR = Path(tempfile.mkdtemp(prefix="crawl-fuzz-warc-"))
MAX_BODY = 1 << 20


def _read(name: str, off: int, length: int) -> None:
    try:
        got = read_response(_WARC_DIR, {"file": name, "offset": off, "length": length}, max_body=MAX_BODY)
    except CrawlError as exc:
        assert str(exc), repr(exc)
        return
    assert len(got.body) <= MAX_BODY
    assert isinstance(got.status, int) and isinstance(got.url, str)


def warc(data: bytes) -> None:
    """crawl.store.read: a WARC file of any bytes, scanned and read back by pointer.

    Byte 0 picks the file's compression (.warc, .warc.gz, .warc.zst).
    :func:`scan` never raises; every record it walks can be read by its
    pointer, and any pointer gives a response or a CrawlError.
    """
    if not data:
        data = b"\0"
    name = "fuzz" + _SUFFIXES[data[0] % len(_SUFFIXES)]
    path = _WARC_DIR / name
    path.write_bytes(data[1:])
    res = scan(path)
    assert res.records >= 0
    assert res.torn_at is None or 0 <= res.torn_at <= len(data) - 1
    pointers = [(0, len(data) - 1)]
    try:
        for off, length, _rec in itertools.islice(iter_records(path), 64):
            pointers.append((off, length))
    except Exception:  # noqa: BLE001 -- scan has reported it; the pointers so far still count
        pass
    for off, length in pointers:
        _read(name, off, length)


# ---------------------------------------------------------------- the registry

TARGETS: dict[str, Callable[[bytes], None]] = {
    "robots": robots,
    "canon": canon,
    "record": record,
    "links": links,
    "http": http,
    "codings": codings,
    "warc": warc,
}
