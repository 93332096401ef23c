"""The crawl done with separate commands (bin/crawl-pipeline): the same pages as
crawl run, and as polite, audited from the server's side."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, TestWeb, start_testweb
from test_run import CRAWL, assert_polite, crawl, logged, reachable, stored

from crawl.testweb import BEHAVIOURS, ROBOTS_VARIANTS

# the politeness flags of bin/crawl-pipeline's frontier commands (test_run's FAST, in short)
POLITE = "--delay 0.2 --backoff-base 0.5s --backoff-cap 4s --park-for 3s"


# "did not hang", not how fast: every round starts six python processes, and at load
# 20-33 (two workers beside five engineers' benchmarks) a round took 30-45 s: the
# every-behaviour crawl's 14 rounds ran 566 s (past the 280 s it had). Within the
# tests' own pytest timeout: a clear failure.
PIPELINE_BOUND = 600


def pipeline(web: TestWeb, d: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POLITE": POLITE, "CRAWL": " ".join(CRAWL)}
    res = subprocess.run(
        [str(ROOT / "bin" / "crawl-pipeline"), str(d), str(web.seeds_file),
         "--resolve-file", str(web.hosts_file), "--allow-private", "--timeout", "2"],
        env=env, capture_output=True, text=True, timeout=PIPELINE_BOUND)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@pytest.mark.timeout(PIPELINE_BOUND + 60)
def test_pipeline_matches_crawl_run(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=12, seed=21, pages=6, links=4, mix="plain") as web:
        ref = tmp_path / "run"
        crawl(web, ref)
        want = _stored_urls(ref)
        assert set(stored(ref)) <= want
        mark = logged(web)
        assert_polite(web, 0, mark)
        d = tmp_path / "pipe"
        pipeline(web, d)
        got = _stored_urls(d)
        print(f"\npages stored: crawl run {len(want)}, pipeline {len(got)}")
        assert got == want, (sorted(want - got)[:5], sorted(got - want)[:5])
        assert_polite(web, mark)


# Every behaviour and robots variant but the traps: a trap host yields a new URL a
# round for dozens of rounds (crawl run bounds it with --max-per-host, the pipeline
# has no such flag), and test_run covers traps.
EVERY_BEHAVIOUR = ",".join(sorted((set(BEHAVIOURS) | set(ROBOTS_VARIANTS)) - {"traps"}))


@pytest.mark.timeout(PIPELINE_BOUND + 60)
def test_pipeline_on_every_behaviour_is_polite(tmp_path: Path) -> None:
    """Every host behaviour and robots variant once, a new fetch process per round:
    busy hosts (429/503), robots.txt that answers 500 or hangs (the host waits for
    the fetcher's next check, in a later round's process), slow, reset, endless,
    huge, bombs. (The rounds are slower than the test web's Retry-After, so an
    ignored Retry-After shows only in crawl run's audit, test_run.py.)"""
    with start_testweb(tmp_path / "w", hosts=22, seed=2, pages=2, links=3, mix=EVERY_BEHAVIOUR,
                       latency=0.05, drip=0.002, hang=3, busy=1, huge_bytes=10**6,
                       bomb_bytes=1 << 24) as web:
        assert {r["behaviour"] for r in web.hosts.values()} == set(BEHAVIOURS) - {"traps"}
        unreachable = web.with_behaviour("500") + web.with_behaviour("timeout")
        assert unreachable
        d = tmp_path / "pipe"
        pipeline(web, d)
        assert assert_polite(web) > 0
        log = web.requests()
        for h in unreachable:  # met, and only ever asked for robots.txt
            asked = [r["path"] for r in log if r["host"] == h and "crawl" in r["ua"]]
            assert asked and set(asked) == {"/robots.txt"}, (h, asked)
        assert any(r.get("retry_after") for r in log if r["status"] in (429, 503))
        got = _stored_urls(d)
        want = reachable(web)
        assert want and want <= got, sorted(want - got)[:5]


def _stored_urls(d: Path) -> set[str]:
    """URLs with an HTTP 200 response record in the crawl's WARC files
    (robots.txt aside): what the crawl stored, read back with warcio."""
    from warcio.archiveiterator import ArchiveIterator

    urls = set()
    for path in sorted((d / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response" and rec.http_headers is not None \
                        and rec.http_headers.get_statuscode() == "200" \
                        and not rec.rec_headers.get_header("WARC-Target-URI").endswith("/robots.txt"):
                    urls.add(rec.rec_headers.get_header("WARC-Target-URI"))
    return urls
