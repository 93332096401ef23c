"""The httpcore network backend that dials the address *we* resolved.

httpcore's connection pool takes a pluggable ``network_backend``. Ours wraps httpcore's trio backend and replaces only
the address in ``connect_tcp``: the pool still keys connections by origin,
the request still carries ``Host: name``, and TLS still sends the name as
SNI and checks the certificate against it (httpcore passes the origin host
as ``server_hostname``), but the socket goes to the address from
:class:`crawl.dns.Resolver`, after :class:`crawl.dns.AddressPolicy` allowed it.
Resolving and checking in the same place as connecting closes the gap a
DNS-rebinding attacker would use (check one address, connect to another).

The connect time and the address used are written into the current task's
:data:`CONNECT_INFO` (a context variable), so the worker that made the
request can put them into its fetch result even when the pool reused a
connection (then no connect happened and the fields stay unset).
"""

from __future__ import annotations

import contextvars
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
import trio
from httpcore._backends.trio import TrioBackend

from .dns import AddressPolicy, DnsError, Resolver

CONNECT_INFO: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "crawl_connect_info", default=None
)


class RefusedAddress(httpcore.ConnectError):
    """The resolved address is not allowed by the policy (private, loopback, ...)."""


class ResolvingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, resolver: Resolver, policy: AddressPolicy) -> None:
        self.resolver = resolver
        self.policy = policy
        self._inner = TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            res = await self.resolver.resolve(host)
        except DnsError as exc:
            raise httpcore.ConnectError(f"dns: {exc}") from exc
        allowed = [a for a in res.addresses if self.policy.permits(a)]
        if not allowed:
            raise RefusedAddress(f"refusing {host} -> {res.address}: not a public address")
        info = CONNECT_INFO.get()
        t0 = time.perf_counter()
        last: Exception | None = None
        for addr in allowed[:3]:  # a few of the addresses, in resolver order
            try:
                stream = await self._inner.connect_tcp(
                    addr, port, timeout=timeout, local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            if info is not None:
                info["connect"] = time.perf_counter() - t0
                info["ip"] = addr
            return stream
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not used by the crawler")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PooledResponse:
    """An httpcore response that hands its connection back to its origin when closed."""

    __slots__ = ("status", "headers", "extensions", "stream", "_pools", "_origin", "_conn")

    def __init__(self, resp: httpcore.Response, pools: OriginPools, origin: _Origin,
                 conn: httpcore.AsyncHTTPConnection) -> None:
        self.status = resp.status
        self.headers: list[tuple[bytes, bytes]] = resp.headers
        self.extensions = resp.extensions
        self.stream: Any = resp.stream
        self._pools = pools
        self._origin: _Origin | None = origin
        self._conn = conn

    async def aclose(self) -> None:
        origin, self._origin = self._origin, None
        if origin is None:
            return
        try:
            await self.stream.aclose()
        finally:
            origin.active -= 1
            await self._pools._release(origin, self._conn)


class _Origin:
    __slots__ = ("idle", "active")

    def __init__(self) -> None:
        self.idle: httpcore.AsyncHTTPConnection | None = None  # at most one kept alive
        self.active = 0


class OriginPools:
    """Connections kept per origin (one idle keep-alive each), least recently used evicted.

    Why not httpcore's connection pool: one big pool rescans every connection
    (and every idle one again, per connection) each time a request starts or
    ends, which is quadratic and, with hundreds of hosts, was 75 % of the
    fetcher's CPU (see README, fetch benchmark); even a small pool per origin
    spent ~5 % of ``crawl run``'s CPU on its queue and locks. A crawler talks
    to each host one request at a time, so this keeps httpcore's connections
    (HTTP/1.1, TLS, keep-alive expiry) and drops the pool around them. Idle
    origins beyond ``max_origins`` are closed, oldest first. The cap is
    generous (8,192; file descriptors are raised to match): a polite crawl
    visits each host about once a second, so a cap below the number of active
    hosts would close every connection just before its host's next turn
    (measured: 2,000 hosts under a 1,024 cap spent ~10% of crawl run's CPU
    opening and closing sockets).

    Requests are httpcore requests (the transport layer under httpx): a
    crawled URL is already canonical, so httpx's Request/Response wrappers,
    its second URL parse and exception mapping gave the crawler nothing.
    """

    def __init__(self, backend: httpcore.AsyncNetworkBackend, ssl_context: Any, *,
                 max_origins: int = 8192, keepalive_expiry: float = 30.0) -> None:
        self._backend = backend
        self._ssl = ssl_context
        self._max_origins = max_origins
        self._expiry = keepalive_expiry
        self._origins: OrderedDict[tuple[bytes, bytes, int | None], _Origin] = OrderedDict()

    async def open(self, request: httpcore.Request) -> PooledResponse:
        """Send ``request``; the caller reads ``.stream`` and must ``aclose()`` the response."""
        url = request.url
        key = (url.scheme, url.host, url.port)
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
            if conn is not None and (not conn.is_available() or conn.has_expired()):
                await _close(conn)  # the server closed it, or it sat idle too long
                conn = None
            if conn is None:
                conn = httpcore.AsyncHTTPConnection(
                    url.origin, ssl_context=self._ssl, keepalive_expiry=self._expiry, http1=True,
                    http2=False, network_backend=self._backend)
            resp = await conn.handle_async_request(request)
        except BaseException:
            origin.active -= 1
            if conn is not None:
                await _close(conn)
            raise
        return PooledResponse(resp, self, origin, conn)

    async def _release(self, origin: _Origin, conn: httpcore.AsyncHTTPConnection) -> None:
        if origin.idle is None and conn.is_idle() and not conn.has_expired():
            origin.idle = conn
        else:
            await _close(conn)

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
        for k in idle:
            conn = self._origins.pop(k).idle
            if conn is not None:
                await _close(conn)

    async def aclose(self) -> None:
        origins, self._origins = list(self._origins.values()), OrderedDict()
        for o in origins:
            if o.idle is not None:
                await _close(o.idle)


async def _close(conn: httpcore.AsyncHTTPConnection) -> None:
    with trio.CancelScope(shield=True):
        await conn.aclose()


def make_transport(
    resolver: Resolver,
    policy: AddressPolicy,
    *,
    max_origins: int = 8192,
    keepalive_expiry: float = 30.0,
    verify: bool = True,
) -> OriginPools:
    """The crawler's transport: per-origin pools dialing through :class:`ResolvingBackend`."""
    ctx = httpx.create_ssl_context(verify=verify, trust_env=False)
    return OriginPools(ResolvingBackend(resolver, policy), ctx, max_origins=max_origins,
                       keepalive_expiry=keepalive_expiry)
