"""crawl run waits for events, not on timers (issue 19).

A host is leased again when its last fetch completes (the result sink wakes
the lease loop), not at the lease loop's next poll; the seed's links are
parsed in the parent while a parse process is still starting. Both are
checked by counting what the loop did, never by timing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import trio
from conftest import start_testweb

from crawl.core import CrawlDir
from crawl.fetch import open_fetcher
from crawl.fetch.batch import fetch_batch
from crawl.frontier import Politeness
from crawl.net import AddressPolicy, load_hosts
from crawl.run import Crawl, RunOptions
from crawl.run.loop import _parse_until_ready

CRAWL = [sys.executable, "-m", "crawl"]


def test_a_slow_host_is_leased_on_completion_not_polled(tmp_path: Path) -> None:
    # Every answer takes 0.25 s: a loop polling the frontier every 20 ms asked
    # it about 12 times per fetch, each a write transaction. Woken by the
    # completion, it asks about once per fetch (plus one poll a second for
    # what nobody announces).
    with start_testweb(tmp_path / "w", hosts=1, seed=3, pages=6, links=3, mix="slow",
                       latency=0.25, drip=0.001) as web:
        d = tmp_path / "c"
        res = subprocess.run(
            [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
             str(web.hosts_file), "--allow-private", "--scope", "any", "--delay", "0",
             "--idle-exit", "1s", "--progress", "none", "--json"],
            capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        st = json.loads(res.stdout.splitlines()[-1])
        fetched, counts = st["fetched"], st["counts"]
        assert st["pages"] >= 5, st
        assert counts["lease/next"] <= 2 * fetched + 8, counts
        assert counts["lease/woken"] >= fetched - 1, counts  # each completion woke the loop


def test_the_parent_parses_until_a_parse_process_is_ready(tmp_path: Path) -> None:
    # No parse process here at all: `ready` is never set, so the seed's links
    # reach the frontier only if the parent parses them itself.
    with start_testweb(tmp_path / "w", hosts=1, seed=4, pages=5, links=3, mix="plain") as web:
        opts = RunOptions(parse_procs=1, overrides=load_hosts(web.hosts_file),
                          address_policy=AddressPolicy(allow_private=True),
                          politeness=Politeness(default_delay=0.0, response_factor=0.0))
        opts.scope.mode = "any"
        cr = Crawl(CrawlDir(tmp_path / "c"), opts)
        try:
            seed = web.seeds_file.read_text().split()[0]
            assert cr.seed([seed])["added"] == 1
            ready = threading.Event()

            async def main() -> None:
                async with open_fetcher(cr.cdir, opts.fetch, overrides=opts.overrides,
                                        fallback=False, policy=opts.address_policy) as (f, w):
                    for _ in range(2):  # robots.txt first (the page is deferred), then the page
                        while not (leases := cr.frontier.next(10, 60.0, time.time())):
                            await trio.sleep(0.01)
                        assert [lease["url"] for lease in leases] == [seed]
                        cr.write_results(await fetch_batch(f, w, leases))
                with trio.fail_after(60):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_parse_until_ready, cr, ready)
                        while not cr.progress.counts.get("links/added"):
                            await trio.sleep(0.01)
                        cr.fetch_done = True  # ends the task

            trio.run(main)
            assert cr.progress.counts["links/added"] >= 3
            assert cr.frontier.pending()["queued"] >= 3
            assert cr.backlog() == 0  # claimed and acknowledged here
        finally:
            cr.close()
