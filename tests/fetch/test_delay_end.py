"""A host's delay runs from the end of the answer as the crawler received it.

The rule (README, "Politeness as the server sees it"): the delay, Crawl-delay,
Retry-After and backoff all count from the last body byte read (or the
connection error), and the crawl log's seconds are the real time the answer
took. Proved from the server's side against a host that sends its headers at
once and drips its body for about a second, longer than the delay: a crawler
that counted from the lease, the headers or the first body byte would ask
again almost at once after such a body. Only ordering and gaps from the
server's own log are asserted, never how fast the crawler was.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import TESTWEB_CLOCK, start_testweb
from fetchutil import run_batch
from proctree import wait_for

from crawl.frontier import Frontier, Politeness
from crawl.net import Limits
from crawl.run import read_log
from crawl.testweb.audit import TOLERANCE, audit

CRAWL = [sys.executable, "-m", "crawl"]
DELAY = 0.3
S = 1e9  # ns in a second
T0 = 1_000_000.0


def _dripped_pages(web: Any, host: str) -> list[dict[str, Any]]:
    """Up to three allowed HTML pages of ``host`` of 40 KB or more: at the drip used
    here each takes longer than DELAY to send."""
    return sorted((p for p in web.pages_of(host) if p["status"] == 200 and (p.get("approx_bytes") or 0) >= 40 << 10
                   and str(p.get("content_type", "")).startswith("text/html") and not p.get("disallowed")),
                  key=lambda p: p["url"])[:3]


def _crawl_dripped(web: Any, big: list[dict[str, Any]], d: Path, *extra: str) -> None:
    """crawl run over the dripped pages of the slow host alone, at DELAY and no
    response factor, so the gaps the server logs are the delay's."""
    seeds = d.parent / "seeds.txt"
    seeds.write_text("".join(p["url"] + "\n" for p in big))
    res = subprocess.run(
        [*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds), "--resolve-file", str(web.hosts_file),
         "--allow-private", "--scope", "any", "--delay", str(DELAY), "--response-factor", "0",
         "--timeout", "10", "--idle-exit", "2s", "--progress", "plain", *extra],
        capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_next_request_starts_the_delay_after_the_last_byte_of_a_dripped_body(tmp_path: Path) -> None:
    # latency 0: headers at once; 1 KiB every 0.02 s: the host's two pages of 52 and 75 KB
    # drip for about 1 and 1.5 s, longer than DELAY
    with start_testweb(tmp_path, hosts=2, seed=7, pages=6, mix="slow", latency=0, drip=0.02,
                       clock=TESTWEB_CLOCK) as web:
        [slow] = web.with_behaviour("slow")
        big = _dripped_pages(web, slow)
        assert len(big) >= 2, "the web must have dripped pages longer than the delay"
        d = tmp_path / "D"
        _crawl_dripped(web, big, d, "--max-pages", str(len(big)))
        log = [r for r in web.requests() if r["host"] == slow and r["ua"].startswith("crawl/")]
        hosts = web.hosts
    log.sort(key=lambda r: r["start"])
    pages = [r for r in log if r["path"] != "/robots.txt"]
    assert len(pages) >= 2 and len(log) >= 3  # robots.txt, then the pages
    # the bodies outlasted the delay (else this would prove nothing): server-side durations
    assert sum((r["end"] - r["start"]) / S > DELAY for r in pages) >= 2
    for prev, nxt in zip(log, log[1:], strict=False):
        gap = (nxt["start"] - prev["end"]) / S
        assert gap >= DELAY - TOLERANCE, (prev["path"], nxt["path"], gap)
    assert audit(log, hosts, delay=DELAY, agent="crawl") == []
    # the crawl log's seconds cover the whole answer as the server sent it:
    # a crawler's clock starts before the server's (connect, send) and stops after (last read)
    fetched = {e["url"]: e for e in read_log(d / "log") if e.get("event") == "fetch"}
    for r in pages:
        e = fetched[web.url(slow, r["path"])]
        assert e["outcome"] == "ok" and e["seconds"] >= (r["end"] - r["start"]) / S, (e, r)


def test_a_body_not_wanted_ends_when_the_crawler_closes_its_connection(tmp_path: Path) -> None:
    """Pages of a type not asked for: the crawler reads the headers and closes the
    connection while the server is still dripping the body. For the server the
    answer ends at that close, so the delay runs from there, not from the headers."""
    with start_testweb(tmp_path, hosts=2, seed=7, pages=6, mix="slow", latency=0, drip=0.02,
                       clock=TESTWEB_CLOCK) as web:
        [slow] = web.with_behaviour("slow")
        big = _dripped_pages(web, slow)
        d = tmp_path / "D"
        _crawl_dripped(web, big, d, "--content-type", "application/pdf", "--parse-procs", "0")
        log = sorted((r for r in web.requests() if r["host"] == slow and r["ua"].startswith("crawl/")),
                     key=lambda r: r["start"])
        hosts = web.hosts
    pages = [r for r in log if r["path"] != "/robots.txt"]
    assert len(pages) >= 2
    fetched = {e["url"]: e for e in read_log(d / "log") if e.get("event") == "fetch"}
    assert {fetched[web.url(slow, r["path"])]["outcome"] for r in pages} == {"skipped-content-type"}
    # the server was cut off mid-body: the crawler hung up before the last dripped byte
    # (the server's own account, not a wall-clock bound that a loaded machine stretches)
    assert all(r["outcome"] == "client-closed" for r in pages), [(r["path"], r["outcome"]) for r in pages]
    for prev, nxt in zip(log, log[1:], strict=False):
        assert (nxt["start"] - prev["end"]) / S >= DELAY - TOLERANCE, (prev["path"], nxt["path"])
    assert audit(log, hosts, delay=DELAY, agent="crawl") == []


def test_the_frontier_counts_the_delay_from_ended_at_not_from_completion(tmp_path: Path) -> None:
    """A result that sat in a spool for 5 s after its answer ended: the host was
    due DELAY after the answer, not DELAY after the result was applied. ended_at
    is kept between the lease and now (a record's clock cannot move a host
    before its lease, nor past the present)."""
    pol = Politeness(default_delay=2.0, response_factor=0.0)
    with Frontier(tmp_path / "f", pol) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://{h}.test/{n}"} for h in "abcd" for n in (1, 2)], T0)
        leases = {lease["host"]: lease for lease in fr.next(4, 60, T0)}
        ends = {"a": T0 + 1.0,  # the answer ended 1 s after the lease
                "b": T0 - 50.0,  # before its lease: cannot be, counts from the lease
                "c": T0 + 99.0,  # after now: counts from now
                "d": None}  # an older fetcher without ended_at: from now
        recs = []
        for h, end in ends.items():
            rec = {**leases[f"{h}.test"], "kind": "fetch", "outcome": "ok", "status": 200}
            if end is not None:
                rec["ended_at"] = end
            recs.append(rec)
        events = fr.complete(recs, T0 + 6.0)
        due = {e["host"]: e["next_allowed"] - T0 for e in events}
        assert due == {"a.test": 3.0, "b.test": 2.0, "c.test": 8.0, "d.test": 8.0}
        assert sorted(x["host"] for x in fr.next(4, 60, T0 + 6.0)) == ["a.test", "b.test"]


def test_a_fetch_record_says_when_its_answer_ended(tmp_path: Path) -> None:
    """ended_at is no earlier than fetched_at plus the seconds up to the last
    body byte, and those seconds hold the whole dripped answer as the server
    sent it."""
    with start_testweb(tmp_path, hosts=2, seed=7, pages=6, mix="slow", latency=0, drip=0.005,
                       clock=TESTWEB_CLOCK) as web:
        [slow] = web.with_behaviour("slow")
        before = len(web.requests())
        [rec] = run_batch(tmp_path / "D", [web.url(slow, "/")], web.hosts_file.read_text(), robots=False,
                          limits=Limits(connect=5.0, total=10.0))
        # the server logs an answer once its last byte left; the client may ask first
        assert wait_for(lambda: len(web.requests(before)) == 1, timeout=30), web.requests(before)
        [served] = web.requests(before)
    # fetched_at is read before the fetch's clock starts, and ended_at never early: at least the sum
    assert rec["outcome"] == "ok" and rec["ended_at"] >= rec["fetched_at"] + rec["timings"]["total"] - 1e-5
    assert rec["timings"]["total"] >= (served["end"] - served["start"]) / S  # the whole dripped body


def test_an_expired_lease_holds_a_host_for_its_crawl_delay_not_only_delay(tmp_path: Path) -> None:
    """A lease that expires (its fetch slow, or its result late under load) may
    have reached the host just before: the host waits its own delay from the
    expiry, the Crawl-delay it asked for included, not only --delay."""
    with Frontier(tmp_path / "f", Politeness(default_delay=0.2, response_factor=0.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{n}"} for n in (1, 2, 3)], T0)
        [first] = fr.next(1, 8, T0)
        fr.complete([{**first, "kind": "fetch", "outcome": "ok", "status": 200, "crawl_delay": 2.0,
                      "ended_at": T0 + 0.1}], T0 + 0.2)
        [second] = fr.next(1, 8, T0 + 2.1)
        assert fr.requeue_expired(T0 + 10.1) == 1  # its result never came
        assert fr.next(1, 8, T0 + 12.0) == []  # 0.2 s after the expiry would be too soon
        [again] = fr.next(1, 8, T0 + 12.1)
        assert again["url"] == second["url"]
