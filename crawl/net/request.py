"""One HTTP exchange under hard limits: the part of a fetch that touches the wire.

Used for pages (:mod:`crawl.fetch`) and robots.txt (:mod:`crawl.robots.fetch`).
Everything that can go wrong on the network ends as a value here, never as
an exception: a failure kind (the fetch ``outcome``), an error text, and
whatever part of the response arrived (a truncated body is still archived).

Limits (DESIGN invariant 4), all configurable in :class:`Limits`:

* connect 10 s, total 30 s for the whole exchange (headers and body),
  enforced with a trio cancel scope, so a server that trickles bytes forever
  still ends on time;
* body 5 MB of *raw* bytes, streamed into a :class:`crawl.store.BodyBuffer`
  (bounded memory); the rest is never read and the capture is marked
  truncated;
* decoded size and ratio: the body is decompressed as it streams (gzip,
  deflate, br) only to count, in bounded pieces, so a compression bomb is
  stopped after at most ``max_decoded`` bytes of output ever existed;
* response headers: 100 KiB (:data:`crawl.net.http1.MAX_HEAD`), a protocol-error beyond.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import trio

from crawl.store import BodyBuffer, Bomb, Meter, http_block

from .backend import OriginPools, RefusedAddress
from .http1 import ConnectError, ConnectTimeout, Response, WireError, request_head


@dataclass(frozen=True)
class Limits:
    connect: float = 10.0
    total: float = 30.0
    max_body: int = 5_000_000
    max_decoded: int = 50_000_000
    max_ratio: float = 100.0  # decoded/raw, checked once 1 MiB has been decoded


@dataclass
class Exchange:
    """What one request produced. ``failure`` is None when a response arrived whole."""

    url: str
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    request: Any = None  # StatusAndHeaders for the WARC request record
    response: Any = None  # StatusAndHeaders for the WARC response record
    body: BodyBuffer | None = None
    truncated: str | None = None  # WARC-Truncated: length, time, disconnect
    failure: str | None = None  # an outcome: timeout, connect-error, protocol-error, ...
    error: str = ""
    skipped: bool = False  # body not read (content type not wanted)
    ip: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # perf_counter() when the answer ended as we received it: its last body byte
    # read, or, for a body not wanted, cut short or broken, the close of its
    # connection (the server is writing until then). A host's delay runs
    # from here (crawl/frontier/complete.py), not from when the result is stored.
    ended: float = 0.0
    decoded: bytes = b""  # first ``keep`` decoded bytes, when asked for
    _index: tuple[list[tuple[str, str]], dict[str, str]] | None = field(default=None, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        index = self._index
        if index is None or index[0] is not self.headers:  # built once per header list
            names: dict[str, str] = {}
            for k, v in self.headers:
                names.setdefault(k.lower(), v)
            index = self._index = (self.headers, names)
        return index[1].get(name.lower())

    def close(self) -> None:
        if self.body is not None:
            self.body.close()


def _response_block(resp: Response) -> Any:
    hdrs = []
    for k, v in resp.headers:
        name = k.decode("latin-1")
        if name.lower() == "transfer-encoding":
            name = "X-Crawl-Transfer-Encoding"  # the stored body is de-chunked (see store.py)
        hdrs.append((name, v.decode("latin-1")))
    status = f"HTTP/{resp.version} {resp.status} {resp.reason.decode('latin-1')}"
    return http_block(status.rstrip(), hdrs)


# What the wire (and the socket layer under it) raises for network trouble.
WIRE_ERRORS = (WireError, OSError)


def classify(exc: BaseException) -> tuple[str, str]:
    """Map a transport exception to (outcome, error text)."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, RefusedAddress):
        return "private-address", text
    if isinstance(exc, ConnectTimeout):
        return "timeout", f"connect timeout: {text}"
    if isinstance(exc, ConnectError):
        return ("dns-error" if text.startswith("dns: ") else "connect-error"), text
    return "protocol-error", f"{type(exc).__name__}: {text}"


# Anything a request line cannot carry as it is (spaces, controls, non-ASCII)
# or userinfo sends the URL through httpx's encoder instead of the fast path.
_NOT_WIRE_SAFE = re.compile(r"[^\x21-\x7e]|@")
_DEFAULT_PORT = {"http": 80, "https": 443}


class Target(NamedTuple):
    """Where a request goes and what its request line asks for."""

    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent: "/a/b?c"


def wire_url(url: str) -> tuple[Target, str]:
    """Where to send a GET for ``url``, and the Host header value.

    A crawled URL is already canonical ASCII, so a plain split does; anything
    else (IDN hosts, raw spaces, userinfo) is encoded by httpx's URL parser,
    as a browser would. Raises ValueError for a URL no request can be made of.
    """
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname
    if scheme in _DEFAULT_PORT and host and not _NOT_WIRE_SAFE.search(url):
        port = parts.port  # ValueError on a bad port
        target = url[len(scheme) + 3 + len(parts.netloc):].partition("#")[0] or "/"
        if target[0] == "?":
            target = "/" + target
        netloc = f"[{host}]" if ":" in host else host
        if port is None or port == _DEFAULT_PORT[scheme]:
            port = _DEFAULT_PORT[scheme]
        else:
            netloc = f"{netloc}:{port}"
        return Target(scheme, host, port, target), netloc
    import httpx  # only here: a crawled URL rarely needs it, and it costs 0.1 s to import

    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(str(exc)) from exc
    if u.scheme not in _DEFAULT_PORT or not u.host:
        raise ValueError(f"not an http(s) URL with a host: {url!r}")
    return (Target(u.scheme, u.raw_host.decode("ascii"), u.port or _DEFAULT_PORT[u.scheme],
                   u.raw_path.decode("ascii")), u.netloc.decode("ascii"))


async def exchange(
    transport: OriginPools,
    url: str,
    headers: list[tuple[str, str]],
    limits: Limits,
    *,
    want_body: Callable[[Exchange], bool] = lambda ex: True,
    max_body: int | None = None,
    keep: int = 0,
) -> Exchange:
    """GET ``url``; never raises for network trouble (see module docstring)."""
    ex = Exchange(url)
    t0 = time.perf_counter()
    cap = limits.max_body if max_body is None else max_body
    resp: Response | None = None
    try:
        try:
            wurl, netloc = wire_url(url)
        except ValueError as exc:
            ex.failure, ex.error = "invalid-url", f"cannot make a request of this URL: {exc}"
            return ex
        wire = [("Host", netloc), *headers]
        try:
            head = request_head(wurl.target, wire)
        except (ValueError, UnicodeEncodeError) as exc:
            ex.failure, ex.error = "invalid-url", f"cannot send this request: {exc}"
            return ex
        ex.request = http_block(f"GET {wurl.target} HTTP/1.1", wire)
        with trio.move_on_after(limits.total) as scope:
            try:
                resp = await transport.open(wurl.scheme, wurl.host, wurl.port, head, limits.connect)
                ex.timings["first_byte"] = time.perf_counter() - t0
                conn = resp._conn
                ex.ip = conn.ip
                if conn.requests == 1:  # this exchange dialled it
                    ex.timings["connect"] = conn.connect_time
                ex.status = resp.status
                ex.response = _response_block(resp)
                ex.headers = list(ex.response.headers)
                if not want_body(ex):
                    ex.skipped = True
                    return ex
                meter = Meter(ex.header("content-encoding") or "", limits.max_decoded,
                              limits.max_ratio, keep)
                body = ex.body = BodyBuffer(ex.response.headers_buff)
                async for chunk in resp:  # raw bytes: Content-Encoding intact
                    room = cap - body.length
                    if len(chunk) > room:
                        chunk = chunk[:room]
                        ex.truncated, ex.failure = "length", "too-large"
                        ex.error = f"body larger than {cap} bytes"
                    meter.feed(chunk)  # before storing: a bomb chunk is not kept
                    body.write(chunk)
                    if ex.truncated:
                        break
                ex.ended = time.perf_counter()  # the last body byte is in
                meter.finish()
                ex.decoded = meter.text()
                if meter.broken and not ex.failure:
                    ex.error = meter.broken
                elif meter.trailing and not ex.failure:
                    ex.error = f"{meter.trailing} bytes after the end of the {meter.kind} body, ignored"
            except Bomb as exc:
                ex.truncated, ex.failure, ex.error = "length", "too-large", str(exc)
            except WIRE_ERRORS as exc:
                ex.failure, ex.error = classify(exc)
                if ex.response is not None:
                    ex.truncated = "time" if ex.failure == "timeout" else "disconnect"
        if scope.cancelled_caught:
            ex.failure = "timeout"
            ex.error = f"no complete response within {limits.total:g} s"
            if ex.response is not None:
                ex.truncated = "time"
    finally:
        # An answer read to its end ends with its last byte: handing the connection
        # back to the pool is not part of it. One skipped, cut short or broken ends,
        # for the server, when we close the connection it is still writing to (a
        # delay counted from the headers of a skipped 5 MB PDF would start while the
        # server still sends it), so then the end is taken after the release.
        read_whole = bool(ex.ended) and not (ex.skipped or ex.truncated or ex.failure)
        if resp is not None:
            await transport.release(resp)
        if not read_whole:
            ex.ended = time.perf_counter()
        ex.timings["total"] = ex.ended - t0
    return ex
