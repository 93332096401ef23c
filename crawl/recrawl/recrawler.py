"""The re-crawl stage: per-URL change history, importance, and due URLs.

Why a separate store from crawl/recrawl/history.py: that table holds what the last
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
from collections.abc import Iterable
from typing import Any

import orjson

from crawl.canon import host_key as host_of
from crawl.core import MAP_BUDGET, CrawlDir, MapTrimmer, Record, close_env, open_env, records

from .freshness import (
    CHANGEFREQ_RATE,
    c_for_budget,
    estimate_rate,
    mu_for_c,
    next_interval,
    optimal_interval,
    solve_mu,
)
from .history import url_key
from .page import (
    GONE,
    HINT,
    MODEL,
    MS,
    PING,
    PRIORITY,
    REASON,
    RecrawlConfig,
    changed_since,
    due_key,
    importance,
    learn_fetch,
    learn_link,
    news_for,
    num,
    parent_signals,
    saturated,
)

__all__ = ["RecrawlConfig", "Recrawler", "changed_since", "importance"]

OBSERVE_CHUNK = 2048  # URLs per write transaction of observe_links: bounds its dirty pages (~8 MB)
TRIM_EVERY = 128  # URLs of a batch between two looks at this process's resident map pages
# Saturated pages remembered (URL -> depth; see Recrawler._saturated), then forgotten all at
# once: at most this many URLs, and at most this many characters of them (~100 bytes of
# dict and string a URL besides its characters: ~7 MB at most, ~4 MB for 80-character URLs).
SATURATED_MEMO, SATURATED_CHARS = 32768, 4 << 20


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
        # A batch's links touch random pages of a map that grows ~400 bytes a
        # discovered URL, and the kernel maps ~16 neighbours of each: one batch
        # of link-heavy pages mapped the whole file (160 MB resident on 2,000
        # realistic hosts). Looked at every TRIM_EVERY URLs while a batch runs.
        self.trimmer = MapTrimmer(MAP_BUDGET, every=TRIM_EVERY)
        # Navigation targets: ~45% of a batch's links go to pages whose in-link list is
        # full and that a home page links to already (page.saturated). Both only grow, so
        # such a page needs reading again only for a link that is shallower than its
        # depth when it was read, or a sitemap entry (page.news_for): reading and
        # decoding it for each batch was ~a third of observe_links (issue 19). A page's
        # depth only falls, so a remembered one is never too low to read for.
        self._saturated: dict[str, int | None] = {}
        self._saturated_chars = 0

    def saved_config(self) -> RecrawlConfig:
        """The settings last given with :meth:`configure` (defaults otherwise)."""
        with self.env.begin() as txn:
            raw = txn.get(b"config", db=self.meta)
        fields = orjson.loads(raw) if raw else {}
        known = RecrawlConfig.__dataclass_fields__
        return RecrawlConfig(**{k: v for k, v in fields.items() if k in known})

    def configure(self, **overrides: float | str | None) -> RecrawlConfig:
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

    def _page_of(self, txn: Any, url: object, host: object = None) -> tuple[bytes, dict[str, Any], bool] | None:
        """The page state of a record's URL, and whether it is new (not stored yet);
        None for a bad URL. ``host``: the record's own, when it has one."""
        if not isinstance(url, str) or not url:
            return None
        try:
            key = url_key(url)
            page = self._get(txn, key, url)
            if page is not None:
                return key, page, False
            return key, self._new_page(url, host if isinstance(host, str) and host else None), True
        except ValueError:
            return None

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
            txn.delete(bytes([old[0]]) + MS.pack(old[1]) + key, db=self.dueq)
        if cls is None:
            page["slot"] = None
            return
        k = due_key(cls, t, key)
        txn.put(k, b"", db=self.dueq)
        page["slot"] = [cls, MS.unpack(k[1:9])[0]]
        page["next"] = t

    def _host_prior(self, txn: Any, host: str) -> float:
        raw = txn.get(host.encode(), db=self.hosts)
        if raw:
            total, n = orjson.loads(raw)
            if n > 0 and total > 0:
                return float(total / n)
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

    def replan(self, now: float, force: bool = False) -> float | None:
        """Solve the optimal policy's mu for ``budget x share`` fetches/second.

        Pages are keyed by a hash, so the first ``replan_sample`` of them are
        a random sample; their load is scaled to the whole set. Done at most
        every ``replan_every`` seconds (``due`` calls it). Pages pick a new mu
        up at their next visit, unless it moved by 2x or more (the first plan,
        a new budget): then every model-scheduled page is rescheduled now, or
        a page planned under a wrong mu could wait up to ``max_interval``.
        """
        cfg = self.cfg
        if cfg.policy != "optimal" or cfg.budget <= 0:
            return None
        with self.env.begin(write=True) as txn:
            last = txn.get(b"replanned", db=self.meta)
            if not force and last is not None and now - float(last) < cfg.replan_every:
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
            old = txn.get(b"mu", db=self.meta)
            txn.put(b"mu", repr(mu).encode(), db=self.meta)
            txn.put(b"replanned", repr(now).encode(), db=self.meta)
            if old is None or not 0.5 < mu / float(old) < 2.0:
                self._reschedule_all(txn, mu)
        return mu

    def _reschedule_all(self, txn: Any, c: float) -> None:
        moves = []
        for key, raw in txn.cursor(db=self.pages):
            page = orjson.loads(raw)
            slot, last = page.get("slot"), num(page.get("last"))
            if slot and slot[0] == MODEL and last is not None and page.get("rate") is not None:
                moves.append((bytes(key), page, last + self._interval(c, page["rate"], page["imp"])))
        for key, page, t in moves:
            self._reslot(txn, key, page, MODEL, t)
            txn.put(key, orjson.dumps(page), db=self.pages)

    def _refit(self, txn: Any, page: dict[str, Any]) -> None:
        """Re-estimate rate and importance; keep the host and budget sums in step."""
        host = page["host"]
        old_rate, old_imp = page.get("rate"), page.get("imp")
        counted = page.get("counted", False)
        if counted and old_rate is not None:
            self._host_add(txn, host, -old_rate, -1)
        prior = CHANGEFREQ_RATE.get(str(page.get("cf")), 0.0) or self._host_prior(txn, host)
        rate = estimate_rate(((t, bool(ch)) for t, ch in page.get("obs", ())), prior, self.cfg.prior_weight,
                             page.get("old") or (0.0, 0.0, 0.0))
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

    def _new_page(self, url: str, host: str | None = None) -> dict[str, Any]:
        return {"url": url, "host": host or host_of(url), "obs": [], "n": 0, "changes": 0, "slot": None}

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
        counts = dict.fromkeys(("observed", "changed", "unchanged", "unknown", "first", "repeat", "ignored"), 0)
        with self.env.begin(write=True) as txn:
            c = self._c(txn)
            unplanned = self.cfg.budget > 0 and txn.get(b"mu", db=self.meta) is None
            for rec in fetches:
                outcome = rec.get("outcome")
                found = self._page_of(txn, rec.get("url"))
                if found is None:
                    counts["ignored"] += 1
                    continue
                key, page, _ = found
                t = num(rec.get("fetched_at")) or num(rec.get("ts")) or now
                if outcome not in ("ok", "not-modified"):
                    if rec.get("status") in GONE and page.get("last") is not None:
                        self._reslot(txn, key, page, MODEL, t + self.cfg.max_interval)
                        txn.put(key, orjson.dumps(page), db=self.pages)
                    counts["ignored"] += 1
                    continue
                got = learn_fetch(page, rec, t, self.cfg.window)
                counts[got] += 1
                if got == "repeat":
                    continue
                counts["observed"] += 1
                self._refit(txn, page)
                slot = page.get("slot")
                if not (slot and slot[0] < MODEL and slot[1] > t * 1000):  # a ping after this fetch stands
                    self._reslot(txn, key, page, MODEL, t + self._interval(c, page["rate"], page["imp"]))
                txn.put(key, orjson.dumps(page), db=self.pages)
        if unplanned and counts["observed"]:
            self.replan(now, force=True)  # the first plan: schedule by the budget from the start
        return counts

    def observe_links(self, links: Iterable[Record], now: float) -> dict[str, int]:
        """Learn importance from link records; sitemap/feed lastmod become hints.

        A sitemap or feed entry whose ``lastmod`` is later than our last
        fetch of that URL says exactly what changed: it is enqueued ahead of
        the model. Its ``changefreq`` becomes the page's prior rate and its
        ``priority`` a factor of its importance.
        """
        counts = {"links": 0, "hints": 0, "ignored": 0}
        # A batch links to the same pages again and again (navigation, related
        # articles): each page is read, taught all its links and written once.
        by_url: dict[str, list[Record]] = {}
        for rec in links:
            url = rec.get("url")
            if rec.get("kind") in records.URL_KINDS and isinstance(url, str) and url:
                by_url.setdefault(url, []).append(rec)
            else:
                counts["ignored"] += 1
        signals: dict[str | None, tuple[str, bool] | None] = {}  # parent -> parent_signals (one per page)
        items = list(by_url.items())
        for i in range(0, len(items), OBSERVE_CHUNK):
            self._observe_chunk(items[i:i + OBSERVE_CHUNK], signals, counts, now)
        return counts

    def _observe_chunk(self, items: list[tuple[str, list[Record]]],
                       signals: dict[str | None, tuple[str, bool] | None], counts: dict[str, int],
                       now: float) -> None:
        """One write transaction of :meth:`observe_links`. Its URLs are spread
        over the whole map (keys are hashes), so each one dirties a page of its
        own, and LMDB keeps a transaction's dirty pages for reuse for as long as
        the environment is open: one transaction for a batch's 20,000 links
        left ~80 MB of heap behind. Learning a link is idempotent (distinct
        parents), so a batch re-run after a crash between chunks counts nothing
        twice."""
        memo = self._saturated
        now_saturated: dict[str, int | None] = {}  # remembered once this chunk has committed
        with self.env.begin(write=True) as txn:
            trim = self.trimmer.maybe_trim
            for url, recs in items:
                if url in memo and not news_for(memo[url], recs):
                    counts["links"] += len(recs)
                    continue  # a navigation target, counted and known: not read again
                trim()
                found = self._page_of(txn, url, recs[0].get("host"))
                if found is None:
                    counts["ignored"] += len(recs)
                    continue
                key, page, new = found
                counts["links"] += len(recs)
                if not new and saturated(page) and not news_for(page.get("depth"), recs):
                    now_saturated[url] = page.get("depth")
                    continue  # nothing to rewrite
                learned = ""
                for rec in recs:
                    parent = rec.get("parent")
                    parent = parent if isinstance(parent, str) else None  # a bad one counts as none
                    if parent in signals:
                        sig = signals[parent]
                    else:
                        sig = signals[parent] = parent_signals(parent)
                    got = learn_link(page, rec, sig)
                    if got == "hint" or not learned:
                        learned = got or learned
                if saturated(page):
                    now_saturated[url] = page.get("depth")  # as it is written (or stays)
                if not learned and not new:
                    continue  # nothing new: the stored page stays as it is
                if learned == "hint":
                    slot = page.get("slot")
                    if not slot or slot[0] > HINT:
                        self._reslot(txn, key, page, HINT, now)
                        counts["hints"] += 1
                if page.get("rate") is not None:
                    self._refit(txn, page)
                txn.put(key, orjson.dumps(page), db=self.pages)
        chars = sum(len(u) for u in now_saturated if u not in memo)
        if len(memo) + len(now_saturated) > SATURATED_MEMO or self._saturated_chars + chars > SATURATED_CHARS:
            memo.clear()
            self._saturated_chars, chars = 0, sum(map(len, now_saturated))
        memo.update(now_saturated)
        self._saturated_chars += chars

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

    def due(self, now: float, limit: int, *, dry_run: bool = False) -> list[Record]:
        """Up to ``limit`` URL records due at ``now``: pings, then hints, then
        the model's most overdue. Each is rescheduled ``reemit`` seconds
        ahead, so a fetch that never reports back is asked for again.

        ``dry_run`` only looks (one read snapshot, no replanning): a ping
        shown is still there for the run that acts on it."""
        out: list[Record] = []
        now_ms = math.floor(now * 1000)
        if not dry_run:
            self.replan(now)
        with self.env.begin(write=not dry_run) as txn:
            picked: list[bytes] = []
            cur = txn.cursor(db=self.dueq)
            for cls in (PING, HINT, MODEL):
                if len(picked) >= limit or not cur.set_range(bytes([cls])):
                    continue
                for k in cur.iternext(values=False):
                    if k[0] != cls or MS.unpack(k[1:9])[0] > now_ms or len(picked) >= limit:
                        break
                    picked.append(k)
            for k in picked:
                key = k[9:]
                raw = txn.get(key, db=self.pages)
                if raw is None:
                    if not dry_run:
                        txn.delete(k, db=self.dueq)
                    continue
                page = orjson.loads(raw)
                cls = k[0]
                rec = records.make("url", url=page["url"], priority=PRIORITY[cls], due=now,
                                   reason=REASON[cls])
                for f in ("etag", "last_modified", "depth"):
                    if page.get(f) is not None:
                        rec[f] = page[f]
                if page.get("rate") is not None:
                    rec["rate"] = page["rate"]
                    rec["importance"] = page["imp"]
                out.append(rec)
                if not dry_run:
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
                    if k[0] != cls or MS.unpack(k[1:9])[0] > now_ms:
                        break
                    n += 1
        return n

    def allowance(self, now: float, per_second: float, burst: float = 60.0, *, spend: bool = True) -> int:
        """How many URLs a budget of ``per_second`` allows now (a token bucket
        refilled since the last call, holding at most ``burst`` seconds).
        ``spend=False`` asks without taking them (a dry run)."""
        with self.env.begin(write=spend) as txn:
            last = txn.get(b"last_emit", db=self.meta)
            tokens = self._meta_float(txn, b"tokens")
            elapsed = burst if last is None else max(0.0, now - float(last))
            tokens = min(tokens + elapsed * per_second, max(burst * per_second, 1.0))
            n = math.floor(tokens)
            if spend:
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
