#!/usr/bin/env python3
"""Freshness of the re-crawl schedule against a uniform one with the same budget.

Runs the real Recrawler (LMDB in a temporary directory) on a simulated clock
against the test web's change process (hourly, daily, weekly and static
pages, exactly what `crawl testweb serve` answers), for several fetch
budgets. Freshness is the fraction of stored pages that are current,
averaged over random instants after a one-week warm-up; the uniform
schedule visits every page at one interval with the same number of fetches
in the measured window, and is sampled at the same instants.

    python scripts/bench_recrawl.py [--hosts 10] [--pages 20] [--days 28]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl.core import CrawlDir  # noqa: E402
from crawl.recrawl import Recrawler  # noqa: E402
from crawl.recrawl.freshness import DAY  # noqa: E402
from crawl.recrawl.recrawler import RecrawlConfig
from crawl.recrawl.sim import simulate, web_truth  # noqa: E402

T0 = 1_780_000_000.0


def oracle(truth: dict[str, float]) -> type[Recrawler]:
    """The same scheduler told the true rates: the ceiling the estimator aims at."""

    class Oracle(Recrawler):
        def _refit(self, txn: Any, page: dict[str, Any]) -> None:
            super()._refit(txn, page)
            page["rate"] = truth[page["url"]] or 1e-9

    return Oracle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--days", type=float, default=28.0)
    ap.add_argument("--per-page-day", type=float, nargs="+", default=[1.0, 3.0, 6.0],
                    help="budgets, in fetches per page per day")
    args = ap.parse_args()
    urls, version_at, truth = web_truth(0, args.hosts, args.pages)
    kinds = {3600: "hourly", 86400: "daily", 7 * 86400: "weekly"}
    mix = {}
    for r in truth.values():
        name = kinds.get(round(1 / r), "?") if r else "static"
        mix[name] = mix.get(name, 0) + 1
    print(f"freshness: {len(urls)} test-web pages ({', '.join(f'{v} {k}' for k, v in sorted(mix.items()))}), "
          f"{args.days:g} simulated days, measured after a 7-day warm-up")
    started = time.perf_counter()
    for ppd in args.per_page_day:
        budget = ppd * len(urls) / DAY
        got = {}
        for name, cls, policy in (("optimal", Recrawler, "optimal"), ("proportional", Recrawler, "proportional"),
                                  ("oracle", oracle(truth), "optimal")):
            cfg = RecrawlConfig(budget=budget, share=1.0, policy=policy)
            with tempfile.TemporaryDirectory() as d, cls(CrawlDir(d), cfg, sync=False) as rc:
                got[name] = simulate(rc, urls, version_at, T0, args.days * DAY, tick=1800,
                                     warmup=7 * DAY, per_second=budget, samples=300)
        opt, prop, orc = got["optimal"], got["proportional"], got["oracle"]
        print(f"freshness @ {ppd:g} fetches/page/day ({budget:.4f}/s): model {opt.freshness:.3f} "
              f"(uniform {opt.uniform:.3f}, same {opt.fetches:,} fetches) ratio {opt.freshness / opt.uniform:.2f}x; "
              f"literal c/(rate x importance) {prop.freshness:.3f} (uniform {prop.uniform:.3f}); "
              f"true rates {orc.freshness:.3f} (uniform {orc.uniform:.3f})")
    print(f"freshness: done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
