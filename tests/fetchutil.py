"""Helpers shared by the fetch tests: run the real fetcher on a crawl directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from crawl.core import CrawlDir
from crawl.fetch import FetchConfig, StoreOptions, open_fetcher
from crawl.fetch.batch import fetch_batch
from crawl.net import AddressPolicy, Limits
from crawl.net.dns import parse_hosts

FAST = Limits(connect=1.0, total=1.5)


def run_batch(
    d: Path,
    urls: list[str] | list[dict[str, Any]],
    hosts: str,
    *,
    allow_private: bool = True,
    cidrs: tuple[str, ...] = (),
    clock: Any = None,
    store: StoreOptions | None = None,
    **cfg: Any,
) -> list[dict[str, Any]]:
    """Fetch ``urls`` (strings or lease dicts) once, in-process; results in input order."""
    leases = [u if isinstance(u, dict) else {"kind": "url", "v": 1, "url": u} for u in urls]
    cfg.setdefault("limits", FAST)
    cfg.setdefault("host_delay", 0.05)  # the politeness pause after robots.txt, shortened
    conf = FetchConfig(**cfg)

    async def main() -> list[dict[str, Any]]:
        pol = AddressPolicy.from_cidrs(cidrs, allow_private)
        async with open_fetcher(CrawlDir(d), conf, overrides=parse_hosts(hosts), fallback=False,
                                policy=pol, store=store) as (fetcher, writer):
            if clock is not None:
                fetcher.clock = clock
                assert fetcher.robots is not None
                fetcher.robots.clock = clock
            return await fetch_batch(fetcher, writer, leases)

    return trio.run(main)
