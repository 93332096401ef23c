"""A small, fast HTTP/1.1 server for the test web (asyncio protocols, keep-alive).

One process listens on a few loopback addresses and one port and dispatches
on the Host header. Ordinary answers are written straight from
``data_received`` (no task, no await), which is what lets one core serve
thousands of pages a second; only misbehaving answers (slow, hanging,
endless, reset) get a task of their own.

Every request is logged (see :class:`RequestLog`) with monotonic nanosecond
times taken from ``time.monotonic_ns`` (CLOCK_MONOTONIC, shared by all
processes on the machine), so a crawler's own timings can be compared. The
end of an answer is stamped when its last byte went to the kernel, never
after: an end taken after the write (or after a drip's last pause) lagged by
however long the process was descheduled, and the audit then saw a polite
client ask again "too soon" (``make demo``: 0.940 s of a 1 s delay).
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import signal
import socket
import struct
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson

from crawl.core import CrawlError

from . import content
from .router import ADMIN_HOST, Clock, Request, Response, Router

MAX_HEAD = 64 * 1024
_REASONS = {s.value: s.phrase for s in HTTPStatus}
_conn_ids = itertools.count(1)


class RequestLog:
    """Buffered NDJSON, one line per request; flushed every ~100 ms and on exit.

    ``start`` is when the server had the whole request head; ``end`` when
    the answer's last byte left the server: stamped just before the write that
    handed it to the kernel whole, or when asyncio's writer drained the last
    buffered byte of a large answer, or when the connection ended first (the
    client hung up, a reset, a hang closed). A record waits in the connection
    until its end is known, so a client cannot have read an answer's last
    byte before its ``end``.

    Fields: start, end (monotonic ns), conn (connection id), addr (the
    loopback address the connection came in on), host, method, path (the
    request target), status (0 if no status line was sent), bytes (body
    bytes written), ua, outcome (ok, reset, hang, client-closed, bad-request),
    and retry_after (only on answers that carried a Retry-After header: the
    seconds after ``end`` the server asked the client to wait, an HTTP-date
    converted against the clock at the moment the answer was logged), so an
    audit can hold the client to what the server actually asked.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "ab")  # noqa: SIM115 - closed in close()
        self.buffer: list[dict[str, Any]] = []
        self.count = 0

    def add(self, rec: dict[str, Any]) -> None:
        self.buffer.append(rec)
        self.count += 1

    def flush(self) -> None:
        if self.buffer:
            out = b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in self.buffer)
            self.buffer.clear()
            self.file.write(out)
            self.file.flush()

    def close(self) -> None:
        self.flush()
        self.file.close()


class _Date:
    """The Date header, formatted at most once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.value = time.strftime("Date: %a, %d %b %Y %H:%M:%S GMT\r\n", time.gmtime(now)).encode()
        return self.value


class Server:
    """Shared state of all connections: the router, the log, the clock."""

    def __init__(self, router: Router, log: RequestLog, clock: Clock) -> None:
        self.router = router
        self.log = log
        self.clock = clock
        self.date = _Date()
        self.tasks: set[asyncio.Task[None]] = set()

    def admin(self, req: Request) -> Response:
        """``admin.testweb.test``: /clock?set=T|advance=S, /flush; never logged."""
        path, _, query = req.target.partition("?")
        args = {k: v[0] for k, v in parse_qs(query).items()}
        if path == "/clock":
            try:
                if "set" in args:
                    self.clock.set(float(args["set"]))
                if "advance" in args:
                    self.clock.advance(float(args["advance"]))
            except ValueError:
                return Response(400, [("Content-Type", "text/plain")], b"bad number\n")
            body = orjson.dumps({"now": self.clock.now(), "simulated": self.clock.simulated})
            return Response(200, [("Content-Type", "application/json")], body + b"\n")
        if path == "/flush":
            self.log.flush()
            return Response(200, [("Content-Type", "application/json")],
                            orjson.dumps({"requests": self.log.count}) + b"\n")
        return Response(404, [("Content-Type", "text/plain")], b"admin: /clock or /flush\n")


def head_bytes(resp: Response, date: bytes, length: int | None, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Unknown')}\r\n"]
    lines += [f"{k}: {v}\r\n" for k, v in resp.headers]
    if length is not None:
        lines.append(f"Content-Length: {length}\r\n")
    if close:
        lines.append("Connection: close\r\n")
    return "".join(lines).encode("latin-1") + b"Server: crawl-testweb\r\n" + date + b"\r\n"


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.busy = False
        self.closed = False
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.id = next(_conn_ids)
        self.addr = transport.get_extra_info("sockname")[0]
        # Paused whenever a byte is left in asyncio's buffer, resumed when the
        # last one went to the kernel: that moment is the end of a large answer.
        transport.set_write_buffer_limits(high=0)
        self.sent = 0  # monotonic ns: the current answer's last byte left (0: not yet)
        self.lost = 0  # monotonic ns: the connection ended
        self.unsent: list[dict[str, Any]] = []  # log records whose last bytes are still buffered

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = time.monotonic_ns()
        self.closed = True
        self.writable.set()
        self._settle(self.lost, "client-closed")

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.sent = time.monotonic_ns()
        self.writable.set()
        self._settle(self.sent)

    def _out(self, data: bytes) -> None:
        """Write, stamping ``sent`` before the syscall: a client cannot read a byte sooner."""
        at = time.monotonic_ns()
        self.transport.write(data)
        self.sent = 0 if self.transport.get_write_buffer_size() else at  # else resume_writing stamps it

    def _settle(self, end: int, outcome: str | None = None) -> None:
        """Log the answers that waited for their last byte to leave."""
        for rec in self.unsent:
            rec["end"] = end
            if outcome:
                rec["outcome"] = outcome
            self.server.log.add(rec)
        self.unsent.clear()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self.process()

    def _log(self, start: int, req: Request, status: int, nbytes: int, outcome: str = "ok",
             resp: Response | None = None, end: int = 0) -> None:
        """Log one answer; its ``end`` is ``end``, else when its last byte left (see RequestLog)."""
        end = end or self.sent
        if self.lost and (not end or self.lost < end):
            end = self.lost  # the connection was gone before the rest was written
        rec = {
            "start": start, "end": end, "conn": self.id, "addr": self.addr,
            "host": req.host, "method": req.method, "path": req.target, "status": status,
            "bytes": nbytes, "ua": req.headers.get("user-agent", ""), "outcome": outcome,
        }
        if resp is not None and status != 200:  # the fast path (a 200 page) never looks
            wait = retry_after_of(resp.headers)
            if wait is not None:
                rec["retry_after"] = wait
        if not self.lost and self.transport.get_write_buffer_size():
            self.unsent.append(rec)  # end: when the buffer drains (resume_writing) or the connection ends
            return
        rec["end"] = end or time.monotonic_ns()
        self.server.log.add(rec)

    def process(self) -> None:
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    self._bad(431)
                return
            start = time.monotonic_ns()
            self.sent = 0
            req, keep_alive, body_len = _parse(self.buf[:end])
            if len(self.buf) < end + 4 + body_len:
                return
            self.buf = self.buf[end + 4 + body_len:]
            if req is None:
                self._bad(400)
                return
            if req.host == ADMIN_HOST:
                self.send(self.server.admin(req), keep_alive)
                continue
            resp = self.server.router.handle(req)
            if resp.action is None:
                n = self.send(resp, keep_alive, head_only=req.method == "HEAD")
                self._log(start, req, resp.status, n, resp=resp)
                if not keep_alive:
                    return
            else:
                self.busy = True
                task = asyncio.get_running_loop().create_task(self.act(start, req, resp, keep_alive))
                self.server.tasks.add(task)
                task.add_done_callback(self.server.tasks.discard)

    def _bad(self, status: int) -> None:
        self.send(Response(status, [("Content-Type", "text/plain")], b"bad request\n"), False)
        self.server.log.add({"start": time.monotonic_ns(), "end": time.monotonic_ns(), "conn": self.id,
                             "addr": self.addr, "host": "", "method": "", "path": "", "status": status,
                             "bytes": 0, "ua": "", "outcome": "bad-request"})
        self.closed = True

    def send(self, resp: Response, keep_alive: bool, head_only: bool = False) -> int:
        body = b"" if head_only or resp.status == 304 else resp.body
        length = None if resp.status == 304 else len(resp.body)
        if keep_alive:
            if resp.head is None:  # cached on the (possibly shared) response: the fast path
                resp.head = head_bytes(resp, b"", length, False)[:-2]
            head = resp.head + self.server.date.get() + b"\r\n"
        else:
            head = head_bytes(resp, self.server.date.get(), length, True)
        self._out(head + body)
        if not keep_alive:
            self.transport.close()
            self.closed = True
        return len(body)

    async def _write(self, data: bytes) -> bool:
        """Write with backpressure; yield to other connections every time."""
        if self.closed:
            return False
        self._out(data)
        await self.writable.wait()  # the whole buffer drained (high-water mark 0)
        await asyncio.sleep(0)
        return not self.closed

    def _rst(self) -> None:
        """Close with a TCP RST (SO_LINGER 0) instead of an orderly FIN."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sent = time.monotonic_ns()  # the answer ends with the reset
        self.transport.abort()
        self.closed = True

    async def act(self, start: int, req: Request, resp: Response, keep_alive: bool) -> None:
        """Carry out a response that takes time or misbehaves on purpose."""
        date = self.server.date.get()
        status, sent, outcome = resp.status, 0, "ok"
        try:
            if req.method == "HEAD" and resp.action in ("huge", "endless", "bomb"):
                await self._head_only(resp, date, keep_alive)
            elif resp.action == "hang":
                await self._wait_closed(resp.delay)
                outcome = "hang"
                self.sent = time.monotonic_ns()  # nothing was sent: it ends when we hang up
                self.transport.close()
                self.closed = True
            elif resp.action == "reset-head":
                await self._write(b"HTTP/1.1 200 OK\r\nContent-Ty")
                await asyncio.sleep(0.01)
                self._rst()
                status, outcome = 0, "reset"
            elif resp.action == "reset-body":
                await self._write(head_bytes(resp, date, len(resp.body), False))
                half = resp.body[: len(resp.body) // 3]
                await self._write(half)
                sent = len(half)
                await asyncio.sleep(0.01)
                self._rst()
                outcome = "reset"
            elif resp.action == "endless":
                resp.headers.append(("Transfer-Encoding", "chunked"))
                await self._write(head_bytes(resp, date, None, True))
                chunk = _filler(16384)
                frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
                while sent < self.server.router.web.config.endless_cap and await self._write(frame):
                    sent += len(chunk)
                outcome = "ok" if not self.closed else "client-closed"
                self.transport.close()
                self.closed = True
            elif resp.action == "huge":
                total = self.server.router.web.config.huge_bytes
                await self._write(head_bytes(resp, date, total, not keep_alive))
                chunk = _filler(65536)
                while sent < total:
                    piece = chunk[: total - sent]
                    if not await self._write(piece):
                        outcome = "client-closed"
                        break
                    sent += len(piece)
            elif resp.action == "bomb":
                size = self.server.router.web.config.bomb_bytes
                body = await asyncio.get_running_loop().run_in_executor(None, content.gzip_bomb, size)
                await self._write(head_bytes(resp, date, len(body), not keep_alive))
                for pos in range(0, len(body), 65536):
                    if not await self._write(body[pos: pos + 65536]):
                        outcome = "client-closed"
                        break
                    sent += len(body[pos: pos + 65536])
                if not keep_alive:
                    self.transport.close()
                    self.closed = True
            elif resp.action == "drip":
                await asyncio.sleep(resp.delay)
                body = b"" if req.method == "HEAD" or resp.status == 304 else resp.body
                length = None if resp.status == 304 else len(resp.body)
                await self._write(head_bytes(resp, date, length, not keep_alive))
                drip = self.server.router.web.config.drip
                for pos in range(0, len(body), 1024):
                    if not await self._write(body[pos: pos + 1024]):
                        outcome = "client-closed"
                        break
                    sent += len(body[pos: pos + 1024])
                    if sent < len(body):  # no pause after the last byte: the answer is logged
                        await asyncio.sleep(drip)  # before its client can ask for the log
                if not keep_alive:
                    self.transport.close()
                    self.closed = True
        finally:
            self._log(start, req, status, sent, outcome, resp=resp if status else None)
            self.busy = False
        if not self.closed:
            self.process()

    async def _head_only(self, resp: Response, date: bytes, keep_alive: bool) -> None:
        """HEAD of a big body: the headers it would have, no body (RFC 9110 9.3.2)."""
        cfg = self.server.router.web.config
        if resp.action == "huge":
            length: int | None = cfg.huge_bytes
        elif resp.action == "bomb":
            loop = asyncio.get_running_loop()
            length = len(await loop.run_in_executor(None, content.gzip_bomb, cfg.bomb_bytes))
        else:
            length = None
            resp = Response(resp.status, [*resp.headers, ("Transfer-Encoding", "chunked")])
        await self._write(head_bytes(resp, date, length, not keep_alive))
        if not keep_alive:
            self.transport.close()
            self.closed = True

    async def _wait_closed(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def retry_after_of(headers: list[tuple[str, str]]) -> float | None:
    """The wait a Retry-After header asks for, in seconds from now (RFC 9110 10.2.3).

    Delay-seconds as they are; an HTTP-date against the wall clock now, which
    is when the answer went out, so an audit can add it to the log's ``end``.
    """
    for name, value in headers:
        if name.lower() == "retry-after":
            text = value.strip()
            if text.isdigit():
                return float(text)
            try:
                when = email.utils.parsedate_to_datetime(text).timestamp()
            except (TypeError, ValueError, IndexError):
                return None
            return round(max(0.0, when - time.time()), 6)
    return None


def _filler(size: int) -> bytes:
    unit = b"<p>" + b"all work and no play makes a dull page " * 4 + b"</p>\n"
    return (unit * (size // len(unit) + 1))[:size]


def _parse(head: bytes) -> tuple[Request | None, bool, int]:
    """(request, keep-alive, body length) from a request head; request None if malformed."""
    try:
        text = head.decode("latin-1")
        line, *rest = text.split("\r\n")
        method, target, version = line.split(" ")
    except ValueError:
        return None, False, 0
    headers: dict[str, str] = {}
    for h in rest:
        name, sep, value = h.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    conn = headers.get("connection", "").lower()
    keep_alive = "close" not in conn if version == "HTTP/1.1" else "keep-alive" in conn
    try:
        body_len = int(headers.get("content-length", "0"))
    except ValueError:
        return None, False, 0
    host = headers.get("host", "").lower()
    if host.startswith("["):
        host = host.split("]")[0] + "]"
    else:
        host = host.rsplit(":", 1)[0] if ":" in host else host
    if target.startswith("http://"):  # absolute-form (RFC 9112 3.2.2)
        rest_url = target[7:]
        authority, slash, path = rest_url.partition("/")
        host = authority.rsplit(":", 1)[0].lower()
        target = slash + path if slash else "/"
    return Request(method, target, host, headers), keep_alive, max(0, body_len)


async def listen(
    addresses: list[str], port: int, factory: Callable[[], asyncio.Protocol]
) -> tuple[list[asyncio.base_events.Server], int]:
    """Bind every address on one port (an ephemeral one found on the first)."""
    loop = asyncio.get_running_loop()
    for _attempt in range(20):
        servers: list[asyncio.base_events.Server] = []
        chosen = port
        try:
            for addr in addresses:
                srv = await loop.create_server(factory, addr, chosen, reuse_address=True, backlog=1024)
                servers.append(srv)
                if chosen == 0:
                    chosen = srv.sockets[0].getsockname()[1]
            return servers, chosen
        except OSError as exc:
            for srv in servers:
                srv.close()
            if port != 0:
                raise CrawlError(f"cannot listen on port {port} of {', '.join(addresses[:3])}...: "
                                 f"{exc.strerror}; choose another --port, or 0 for any free one") from exc
    raise CrawlError("could not find one free port on every test web address; try again or use --port")


async def run(
    server_factory: Callable[[int], Server],
    addresses: list[str],
    port: int,
    ready: Callable[[Server, int], None],
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (or ``stop``); the log is flushed on the way out."""
    holder: dict[str, Server] = {}
    servers, port = await listen(addresses, port, lambda: Connection(holder["server"]))
    server = holder["server"] = server_factory(port)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass

    async def flusher() -> None:
        while True:
            await asyncio.sleep(0.1)
            server.log.flush()

    flush_task = loop.create_task(flusher())
    web = server.router.web
    if any(web.host(i).behaviour == "gzip-bomb" for i in range(min(web.config.hosts, 64))):
        loop.run_in_executor(None, content.gzip_bomb, web.config.bomb_bytes)  # warm it up
    try:
        ready(server, port)
        await stop.wait()
    finally:
        flush_task.cancel()
        for srv in servers:
            srv.close()
        pending = list(server.tasks)
        for task in pending:
            task.cancel()
        # let them log what they did (a hanging robots.txt, a stream cut short) before closing
        await asyncio.gather(*pending, return_exceptions=True)
        server.log.close()
