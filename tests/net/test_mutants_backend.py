"""What a mutation run (issue 21) found untested in the dialler: an IPv6
address is dialled on an IPv6 socket (and an IPv4 one on IPv4), and a
connection that fails leaves no socket open behind it. Real loopback sockets."""

from __future__ import annotations

import gc
import socket
import ssl
import warnings

import pytest
import trio

from crawl.net import AddressPolicy, Resolver
from crawl.net.backend import ConnectError, Dialer


def _listener(family: int, addr: str) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((addr, 0))
    s.listen(8)
    return s


@pytest.mark.parametrize(("family", "addr"), [(socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")])
def test_each_address_is_dialled_in_its_own_family(family: int, addr: str) -> None:
    try:
        lst = _listener(family, addr)
    except OSError as exc:
        pytest.skip(f"no {addr} here: {exc}")
    port = lst.getsockname()[1]

    async def main() -> str:
        d = Dialer(Resolver(overrides={"v.test": [addr]}, fallback=False), AddressPolicy(allow_private=True),
                   ssl.create_default_context())
        conn = await d.dial("http", "v.test", port, 5.0)
        try:
            return str(conn.stream.socket.getpeername()[0])  # type: ignore[attr-defined]
        finally:
            await conn.stream.aclose()

    try:
        assert trio.run(main) == addr
        peer, _ = lst.accept()
        peer.close()
    finally:
        lst.close()


def test_a_refused_connection_leaves_no_socket_open() -> None:
    lst = _listener(socket.AF_INET, "127.0.0.1")
    port = lst.getsockname()[1]
    lst.close()  # nothing listens there now: each connect is refused at once

    async def main() -> int:
        d = Dialer(Resolver(overrides={"r.test": ["127.0.0.1"]}, fallback=False),
                   AddressPolicy(allow_private=True), ssl.create_default_context())
        failed = 0
        for _ in range(5):
            with pytest.raises(ConnectError):
                await d.dial("http", "r.test", port, 5.0)
            failed += 1
        return failed

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert trio.run(main) == 5
        gc.collect()
    unclosed = [w for w in got if issubclass(w.category, ResourceWarning) and "socket" in str(w.message)]
    assert not unclosed, [str(w.message) for w in unclosed]


def test_a_name_that_does_not_resolve_is_a_connect_error_that_says_dns() -> None:
    async def main() -> None:
        d = Dialer(Resolver(overrides={}, fallback=False), AddressPolicy(allow_private=True),
                   ssl.create_default_context())
        await d.dial("http", "nowhere.test", 80, 5.0)

    with pytest.raises(ConnectError, match="^dns: "):
        trio.run(main)
