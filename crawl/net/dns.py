"""Name resolution for the fetcher: an override file, a TTL cache, an address policy.

Why our own layer instead of the system resolver per request: a crawl
resolves the same few thousand hosts over and over, and public resolvers
rate-limit (a cache with a TTL of at least an hour removes >95 % of
lookups). The override file (hosts format, ``--resolve-file``) is how a
staging site, or the bundled test web, is mapped to addresses without
touching /etc/hosts. The address chosen here is the one the connection goes
to (see :mod:`crawl.net.backend`), and it is checked against the
:class:`AddressPolicy` before any byte is sent: private, loopback,
link-local and other special-purpose addresses are refused unless the
operator allows them, so a public page cannot point the crawler at an
internal service (SSRF). An IPv6 address that carries an IPv4 one
(IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64; :mod:`.carried`) is
judged by the IPv4 it carries, and a literal host is read as the URL parser
reads it (``0x7f.1`` is 127.0.0.1) before any lookup.

Names not in the override file: with ``fallback=False`` (what ``--resolve-file``
implies unless ``--resolve-fallback`` is given) they fail with a dns-error,
so a test or staging crawl can never leak to the real network; with
``fallback=True`` they go to the system resolver (getaddrinfo).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import trio

from crawl.canon import CanonError, ip_literal
from crawl.core import UsageError

from .carried import carried_ipv4

DEFAULT_TTL = 3600.0  # the floor: at least one hour
NEGATIVE_TTL = 300.0  # a failed lookup is retried after five minutes
_MEMORY_ENTRIES = 65536

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class DnsError(Exception):
    """The name does not resolve (or may not be resolved here)."""


def is_special(ip: IPAddress) -> bool:
    """True for addresses a public crawl must not reach.

    Private (RFC 1918, RFC 4193), loopback, link-local (RFC 3927, incl. the
    169.254.169.254 cloud metadata service), multicast, reserved and
    unspecified addresses. An IPv6 address that carries IPv4 addresses
    (:func:`~crawl.net.carried.carried_ipv4`) is special when any of them is.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        carried = carried_ipv4(ip)
        if carried:
            return any(_is_special(v4) for v4 in carried)
    return _is_special(ip)


def _is_special(ip: IPAddress) -> bool:
    return bool(
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast
        or ip.is_reserved or ip.is_unspecified or not ip.is_global
    )


@dataclass(frozen=True)
class AddressPolicy:
    """Which resolved addresses the fetcher may connect to.

    ``allow_private`` lets every address through (the test web needs it);
    ``allow`` lists CIDR ranges let through even though they are special
    (a staging network, ``10.1.0.0/16``). An IPv6 address in no allowed
    range that carries IPv4 addresses passes when each of them would:
    ``::ffff:10.1.2.3`` with ``10.1.0.0/16`` allowed, never
    ``2002:7f00:1::1`` (127.0.0.1) without ``127.0.0.0/8``.
    """

    allow_private: bool = False
    allow: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str], allow_private: bool = False) -> AddressPolicy:
        nets = []
        for c in cidrs:
            try:
                nets.append(ipaddress.ip_network(c.strip(), strict=False))
            except ValueError as exc:
                raise UsageError(f"--allow-cidr {c!r} is not a CIDR range ({exc})") from exc
        return cls(allow_private, tuple(nets))

    def permits(self, address: str) -> bool:
        return _permits(self, address)

    def _judge(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if self.allow_private or self._allowed(ip):
            return True
        if isinstance(ip, ipaddress.IPv6Address):
            carried = carried_ipv4(ip)
            if carried:
                return all(not _is_special(v4) or self._allowed(v4) for v4 in carried)
        return not _is_special(ip)

    def _allowed(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.allow if net.version == ip.version)


@functools.lru_cache(maxsize=65536)
def _permits(policy: AddressPolicy, address: str) -> bool:
    """Memoised: every fetch asks again about the same few addresses (the policy is frozen)."""
    return policy._judge(address)


def parse_hosts(text: str, origin: str = "hosts file") -> dict[str, list[str]]:
    """Parse hosts-format lines: ``ADDRESS NAME [NAME...]``, ``#`` comments.

    Several lines for one name add addresses in order. A bad address is a
    UsageError naming the line: an override file is operator input.
    """
    out: dict[str, list[str]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 2:
            raise UsageError(f"{origin} line {n}: expected 'ADDRESS NAME [NAME...]', got {raw!r}")
        try:
            addr = str(ipaddress.ip_address(parts[0]))
        except ValueError:
            raise UsageError(f"{origin} line {n}: {parts[0]!r} is not an IP address") from None
        for name in parts[1:]:
            out.setdefault(name.lower().rstrip("."), []).append(addr)
    return out


def load_hosts(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --resolve-file {str(path)!r}: {exc.strerror}") from exc
    return parse_hosts(text, str(path))


@dataclass
class Resolution:
    addresses: list[str]
    source: str  # literal, override, cache, system
    elapsed: float = 0.0

    @property
    def address(self) -> str:
        return self.addresses[0]


@dataclass
class _Entry:
    addresses: list[str]
    expires: float
    error: str = ""


@dataclass
class Resolver:
    """Resolve host names through the override, the cache, then (maybe) the system.

    The cache lives in memory (bounded LRU) and, when ``env`` is given, in the
    ``dns`` table of the crawl's fetch-state LMDB so a resumed crawl does not
    resolve everything again.
    """

    overrides: dict[str, list[str]] = field(default_factory=dict)
    fallback: bool = True
    ttl: float = DEFAULT_TTL
    negative_ttl: float = NEGATIVE_TTL
    env: object | None = None  # lmdb.Environment
    clock: object = time.time
    _memory: OrderedDict[str, _Entry] = field(default_factory=OrderedDict)
    lookups: int = 0  # system lookups actually made

    def __post_init__(self) -> None:
        self._db = self.env.open_db(b"dns") if self.env is not None else None  # type: ignore[attr-defined]

    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]

    def _cached(self, host: str, now: float) -> _Entry | None:
        e = self._memory.get(host)
        if e is None and self._db is not None:
            with self.env.begin(db=self._db) as txn:  # type: ignore[attr-defined]
                raw = txn.get(host.encode())
            if raw:
                d = orjson.loads(raw)
                e = _Entry(d["a"], d["x"], d.get("e", ""))
        if e is None or e.expires <= now:
            return None
        self._memory[host] = e
        self._memory.move_to_end(host)
        return e

    def _store(self, host: str, e: _Entry) -> None:
        self._memory[host] = e
        while len(self._memory) > _MEMORY_ENTRIES:
            self._memory.popitem(last=False)
        if self._db is not None and not e.error:
            with self.env.begin(write=True, db=self._db) as txn:  # type: ignore[attr-defined]
                txn.put(host.encode(), orjson.dumps({"a": e.addresses, "x": e.expires}))

    def resolve_static(self, host: str) -> Resolution | None:
        """Literal addresses and override entries: no I/O, no cache.

        A literal is read as the canonicaliser reads a URL's host
        (:func:`crawl.canon.ip_literal`), so ``0x7f.1``, ``2130706433`` and
        ``127.1`` are 127.0.0.1 whether or not system DNS is on, and never
        go to the override file or a resolver that would read them
        otherwise. Raises DnsError for a host no URL may have (``1.2.3.256``).
        """
        h = host.lower().rstrip(".")
        try:
            literal = ip_literal(h)
        except CanonError as exc:
            raise DnsError(f"{host[:100]!r} is neither a host name nor an IP address "
                           f"({exc.detail})") from None
        if literal is not None:
            return Resolution([literal], "literal")
        if h in self.overrides:
            return Resolution(list(self.overrides[h]), "override")
        return None

    async def resolve(self, host: str) -> Resolution:
        """Addresses for ``host``; raises DnsError (cached for ``negative_ttl``)."""
        static = self.resolve_static(host)
        if static is not None:
            return static
        h = host.lower().rstrip(".")
        now = self._now()
        e = self._cached(h, now)
        if e is not None:
            if e.error:
                raise DnsError(e.error)
            return Resolution(list(e.addresses), "cache")
        if not self.fallback:
            raise DnsError(f"{h} is not in the resolve file (system DNS is off)")
        t0 = time.perf_counter()
        self.lookups += 1
        try:
            infos = await trio.socket.getaddrinfo(h, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            msg = f"cannot resolve {h}: {getattr(exc, 'strerror', None) or exc}"
            self._store(h, _Entry([], now + self.negative_ttl, msg))
            raise DnsError(msg) from None
        addrs: list[str] = []
        for info in infos:
            a = str(info[4][0])
            if a not in addrs:
                addrs.append(a)
        if not addrs:
            raise DnsError(f"{h} has no addresses")
        self._store(h, _Entry(addrs, now + self.ttl))
        return Resolution(addrs, "system", time.perf_counter() - t0)
