"""The fetch stage: leases in, archived responses and fetch results out.

Shape (STYLE.md "Async shape"): a reader task turns source batches into work
items, N worker tasks each run one :meth:`Fetcher.fetch` at a time, ONE
writer task appends their captures to the WARC store and fsyncs, and only
then an output task emits the results and acknowledges the input batch.
Every channel is bounded, so a slow disk or a slow consumer slows the
fetchers down instead of piling pages up in memory.

Per lease, :meth:`Fetcher.fetch` does, in order: resolve (override, cache,
system) and check the address policy; robots.txt for the origin (cached;
fetched inside this lease, so it is polite); the GET with conditional
headers from the URL's history; then it classifies the result into one
``outcome`` (see :data:`crawl.records.OUTCOMES`). Redirects are never
followed here: the Location goes out in the result and becomes a new URL
for the frontier, so a cross-host redirect waits for its own host's turn.

Politeness (one request per host, delays) is the frontier's job: fetch
trusts its leases. Plain URL records are accepted too, for one-off use.
"""

from __future__ import annotations

import email.utils
import logging
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import trio

from . import records
from .dns import AddressPolicy, DnsError, Resolver
from .exchange import Exchange, Limits, exchange
from .history import History
from .io import Batch, Report, Sink, Source
from .netbackend import make_transport
from .records import Record
from .robots_fetch import RobotsCache, RobotsFetcher, RobotsInfo
from .state import CrawlDir, open_env
from .store import Capture, WarcWriter, warc_date

DEFAULT_USER_AGENT = "crawl/0.1 (+https://github.com/crawl/crawl; crawler contact)"
AGENT_TOKEN = "crawl"
DEFAULT_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml", "text/plain")
ACCEPTS = frozenset({"lease", "url", "link"})
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchConfig:
    user_agent: str = DEFAULT_USER_AGENT
    agent_token: str = AGENT_TOKEN
    limits: Limits = field(default_factory=Limits)
    content_types: tuple[str, ...] = DEFAULT_TYPES  # "*/*" accepts everything
    robots: bool = True
    conditional: bool = True
    archive_robots: bool = True
    concurrency: int = 256
    host_delay: float = 1.0  # between robots.txt redirect hops (the frontier spaces leases)


def type_wanted(content_type: str | None, wanted: tuple[str, ...]) -> bool:
    """HTML, XHTML, XML (incl. ``+xml``) and plain text by default; no header: yes."""
    if not content_type or "*/*" in wanted:
        return True
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in wanted or (any(w.endswith("xml") for w in wanted) and mime.endswith("+xml"))


def retry_after(value: str | None, now: float) -> float | None:
    """RFC 9110 section 10.2.3: delay-seconds or an HTTP-date, as seconds from now."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(0.0, dt.timestamp() - now)


@dataclass
class Fetched:
    """One lease's result before it is stored: the record and what to archive."""

    record: Record
    captures: list[Capture] = field(default_factory=list)
    page: Capture | None = None  # the capture whose pointer goes into record["warc"]
    history: dict[str, Any] | None = None  # fields to merge into the URL's history
    token: Any = None  # which input batch it belongs to


class Fetcher:
    """Fetch one lease at a time (many tasks share one Fetcher)."""

    def __init__(
        self,
        cfg: FetchConfig,
        transport: httpx.AsyncBaseTransport,
        resolver: Resolver,
        policy: AddressPolicy,
        *,
        history: History | None = None,
        robots: RobotsFetcher | None = None,
        clock: Any = time.time,
    ) -> None:
        self.cfg = cfg
        self.transport = transport
        self.resolver = resolver
        self.policy = policy
        self.history = history
        self.robots = robots if cfg.robots else None
        self.clock = clock

    def _captures_for_robots(self, exchanges: list[Exchange], ts: float) -> list[Capture]:
        if not self.cfg.archive_robots:
            for ex in exchanges:
                ex.close()
            return []
        return [_capture(ex, "response" if ex.response is not None else "none", ts,
                         {"purpose": "robots.txt", "outcome": ex.failure or "ok",
                          "error": ex.error or None, "timings": ex.timings})
                for ex in exchanges]

    async def fetch(self, lease: Record) -> Fetched:
        """Never raises: a bug here becomes one URL's error, not the crawl's end."""
        try:
            return await self._fetch(lease)
        except Exception as exc:  # noqa: BLE001
            log.exception("fetch of %s failed unexpectedly", lease.get("url"))
            rec = records.derive(lease, "fetch", outcome="protocol-error", fetched_at=float(self.clock()),
                                 error=f"internal error: {type(exc).__name__}: {exc}")
            rec.pop("warc", None)
            return Fetched(rec)

    async def _fetch(self, lease: Record) -> Fetched:
        now = float(self.clock())
        url = lease["url"]
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        rec = records.derive(lease, "fetch", url=url, fetched_at=now)
        rec.pop("warc", None)
        out = Fetched(rec)

        def done(outcome: str, error: str | None = None, **extra: Any) -> Fetched:
            timings["total"] = round(time.perf_counter() - t0, 6)
            rec.update(outcome=outcome, timings=timings, **extra)
            if error:
                rec["error"] = error
            if not out.captures or out.captures[-1] is not out.page:
                meta = {k: rec.get(k) for k in ("outcome", "status", "error", "timings", "ip")}
                out.captures.append(Capture(url, "none", now, meta, ip=rec.get("ip")))
            return out

        parts = urlsplit(url)
        try:
            host = parts.hostname
            parts.port  # noqa: B018 -- raises on a bad port
        except ValueError as exc:
            return done("invalid-url", f"cannot parse URL: {exc}")
        if parts.scheme not in ("http", "https") or not host:
            return done("invalid-url", "only http and https URLs with a host can be fetched")
        rec.setdefault("host", host)
        try:
            res = await self.resolver.resolve(host)
        except DnsError as exc:
            return done("dns-error", str(exc))
        timings["dns"] = round(res.elapsed, 6)
        allowed = [a for a in res.addresses if self.policy.permits(a)]
        rec["ip"] = allowed[0] if allowed else res.address
        if not allowed:
            return done("private-address", f"{host} resolves to {res.address}, a private or "
                        "special-purpose address; use --allow-private or --allow-cidr to fetch it")
        if self.robots is not None:
            info, exchanges = await self.robots.get(url)
            out.captures.extend(self._captures_for_robots(exchanges, now))
            delay = info.robots.crawl_delay(self.cfg.agent_token)
            if delay is not None:
                rec["crawl_delay"] = delay
            if not info.robots.allowed(url, self.cfg.agent_token):
                extra = _robots_fields(info, url, self.cfg, now)
                return done("robots-disallowed", extra.pop("error", None), **extra)
            if exchanges:
                # This request went to robots.txt. Asking for the page right away
                # would be a second request with no delay: a frontier lease goes
                # back so the frontier leases it on the host's next turn; a bare
                # URL (no frontier) waits the host delay here.
                if lease.get("kind") == "lease":
                    return done("deferred", "robots.txt fetched first; the page waits for the "
                                "host's next turn", robots_status=info.status)
                await trio.sleep(self.cfg.host_delay)
        headers = [("User-Agent", self.cfg.user_agent),
                   ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.1"),
                   ("Accept-Encoding", "gzip, deflate, br")]
        hist = self.history.get(url) if (self.history and self.cfg.conditional) else None
        if self.cfg.conditional and self.history is not None:
            headers += self.history.conditional_headers(url, lease)
        ex = await exchange(self.transport, url, headers, self.cfg.limits,
                            want_body=lambda e: not (200 <= e.status < 300)
                            or type_wanted(e.header("content-type"), self.cfg.content_types))
        return self._classify(ex, out, hist, now, timings, done)

    def _classify(self, ex: Exchange, out: Fetched, hist: dict[str, Any] | None, now: float,
                  timings: dict[str, float], done: Any) -> Fetched:
        rec = out.record
        for k in ("connect", "first_byte"):
            if k in ex.timings:
                timings[k] = round(ex.timings[k], 6)
        if ex.ip:
            rec["ip"] = ex.ip
        if ex.response is None:
            return done(ex.failure or "protocol-error", ex.error)
        rec["status"] = ex.status
        ctype = ex.header("content-type")
        if ctype:
            rec["content_type"] = ctype.split(";", 1)[0].strip().lower()
        ra = retry_after(ex.header("retry-after"), now)
        if ra is not None:
            rec["retry_after"] = ra
        for name, key in (("etag", "etag"), ("last-modified", "last_modified")):
            if ex.header(name):
                rec[key] = ex.header(name)
        meta = {"outcome": None, "status": ex.status, "timings": timings, "ip": rec.get("ip")}
        if ex.status == 304 and hist and hist.get("digest") and hist.get("warc_date"):
            cap = _capture(ex, "revisit", now, meta)
            cap.refers_to = {"uri": rec["url"], "date": hist["warc_date"], "digest": hist["digest"]}
            if hist.get("warc"):
                rec["refers_to"] = hist["warc"]
            rec["digest"] = hist["digest"]
            out.history = {"fetched_at": now, "status": 304}
            return self._page(out, cap, done, "not-modified")
        if ex.skipped:
            ex.close()
            return done("skipped-content-type", f"content type {ctype!r} is not fetched "
                        "(see --content-type)", bytes=0)
        cap = _capture(ex, "response", now, meta)
        assert ex.body is not None
        rec["bytes"] = ex.body.length
        rec["digest"] = cap.metadata["digest"] = _digest(ex)
        if ex.truncated:
            rec["truncated"] = ex.truncated
        if ex.error:
            rec["error"] = ex.error
        if ex.failure:
            return self._page(out, cap, done, ex.failure)
        loc = ex.header("location")
        if 300 <= ex.status < 400 and loc:
            rec["location"] = urljoin(rec["url"], loc.strip())
            return self._page(out, cap, done, "redirect")
        if ex.status == 304:
            return self._page(out, cap, done, "not-modified")
        if 200 <= ex.status < 300:
            out.history = {"etag": rec.get("etag"), "last_modified": rec.get("last_modified"),
                           "digest": rec["digest"], "fetched_at": now, "status": ex.status,
                           "warc_date": warc_date(now)}
            return self._page(out, cap, done, "ok")
        return self._page(out, cap, done, "http-error")

    @staticmethod
    def _page(out: Fetched, cap: Capture, done: Any, outcome: str) -> Fetched:
        cap.metadata["outcome"] = outcome
        out.captures.append(cap)
        out.page = cap
        return done(outcome, None)


def _digest(ex: Exchange) -> str:
    from .store import sha1_label

    assert ex.body is not None
    return sha1_label(ex.body.payload)


def _capture(ex: Exchange, kind: str, ts: float, meta: dict[str, Any]) -> Capture:
    return Capture(ex.url, kind, ts, meta, ip=ex.ip, request=ex.request, response=ex.response,
                   body=ex.body if kind == "response" else None, truncated=ex.truncated)


def _robots_fields(info: RobotsInfo, url: str, cfg: FetchConfig, now: float) -> dict[str, Any]:
    d = info.robots.decide(url, cfg.agent_token)
    extra: dict[str, Any] = {"robots": {**info.summary(), "rule": d.rule, "line": d.line,
                                        "group": d.group}}
    if info.verdict == "unreachable":
        # not a rule: the file could not be read. Ask the frontier to come back later.
        extra["retry_after"] = max(0.0, info.fetched_at + 1800.0 - now) or 1800.0
        extra["error"] = f"robots.txt unreachable ({info.error}); everything disallowed meanwhile"
    return extra


def store_group(writer: WarcWriter, history: History | None, items: list[Fetched]) -> list[Record]:
    """Archive a group, fsync once, update history; returns the records to release.

    Runs in a worker thread (blocking file I/O). Only after ``writer.sync()``
    does any record of the group leave this function (DESIGN invariant 1).
    """
    updates = []
    try:
        for it in items:
            for cap in it.captures:
                ptr = writer.write(cap)
                if cap is it.page and ptr is not None:
                    it.record["warc"] = ptr
            if it.history is not None:
                if "warc" in it.record and it.record["outcome"] == "ok":
                    it.history["warc"] = it.record["warc"]
                updates.append((it.record["url"], it.history))
        writer.sync()
        if history is not None:
            history.update(updates)
    finally:
        for it in items:
            for cap in it.captures:
                cap.close()
    return [it.record for it in items]


async def fetch_batch(fetcher: Fetcher, writer: WarcWriter, leases: list[Record]) -> list[Record]:
    """Fetch a batch concurrently, store it durably, return the results in input order.

    The entry point for callers that already run trio (``crawl run``).
    """
    results: list[Fetched | None] = [None] * len(leases)
    limiter = trio.CapacityLimiter(max(1, fetcher.cfg.concurrency))

    async def one(i: int, lease: Record) -> None:
        async with limiter:
            results[i] = await fetcher.fetch(lease)

    async with trio.open_nursery() as nursery:
        for i, lease in enumerate(leases):
            nursery.start_soon(one, i, lease)
    done = [r for r in results if r is not None]
    return await trio.to_thread.run_sync(store_group, writer, fetcher.history, done)


async def fetch_all(source: Source, sink: Sink, fetcher: Fetcher, writer: WarcWriter,
                    report: Report, *, batch: int = 500, group: int = 256) -> None:
    """Stream leases from ``source`` to results in ``sink`` (see module docstring).

    Input batches are acknowledged (spools) only once all their results are written.
    """
    work_send, work_recv = trio.open_memory_channel[tuple[Any, Record]](0)
    store_send, store_recv = trio.open_memory_channel[Fetched](fetcher.cfg.concurrency)
    out_send, out_recv = trio.open_memory_channel[list[Fetched]](4)
    pending: dict[int, list[Any]] = {}  # batch id -> [results outstanding, batch, all read]

    async def reader() -> None:
        it: Iterator[Batch] = source.batches(batch)
        async with work_send:
            for bid in range(1 << 62):
                b = await trio.to_thread.run_sync(next, it, None, abandon_on_cancel=True)
                if b is None:
                    return
                report.add("in", len(b.records))
                pending[bid] = [len(b.records), b]
                if not b.records:
                    await trio.to_thread.run_sync(b.ack)
                for rec in b.records:
                    await work_send.send((bid, rec))

    async def worker(recv: Any, send: Any) -> None:
        async with send:
            async for bid, lease in recv:
                f = await fetcher.fetch(lease)
                f.token = bid
                await send.send(f)

    async def store_task() -> None:
        async with out_send:
            async for first in store_recv:
                items = [first]
                while len(items) < group:
                    try:
                        items.append(store_recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await trio.to_thread.run_sync(store_group, writer, fetcher.history, items)
                await out_send.send(items)

    async def output() -> None:
        async for items in out_recv:
            await trio.to_thread.run_sync(sink.write, [it.record for it in items])
            for it in items:
                report.add("out")
                report.add(f"outcome/{it.record['outcome']}")
                entry = pending[it.token]
                entry[0] -= 1
                if entry[0] == 0:
                    del pending[it.token]
                    await trio.to_thread.run_sync(entry[1].ack)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        async with store_send, work_recv:
            for _ in range(max(1, fetcher.cfg.concurrency)):
                nursery.start_soon(worker, work_recv.clone(), store_send.clone())
        nursery.start_soon(store_task)
        nursery.start_soon(output)


@dataclass
class StoreOptions:
    compression: str = "gzip"
    max_size: int = 1 << 30
    prefix: str = "crawl"


@asynccontextmanager
async def open_fetcher(
    crawl_dir: CrawlDir,
    cfg: FetchConfig,
    *,
    overrides: dict[str, list[str]] | None = None,
    fallback: bool = True,
    policy: AddressPolicy | None = None,
    store: StoreOptions | None = None,
) -> AsyncIterator[tuple[Fetcher, WarcWriter]]:
    """Everything a fetch needs, opened on one crawl directory and closed after.

    Usage (inside trio)::

        async with open_fetcher(CrawlDir(d), FetchConfig(), overrides=hosts) as (f, w):
            results = await fetch_batch(f, w, leases)
    """
    env = open_env(crawl_dir.fetchstate)
    policy = policy or AddressPolicy()
    store = store or StoreOptions()
    resolver = Resolver(overrides or {}, fallback=fallback, env=env)
    transport = make_transport(resolver, policy, max_origins=max(64, cfg.concurrency * 4))
    writer = WarcWriter(crawl_dir.warc, prefix=store.prefix, max_size=store.max_size,
                        compression=store.compression,
                        info={"operator-agent": cfg.user_agent, "robots": "obey" if cfg.robots else "ignore"})
    robots = RobotsFetcher(transport, RobotsCache(env), user_agent=cfg.user_agent, limits=cfg.limits,
                           hop_delay=cfg.host_delay)
    fetcher = Fetcher(cfg, transport, resolver, policy, history=History(env), robots=robots)
    try:
        yield fetcher, writer
    finally:
        with trio.CancelScope(shield=True):
            await transport.aclose()
        writer.close()


def run_fetch(source: Source, sink: Sink, report: Report, crawl_dir: CrawlDir, cfg: FetchConfig,
              **opts: Any) -> None:
    """Blocking entry point for ``crawl fetch``: one trio run over the whole input.

    SIGINT/SIGTERM cancel the run; a WARC group being written is finished
    (its thread is not abandoned) and KeyboardInterrupt is raised afterwards,
    which the command boundary turns into exit status 130.
    """
    interrupted = False

    async def main() -> None:
        nonlocal interrupted
        async with open_fetcher(crawl_dir, cfg, **opts) as (fetcher, writer):
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal interrupted
                    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                        async for _ in sigs:
                            interrupted = True
                            nursery.cancel_scope.cancel()
                            return

                nursery.start_soon(watch)
                await fetch_all(source, sink, fetcher, writer, report)
                nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        # trio groups task failures; one failure (a closed stdout, a full disk)
        # is re-raised alone so the command boundary can word it properly.
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    if interrupted:
        raise KeyboardInterrupt


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
