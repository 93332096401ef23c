"""What one page's record says: settings, importance, change detection.

Split from crawl/recrawl/recrawler.py (the store and the schedule) because these are
the rules a reader looks for ("why is this page important", "why did it
count as changed"), and they need no database.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import xxhash

from crawl.core import Record

from .freshness import CHANGEFREQ_RATE, DAY

PING, HINT, MODEL = 0, 1, 2
REASON = {PING: "ping", HINT: "hint", MODEL: "recrawl"}
PRIORITY = {PING: 0, HINT: 0, MODEL: 2}  # frontier levels: 0 high .. 9 low
MS = struct.Struct(">Q")
GONE = frozenset({404, 410})
SITEMAP = frozenset({"sitemap", "sitemap-index", "feed"})
MAX_IN = 64  # distinct parents a page's in-link list keeps (importance grows with their log)


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


def due_key(cls: int, t: float, key: bytes) -> bytes:
    return bytes([cls]) + MS.pack(max(0, math.ceil(t * 1000))) + key


def num(v: object) -> float | None:
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def iso_time(text: object) -> float | None:
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
    sp = num(page.get("sp"))
    if sp is not None:
        imp *= 0.5 + 2 * min(max(sp, 0.0), 1.0)  # 0.5 -> x1.5, 1.0 -> x2.5, 0.0 -> x0.5
    return min(max(imp / 2.0, 0.1), 10.0)


def hashes(rec: Record) -> tuple[str | None, str | None]:
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
    hs, hd = hashes(rec)
    if hs and page.get("hs"):
        return bool(hs != page["hs"])
    if hd and page.get("hd"):
        return bool(hd != page["hd"])
    return None


def learn_fetch(page: dict[str, Any], rec: Record, t: float, window: int) -> str:
    """Fold one successful fetch at time ``t`` into ``page``.

    Returns "repeat" (same or older fetch time: at-least-once delivery, the
    page is untouched), "first" (nothing to compare with yet), "changed",
    "unchanged", or "unknown" (no comparable hash; only the time is kept).
    """
    last = num(page.get("last"))
    if last is not None and t <= last:
        return "repeat"
    if isinstance(rec.get("depth"), int):
        d = page.get("depth")
        page["depth"] = rec["depth"] if d is None else min(d, rec["depth"])
    got = "first"
    if last is not None:
        ch = changed_since(page, rec)
        got = "unknown" if ch is None else "changed" if ch else "unchanged"
        if ch is not None:
            obs = page.get("obs", []) + [[round(t - last, 3), int(ch)]]
            if len(obs) > window:
                fold(page, obs[: len(obs) - window])
                obs = obs[-window:]
            page["obs"] = obs
            page["changes"] = page.get("changes", 0) + ch
    page["n"] = page.get("n", 0) + 1
    page["last"] = t
    hs, hd = hashes(rec)
    if hs:
        page["hs"] = hs
    if hd:
        page["hd"] = hd
    for f in ("etag", "last_modified"):
        if isinstance(rec.get(f), str):
            page[f] = rec[f]
    return got


def parent_signals(parent: object) -> tuple[str, bool] | None:
    """A link's parent as :func:`learn_link` counts it: a short hash of its URL, and
    whether it is a home page. One page's links share it (compute it once per page)."""
    if not isinstance(parent, str):
        return None
    ph = xxhash.xxh64_hexdigest(parent.encode("utf-8", "surrogatepass"))[:10]
    return ph, parent.split("://", 1)[-1].partition("/")[2] in ("", "index.html")


def saturated(page: dict[str, Any]) -> bool:
    """No ordinary link can add to this page's in-links or home flag any more.
    Both only grow, so a page saturated once stays so (Recrawler's memo). With
    :func:`news_for` false, :func:`learn_link` learns nothing from the links (a
    property test checks it): a batch's navigation links are ~45% of its links
    (a 1,000-page realistic host: 42,639 of 96,010) and go to such pages."""
    inl = page.get("in")
    return inl is not None and len(inl) >= MAX_IN and bool(page.get("home"))


def news_for(depth: int | None, recs: list[Record]) -> bool:
    """Whether any of ``recs`` could teach a saturated page of this ``depth``:
    a sitemap or feed entry, or a shallower link."""
    for rec in recs:
        if rec.get("source") in SITEMAP:
            return True
        d = rec.get("depth")
        if isinstance(d, int) and not isinstance(d, bool) and (depth is None or d < depth):
            return True
    return False


def learn_link(page: dict[str, Any], rec: Record, signals: tuple[str, bool] | None = None) -> str:
    """Fold one link to ``page`` into its importance signals.

    Returns "hint" when it is a sitemap or feed entry whose lastmod is later
    than our last fetch (the page changed, and we know it without looking),
    "changed" when a signal moved, and "" when the link told nothing new (most
    links on a re-crawled site: a parent already counted), so the caller can
    skip rewriting the page. ``signals``: :func:`parent_signals` of the link's
    parent, when the caller has it already.
    """
    changed = False
    parent = rec.get("parent")
    if signals is None:
        signals = parent_signals(parent)
    if signals is not None and parent != page["url"]:
        ph, home = signals
        inl = page.setdefault("in", [])
        if len(inl) < MAX_IN and ph not in inl:  # distinct parents, so re-crawls do not inflate it (full: no scan)
            inl.append(ph)
            changed = True
        if home and not page.get("home"):
            page["home"] = True
            changed = True
    d = rec.get("depth")
    if isinstance(d, int) and not isinstance(d, bool):
        old = page.get("depth")
        if old is None or d < old:
            page["depth"] = d
            changed = True
    if rec.get("source") not in SITEMAP:
        return "changed" if changed else ""
    # <priority> 0.0-1.0 of the sitemap protocol; not the frontier's integer "priority"
    sp = rec.get("sitemap_priority", rec.get("priority"))
    if isinstance(sp, str | float) and not isinstance(sp, bool):
        try:
            page["sp"] = float(sp)
        except ValueError:
            pass
    cf = rec.get("changefreq")
    if isinstance(cf, str) and cf.lower() in CHANGEFREQ_RATE:
        page["cf"] = cf.lower()
    lm = iso_time(rec.get("lastmod"))
    last = num(page.get("last"))
    return "hint" if lm is not None and last is not None and lm > last else "changed"


FOLD_DECAY = 0.995  # folded history halves every ~140 visits, so habits can change


def fold(page: dict[str, Any], old: list[list[float]]) -> None:
    """Fold observations leaving the window into ``page["old"]``: unchanged
    seconds, changed intervals, changed seconds (see freshness.estimate_rate)."""
    q, n, secs = page.get("old") or (0.0, 0.0, 0.0)
    for t, ch in old:
        q, n, secs = q * FOLD_DECAY, n * FOLD_DECAY, secs * FOLD_DECAY
        if ch:
            n, secs = n + 1, secs + t
        else:
            q += t
    page["old"] = [round(q, 3), round(n, 6), round(secs, 3)]
