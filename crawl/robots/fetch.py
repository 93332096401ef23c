"""Fetching and caching robots.txt per origin, with the RFC 9309 status rules.

The parser is :mod:`crawl.robots`; this module decides *which* robots.txt
applies (RFC 9309 sections 2.3 and 2.4):

* 2xx: parse the body (at most 500 KiB are read, section 2.5);
* 3xx: follow up to five redirects (section 2.3.1.2), across hosts if need
  be; more than five means "unavailable";
* 4xx: unavailable, everything allowed (429 is treated as unreachable, see
  :func:`crawl.robots.for_status`);
* 5xx, timeouts, connection and DNS errors: unreachable, everything
  disallowed, except that a cached copy that was good is used while the
  file stays unreachable (section 2.4), and after 30 days of being
  unreachable the file counts as unavailable (section 2.3.1.4 allows this);
* a verdict is cached per origin for at most 24 hours (section 2.4); an
  "unreachable" verdict only until the next check: the answer's
  Retry-After when it has one, otherwise ``recheck`` (60 s), doubled per
  failed check in a row up to ``unreachable_ttl`` (30 minutes), so a host
  that recovers is crawled again soon and one that stays down is asked
  rarely. The verdict says when that is (``RobotsInfo.expires``): the
  frontier keeps the host's URLs queued until then instead of dropping them.

The robots fetch is a request to the host like any other: it runs inside
the host's lease, before the page, with the same user agent, limits, DNS
override and address policy; its exchanges are returned so they can be
archived in the WARC next to the page.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import lmdb
import orjson
import trio

from crawl.core import DEFAULT_USER_AGENT
from crawl.frontier import parse_retry_after
from crawl.net import Exchange, Limits, OriginPools, exchange

from . import policy as robots_mod

ROBOTS_TTL = 24 * 3600.0
UNREACHABLE_TTL = 1800.0
RECHECK = 60.0  # first wait before an unreachable robots.txt is asked again
GIVE_UP_UNREACHABLE = 30 * 86400.0
MAX_HOPS = 5
_LEN = struct.Struct(">I")


def origin_of(url: str) -> str:
    """``scheme://host[:port]``, lowercased, default port dropped: the cache key."""
    p = urlsplit(url)
    scheme = p.scheme.lower()
    host = (p.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = p.port
    if port and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host += f":{port}"
    return f"{scheme}://{host}"


@dataclass
class RobotsInfo:
    """Which robots.txt applies to an origin, and why."""

    robots: robots_mod.Robots
    origin: str
    source: str  # cache, fetched, stale (cached copy used while unreachable)
    verdict: str  # parsed, unavailable, unreachable
    status: int = 0  # HTTP status of the last fetch (0: transport failure)
    fetched_at: float = 0.0
    error: str = ""
    hops: list[str] = field(default_factory=list)
    expires: float = 0.0  # when this verdict is checked again (for "unreachable": the next check)
    retry_after: float | None = None  # the unreachable answer's Retry-After, in seconds
    checks: int = 0  # failed checks in a row (unreachable only)
    since: float = 0.0  # unreachable since (unreachable only)

    def summary(self) -> dict[str, Any]:
        out = {"origin": self.origin, "source": self.source, "verdict": self.verdict,
               "status": self.status, "fetched_at": self.fetched_at, "error": self.error or None}
        if self.verdict == "unreachable":
            out.update(next_check=self.expires, checks=self.checks, unreachable_since=self.since)
        return out


def recheck_delay(checks: int, retry_after: float | None, base: float = RECHECK,
                  cap: float = UNREACHABLE_TTL) -> float:
    """Seconds until an unreachable robots.txt is asked again, after ``checks`` failures in a row.

    The server's Retry-After wins, kept between a second (never a tight
    loop) and a day (a robots.txt must not stall its host for ever);
    otherwise ``base``, doubled per failure, up to ``cap``.
    """
    if retry_after is not None:
        return min(max(retry_after, 1.0), ROBOTS_TTL)
    return min(base * 2.0 ** min(max(checks - 1, 0), 40), max(cap, base))


class RobotsCache:
    """``robots`` table of the fetch-state LMDB: origin -> entry (+ raw body).

    Writes are group-committed: :meth:`put` returns once its entry is on disk,
    as one commit per put did, but the puts of several threads at once share
    one fsynced commit (a crawl's first minute is thousands of hosts' first
    robots.txt, and one commit each was one fsync each, in a row).
    """

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.db = env.open_db(b"robots")
        self._cond = threading.Condition()
        self._pending: dict[bytes, bytes] = {}  # the open batch: origin -> value (the last put wins)
        self._open = 1  # the batch a put joins now
        self._done = 0  # the last batch committed or failed
        self._busy = False  # a thread is committing a batch
        self._failed: dict[int, BaseException] = {}
        self.commits = 0

    def get(self, origin: str) -> tuple[dict[str, Any], bytes] | None:
        with self.env.begin(db=self.db) as txn:
            raw = txn.get(origin.encode())
            if raw is None:
                return None
            raw = bytes(raw)
        (n,) = _LEN.unpack_from(raw)
        return orjson.loads(raw[4 : 4 + n]), raw[4 + n :]

    def put(self, origin: str, entry: dict[str, Any], body: bytes) -> None:
        """Store ``origin``'s entry; returns once it is committed (or raises what the commit raised)."""
        meta = orjson.dumps(entry)
        with self._cond:
            self._pending[origin.encode()] = _LEN.pack(len(meta)) + meta + body
            batch = self._open
            while self._done < batch:
                if self._busy:
                    self._cond.wait()  # a commit is running: this put is in the next one
                else:
                    self._commit_open()
            err = self._failed.get(batch)
        if err is not None:
            raise err

    def _commit_open(self) -> None:
        """Commit the open batch (called and returning with the condition held)."""
        items, self._pending = self._pending, {}
        batch, self._busy = self._open, True
        self._open += 1
        self._cond.release()
        err: BaseException | None = None
        try:
            with self.env.begin(write=True, db=self.db) as txn:
                for key, value in items.items():
                    txn.put(key, value)
        except BaseException as exc:  # every put of the batch raises it, not only this one
            err = exc
        finally:
            self._cond.acquire()
            self._busy, self._done = False, batch
            self.commits += 1
            if err is not None:
                self._failed[batch] = err
                for old in [b for b in self._failed if b < batch - 64]:
                    del self._failed[old]
            self._cond.notify_all()


def _info_from(entry: dict[str, Any], body: bytes, origin: str, source: str) -> RobotsInfo:
    verdict = entry["verdict"]
    if verdict == "parsed":
        rob = robots_mod.parse(body)
    elif verdict == "unavailable":
        rob = robots_mod.ALLOW_ALL
    else:
        rob = robots_mod.DISALLOW_ALL
    info = RobotsInfo(rob, origin, source, verdict, entry.get("status", 0),
                      entry.get("fetched_at", 0.0), entry.get("error", ""))
    info.expires = entry.get("expires", 0.0)
    info.checks = entry.get("checks", 0)
    info.since = entry.get("unreachable_since", 0.0)
    return info


async def _info_async(entry: dict[str, Any], body: bytes, origin: str, source: str) -> RobotsInfo:
    """As :func:`_info_from`; a big file is parsed in a thread so the event loop keeps going."""
    if len(body) > 32 << 10:
        return await trio.to_thread.run_sync(_info_from, entry, body, origin, source)
    return _info_from(entry, body, origin, source)


class RobotsFetcher:
    """Answer "which robots.txt applies to this URL" from the cache or the host."""

    def __init__(
        self,
        transport: OriginPools,
        cache: RobotsCache | None,
        *,
        user_agent: str,
        limits: Limits | None = None,
        ttl: float = ROBOTS_TTL,
        unreachable_ttl: float = UNREACHABLE_TTL,
        recheck: float = RECHECK,
        clock: Any = time.time,
        hop_delay: float = 1.0,
    ) -> None:
        self.transport = transport
        self.hop_delay = hop_delay  # politeness between redirect hops (same lease)
        self.cache = cache
        self.user_agent = user_agent
        self.limits = limits or Limits()
        self.ttl = ttl
        self.unreachable_ttl = unreachable_ttl
        self.recheck = recheck
        self.clock = clock
        self._locks: dict[str, trio.Lock] = {}
        self._parsed: dict[str, tuple[float, RobotsInfo]] = {}
        self.fetches = 0

    async def get(self, url: str) -> tuple[RobotsInfo, list[Exchange]]:
        """The robots verdict for ``url``'s origin, plus any exchanges made to get it."""
        origin = origin_of(url)
        hot = self._parsed.get(origin)  # the common case, without a lock: a parsed copy in memory
        if hot is not None and hot[0] > float(self.clock()):
            return hot[1], []
        lock = self._locks.get(origin)
        if lock is None:
            lock = self._locks[origin] = trio.Lock()
        try:
            async with lock:  # one robots fetch per origin at a time
                return await self._get(origin)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(origin, None)

    async def _get(self, origin: str) -> tuple[RobotsInfo, list[Exchange]]:
        now = float(self.clock())
        hot = self._parsed.get(origin)
        if hot is not None and hot[0] > now:
            return hot[1], []
        cached = self.cache.get(origin) if self.cache else None
        if cached and cached[0]["expires"] > now:
            info = await _info_async(cached[0], cached[1], origin, "cache")
            self._remember(origin, cached[0]["expires"], info)
            return info, []
        info, exchanges, body = await self.fetch(origin)
        entry: dict[str, Any] = {"verdict": info.verdict, "status": info.status,
                                 "fetched_at": now, "error": info.error}
        if info.verdict == "unreachable":
            prev = cached[0] if cached else {}
            since = prev.get("unreachable_since") or now
            checks = int(prev.get("checks") or 0) + 1 if prev.get("unreachable_since") else 1
            # from the end of this check: a timed-out fetch took its time already
            wait = recheck_delay(checks, info.retry_after, self.recheck, self.unreachable_ttl)
            entry.update(expires=float(self.clock()) + wait, unreachable_since=since, checks=checks)
            if cached and prev.get("verdict") in ("parsed", "unavailable"):
                # RFC 9309 2.4: keep using the good copy while unreachable
                good = dict(prev, expires=entry["expires"], unreachable_since=since, checks=checks,
                            last_error=info.error, last_status=info.status)
                if self.cache:
                    await trio.to_thread.run_sync(self.cache.put, origin, good, cached[1])
                stale = await _info_async(good, cached[1], origin, "stale")
                stale.error = info.error
                self._remember(origin, good["expires"], stale)
                return stale, exchanges
            if now - since > GIVE_UP_UNREACHABLE:
                entry["verdict"] = "unavailable"  # 2.3.1.4: unreachable for 30 days
                info = _info_from(entry, b"", origin, "fetched")
            body = b""
        else:
            entry["expires"] = now + self.ttl
        if self.cache:  # an fsynced commit: off the event loop
            await trio.to_thread.run_sync(self.cache.put, origin, entry, body)
        info.fetched_at = now
        info.expires = entry["expires"]
        info.checks = entry.get("checks", 0)
        info.since = entry.get("unreachable_since", 0.0)
        self._remember(origin, entry["expires"], info)
        return info, exchanges

    def _remember(self, origin: str, expires: float, info: RobotsInfo) -> None:
        """Parsed copies in memory (bounded), so a host's leases do not re-parse
        a 500 KiB file each time; LMDB stays the durable copy."""
        self._parsed[origin] = (expires, dataclasses.replace(info, source="cache", hops=[]))
        while len(self._parsed) > 4096:
            self._parsed.pop(next(iter(self._parsed)))

    async def fetch(self, origin: str) -> tuple[RobotsInfo, list[Exchange], bytes]:
        """Fetch ``origin/robots.txt`` now (no cache), following up to 5 redirects."""
        self.fetches += 1
        url = origin + "/robots.txt"
        headers = [("User-Agent", self.user_agent), ("Accept", "text/plain, */*;q=0.5"),
                   ("Accept-Encoding", "gzip, deflate, br")]
        exchanges: list[Exchange] = []
        hops: list[str] = []
        limit = robots_mod.MAX_BYTES
        while True:
            ex = await exchange(self.transport, url, headers, self.limits,
                                want_body=lambda e: 200 <= e.status < 400, max_body=limit, keep=limit)
            exchanges.append(ex)
            hops.append(url)
            broken = ex.failure not in (None, "too-large") and 200 <= ex.status < 300
            if ex.response is None or broken:
                # unreachable: timeout, connect/DNS/address failure, body cut short
                info = RobotsInfo(robots_mod.DISALLOW_ALL, origin, "fetched", "unreachable",
                                  ex.status, error=f"{ex.failure}: {ex.error}", hops=hops)
                return info, exchanges, b""
            loc = ex.header("location")
            if 300 <= ex.status < 400 and loc and len(hops) <= MAX_HOPS:
                url = urljoin(url, loc.strip())
                if urlsplit(url).scheme not in ("http", "https"):
                    break
                # Each hop is another request, often to the same host: keep the
                # host's delay between them (DESIGN invariant 2).
                await trio.sleep(self.hop_delay)
                continue
            break
        fixed = robots_mod.for_status(ex.status)
        if fixed is None:
            body = ex.decoded
            rob = (await trio.to_thread.run_sync(robots_mod.parse, body)) if len(body) > 32 << 10 \
                else robots_mod.parse(body)
            return RobotsInfo(rob, origin, "fetched", "parsed", ex.status, hops=hops), exchanges, body
        verdict = "unavailable" if fixed is robots_mod.ALLOW_ALL else "unreachable"
        err = f"robots.txt returned {ex.status}"
        if 300 <= ex.status < 400:
            err = f"more than {MAX_HOPS} redirects (or a redirect without a usable Location)"
        info = RobotsInfo(fixed, origin, "fetched", verdict, ex.status, error=err, hops=hops)
        if verdict == "unreachable":  # a 5xx or 429 may say when to come back
            info.retry_after = parse_retry_after(ex.header("retry-after"), float(self.clock()))
        return info, exchanges, b""


def fetch_robots_sync(
    url: str,
    *,
    resolve_file: str | os.PathLike[str] | None = None,
    resolve_fallback: bool = False,
    allow_private: bool = False,
    allow_cidrs: tuple[str, ...] = (),
    user_agent: str | None = None,
    crawl_dir: str | os.PathLike[str] | None = None,
    limits: Limits | None = None,
) -> RobotsInfo:
    """The robots.txt that applies to ``url``, fetched live (``crawl robots`` live mode).

    Same rules, DNS override and address policy as ``crawl fetch``. With
    ``crawl_dir`` the crawl's robots cache is read and updated (so the answer
    is the one the crawl would use); without it the file is always fetched.
    Never raises for network trouble: an unreachable file is a verdict.
    """
    from crawl.net import AddressPolicy, Resolver, load_hosts, make_transport

    overrides = load_hosts(resolve_file) if resolve_file else {}
    policy = AddressPolicy.from_cidrs(allow_cidrs, allow_private)

    async def main() -> RobotsInfo:
        env = None
        if crawl_dir is not None:
            from crawl.core import CrawlDir, open_env

            env = open_env(CrawlDir(crawl_dir).fetchstate)
        resolver = Resolver(overrides, fallback=resolve_file is None or resolve_fallback, env=env)
        transport = make_transport(resolver, policy, max_origins=8)
        try:
            rf = RobotsFetcher(transport, RobotsCache(env) if env is not None else None,
                               user_agent=user_agent or DEFAULT_USER_AGENT, limits=limits)
            info, exchanges = await rf.get(url)
            for ex in exchanges:
                ex.close()
            return info
        finally:
            await transport.aclose()

    return trio.run(main)
