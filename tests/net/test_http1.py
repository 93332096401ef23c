"""The HTTP/1.1 client under the fetcher, against a loopback server that sends scripted bytes.

Each test scripts what the server writes on each connection, request by
request, and checks what :func:`crawl.net.request.exchange` made of it and how
many connections it took (keep-alive is kept only when it is safe).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trustme
from hostile import read_head

from crawl.net import (
    AddressPolicy,
    Exchange,
    Limits,
    OriginPools,
    Resolver,
    exchange,
    make_transport,
)
from crawl.net.backend import Dialer
from crawl.net.http1 import MAX_HEAD, request_head

LIMITS = Limits(connect=2.0, total=5.0)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CLOSE = None  # in a script: close the connection instead of answering


Answer = bytes | tuple[bytes, ...] | None


class Scripted:
    """Connection i answers its requests with ``scripts[i]`` in turn (CLOSE: hang up).

    An answer given as a tuple is written part by part (over TLS: a record or more
    each), corked so that all parts reach the client together. Any connection
    beyond the scripts answers OK to everything.
    """

    def __init__(self, scripts: list[list[Answer]], tls: ssl.SSLContext | None = None) -> None:
        self.scripts = scripts
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            i, self.connections = self.connections, self.connections + 1
            script = self.scripts[i] if i < len(self.scripts) else [OK] * 100
            threading.Thread(target=self._serve, args=(conn, list(script)), daemon=True).start()

    def _serve(self, conn: socket.socket, script: list[Answer]) -> None:
        try:
            self._answer(conn, script)
        except OSError:  # the client hung up mid-answer (it may: a limit of its own)
            pass

    def _answer(self, conn: socket.socket, script: list[Answer]) -> None:
        buf = b""
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):  # the client refused our certificate
                conn.close()
                return
        with conn:
            for answer in script:
                got = read_head(conn, buf)
                if got is None:
                    return
                head, buf = got
                self.requests.append(head)
                if answer is CLOSE:
                    return
                if isinstance(answer, tuple):
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
                    for part in answer:
                        conn.sendall(part)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
                else:
                    conn.sendall(answer)
            conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()


@contextmanager
def server(*scripts: list[Answer]) -> Iterator[Scripted]:
    s = Scripted(list(scripts))
    try:
        yield s
    finally:
        s.close()


def get_all(port: int, paths: list[str], limits: Limits = LIMITS) -> list[Exchange]:
    """GET each path of a.test (mapped to 127.0.0.1) in turn over one transport."""

    async def main() -> list[Exchange]:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        out = []
        try:
            for p in paths:
                ex = await exchange(transport, f"http://a.test:{port}{p}", [("User-Agent", "t")], limits,
                                    keep=100)
                ex.close()
                out.append(ex)
        finally:
            await transport.aclose()
        return out

    return trio.run(main)


def body(ex: Exchange) -> bytes:
    return ex.decoded  # the first 100 bytes of the body, decoded


def test_keep_alive_serves_sequential_requests_on_one_connection() -> None:
    with server([OK, OK, OK]) as s:
        got = get_all(s.port, ["/1", "/2", "/3"])
    assert [(e.status, e.failure, body(e)) for e in got] == [(200, None, b"ok")] * 3
    assert s.connections == 1
    assert [r.split(b"\r\n")[0] for r in s.requests] == [b"GET /1 HTTP/1.1", b"GET /2 HTTP/1.1",
                                                         b"GET /3 HTTP/1.1"]
    assert b"Host: a.test:%d" % s.port in s.requests[0]
    assert "connect" in got[0].timings and "connect" not in got[1].timings  # only the first one dialled
    assert got[1].ip == "127.0.0.1"


def test_a_kept_alive_connection_the_server_dropped_is_retried_on_a_new_one() -> None:
    # connection 1 answers once, then reads the next request and hangs up without a byte
    with server([OK, CLOSE], [OK]) as s:
        got = get_all(s.port, ["/1", "/2"])
    assert [(e.status, e.failure, body(e)) for e in got] == [(200, None, b"ok")] * 2
    assert s.connections == 2


def test_a_fresh_connection_closed_without_an_answer_is_a_protocol_error_not_retried() -> None:
    with server([CLOSE], [OK]) as s:
        (ex,) = get_all(s.port, ["/1"])
    assert ex.failure == "protocol-error" and "without sending" in ex.error
    assert s.connections == 1


def test_informational_responses_are_skipped() -> None:
    with server([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + OK]) as s:
        (ex,) = get_all(s.port, ["/"])
    assert (ex.status, ex.failure, body(ex)) == (200, None, b"ok")
    assert ex.header("link") is None


def test_body_framed_by_close_ends_at_eof_and_the_connection_is_not_reused() -> None:
    with server([b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert (got[0].status, got[0].failure, body(got[0])) == (200, None, b"until the end")
    assert got[0].response.protocol == "HTTP/1.0"
    assert body(got[1]) == b"ok" and s.connections == 2


def test_chunked_body_is_dechunked_and_its_header_renamed_in_the_record() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    with server([chunked, OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert body(got[0]) == b"abcde" and got[0].failure is None
    assert got[0].response.get_header("X-Crawl-Transfer-Encoding") == "chunked"
    assert s.connections == 1


def test_bytes_after_a_response_keep_the_response_but_not_the_connection() -> None:
    with server([OK + b"JUNK AFTER THE BODY", OK], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert [(e.status, e.failure, body(e)) for e in got] == [(200, None, b"ok")] * 2
    assert s.connections == 2


def test_connection_close_header_is_honoured() -> None:
    with server([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert [e.failure for e in got] == [None, None] and s.connections == 2


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF line ends
    b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok",  # obs-fold
    b"HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",  # no reason phrase
])
def test_sloppy_but_readable_responses_are_read_as_browsers_read_them(answer: bytes) -> None:
    with server([answer]) as s:
        (ex,) = get_all(s.port, ["/"])
    assert (ex.status, ex.failure, body(ex)) == (200, None, b"ok"), ex.error


@pytest.mark.parametrize("answer, words", [
    (b"NOT HTTP AT ALL\r\n\r\n", "malformed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "complete message body"),
    (b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * (MAX_HEAD + 10), "too large"),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", "switched"),
])
def test_broken_responses_are_protocol_errors(answer: bytes, words: str) -> None:
    with server([answer]) as s:
        (ex,) = get_all(s.port, ["/"])
    assert ex.failure == "protocol-error" and words in ex.error, ex.error


def test_a_header_value_with_a_line_break_is_never_sent() -> None:
    with pytest.raises(ValueError):
        request_head("/", [("If-None-Match", '"a"\r\nX-Evil: 1')])
    with server([OK]) as s:
        (ex,) = get_all(s.port, ["/"], limits=LIMITS)
        got = trio.run(_one_with_header, s.port)
    assert ex.failure is None
    assert got.failure == "invalid-url" and "line break" in got.error
    assert len(s.requests) == 1  # the bad one never reached the server


async def _one_with_header(port: int) -> Exchange:
    transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                               AddressPolicy(allow_private=True))
    try:
        return await exchange(transport, f"http://a.test:{port}/", [("X-Evil", "a\r\nb: c")], LIMITS)
    finally:
        await transport.aclose()


def test_refused_address_and_connect_error() -> None:
    async def main() -> list[Exchange]:
        res = Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False)
        strict = make_transport(res, AddressPolicy(allow_private=False))
        lax = make_transport(res, AddressPolicy(allow_private=True))
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return [await exchange(strict, "http://a.test/", [], LIMITS),
                await exchange(lax, f"http://a.test:{port}/", [], LIMITS)]

    refused, closed = trio.run(main)
    assert refused.failure == "private-address"
    assert closed.failure == "connect-error"


def test_https_checks_the_certificate_against_the_name_not_the_address() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("a.test").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    s = Scripted([[OK, OK]], tls=server_ctx)

    async def main() -> list[Exchange]:
        res = Resolver(overrides={"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]}, fallback=False)
        transport = OriginPools(Dialer(res, AddressPolicy(allow_private=True), client_ctx))
        try:
            return [await exchange(transport, f"https://{h}:{s.port}/", [], LIMITS, keep=10)
                    for h in ("a.test", "a.test", "b.test")]
        finally:
            await transport.aclose()

    try:
        good, again, wrong = trio.run(main)
    finally:
        s.close()
    assert (good.status, good.failure, good.decoded) == (200, None, b"ok")
    assert again.failure is None and s.connections == 2  # kept alive; b.test dialled its own
    assert wrong.failure == "connect-error" and "certificate" in wrong.error.lower(), wrong.error


def test_a_flood_of_informational_responses_is_capped_like_the_head() -> None:
    with server([b"HTTP/1.1 100 Continue\r\n\r\n" * 10_000]) as s:
        (ex,) = get_all(s.port, ["/"])
    assert ex.failure == "protocol-error" and "too large" in ex.error, ex.error


@pytest.mark.parametrize("trailers", [
    b"X-T: " + b"a" * 100 + b"\r\n",  # many trailer fields ...
    b"X-T: " + b"a" * (8 << 20),  # ... or one endless trailer value
])
def test_chunked_trailers_are_capped_like_the_head(trailers: bytes) -> None:
    # trailers come after the last chunk: no body byte counts them, the parser buffers them
    flood = trailers * max(1, (8 << 20) // len(trailers))
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" + flood
    with server([answer, CLOSE]) as s:  # then the server waits, the connection open
        (ex,) = get_all(s.port, ["/"])
    assert ex.failure == "protocol-error" and "too large" in ex.error, ex.error
    assert ex.truncated == "disconnect"


def test_a_body_on_an_informational_response_never_joins_the_final_body() -> None:
    # RFC 9110 15.2: a 1xx response ends with its header section (llhttp reads a body
    # on 104..199 when given a Content-Length)
    with server([b"HTTP/1.1 150 Odd\r\nContent-Length: 5\r\n\r\nEVIL!" + OK]) as s:
        (ex,) = get_all(s.port, ["/"])
    assert ex.failure == "protocol-error" and body(ex) == b"", (ex.failure, ex.error, body(ex))


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n",  # chunked not last
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n",  # TE wins over CL
])
def test_a_transfer_coding_that_does_not_end_in_chunked_is_read_until_close(head: bytes) -> None:
    # RFC 9112 6.3: the body runs to the end of the connection, as llhttp reads it
    with server([head + b"\r\nuntil the end"], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert (got[0].failure, body(got[0])) == (None, b"until the end"), got[0].error
    assert body(got[1]) == b"ok" and s.connections == 2


def test_content_length_beside_chunked_is_read_but_the_connection_is_not_reused() -> None:
    # RFC 9112 6.3: both framings on one message may be smuggling; read the chunks, then close
    both = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    with server([both, OK], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert [(e.failure, body(e)) for e in got] == [(None, b"ok")] * 2
    assert s.connections == 2


def _tls_contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("a.test").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return server_ctx, client_ctx


def test_bytes_the_tls_layer_already_holds_after_a_response_forbid_reuse() -> None:
    # the junk is its own TLS record, read from the socket with the response's last
    # record: the socket is no longer readable, but the connection is not clean
    evil = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
    server_ctx, client_ctx = _tls_contexts()
    s = Scripted([[(OK, evil), OK]], tls=server_ctx)

    async def main() -> list[Exchange]:
        res = Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False)
        transport = OriginPools(Dialer(res, AddressPolicy(allow_private=True), client_ctx))
        try:
            return [await exchange(transport, f"https://a.test:{s.port}/{i}", [], LIMITS, keep=10)
                    for i in range(2)]
        finally:
            await transport.aclose()

    try:
        got = trio.run(main)
    finally:
        s.close()
    assert [(e.failure, e.decoded) for e in got] == [(None, b"ok")] * 2
    assert s.connections == 2


class _SlowToClose(trio.abc.Stream):
    """A stream whose closing takes a while (as a TLS close can): other tasks run meanwhile.

    It says when its close begins (``closing``) and holds the close open until
    ``go`` is set, so a test can put another task's work inside the close
    instead of hoping a sleep lands there (bounded, so a test cannot hang).
    """

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.closing = trio.Event()
        self.go = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        self.closing.set()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await self.go.wait()
        await trio.aclose_forcefully(self.inner)


def test_eviction_never_drops_an_origin_that_became_busy_while_it_closed_others() -> None:
    with server() as s:
        async def main() -> None:
            res = Resolver(overrides={h: ["127.0.0.1"] for h in ("a.t", "b.t", "c.t", "d.t")},
                           fallback=False)
            pools = make_transport(res, AddressPolicy(allow_private=True), max_origins=3)
            head = request_head("/", [("Host", "x")])
            for h in ("a.t", "b.t", "c.t"):  # three idle origins, each with its connection
                resp = await pools.open("http", h, s.port, head, 2.0)
                async for _ in resp:
                    pass
                await pools.release(resp)
            pools._max_origins = 1  # now two too many: the next new origin evicts a.t and b.t
            slow = pools._origins[("http", "a.t", s.port)].idle
            assert slow is not None
            slow.stream = closer = _SlowToClose(slow.stream)
            busy: list[object] = []
            d_done = trio.Event()

            async def take_b() -> None:
                await closer.closing.wait()  # d.t's eviction is closing a.t right now
                resp = await pools.open("http", "b.t", s.port, head, 2.0)
                closer.go.set()  # b.t is busy: let the eviction go on
                await d_done.wait()  # ... and stay busy until it is over
                busy.append(pools._origins.get(("http", "b.t", s.port)))
                await pools.release(resp)

            async def take_d() -> None:
                resp = await pools.open("http", "d.t", s.port, head, 2.0)
                await pools.release(resp)
                d_done.set()

            with trio.fail_after(30):
                async with trio.open_nursery() as n:
                    n.start_soon(take_d)
                    n.start_soon(take_b)
            assert closer.closing.is_set() and closer.go.is_set()  # the race was run, not missed
            assert busy[0] is not None, "b.t was evicted while a request was on it"
            await pools.aclose()

        trio.run(main)


def test_a_switch_of_protocols_after_a_whole_response_is_junk_after_it() -> None:
    upgrade = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
    with server([OK + upgrade, OK], [OK]) as s:
        got = get_all(s.port, ["/a", "/b"])
    assert [(e.status, e.failure, body(e)) for e in got] == [(200, None, b"ok")] * 2, got[0].error
    assert s.connections == 2


def test_an_overlong_host_name_over_tls_ends_as_an_outcome_not_a_crash() -> None:
    long_label = "a" * 64 + ".test"

    async def main() -> Exchange:
        transport = make_transport(Resolver(overrides={long_label: ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        try:
            with server([OK]) as s:
                return await exchange(transport, f"https://{long_label}:{s.port}/", [], LIMITS)
        finally:
            await transport.aclose()

    ex = trio.run(main)  # the server is not TLS: the handshake gets no answer
    assert ex.failure in ("connect-error", "timeout"), ex.error


def test_validators_with_control_characters_are_not_sent_back(tmp_path: Path) -> None:
    from crawl.core import close_env, open_env
    from crawl.recrawl import History

    env = open_env(tmp_path / "h", max_dbs=4)
    try:
        h = History(env)
        entry = {"etag": '"ok"\x00', "last_modified": "Sun, 29 Nov 2026 10:00:00 GMT"}
        assert h.conditional_headers("http://a.test/", entry=entry) == [
            ("If-Modified-Since", "Sun, 29 Nov 2026 10:00:00 GMT")]
        assert h.conditional_headers("http://a.test/", entry={"etag": '"v1"'}) == [("If-None-Match", '"v1"')]
    finally:
        close_env(env)
