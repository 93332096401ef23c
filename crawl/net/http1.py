"""HTTP/1.1 on one connection: a request head out, a response in, parsed by llhttp.

Why not h11 (through httpcore): a polite crawl of thousands of hosts spends
its CPU per request, and h11's pure-Python state machine plus httpcore's
per-read timeout scopes were about 15 % of ``crawl run``'s CPU. llhttp (the
node.js parser, bound by httptools) does the framing in C: Content-Length,
chunked coding, keep-alive rules, informational responses. What is left
here is what a crawler needs and a general client does not:

* one request at a time per connection (a polite crawler never pipelines);
* response headers capped (:data:`MAX_HEAD`), or the server is told off as
  a protocol error, not buffered without end;
* the body handed out as raw bytes, Content-Encoding intact (the WARC keeps
  the payload as sent; :mod:`crawl.net.request` meters decompression);
* a body framed "until the server closes" ends cleanly at EOF, and a body
  cut short of its Content-Length or last chunk is a protocol error, so the
  capture is marked truncated;
* a connection is reused only when its last response ended exactly, the
  server allowed keep-alive and nothing arrived after it.

Time limits are the caller's: :func:`crawl.net.request.exchange` wraps the whole
exchange in one cancel scope, which is cheaper than a timeout per read.
"""

from __future__ import annotations

import re
import time

import httptools
import trio

MAX_HEAD = 100 << 10  # response status line and headers, bytes
_READ = 64 << 10
_BAD_HEADER = re.compile(r"[\r\n\0]")


class WireError(Exception):
    """Network trouble on one exchange; :func:`crawl.net.request.classify` names the outcome."""


class ConnectError(WireError):
    pass


class ConnectTimeout(ConnectError):
    pass


class NetworkError(WireError):
    """The connection broke while sending or reading."""


class ProtocolError(WireError):
    """The server's bytes are not HTTP/1.1 (or break a limit of ours)."""


class StaleConnection(NetworkError):
    """A kept-alive connection was closed by the server before any response byte:
    the request never reached it and can be sent again on a new connection."""


def request_head(target: str, headers: list[tuple[str, str]]) -> bytes:
    """``GET target HTTP/1.1`` and the header lines, as sent.

    Raises ValueError for a header value that would split the head (a line
    break from a server's ETag or an operator's user agent must not forge a
    header of its own).
    """
    lines = [f"GET {target} HTTP/1.1\r\n"]
    for k, v in headers:
        if _BAD_HEADER.search(k) or _BAD_HEADER.search(v):
            raise ValueError(f"header {k!r} contains a line break or NUL")
        lines.append(f"{k}: {v}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


class Response:
    """One response: status, reason and headers once :meth:`Connection.send` returns,
    then the body from ``async for chunk in response``.

    It is also the parser's callback object (httptools calls ``on_*``).
    """

    __slots__ = ("status", "reason", "version", "headers", "_conn", "_chunks", "_head_done",
                 "_done", "_extra", "_until_close", "_keep_alive", "_parser", "_got_body", "_quiet",
                 "_mixed")

    def __init__(self, conn: Connection) -> None:
        self.status = 0
        self.reason = b""
        self.version = "1.1"
        self.headers: list[tuple[bytes, bytes]] = []
        self._conn = conn
        self._chunks: list[bytes] = []
        self._head_done = False
        self._done = False
        self._extra = False  # bytes after the end of this response
        self._until_close = False
        self._keep_alive = False
        self._got_body = False  # a body byte came out of the last read
        self._quiet = 0  # bytes read since the last body byte: chunk framing, trailers
        self._mixed = False  # Content-Length beside Transfer-Encoding: read, never reused
        self._parser = httptools.HttpResponseParser(self)
        # Read what browsers read: bare LF line ends, folded or control-character header
        # values, a Content-Length beside chunked coding (the chunks win), HTTP/1.2.
        # "Dangerous" for a proxy, which could be fooled into splitting one message
        # two ways; a crawler only reads. Keep-alive stays strict: any doubt closes.
        self._parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_chunked_length=True, lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True, lenient_optional_crlf_after_chunk=True,
            lenient_version=True)

    # -- parser callbacks
    def on_message_begin(self) -> None:
        if self._done:
            self._extra = True

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._head_done:  # trailers (after the last chunk) are read past, not kept
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._done:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # informational (100 Continue, 103 Early Hints): the real one follows
            self.headers, self.reason = [], b""
            return
        self.status = status
        self.version = self._parser.get_http_version()
        self._head_done = True
        length = coded = False
        last = b""
        for k, v in self.headers:
            lk = k.lower()
            if lk == b"content-length":
                length = True
            elif lk == b"transfer-encoding":
                coded, last = True, v
        # As llhttp frames it (RFC 9112 6.3): chunked only when it is the last coding; any
        # other Transfer-Encoding runs to the close, whatever Content-Length says
        chunked = last.rpartition(b",")[2].strip().lower() == b"chunked"
        self._until_close = not chunked and (coded or not length) and status not in (204, 304)
        self._mixed = length and coded  # RFC 9112 6.3: maybe smuggling; the server framed it some way

    def on_body(self, body: bytes) -> None:
        if not self._head_done:  # RFC 9110 15.2: a 1xx ends with its head (llhttp reads a Content-Length)
            raise ProtocolError("an informational (1xx) response with a body")
        if not self._done:
            self._chunks.append(body)
            self._got_body = True

    def on_message_complete(self) -> None:
        if self._head_done and not self._done:
            self._done = True
            # read now: the parser resets after
            self._keep_alive = self._parser.should_keep_alive() and not self._mixed

    # -- reading
    def _feed(self, data: bytes | bytearray) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            if self._done:  # a 101 after a whole response is junk after it, like any other
                self._extra = True
                return
            raise ProtocolError("the server switched protocols unasked") from exc
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, ProtocolError):  # raised by a callback of ours
                raise exc.__context__ from None
            if self._done:  # junk after a whole response: the response stands, the connection goes
                self._extra = True
                return
            raise ProtocolError(f"malformed response: {exc}") from exc

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        """The raw body (transfer coding removed, content coding kept), piece by piece."""
        while True:
            if self._chunks:
                chunks, self._chunks = self._chunks, []
                for c in chunks:
                    yield c
            if self._done:
                return
            data = await self._conn.receive()
            if not data:
                if self._until_close:
                    self._done = True
                    self._conn.keep = False
                    return
                raise ProtocolError("peer closed connection without sending complete message body")
            self._got_body = False
            self._feed(data)
            if self._got_body or self._done:
                self._quiet = 0
            else:  # trailers are buffered by the parser like a head, and capped like one
                self._quiet += len(data)
                if self._quiet > MAX_HEAD:
                    raise ProtocolError(f"chunk framing or trailers too large: over {MAX_HEAD} bytes "
                                        "without a body byte")

    @property
    def complete(self) -> bool:
        return self._done and not self._extra


def _tls_holds_bytes(stream: trio.abc.Stream) -> bool:
    """Whether a TLS stream already read bytes from its socket that nobody has received
    (a record after the response's last one, or decrypted bytes not yet handed out): the
    socket is then not readable, yet the connection is not clean. trio keeps both in
    private attributes; without them, assume it does."""
    try:
        return bool(stream._incoming.pending or stream._ssl_object.pending())  # type: ignore[attr-defined]
    except AttributeError:
        return True


class Connection:
    """One TCP or TLS stream to an origin and the address it went to."""

    __slots__ = ("stream", "origin", "ip", "connect_time", "keep", "idle_since", "requests")

    def __init__(self, stream: trio.abc.Stream, origin: tuple[str, str, int], ip: str,
                 connect_time: float) -> None:
        self.stream = stream
        self.origin = origin  # (scheme, host, port)
        self.ip = ip
        self.connect_time = connect_time
        self.keep = True
        self.idle_since = time.monotonic()
        self.requests = 0  # after the first, a failure before any response byte means the server had closed it

    async def receive(self) -> bytes | bytearray:
        try:
            return await self.stream.receive_some(_READ)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise NetworkError(f"read failed: {exc}") from exc

    async def send(self, head: bytes) -> Response:
        """Send a request head; return once the response's status and headers are in."""
        reused = self.requests > 0
        self.requests += 1
        self.keep = False  # until this response has ended cleanly
        try:
            await self.stream.send_all(head)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            if reused:
                raise StaleConnection(f"kept-alive connection closed: {exc}") from exc
            raise NetworkError(f"write failed: {exc}") from exc
        resp = Response(self)
        seen = 0
        # The parser is fed whole lines of the head: llhttp hands a status reason or a
        # header value that arrives in pieces to httptools, which joins the pieces by
        # concatenation, so a head dribbled a byte per read cost n*n copying (a 100 KiB
        # head: 5 GB). Reads that end no line are held until one does.
        held = bytearray()
        while not resp._head_done:
            try:
                data = await self.receive()
            except NetworkError as exc:
                if reused and seen == 0:
                    raise StaleConnection(str(exc)) from exc
                raise
            if not data:
                if reused and seen == 0:
                    raise StaleConnection("kept-alive connection closed by the server")
                if held:
                    resp._feed(bytes(held))  # a malformed head says so
                raise ProtocolError("server disconnected without sending a complete response head")
            seen += len(data)
            held += data
            if b"\n" in data or seen > MAX_HEAD:
                resp._feed(bytes(held))
                held.clear()
            if not resp._head_done and seen > MAX_HEAD:
                raise ProtocolError(f"response head too large: over {MAX_HEAD} bytes without its end")
        return resp

    def finished(self, resp: Response) -> None:
        """Keep the connection for the next request only if ``resp`` ended exactly
        and the server allows it."""
        self.keep = resp.complete and resp._keep_alive
        self.idle_since = time.monotonic()

    def usable(self, expiry: float) -> bool:
        """Kept alive, not idle longer than ``expiry``, and the server has not closed
        (or written to) it since: any readable byte now means EOF or junk."""
        if not self.keep or time.monotonic() - self.idle_since > expiry:
            return False
        stream = self.stream
        inner = getattr(stream, "transport_stream", stream)
        if inner is not stream and _tls_holds_bytes(stream):
            return False
        sock = getattr(inner, "socket", None)
        return sock is None or not sock.is_readable()

    async def aclose(self) -> None:
        self.keep = False
        with trio.CancelScope(shield=True):
            try:
                await trio.aclose_forcefully(self.stream)
            except (trio.BrokenResourceError, OSError):
                pass
