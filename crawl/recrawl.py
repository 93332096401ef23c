"""The re-crawl stage: per-URL change history, importance, and due URLs.

Why a separate store from crawl/history.py: that table holds what the last
fetch said (validators for a conditional GET); this one holds what the
freshness model learns over many fetches (change observations, in-links,
sitemap hints) and the schedule. It lives in its own LMDB environment,
``DIR/recrawl``, so it can be rebuilt from the crawl log (``crawl recrawl
--from-log``) without touching anything else.

Databases:

``pages``   xxh3-128(url) -> JSON page state: url, host, depth, last (time
            of the last successful fetch), hs/hd (simhash / payload digest
            seen then), etag, lm, obs [[interval s, changed 0|1], ...] (the
            last ``window``), n, changes, rate, imp, in (parent hashes), home,
            sp (sitemap priority), cf (changefreq), next, slot [class, ms].
``due``     class (0 ping, 1 sitemap/feed hint, 2 model) + due ms + url key
            -> b"": the schedule, scanned in that order.
``hosts``   host -> [sum of page rates, pages]: the prior for new pages.
``meta``    wsum (sum of rate x importance, for the budget's c), last_emit.

A URL is scheduled only after its first successful fetch is observed:
discovering new URLs is the frontier's job, keeping known ones fresh is
ours. A ping is the exception: it enqueues even an unknown URL.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import xxhash

from . import records
from .freshness import (
    CHANGEFREQ_RATE,
    DAY,
    c_for_budget,
    estimate_rate,
    mu_for_c,
    next_interval,
    optimal_interval,
    solve_mu,
)
from .history import url_key
from .politeness import host_of
from .records import Record
from .state import CrawlDir, close_env, open_env

PING, HINT, MODEL = 0, 1, 2
_REASON = {PING: "ping", HINT: "hint", MODEL: "recrawl"}
_PRIORITY = {PING: 0, HINT: 0, MODEL: 2}  # frontier levels: 0 high .. 9 low
_MS = struct.Struct(">Q")
_GONE = frozenset({404, 410})
_SITEMAP = frozenset({"sitemap", "sitemap-index", "feed"})


@dataclass
class RecrawlConfig:
    """How the freshness model schedules visits.

    Args:
        min_interval / max_interval: the clamp on any page's revisit interval.
        c: changes (x importance) a page of average rate may accumulate
            before a revisit; used when ``budget`` is 0.
        policy: "optimal" (freshness-optimal intervals, see
            freshness.optimal_interval) or "proportional" (the literal
            ``c / (rate x importance)``).
        budget: total fetch capacity, fetches/second (0: use ``c``).
        share: the fraction of ``budget`` reserved for re-crawls; the rest is
            discovery's (see freshness.split_budget).
        default_rate: prior change rate (per second) for a host with no data.
        prior_weight: pseudo-changes the prior is worth (estimate_rate).
        window: observations kept per URL (older ones are forgotten, so a
            page whose habits change is re-learnt).
        reemit: after emitting a URL, wait this long before emitting it
            again if no fetch result arrives (a lost or slow fetch).
    """

    min_interval: float = 3600.0
    max_interval: float = 90 * DAY
    c: float = 0.5
    policy: str = "optimal"
    budget: float = 0.0
    share: float = 0.5
    default_rate: float = 1 / (7 * DAY)
    prior_weight: float = 0.5
    window: int = 32
    reemit: float = 3600.0
    replan_every: float = 3600.0
    replan_sample: int = 5000


def _due_key(cls: int, t: float, key: bytes) -> bytes:
    return bytes([cls]) + _MS.pack(max(0, math.ceil(t * 1000))) + key


def _num(v: object) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _iso_time(text: object) -> float | None:
    """A sitemap/feed lastmod (W3C datetime, a profile of ISO 8601) in unix seconds."""
    if not isinstance(text, str) or not text:
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:  # a bare date: the protocol says UTC is meant
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def importance(page: dict[str, Any]) -> float:
    """How much a page's freshness matters, ~1 for an ordinary page.

    Signals from the design note: in-links (log-scaled, so a nav link on
    every page does not dominate), links from home pages, shallow depth,
    and the sitemap's own <priority> (0.0-1.0, default 0.5).
    """
    imp = 1.0 + 0.5 * math.log2(1 + len(page.get("in") or ()))
    depth = page.get("depth")
    if isinstance(depth, int):
        imp *= 1.5 if depth == 0 else 1.0 / (1 + 0.25 * max(depth - 1, 0))
    if page.get("home"):
        imp *= 1.5
    sp = _num(page.get("sp"))
    if sp is not None:
        imp *= 0.5 + 2 * min(max(sp, 0.0), 1.0)  # 0.5 -> x1.5, 1.0 -> x2.5, 0.0 -> x0.5
    return min(max(imp / 2.0, 0.1), 10.0)


def _hashes(rec: Record) -> tuple[str | None, str | None]:
    hs = rec.get("simhash")
    hd = rec.get("digest")
    return (hs if isinstance(hs, str) else None), (hd if isinstance(hd, str) else None)


def changed_since(page: dict[str, Any], rec: Record) -> bool | None:
    """Did the content change since the stored copy? None when we cannot tell.

    The simhash of the boilerplate-free text is the content hash that
    counts (a rotating advert must not look like a change); the payload
    digest is the fallback. A 304 is unchanged for free (RFC 9110 15.4.5).
    """
    if rec.get("outcome") == "not-modified":
        return False
    hs, hd = _hashes(rec)
    if hs and page.get("hs"):
        return bool(hs != page["hs"])
    if hd and page.get("hd"):
        return bool(hd != page["hd"])
    return None


class Recrawler:
    """The freshness model over one crawl directory. ``now`` is always passed in.

    Every public method runs in one write transaction that commits (fsynced)
    before it returns, so output is written only after the state it
    reflects is durable.
    """

    def __init__(self, cdir: CrawlDir, cfg: RecrawlConfig | None = None, *, sync: bool = True) -> None:
        self.env = open_env(cdir.sub("recrawl"), max_dbs=8, sync=sync)
        self.pages = self.env.open_db(b"pages")
        self.dueq = self.env.open_db(b"due")
        self.hosts = self.env.open_db(b"hosts")
        self.meta = self.env.open_db(b"meta")
        self.cfg = cfg or self.saved_config()

    def saved_config(self) -> RecrawlConfig:
        """The settings last given with :meth:`configure` (defaults otherwise)."""
        with self.env.begin() as txn:
            raw = txn.get(b"config", db=self.meta)
        fields = orjson.loads(raw) if raw else {}
        known = RecrawlConfig.__dataclass_fields__
        return RecrawlConfig(**{k: v for k, v in fields.items() if k in known})

    def configure(self, **overrides: float) -> RecrawlConfig:
        """Change settings and keep them in the crawl directory, so every later
        command (and ``crawl run --recrawl``) schedules the same way."""
        cfg = self.saved_config()
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        with self.env.begin(write=True) as txn:
            txn.put(b"config", orjson.dumps(cfg.__dict__), db=self.meta)
        self.cfg = cfg
        return cfg

    def __enter__(self) -> Recrawler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        close_env(self.env)

    # ---- small helpers (inside a transaction) ---------------------------

    def _get(self, txn: Any, key: bytes, url: str) -> dict[str, Any] | None:
        raw = txn.get(key, db=self.pages)
        if raw is None:
            return None
        page: dict[str, Any] = orjson.loads(raw)
        return page if page.get("url") == url else None  # a 128-bit collision: ignore

    def _meta_float(self, txn: Any, name: bytes) -> float:
        raw = txn.get(name, db=self.meta)
        return float(raw) if raw else 0.0

    def _reslot(self, txn: Any, key: bytes, page: dict[str, Any], cls: int | None, t: float = 0.0) -> None:
        old = page.get("slot")
        if old:
            txn.delete(bytes([old[0]]) + _MS.pack(old[1]) + key, db=self.dueq)
        if cls is None:
            page["slot"] = None
            return
        k = _due_key(cls, t, key)
        txn.put(k, b"", db=self.dueq)
        page["slot"] = [cls, _MS.unpack(k[1:9])[0]]
        page["next"] = t

    def _host_prior(self, txn: Any, host: str) -> float:
        raw = txn.get(host.encode(), db=self.hosts)
        if raw:
            total, n = orjson.loads(raw)
            if n > 0 and total > 0:
                return float(total) / n
        return self.cfg.default_rate

    def _host_add(self, txn: Any, host: str, rate: float, n: int) -> None:
        raw = txn.get(host.encode(), db=self.hosts)
        total, count = orjson.loads(raw) if raw else (0.0, 0)
        txn.put(host.encode(), orjson.dumps([max(total + rate, 0.0), max(count + n, 0)]), db=self.hosts)

    def _c(self, txn: Any) -> float:
        """The proportional policy's c, or the optimal policy's mu."""
        cfg = self.cfg
        wsum = self._meta_float(txn, b"wsum")
        if cfg.policy == "proportional":
            if cfg.budget > 0 and wsum > 0:
                return c_for_budget(wsum, cfg.budget * cfg.share)
            return cfg.c
        if cfg.budget > 0 and txn.get(b"mu", db=self.meta) is not None:
            return self._meta_float(txn, b"mu")
        return mu_for_c(cfg.c, cfg.default_rate)

    def _interval(self, c: float, rate: float, imp: float) -> float:
        cfg = self.cfg
        if cfg.policy == "proportional":
            return next_interval(rate, imp, c, cfg.min_interval, cfg.max_interval)
        return optimal_interval(rate, imp, c, cfg.min_interval, cfg.max_interval)

    def replan(self, now: float) -> float | None:
        """Solve the optimal policy's mu for ``budget x share`` fetches/second.

        Pages are keyed by a hash, so the first ``replan_sample`` of them are
        a random sample; their load is scaled to the whole set. Done at most
        every ``replan_every`` seconds (``due`` calls it); pages pick the new
        mu up at their next visit.
        """
        cfg = self.cfg
        if cfg.policy != "optimal" or cfg.budget <= 0:
            return None
        with self.env.begin(write=True) as txn:
            last = txn.get(b"replanned", db=self.meta)
            if last is not None and now - float(last) < cfg.replan_every:
                return None
            sample: list[tuple[float, float]] = []
            for _, raw in txn.cursor(db=self.pages):
                page = orjson.loads(raw)
                if page.get("rate") is not None and page.get("slot"):
                    sample.append((page["rate"], page["imp"]))
                    if len(sample) >= cfg.replan_sample:
                        break
            rated = max(self._meta_float(txn, b"rated"), len(sample), 1)
            mu = solve_mu(sample, cfg.budget * cfg.share * len(sample) / rated,
                          cfg.min_interval, cfg.max_interval)
            txn.put(b"mu", repr(mu).encode(), db=self.meta)
            txn.put(b"replanned", repr(now).encode(), db=self.meta)
        return mu

    def _refit(self, txn: Any, page: dict[str, Any]) -> None:
        """Re-estimate rate and importance; keep the host and budget sums in step."""
        host = page["host"]
        old_rate, old_imp = page.get("rate"), page.get("imp")
        counted = page.get("counted", False)
        if counted and old_rate is not None:
            self._host_add(txn, host, -old_rate, -1)
        prior = CHANGEFREQ_RATE.get(str(page.get("cf")), 0.0) or self._host_prior(txn, host)
        rate = estimate_rate(((t, bool(ch)) for t, ch in page.get("obs", ())), prior, self.cfg.prior_weight)
        imp = importance(page)
        page["rate"], page["imp"] = rate, imp
        # a page speaks for its host once it has a few observations of its own
        page["counted"] = len(page.get("obs", ())) >= 2
        if page["counted"]:
            self._host_add(txn, host, rate, 1)
        wsum = self._meta_float(txn, b"wsum") + rate * imp
        if old_rate is not None and old_imp is not None:
            wsum -= old_rate * old_imp
        else:
            txn.put(b"rated", repr(self._meta_float(txn, b"rated") + 1).encode(), db=self.meta)
        txn.put(b"wsum", repr(max(wsum, 0.0)).encode(), db=self.meta)

    def _new_page(self, url: str) -> dict[str, Any]:
        return {"url": url, "host": host_of(url), "obs": [], "n": 0, "changes": 0, "slot": None}

    # ---- public API -------------------------------------------------------

    def observe(self, fetches: Iterable[Record], now: float) -> dict[str, int]:
        """Learn from fetch results (and crawl-log fetch events) and reschedule.

        ``ok`` and ``not-modified`` results add one observation (changed or
        not) per re-visit; a repeated result (same or older fetch time, as
        at-least-once delivery gives) changes nothing. 404/410 park the page
        at the longest interval. Other failures leave the schedule alone:
        the frontier retries them, and an emitted URL is re-emitted after
        ``reemit`` seconds if no result comes.
        """
        counts = {"observed": 0, "changed": 0, "unchanged": 0, "first": 0, "repeat": 0, "ignored": 0}
        with self.env.begin(write=True) as txn:
            c = self._c(txn)
            for rec in fetches:
                url = rec.get("url")
                outcome = rec.get("outcome")
                if not isinstance(url, str) or not url:
                    counts["ignored"] += 1
                    continue
                try:
                    key = url_key(url)
                    page = self._get(txn, key, url) or self._new_page(url)
                except ValueError:
                    counts["ignored"] += 1
                    continue
                t = _num(rec.get("fetched_at")) or _num(rec.get("ts")) or now
                if outcome not in ("ok", "not-modified"):
                    if rec.get("status") in _GONE and page.get("last") is not None:
                        self._reslot(txn, key, page, MODEL, t + self.cfg.max_interval)
                        txn.put(key, orjson.dumps(page), db=self.pages)
                    counts["ignored"] += 1
                    continue
                last = _num(page.get("last"))
                if last is not None and t <= last:
                    counts["repeat"] += 1
                    continue
                counts["observed"] += 1
                if isinstance(rec.get("depth"), int):
                    d = page.get("depth")
                    page["depth"] = rec["depth"] if d is None else min(d, rec["depth"])
                ch = changed_since(page, rec) if last is not None else None
                if last is not None and ch is not None:
                    page["obs"] = (page.get("obs", []) + [[round(t - last, 3), int(ch)]])[-self.cfg.window:]
                    page["changes"] = page.get("changes", 0) + ch
                    counts["changed" if ch else "unchanged"] += 1
                elif last is None:
                    counts["first"] += 1
                page["n"] = page.get("n", 0) + 1
                page["last"] = t
                hs, hd = _hashes(rec)
                if hs:
                    page["hs"] = hs
                if hd:
                    page["hd"] = hd
                for f in ("etag", "last_modified"):
                    if isinstance(rec.get(f), str):
                        page[f] = rec[f]
                self._refit(txn, page)
                interval = self._interval(c, page["rate"], page["imp"])
                self._reslot(txn, key, page, MODEL, t + interval)
                txn.put(key, orjson.dumps(page), db=self.pages)
        return counts

    def observe_links(self, links: Iterable[Record], now: float) -> dict[str, int]:
        """Learn importance from link records; sitemap/feed lastmod become hints.

        A sitemap or feed entry whose ``lastmod`` is later than our last
        fetch of that URL says exactly what changed: it is enqueued ahead of
        the model. Its ``changefreq`` becomes the page's prior rate and its
        ``priority`` a factor of its importance.
        """
        counts = {"links": 0, "hints": 0, "ignored": 0}
        with self.env.begin(write=True) as txn:
            for rec in links:
                url = rec.get("url")
                if rec.get("kind") not in records.URL_KINDS or not isinstance(url, str) or not url:
                    counts["ignored"] += 1
                    continue
                try:
                    key = url_key(url)
                    page = self._get(txn, key, url) or self._new_page(url)
                except ValueError:
                    counts["ignored"] += 1
                    continue
                counts["links"] += 1
                parent = rec.get("parent")
                if isinstance(parent, str) and parent != url:
                    ph = xxhash.xxh64_hexdigest(parent.encode("utf-8", "surrogatepass"))[:10]
                    inl = page.setdefault("in", [])
                    if ph not in inl and len(inl) < 64:
                        inl.append(ph)
                    if parent.split("://", 1)[-1].split("/", 1)[-1] in ("", "index.html"):
                        page["home"] = True
                d = rec.get("depth")
                if isinstance(d, int) and not isinstance(d, bool):
                    page["depth"] = d if page.get("depth") is None else min(page["depth"], d)
                if rec.get("source") in _SITEMAP:
                    # <priority> 0.0-1.0; not the frontier's integer "priority"
                    sp = rec.get("sitemap_priority", rec.get("priority"))
                    if isinstance(sp, str | float) and not isinstance(sp, bool):
                        try:
                            page["sp"] = float(sp)
                        except ValueError:
                            pass
                    cf = rec.get("changefreq")
                    if isinstance(cf, str) and cf.lower() in CHANGEFREQ_RATE:
                        page["cf"] = cf.lower()
                    lm = _iso_time(rec.get("lastmod"))
                    last = _num(page.get("last"))
                    if lm is not None and last is not None and lm > last:
                        slot = page.get("slot")
                        if not slot or slot[0] > HINT:
                            self._reslot(txn, key, page, HINT, now)
                            counts["hints"] += 1
                if page.get("rate") is not None:
                    self._refit(txn, page)
                txn.put(key, orjson.dumps(page), db=self.pages)
        return counts

    def ping(self, urls: Iterable[str], now: float) -> int:
        """Enqueue URLs ahead of the model (a publisher said they changed)."""
        n = 0
        with self.env.begin(write=True) as txn:
            for url in urls:
                key = url_key(url)
                page = self._get(txn, key, url) or self._new_page(url)
                self._reslot(txn, key, page, PING, now)
                txn.put(key, orjson.dumps(page), db=self.pages)
                n += 1
        return n

    def due(self, now: float, limit: int) -> list[Record]:
        """Up to ``limit`` URL records due at ``now``: pings, then hints, then
        the model's most overdue. Each is rescheduled ``reemit`` seconds
        ahead, so a fetch that never reports back is asked for again."""
        out: list[Record] = []
        now_ms = math.floor(now * 1000)
        self.replan(now)
        with self.env.begin(write=True) as txn:
            picked: list[bytes] = []
            cur = txn.cursor(db=self.dueq)
            for cls in (PING, HINT, MODEL):
                if len(picked) >= limit or not cur.set_range(bytes([cls])):
                    continue
                for k in cur.iternext(values=False):
                    if k[0] != cls or _MS.unpack(k[1:9])[0] > now_ms or len(picked) >= limit:
                        break
                    picked.append(k)
            for k in picked:
                key = k[9:]
                raw = txn.get(key, db=self.pages)
                if raw is None:
                    txn.delete(k, db=self.dueq)
                    continue
                page = orjson.loads(raw)
                cls = k[0]
                rec = records.make("url", url=page["url"], priority=_PRIORITY[cls], due=now,
                                   reason=_REASON[cls])
                for f in ("etag", "last_modified", "depth"):
                    if page.get(f) is not None:
                        rec[f] = page[f]
                if page.get("rate") is not None:
                    rec["rate"] = page["rate"]
                    rec["importance"] = page["imp"]
                out.append(rec)
                self._reslot(txn, key, page, MODEL, now + self.cfg.reemit)
                txn.put(key, orjson.dumps(page), db=self.pages)
        return out

    def backlog(self, now: float) -> int:
        """URLs due (any class) but not yet emitted: the re-crawl backlog."""
        now_ms = math.floor(now * 1000)
        n = 0
        with self.env.begin() as txn:
            cur = txn.cursor(db=self.dueq)
            for cls in (PING, HINT, MODEL):
                if not cur.set_range(bytes([cls])):
                    continue
                for k in cur.iternext(values=False):
                    if k[0] != cls or _MS.unpack(k[1:9])[0] > now_ms:
                        break
                    n += 1
        return n

    def allowance(self, now: float, per_second: float, burst: float = 60.0) -> int:
        """How many URLs a budget of ``per_second`` allows now (a token bucket
        refilled since the last call, holding at most ``burst`` seconds)."""
        with self.env.begin(write=True) as txn:
            last = txn.get(b"last_emit", db=self.meta)
            tokens = self._meta_float(txn, b"tokens")
            elapsed = burst if last is None else max(0.0, now - float(last))
            tokens = min(tokens + elapsed * per_second, max(burst * per_second, 1.0))
            n = math.floor(tokens)
            txn.put(b"last_emit", repr(now).encode(), db=self.meta)
            txn.put(b"tokens", repr(tokens - n).encode(), db=self.meta)
        return n

    def get(self, url: str) -> dict[str, Any] | None:
        """One URL's model state (for ``crawl recrawl show`` and tests)."""
        with self.env.begin() as txn:
            return self._get(txn, url_key(url), url)

    def stats(self, now: float) -> dict[str, Any]:
        """Counts for ``crawl recrawl stats`` and ``crawl stats``."""
        with self.env.begin() as txn:
            pages = txn.stat(self.pages)["entries"]
            scheduled = txn.stat(self.dueq)["entries"]
            pings = hints = 0
            cur = txn.cursor(db=self.dueq)
            for cls in (PING, HINT):
                if cur.set_range(bytes([cls])):
                    for k in cur.iternext(values=False):
                        if k[0] != cls:
                            break
                        pings += cls == PING
                        hints += cls == HINT
            c = self._c(txn)
        key = "c" if self.cfg.policy == "proportional" else "mu"
        return {"pages": pages, "scheduled": scheduled, "backlog": self.backlog(now),
                "pings": pings, "hints": hints, "policy": self.cfg.policy, key: c}
