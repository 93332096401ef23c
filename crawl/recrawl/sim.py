"""Simulated re-crawling against a known change process, on a simulated clock.

Why: whether a schedule keeps a store fresh can only be judged against the
truth, and the truth is only known for pages we generate. This drives the
real :class:`crawl.recrawl.Recrawler` (its LMDB, its estimator, its due
queue) against the test web's change process (``Web.version``, the same
function ``crawl testweb serve`` answers from) or any ``version_at``
function, and measures freshness at random instants. It fetches nothing:
a "fetch" is the version the page has at that instant. The tests and
``scripts/bench_recrawl.py`` share it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from crawl.core import records

from .freshness import sampled_freshness
from .recrawler import Recrawler

VersionAt = Callable[[str, float], object]


@dataclass
class SimResult:
    visits: dict[str, list[float]] = field(default_factory=dict)  # page -> fetch times
    fetches: int = 0  # fetches inside the measured window
    freshness: float = 0.0  # the model's schedule, sampled in the window
    uniform: float = 0.0  # every page at one interval, same number of fetches


def web_truth(seed: int, hosts: int, pages: int) -> tuple[list[str], VersionAt, dict[str, float]]:
    """Page URLs of a test web, its version function, and each page's true rate.

    The test web's changing pages flip version every ``change_period``
    seconds (a fixed phase per page), so the true rate is 1/period; pages
    without a period never change (rate 0).
    """
    from crawl.testweb import Web, WebConfig

    web = Web(WebConfig(seed=seed, hosts=hosts, pages=pages, mix="plain"))
    specs = {}
    for i in range(hosts):
        for k in range(pages):
            spec = web.page(i, k)
            specs[web.url(i, spec.path)] = spec

    def version_at(url: str, t: float) -> object:
        return web.version(specs[url], t)[0]

    truth = {u: (1.0 / s.change_period if s.change_period else 0.0) for u, s in specs.items()}
    return list(specs), version_at, truth


def simulate(
    rc: Recrawler,
    urls: list[str],
    version_at: VersionAt,
    start: float,
    horizon: float,
    *,
    tick: float = 600.0,
    warmup: float = 0.0,
    per_second: float = 0.0,
    samples: int = 200,
    seed: int = 1,
) -> SimResult:
    """Crawl every page once at ``start``, then let the model schedule for ``horizon`` s.

    Every ``tick`` seconds the due URLs (at most what ``per_second`` allows,
    if set) are "fetched": a 304 when the version is the one we hold, a 200
    with the version as digest otherwise. Freshness is sampled at random
    instants in [start + warmup, start + horizon) and compared with a
    uniform schedule making the same number of fetches in that window, each
    page at a random phase.
    """
    res = SimResult(visits={u: [] for u in urls})
    held: dict[str, object] = {}

    def fetch(batch: list[str], t: float) -> None:
        out = []
        for u in batch:
            v = version_at(u, t)
            outcome = "not-modified" if held.get(u) == v else "ok"
            held[u] = v
            out.append(records.make("fetch", url=u, outcome=outcome, status=304 if outcome != "ok" else 200,
                                    digest=f"v{v}", fetched_at=t))
            res.visits[u].append(t)
            if t >= start + warmup:
                res.fetches += 1
        rc.observe(out, t)

    fetch(urls, start)
    t = start + tick
    carry = 0.0
    while t < start + horizon:
        if per_second > 0:
            carry += per_second * tick
            limit = int(carry)
            carry -= limit
        else:
            limit = 1 << 30
        due = rc.due(t, limit) if limit else []
        fetch([r["url"] for r in due], t)
        t += tick
    lo, hi = start + warmup, start + horizon
    # the same instants for both schedules: a paired comparison
    res.freshness = sampled_freshness(res.visits, version_at, lo, hi, samples, random.Random(seed))
    interval = len(urls) * (hi - lo) / max(res.fetches, 1)
    uniform = {}
    phases = random.Random(seed + 1)
    for u in urls:
        phase = phases.uniform(0, interval)
        times, x = [start], start + phase
        while x < hi:
            times.append(x)
            x += interval
        uniform[u] = times
    res.uniform = sampled_freshness(uniform, version_at, lo, hi, samples, random.Random(seed))
    return res
