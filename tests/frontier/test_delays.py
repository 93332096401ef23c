"""Why a host waits: the cause the frontier notes, the read-only view, and the replay of the log.

Real LMDB frontiers driven through lease and complete, as a fetcher would:
the cause noted at a completion (crawl/frontier/delays.py) must name the
rule that set the host's next-allowed time, disappear with the first normal
completion, and agree with ``replay_delay`` (what ``crawl why --host``
walks the crawl log through) for every kind of result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import pytest

from crawl.core import records
from crawl.frontier import Frontier, FrontierView, Politeness, release_cause, replay_delay
from crawl.report.why import host_wait

CFG = Politeness(default_delay=1.0, response_factor=5.0, backoff_base=2.0, backoff_cap=600.0, park_after=4,
                 park_seconds=900.0, max_retries=50)
HOST = "a.test"


def _result(lease: dict[str, Any], outcome: str, status: int | None = None, retry_after: float | None = None,
            total: float = 0.1) -> dict[str, Any]:
    rec = records.make("fetch", url=lease["url"], lease=lease["lease"], outcome=outcome, timings={"total": total})
    if status is not None:
        rec["status"] = status
    if retry_after is not None:
        rec["retry_after"] = retry_after
    return rec


def _frontier(tmp_path: Path, n: int = 20) -> Frontier:
    fr = Frontier(tmp_path / "frontier", CFG)
    fr.add([records.make("url", url=f"http://{HOST}/p{i}") for i in range(n)], 1000.0)
    return fr


def test_a_429_with_retry_after_is_noted_and_a_normal_result_clears_it(tmp_path: Path) -> None:
    fr = _frontier(tmp_path)
    now = 1000.0
    (lease,) = fr.next(1, 60, now)
    fr.complete([_result(lease, "http-error", 429, retry_after=30.0)], now)
    view = FrontierView(tmp_path / "frontier")
    h = view.host(HOST, now)
    assert h is not None and h["noted"]["cause"] == "retry-after"
    assert h["noted"]["retry_after"] == 30.0 and h["noted"]["status"] == 429
    wait = host_wait(h, CFG, now)
    assert wait["cause"] == "retry-after" and wait["delay"] == 30.0 and wait["next"] == now + 30.0
    assert not fr.next(1, 60, now + 29.0)  # and the frontier keeps it: nothing before Retry-After
    (lease,) = fr.next(1, 60, now + 30.0)
    fr.complete([_result(lease, "ok", 200, total=0.4)], now + 31.0)
    h = view.host(HOST, now + 31.0)
    assert h is not None and h["noted"] is None
    wait = host_wait(h, CFG, now + 31.0)
    assert wait["cause"] == "response-time" and wait["delay"] == pytest.approx(5.0 * 0.4)  # k x the response time


def test_replay_agrees_with_the_frontier_for_every_kind_of_result(tmp_path: Path) -> None:
    fr = _frontier(tmp_path)
    view = FrontierView(tmp_path / "frontier")
    steps = [("http-error", 429, None), ("http-error", 503, 7.0), ("ok", 200, None), ("timeout", None, None),
             ("http-error", 500, None), ("connect-error", None, None), ("http-error", 502, 3.0),
             ("ok", 200, None), ("robots-unreachable", None, 60.0), ("ok", 304, None), ("http-error", 429, 0.5)]
    level = failures = 0
    now = 1000.0
    seen = []
    for outcome, status, ra in steps:
        (lease,) = fr.next(1, 60, now)
        fr.complete([_result(lease, outcome, status, ra, total=0.1)], now)
        h = view.host(HOST, now)
        assert h is not None
        r = replay_delay(CFG, level, failures, outcome, status, ra, 0.1, None)
        level, failures = r.level, r.failures
        assert abs((h["next_allowed"] - now) - r.delay) < 1e-6, (outcome, status, ra)
        assert (h["backoff_level"], h["consecutive_failures"]) == (level, failures)
        noted = (h["noted"] or {}).get("cause")
        assert noted == (None if r.cause in ("base-delay", "response-time", "crawl-delay", "max-delay")
                         else r.cause), (outcome, status, ra, noted, r.cause)
        seen.append(r.cause)
        now = max(h["next_allowed"], h["parked_until"] or 0.0) + 0.001
    # four failures in a row (timeout, 500, connect-error, 502) parked the host on the way
    assert seen == ["backoff", "retry-after", "base-delay", "error-backoff", "error-backoff", "error-backoff",
                    "parked", "base-delay", "robots-wait", "base-delay", "backoff"], seen  # Retry-After 0.5 < the delay


def test_release_cause_names_the_largest_term() -> None:
    assert release_cause(CFG, 0.1, None).cause == "base-delay"
    assert release_cause(CFG, 0.4, None) == (2.0, "response-time", {"base-delay": 1.0, "response-time": 2.0})
    assert release_cause(CFG, 0.4, 3.0).cause == "crawl-delay"
    capped = release_cause(Politeness(max_delay=10.0), 0.1, 120.0)
    assert capped.cause == "max-delay" and capped.delay == 10.0 and capped.terms["crawl-delay"] == 120.0


def test_a_frontier_without_the_delays_table_still_reads(tmp_path: Path) -> None:
    fr = _frontier(tmp_path)
    (lease,) = fr.next(1, 60, 1000.0)
    fr.complete([_result(lease, "http-error", 503)], 1000.0)
    fr.close()
    env = lmdb.open(str(tmp_path / "frontier"), max_dbs=32)  # as a frontier written before the table existed
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"delays", txn=txn), delete=True)
    env.close()
    h = FrontierView(tmp_path / "frontier").host(HOST, 1000.0)
    assert h is not None and h["noted"] is None and h["backoff_level"] == 1
    wait = host_wait(h, CFG, 1000.0)
    assert wait["cause"] == "backoff" and "not recorded" in wait["detail"]
