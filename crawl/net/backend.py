"""Connections per origin, dialled to the address *we* resolved.

The socket goes to an address from :class:`crawl.net.dns.Resolver`, after
:class:`crawl.net.dns.AddressPolicy` allowed it, while the request still carries
``Host: name`` and TLS still sends the name as SNI and checks the
certificate against it. Resolving and checking in the same place as
connecting closes the gap a DNS-rebinding attacker would use (check one
address, connect to another).

Why no connection pool library: one big pool rescans every connection each
time a request starts or ends, which is quadratic and, with hundreds of
hosts, was 75 % of the fetcher's CPU (README, fetch benchmark). A polite
crawler talks to each host one request at a time, so one kept-alive
connection per origin is all the pooling it needs. Idle origins beyond
``max_origins`` are closed, oldest first. The cap is generous (8,192; file
descriptors are raised to match): a polite crawl visits each host about once
a second, so a cap below the number of active hosts would close every
connection just before its host's next turn (measured: 2,000 hosts under a
1,024 cap spent ~10 % of crawl run's CPU opening and closing sockets).
"""

from __future__ import annotations

import ssl
import time
from collections import OrderedDict
from collections.abc import Callable

import certifi
import trio

from .dns import AddressPolicy, DnsError, Resolver
from .http1 import ConnectError, Connection, ConnectTimeout, Response, StaleConnection


class RefusedAddress(ConnectError):
    """The resolved address is not allowed by the policy (private, loopback, ...)."""


class Dialer:
    """Resolve, check the policy, connect (and shake hands for https) within ``timeout``."""

    def __init__(self, resolver: Resolver, policy: AddressPolicy,
                 ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext]) -> None:
        self.resolver = resolver
        self.policy = policy
        self._ssl = ssl_context

    @property
    def ssl(self) -> ssl.SSLContext:
        """The TLS context, made at the first https dial when given as a maker: loading
        the CA bundle is ~25 ms of a crawl's start that an http-only crawl never needs."""
        if not isinstance(self._ssl, ssl.SSLContext):
            self._ssl = self._ssl()
        return self._ssl

    async def dial(self, scheme: str, host: str, port: int, timeout: float) -> Connection:
        try:
            res = await self.resolver.resolve(host)
        except DnsError as exc:
            raise ConnectError(f"dns: {exc}") from exc
        allowed = [a for a in res.addresses if self.policy.permits(a)]
        if not allowed:
            raise RefusedAddress(f"refusing {host} -> {res.address}: not a public address")
        t0 = time.perf_counter()
        last: Exception | None = None
        for addr in allowed[:3]:  # a few of the addresses, in resolver order
            try:
                with trio.fail_after(timeout):
                    tcp = await _tcp(addr, port)
                    stream: trio.abc.Stream = await _tls(tcp, self.ssl, host) if scheme == "https" else tcp
            except trio.TooSlowError:
                last = ConnectTimeout(f"no connection to {addr}:{port} within {timeout:g} s")
                continue
            except ConnectError as exc:
                last = exc
                continue
            except OSError as exc:
                last = ConnectError(f"{addr}:{port}: {exc}")
                continue
            return Connection(stream, (scheme, host, port), addr, time.perf_counter() - t0)
        assert last is not None
        raise last


async def _tcp(addr: str, port: int) -> trio.SocketStream:
    """Connect to an address already resolved and allowed (``open_tcp_stream`` would
    look it up again and race a nursery of attempts for the one address)."""
    sock = trio.socket.socket(trio.socket.AF_INET6 if ":" in addr else trio.socket.AF_INET,
                              trio.socket.SOCK_STREAM)
    try:
        await sock.connect((addr, port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)  # sets TCP_NODELAY


async def _tls(tcp: trio.SocketStream, ctx: ssl.SSLContext, host: str) -> trio.SSLStream[trio.SocketStream]:
    # https_compatible: a server that closes without close_notify ends the body (as browsers accept)
    stream = trio.SSLStream(tcp, ctx, server_hostname=host, https_compatible=True)
    try:
        await stream.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(stream)
        why = exc.__cause__ or exc  # trio wraps the ssl error; its text is what the operator needs
        raise ConnectError(f"tls handshake with {host} failed: {why}") from exc
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream


class _Origin:
    __slots__ = ("idle", "active")

    def __init__(self) -> None:
        self.idle: Connection | None = None  # at most one kept alive
        self.active = 0


class OriginPools:
    """One kept-alive connection per origin, least recently used evicted."""

    def __init__(self, dialer: Dialer, *, max_origins: int = 8192, keepalive_expiry: float = 30.0) -> None:
        self._dialer = dialer
        self._max_origins = max_origins
        self._expiry = keepalive_expiry
        self._origins: OrderedDict[tuple[str, str, int], _Origin] = OrderedDict()

    async def open(self, scheme: str, host: str, port: int, head: bytes, connect_timeout: float) -> Response:
        """Send ``head``; return the response with its headers read. The caller reads the
        body and must pass the response to :meth:`release` (also after an error)."""
        key = (scheme, host, port)
        origin = self._origins.get(key)
        new = origin is None
        if origin is None:
            origin = self._origins[key] = _Origin()
        else:
            self._origins.move_to_end(key)
        origin.active += 1  # busy from here on: eviction must not pick it
        conn, origin.idle = origin.idle, None
        try:
            if new:
                await self._evict()
            if conn is not None and not conn.usable(self._expiry):
                await conn.aclose()  # the server closed it, or it sat idle too long
                conn = None
            if conn is not None:
                try:
                    return await conn.send(head)
                except StaleConnection:  # the request never reached the server: once more, afresh
                    await conn.aclose()
                    conn = None
            conn = await self._dialer.dial(scheme, host, port, connect_timeout)
            return await conn.send(head)
        except BaseException:
            origin.active -= 1
            if conn is not None:
                await conn.aclose()
            raise

    async def release(self, resp: Response) -> None:
        """Keep the response's connection for its origin if it ended cleanly, else close it."""
        conn = resp._conn
        conn.finished(resp)
        origin = self._origins.get(conn.origin)
        if origin is not None:
            origin.active -= 1
            if origin.idle is None and conn.keep:
                origin.idle = conn
                return
        await conn.aclose()

    async def _evict(self) -> None:
        excess = len(self._origins) - self._max_origins
        if excess <= 0:
            return
        idle = []  # oldest first, and stop as soon as enough are found: no full scan
        for k, o in self._origins.items():
            if o.active == 0:
                idle.append(k)
                if len(idle) == excess:
                    break
        # all out of the table before the first close: a close lets other tasks run, and one
        # could take an origin still listed here (evicting it then would drop a busy origin)
        conns = [self._origins.pop(k).idle for k in idle]
        for conn in conns:
            if conn is not None:
                await conn.aclose()

    async def aclose(self) -> None:
        origins, self._origins = list(self._origins.values()), OrderedDict()
        for o in origins:
            if o.idle is not None:
                await o.idle.aclose()


def make_transport(
    resolver: Resolver,
    policy: AddressPolicy,
    *,
    max_origins: int = 8192,
    keepalive_expiry: float = 30.0,
    verify: bool = True,
) -> OriginPools:
    """The crawler's transport: one connection per origin, dialled through :class:`Dialer`."""
    def context() -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=certifi.where())  # what httpx would use, without importing it
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    return OriginPools(Dialer(resolver, policy, context), max_origins=max_origins,
                       keepalive_expiry=keepalive_expiry)
