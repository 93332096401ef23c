"""The httpcore network backend that dials the address *we* resolved.

httpx lets the transport's connection pool take a pluggable
``network_backend``. Ours wraps httpcore's trio backend and replaces only
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
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
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


def make_transport(
    resolver: Resolver,
    policy: AddressPolicy,
    *,
    max_connections: int = 1024,
    keepalive: int = 512,
    keepalive_expiry: float = 30.0,
    verify: bool = True,
) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose pool connects through :class:`ResolvingBackend`.

    httpx 0.28 does not expose ``network_backend`` on its transport, so the
    pool is built here with the same arguments httpx would use and swapped in.
    """
    transport = httpx.AsyncHTTPTransport(verify=verify, trust_env=False)
    ctx = httpx.create_ssl_context(verify=verify, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ctx,
        max_connections=max_connections,
        max_keepalive_connections=keepalive,
        keepalive_expiry=keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=ResolvingBackend(resolver, policy),
    )
    return transport
