"""One fetch: a lease in, a fetch record and the captures to archive out.

:meth:`Fetcher.fetch` does, in order: resolve the host (override, cache,
system) and check the address policy; robots.txt for the origin (cached;
fetched inside this lease, so it is polite); the GET with conditional
headers from the URL's history; then it classifies what happened into one
``outcome`` (see :data:`crawl.core.records.OUTCOMES`). Redirects are never
followed here: the Location goes out in the result and becomes a new URL
for the frontier, so a cross-host redirect waits for its own host's turn.
The lease's ``hops`` says how many redirects led to it; a redirect past
``records.MAX_REDIRECTS`` of them is ``redirect-limit``, stored and not
followed. A robots.txt that cannot be read (5xx, timeout) makes the result
``robots-unreachable``, not ``robots-disallowed``: the URL is not refused
by a rule, it waits (``retry_after``) until robots.txt is checked again.

Nothing here writes: the captures go to the single WARC writer of
:mod:`crawl.fetch`, which releases the record only after they are durable.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import trio

from crawl.canon import CanonError, canonicalize
from crawl.core import AGENT_TOKEN as AGENT_TOKEN
from crawl.core import DEFAULT_USER_AGENT as DEFAULT_USER_AGENT
from crawl.core import Record, records
from crawl.frontier import parse_retry_after
from crawl.net import AddressPolicy, DnsError, Exchange, Limits, OriginPools, Resolver, exchange
from crawl.recrawl import History
from crawl.robots import RobotsFetcher, RobotsInfo
from crawl.store import Capture, warc_date

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
    robots_retry: float = 60.0  # first wait before an unreachable robots.txt is checked again


def type_wanted(content_type: str | None, wanted: tuple[str, ...]) -> bool:
    """HTML, XHTML, XML (incl. ``+xml``) and plain text by default; no header: yes."""
    if not content_type or "*/*" in wanted:
        return True
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in wanted or (any(w.endswith("xml") for w in wanted) and mime.endswith("+xml"))


def retry_after(value: str | None, now: float) -> float | None:
    """RFC 9110 section 10.2.3: delay-seconds or an HTTP-date, as seconds from now."""
    return parse_retry_after(value, now)


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
        transport: OriginPools,
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
        ended: list[float] = []  # when each answer of this lease ended (robots.txt, the page)

        def done(outcome: str, error: str | None = None, **extra: Any) -> Fetched:
            # The lease's time ends with its last answer as received (not with the
            # digest or the WARC write after it): the crawl log's seconds, and
            # ended_at, from which the frontier counts the host's delay.
            end = max(ended) if ended else time.perf_counter()
            timings["total"] = round(end - t0, 6)
            rec.update(outcome=outcome, timings=timings, ended_at=round(self._wall(end), 6), **extra)
            if error:
                rec["error"] = error
            if not out.captures or out.captures[-1] is not out.page:
                meta = {k: rec.get(k) for k in ("outcome", "status", "error", "timings", "ip")}
                out.captures.append(Capture(url, "none", now, meta, ip=rec.get("ip")))
            return out

        try:
            if lease.get("kind") != "lease":  # a plain URL: validated as every stage does
                canonicalize(url)
            parts = urlsplit(url)
            host = parts.hostname
            parts.port  # noqa: B018 -- raises on a bad port
        except CanonError as exc:
            return done("invalid-url", str(exc))
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
            ended.extend(ex.ended for ex in exchanges if ex.ended)
            out.captures.extend(self._captures_for_robots(exchanges, now))
            delay = info.robots.crawl_delay(self.cfg.agent_token)
            if delay is not None:
                rec["crawl_delay"] = delay
            if not info.robots.allowed(url, self.cfg.agent_token):
                extra = _robots_fields(info, url, self.cfg, float(self.clock()))
                outcome = "robots-unreachable" if info.verdict == "unreachable" else "robots-disallowed"
                return done(outcome, extra.pop("error", None), **extra)
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
            headers += self.history.conditional_headers(url, lease, hist or {})
        ex = await exchange(self.transport, url, headers, self.cfg.limits,
                            want_body=lambda e: not (200 <= e.status < 300)
                            or type_wanted(e.header("content-type"), self.cfg.content_types))
        ended.append(ex.ended)
        return self._classify(ex, out, hist, now, timings, done, ended_at=self._wall(ex.ended))

    def _wall(self, perf: float) -> float:
        """The wall-clock time of a perf_counter() reading. perf_counter first: a
        pause between the two readings can only make the answer seem to end
        later (a longer wait), never earlier."""
        p = time.perf_counter()
        return float(self.clock()) - (p - perf)

    def _classify(self, ex: Exchange, out: Fetched, hist: dict[str, Any] | None, now: float,
                  timings: dict[str, float], done: Any, ended_at: float | None = None) -> Fetched:
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
        # An HTTP-date counts from the end of the answer, as the frontier's wait does.
        ra = retry_after(ex.header("retry-after"), now if ended_at is None else ended_at)
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
            hops = rec.get("hops")
            if type(hops) is int and hops >= records.MAX_REDIRECTS:
                rec["error"] = (f"{hops} redirects in a row led here; this one is stored, not followed "
                                f"(at most {records.MAX_REDIRECTS})")
                return self._page(out, cap, done, "redirect-limit")
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
    from crawl.store import sha1_label

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
        # not a rule: the file could not be read. The frontier keeps the URL and
        # leases the host again when robots.txt is due to be checked again.
        wait = round(max(1.0, info.expires - now), 3)
        extra["retry_after"] = wait
        extra["error"] = (f"robots.txt unreachable ({info.error}); nothing is fetched from this host "
                          f"until it can be read: next check in {wait:.0f} s")
    return extra
