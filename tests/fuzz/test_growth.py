"""Growth: doubling a parser's input may at most about double its work.

For each parser of untrusted bytes, and each shape that makes parsers go
quadratic (many groups, rules and agents in a robots.txt; long runs of
percent escapes; many links, deep nesting; many chunks, headers and
informational responses; many gzip members; many tiny WARC records...), the
same shape is built at n and at 2n and the work of both is counted (no
clock: :mod:`work` counts Python-level steps and bytes allocated, the same
on every run). Linear work doubles; a quadratic path quadruples and fails
here. Each shape must also really scale (the doubled input costs clearly
more), so a cap that stops early cannot make a test pass on nothing.

What these counts cannot see is work inside one C call that allocates
nothing through Python: libxml2's own loops (its attribute list and its
stack of open elements are walked from one end, n*n on hostile pages) and
regex backtracking. libxml2 is bounded before it starts by the parse
stage's budget (crawl/parse/budget.py, with its own tests); the shapes
below measure our Python on the same markup (links at every level of deep
nesting, links with many attributes).
"""

from __future__ import annotations

import gzip
import io
import random
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brotli
import pytest
import trio
from work import CRAWL, WARCIO, Work, measure

from crawl.canon import Resolver, canonicalize
from crawl.core import records
from crawl.core.errors import BadRecord
from crawl.core.io import Report, StreamSource
from crawl.net import http1
from crawl.parse import links
from crawl.robots import parse as parse_robots
from crawl.store import Meter, read_response, scan

RATIO = 2.5  # "about double": n log n passes, quadratic (about 4) fails
SLACK = 64 << 10  # bytes: a fixed allocation (a first buffer) is not growth


@dataclass(frozen=True)
class Shape:
    name: str
    make: Callable[[int], Any]  # n -> the input
    run: Callable[[Any], object]  # the parser over it
    n: int
    include: tuple[str, ...] = (CRAWL,)


def _check(shape: Shape) -> tuple[Work, Work]:
    shape.run(shape.make(max(shape.n // 8, 1)))  # warm caches and lazy imports first
    small, big = shape.make(shape.n), shape.make(2 * shape.n)
    w1 = measure(lambda: shape.run(small), shape.include)
    w2 = measure(lambda: shape.run(big), shape.include)
    assert w2.ops > 1.5 * w1.ops or w2.alloc > 1.5 * w1.alloc, \
        f"{shape.name}: the shape does not scale ({w1} -> {w2}): nothing was measured"
    assert w2.ops <= RATIO * w1.ops, f"{shape.name}: steps grew {w2.ops / w1.ops:.2f}x for 2x input ({w1} -> {w2})"
    assert w2.alloc <= RATIO * w1.alloc + SLACK, \
        f"{shape.name}: allocation grew {w2.alloc / max(w1.alloc, 1):.2f}x for 2x input ({w1} -> {w2})"
    return w1, w2


def _params(shapes: list[Shape], xfail: dict[str, str] | None = None) -> list[Any]:
    xfail = xfail or {}
    return [pytest.param(s, id=s.name, marks=[pytest.mark.xfail(strict=True, reason=xfail[s.name])]
                         if s.name in xfail else []) for s in shapes]


# ---------------------------------------------------------------- robots.txt

def _robots(body: str) -> None:
    r = parse_robots(body.encode())
    for agent in ("crawl", "Mozilla/5.0 (compatible; b7bot/1.0)"):
        r.allowed("/p1xq", agent)
        r.crawl_delay(agent)


ROBOTS = [
    Shape("many-groups", lambda n: "".join(f"User-agent: b{i}\nDisallow: /p{i}\n" for i in range(n)), _robots, 400),
    Shape("many-rules", lambda n: "User-agent: *\n" + "".join(f"Disallow: /p{i}*q$\n" for i in range(n)),
          _robots, 150),
    Shape("many-unkeyed-rules", lambda n: "User-agent: *\n" + "".join(f"Allow: */{i}*x\n" for i in range(n)),
          _robots, 150),
    Shape("many-agents", lambda n: "".join(f"User-agent: b*{i}bot\n" for i in range(n)) + "Disallow: /p\n",
          _robots, 400),
    Shape("agents-then-delays", lambda n: "".join(f"User-agent: b{i}\n" for i in range(n))
          + "".join(f"Crawl-delay: {i}\n" for i in range(n)), _robots, 100),
    Shape("agents-then-rates", lambda n: "".join(f"User-agent: b{i}\n" for i in range(n))
          + "".join(f"Request-rate: {i + 1}/10s\n" for i in range(n)), _robots, 100),
    Shape("percent-escapes", lambda n: "User-agent: *\nDisallow: /" + "%41%e2%82%ac%zz%" * n + "\n",
          _robots, 150),
    Shape("long-wildcard", lambda n: "User-agent: *\nDisallow: /" + "a*" * n + "b$\n", _robots, 1000),
    Shape("one-long-line", lambda n: "Disallow " + "x" * n, _robots, 50_000),
    Shape("many-sitemaps", lambda n: "".join(f"Sitemap: http://a.test/s{i}.xml\n" for i in range(n)), _robots, 500),
    Shape("bare-cr-lines", lambda n: "User-agent: *\r" + "Disallow: /a\r\r" * n, _robots, 250),
]


@pytest.mark.parametrize("shape", _params(ROBOTS))
def test_robots_parser_grows_linearly(shape: Shape) -> None:
    _check(shape)


def test_robots_delays_after_many_agents_keep_first_values() -> None:
    """The first Crawl-delay and Request-rate after a run of user-agent lines apply
    to every agent of the run; later lines change nothing (first value wins)."""
    body = "".join(f"User-agent: b{i}\n" for i in range(50)) + "Crawl-delay: 3\nCrawl-delay: 9\n" \
        "Request-rate: 1/5s\nRequest-rate: 7/1s\nUser-agent: late\nCrawl-delay: 4\nDisallow: /x\n"
    r = parse_robots(body.encode())
    assert [r.crawl_delay(f"b{i}") for i in (0, 25, 49)] == [3.0, 3.0, 3.0]
    assert r.request_rate("b7") is not None and r.request_rate("b7").requests == 1
    assert r.crawl_delay("late") == 4.0
    assert not r.allowed("/x", "b3") and not r.allowed("/x", "late")


# ---------------------------------------------------------------- canonicaliser

def _canon_all(urls: list[str]) -> None:
    for u in urls:
        try:
            canonicalize(u)
        except ValueError:
            pass


def _resolve_all(hrefs: list[str]) -> None:
    r = Resolver("http://a.test/dir/page.html?x=1")
    for h in hrefs:
        r(h)


CANON = [
    Shape("percent-run", lambda n: ["http://a.test/" + "%7e%41%zz%4" * n], _canon_all, 100),
    Shape("lower-hex-run", lambda n: ["http://a.test/?q=" + "%c3%a4%3d" * n], _canon_all, 150),
    Shape("many-params", lambda n: ["http://a.test/p?" + "&".join(f"k{n - i}=v&utm_x{i}=1" for i in range(n))],
          _canon_all, 60),
    Shape("many-links", lambda n: [f"/p/{i}?b=1&a={i}" if i % 3 else f"q{i}.html#f" for i in range(n)],
          _resolve_all, 500),
]


@pytest.mark.parametrize("shape", _params(CANON))
def test_canonicaliser_grows_linearly(shape: Shape) -> None:
    _check(shape)


# ---------------------------------------------------------------- records

def _decode(line: bytes) -> None:
    try:
        records.decode(line, None, 1)
    except BadRecord:
        pass


def _stream(data: bytes) -> None:
    src = StreamSource(io.BytesIO(data), None, Report("growth"))
    for _ in src.batches(1000):
        pass


RECORDS = [
    Shape("long-plain-url", lambda n: b"http://a.test/" + b"a" * n, _decode, 50_000),
    Shape("many-keys", lambda n: b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(n)) + b',"url":"u"}',
          _decode, 2000),
    Shape("deep-nesting", lambda n: b"[" * n + b"]" * n, _decode, 400),
    Shape("many-lines", lambda n: b'{"url":"http://a.test/"}\n' * n, _stream, 2000),
    Shape("one-long-line-many-reads", lambda n: b'{"url":"http://a.test/' + b"a" * (n << 16) + b'"}\n',
          _stream, 32),
]


@pytest.mark.parametrize("shape", _params(RECORDS))
def test_record_decoder_grows_linearly(shape: Shape) -> None:
    _check(shape)


# ---------------------------------------------------------------- link extractor

def _extract(doc: bytes) -> None:
    page = links.extract(doc)
    for link in page.links:
        links.anchor_text(link.element, 100)


LINKS = [
    Shape("many-links", lambda n: b"<html><body>" + b"".join(b"<a href=/p%d>t %d</a>" % (i, i) for i in range(n)),
          _extract, 1000),
    Shape("deep-nesting", lambda n: b"<html><body>" + b"<div><a href=/p%d>t</a>" * n, _extract, 400),
    Shape("many-attributes", lambda n: b"<html><body>" + b"".join(
        b"<a href=/p%d " % i + b" ".join(b"a%d=v" % k for k in range(12)) + b">t</a>" for i in range(n)),
        _extract, 500),
    Shape("nested-anchors", lambda n: b"<html><body>" + b"<a href=/x><span>" * n + b"y", _extract, 150),
    Shape("after-end", lambda n: b"<html><body></body></html>" + b"<a href=/p%d>t</a>" * n, _extract, 500),
    Shape("many-metas", lambda n: b"<head>" + b"<meta name=robots content='noindex, crawl: nofollow, x'>" * n
          + b"<meta http-equiv=refresh content='0; url=/r'>" * n, _extract, 300),
]


@pytest.mark.parametrize("shape", _params(LINKS))
def test_link_extractor_grows_linearly(shape: Shape) -> None:
    _check(shape)


# ---------------------------------------------------------------- HTTP/1.1 reader

def _http(data: bytes) -> None:
    """One exchange over a socket pair, the response written in full before the
    first read: reads are then as large as they can be, on every run."""
    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    a.sendall(data)
    a.shutdown(socket.SHUT_WR)

    async def main() -> None:
        conn = http1.Connection(trio.SocketStream(trio.socket.from_stdlib_socket(b)), ("http", "t", 80),
                                "127.0.0.1", 0.0)
        try:
            resp = await conn.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            async for _ in resp:
                pass
        except http1.WireError:
            pass
        await conn.aclose()

    try:
        trio.run(main)
    finally:
        a.close()


class _Dribble(trio.abc.Stream):
    """A peer that answers with ``data`` ``step`` bytes per read (one by default, as a
    server that dribbles its head sends it): a socket cannot be made to split reads
    so exactly, on every run, and how a loaded machine splits them is not growth."""

    def __init__(self, data: bytes, step: int = 1) -> None:
        self.data, self.pos, self.step = data, 0, step

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        pass

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        self.pos += self.step  # no checkpoint: nothing to wait for, and no scheduler work per read
        return self.data[self.pos - self.step:self.pos]

    async def aclose(self) -> None:
        pass


def _http_dribbled(data: bytes, step: int = 1) -> None:
    async def main() -> None:
        conn = http1.Connection(_Dribble(data, step), ("http", "t", 80), "127.0.0.1", 0.0)
        try:
            resp = await conn.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            async for _ in resp:
                pass
        except http1.WireError:
            pass

    trio.run(main)


_OK_HEAD = b"HTTP/1.1 200 OK\r\n"
HTTP = [
    Shape("many-chunks", lambda n: _OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * n + b"0\r\n\r\n",
          _http, 4000),
    Shape("many-headers", lambda n: _OK_HEAD + b"".join(b"X-H%d: v\r\n" % i for i in range(n))
          + b"Content-Length: 0\r\n\r\n", _http, 1000),
    Shape("many-informational", lambda n: b"HTTP/1.1 100 Continue\r\nX: y\r\n\r\n" * n + _OK_HEAD
          + b"Content-Length: 0\r\n\r\n", _http, 1000),
    Shape("many-trailers", lambda n: _OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
          + b"".join(b"T%d: v\r\n" % i for i in range(n)) + b"\r\n", _http, 1000),
    # reads of 4 KiB each: over a socket pair the kernel split a 200 KB body into a
    # handful of reads whose count varied with the load (191 -> 272 ops: "no growth")
    Shape("long-body", lambda n: _OK_HEAD + b"\r\n" + b"x" * (n << 10),
          lambda data: _http_dribbled(data, 4096), 800),
    Shape("head-a-byte-per-read", lambda n: b"HTTP/1.1 200 " + b"r" * n + b"\r\nX-Long: " + b"v" * n
          + b"\r\nContent-Length: 0\r\n\r\n", _http_dribbled, 2500),
]


@pytest.mark.parametrize("shape", _params(HTTP))
def test_http_reader_grows_linearly(shape: Shape) -> None:
    _check(shape)


# ---------------------------------------------------------------- content decoders

def _meter(encoding: str, step: int = 1 << 16) -> Callable[[bytes], None]:
    def run(body: bytes) -> None:
        m = Meter(encoding, 1 << 30, 1e9, keep=1 << 16)
        for i in range(0, len(body), step):
            m.feed(body[i:i + step])
        m.finish()
    return run


def _members(n: int) -> bytes:
    """n gzip members of 200 random bytes each (they do not compress): the input grows by members."""
    return b"".join(gzip.compress(random.Random(i).randbytes(200), mtime=0) for i in range(n))


def _deflate(n: int) -> bytes:
    return zlib.compress(b"text " * (n << 10))


CODINGS = [
    Shape("gzip-members", _members, _meter("gzip"), 100),
    Shape("gzip-members-one-feed", _members, _meter("gzip", 1 << 30), 400),
    Shape("gzip-members-small-feeds", _members, _meter("gzip", 100), 200),
    Shape("deflate-long", _deflate, _meter("deflate"), 200),
    Shape("br-long", lambda n: brotli.compress(b"text " * (n << 10)), _meter("br"), 200),
    Shape("gzip-under-br", lambda n: brotli.compress(_members(n)), _meter("gzip, br"), 200),
    Shape("trailing-junk", lambda n: gzip.compress(b"x") + b"junk" * (n << 8), _meter("gzip", 512), 200),
    Shape("identity", lambda n: b"x" * (n << 10), _meter("identity"), 2000),
]


@pytest.mark.parametrize("shape", _params(CODINGS))
def test_content_decoders_grow_linearly(shape: Shape) -> None:
    _check(shape)


# ---------------------------------------------------------------- WARC reader

def _warc_record(i: int, kind: str = "resource", block: bytes = b"x") -> bytes:
    return (b"WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%d>\r\n"
            b"WARC-Target-URI: http://a.test/%d\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n"
            % (kind.encode(), i, i, len(block), block))


def _response_record(headers: int, chunks: int) -> bytes:
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n"
            + b"".join(b"X-H%d: v\r\n" % i for i in range(headers)) + b"\r\n"
            + b"1\r\nx\r\n" * chunks + b"0\r\n\r\n")
    return (b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
            b"WARC-Target-URI: http://a.test/\r\nWARC-Date: 2026-01-01T00:00:00Z\r\n"
            b"Content-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n"
            % (len(http), http))


class _Warc:
    """A shape's bytes written to a WARC file; the run scans it, or reads its first record back."""

    def __init__(self, folder: Path, suffix: str, read: bool = False) -> None:
        self.folder, self.suffix, self.read = folder, suffix, read

    def make(self, data: bytes) -> Path:
        path = self.folder / f"{len(data)}{self.suffix}"
        path.write_bytes(data)
        return path

    def run(self, path: Path) -> None:
        if self.read:
            read_response(path.parent, {"file": path.name, "offset": 0, "length": path.stat().st_size})
        else:
            scan(path)


def _warc_shapes(folder: Path) -> list[Shape]:
    plain, gz, zst = _Warc(folder, ".warc"), _Warc(folder, ".warc.gz"), _Warc(folder, ".warc.zst")
    reader = _Warc(folder, ".warc", read=True)
    import zstandard

    zc = zstandard.ZstdCompressor()
    inc = (CRAWL, WARCIO)
    return [
        Shape("tiny-records", lambda n: plain.make(b"".join(_warc_record(i) for i in range(n))), plain.run, 100, inc),
        Shape("tiny-records-gzip", lambda n: gz.make(b"".join(gzip.compress(_warc_record(i), mtime=0)
                                                                for i in range(n))), gz.run, 100, inc),
        Shape("random-records-gzip", lambda n: gz.make(b"".join(
            gzip.compress(_warc_record(i, block=random.Random(i).randbytes(4000)), mtime=0) for i in range(n))),
            gz.run, 80, inc),
        Shape("tiny-records-zstd", lambda n: zst.make(b"".join(zc.compress(_warc_record(i)) for i in range(n))),
              zst.run, 100, inc),
        Shape("many-http-headers", lambda n: reader.make(_response_record(n, 1)), reader.run, 500, inc),
        Shape("many-chunks", lambda n: reader.make(_response_record(1, n)), reader.run, 400, inc),
    ]


_WARC_NAMES = ["tiny-records", "tiny-records-gzip", "random-records-gzip", "tiny-records-zstd", "many-http-headers", "many-chunks"]


@pytest.mark.parametrize("name", _WARC_NAMES)
def test_warc_reader_grows_linearly(name: str, tmp_path: Path) -> None:
    (shape,) = [s for s in _warc_shapes(tmp_path) if s.name == name]
    _check(shape)
