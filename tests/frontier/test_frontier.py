"""The frontier against real LMDB files: tables for delays, backoff, caps, parking,
leases and bad records. The simulated clock is the ``now`` argument."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.frontier import DEFAULT, Frontier, Politeness, parse_retry_after
from crawl.frontier.politeness import DAY, backoff_delay, effective_priority, release_delay

T0 = 1_000_000.0


def url_rec(url: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "url", "v": 1, "url": url, **fields}


def fetch(lease: dict[str, Any], outcome: str = "ok", **fields: Any) -> dict[str, Any]:
    rec = {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": outcome}
    if outcome == "ok":
        rec["status"] = 200
    rec.update(fields)
    return rec


@pytest.fixture
def fr(tmp_path: Path) -> Any:
    with Frontier(tmp_path / "frontier") as f:
        yield f


def make(tmp_path: Path, **cfg: Any) -> Frontier:
    return Frontier(tmp_path / "frontier", Politeness(**cfg))


def snapshot(f: Frontier) -> dict[str, list[tuple[bytes, bytes]]]:
    with f.env.begin() as txn:
        return {name: list(txn.cursor(db=db)) for name, db in f.db.items()}


# ---- pure formulas ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rt", "crawl_delay", "expected"),
    [
        (None, None, 1.0),  # default delay
        (0.1, None, 1.0),  # 5 x 0.1 = 0.5 < 1 s
        (0.4, None, 2.0),  # k x response time wins
        (0.4, 10.0, 10.0),  # Crawl-delay wins
        (0.0, 0.5, 1.0),  # Crawl-delay below the default does not speed up
        (None, 10_000.0, 300.0),  # Crawl-delay capped by max_delay
        (1000.0, None, 300.0),  # a very slow host: capped too
    ],
)
def test_release_delay_table(rt: float | None, crawl_delay: float | None, expected: float) -> None:
    assert release_delay(DEFAULT, rt, crawl_delay) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("level", "retry_after", "expected"),
    [
        (1, None, 2.0),
        (2, None, 4.0),
        (3, None, 8.0),
        (10, None, 1024.0),
        (17, None, DAY),  # 2 x 2^16 s is more than a day: capped
        (200, None, DAY),
        (1, 120.0, 120.0),  # Retry-After honoured exactly ...
        (5, 0.5, 0.5),  # ... even when shorter than the backoff
        (1, 10 * DAY, DAY),  # ... but never beyond a day
    ],
)
def test_backoff_table(level: int, retry_after: float | None, expected: float) -> None:
    assert backoff_delay(DEFAULT, level, retry_after) == pytest.approx(expected)


@pytest.mark.parametrize("due", ["tomorrow", True, float("nan"), [1]])
def test_a_due_time_that_is_no_number_is_ignored(fr: Frontier, due: object) -> None:
    fr.add([url_rec("http://a.test/1", due=due)], T0)
    [lease] = fr.next(1, 60, T0)  # queued for now, not refused and not a crash later
    assert lease["url"] == "http://a.test/1"


def test_a_crawl_delay_under_a_second_counts_above_a_shorter_delay() -> None:
    fast = Politeness(default_delay=0.2)  # crawl run --delay 0.2: a robots Crawl-delay of 0.5 still holds
    assert release_delay(fast, None, 0.5) == pytest.approx(0.5)
    assert release_delay(fast, None, 0.0) == pytest.approx(0.2)  # 0 asks for nothing


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (30, 30.0),
        (" 7 ", 7.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),  # a past date: go now
        ("Thu, 01 Jan 1970 00:02:00 GMT", 0.0),  # RFC 850 and asctime forms too:
        ("Sunday, 06-Nov-94 08:49:37 GMT", 0.0),
        ("Sun Nov  6 08:49:37 1994", None),  # no zone: unreadable, ignored
        ("soon", None),
        (-5, None),
        (None, None),
        (True, None),
    ],
)
def test_parse_retry_after(value: object, expected: float | None) -> None:
    assert parse_retry_after(value, 1.8e9) == expected


def test_parse_retry_after_future_date() -> None:
    # RFC 9110 10.2.3: an HTTP-date is relative to now.
    assert parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", 40.0) == pytest.approx(60.0)


@pytest.mark.parametrize(
    ("url", "priority", "depth", "expected"),
    [
        ("http://a/", None, None, 1),
        ("http://a/", 0, 0, 0),
        ("http://a/", 0, 3, 1),  # one level per 3 of depth
        ("http://a/", 1, 7, 3),
        ("http://a/?a=1&b=2", 1, 0, 1),
        ("http://a/?a=1&b=2&c=3", 1, 0, 2),  # 3+ params
        ("http://a/?a&b&c&d&e&f", 1, 0, 3),  # 6+ params
        ("http://a/", 42, 100, 9),  # clamped
        ("http://a/", "high", None, 1),  # junk priority: default
    ],
)
def test_effective_priority(url: str, priority: object, depth: object, expected: int) -> None:
    assert effective_priority(url, priority, depth) == expected


# ---- add ---------------------------------------------------------------------------------


def test_add_is_noop_when_queued_leased_or_done(fr: Frontier) -> None:
    assert fr.add([url_rec("http://a.test/1")], T0)["added"] == 1
    assert fr.add([url_rec("http://a.test/1")], T0)["known"] == 1  # queued
    [lease] = fr.next(10, 60, T0)
    assert fr.add([url_rec("http://a.test/1")], T0)["known"] == 1  # leased
    fr.complete([fetch(lease)], T0 + 1)
    assert fr.state_of("http://a.test/1") == "done"
    assert fr.add([url_rec("http://a.test/1")], T0 + 9)["known"] == 1  # done this cycle
    assert fr.next(10, 60, T0 + 100) == []  # never leased again in the cycle
    assert fr.new_cycle() == 1
    assert fr.add([url_rec("http://a.test/1")], T0 + 100)["added"] == 1
    assert [r["url"] for r in fr.next(10, 60, T0 + 100)] == ["http://a.test/1"]


def test_add_rejects_unusable_urls_and_changes_nothing(fr: Frontier) -> None:
    before = snapshot(fr)
    rejects: list[dict[str, Any]] = []
    counts = fr.add([url_rec("mailto:me@x.test"), url_rec(""), {"kind": "url"}], T0, rejects)
    assert counts["rejected"] == 3 and counts["added"] == 0
    assert all(r["kind"] == "reject" and r["error"] for r in rejects)
    assert snapshot(fr) == before


def test_host_queue_cap_drops_and_counts(tmp_path: Path) -> None:
    with make(tmp_path, host_queue_cap=2) as f:
        counts = f.add([url_rec(f"http://a.test/{i}") for i in range(5)] + [url_rec("http://b.test/")], T0)
        assert counts == {"added": 3, "known": 0, "dropped_host_cap": 3, "rejected": 0}
        assert f.stats(T0)["dropped_host_cap"] == 3
        assert f.state_of("http://a.test/4") is None  # dropped, not remembered


def test_due_time_is_respected(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/later", due=T0 + 50), url_rec("http://b.test/now")], T0)
    assert [r["url"] for r in fr.next(10, 60, T0)] == ["http://b.test/now"]
    assert fr.next(10, 60, T0 + 49) == []
    assert fr.stats(T0 + 49)["delayed"] == 1
    assert [r["url"] for r in fr.next(10, 60, T0 + 50)] == ["http://a.test/later"]


def test_pass_through_fields_survive_into_the_lease(fr: Frontier) -> None:
    fr.add([url_rec("https://a.test:8443/p?q=1", depth=2, parent="https://a.test:8443/", x={"y": [1]})], T0)
    [lease] = fr.next(1, 30, T0)
    assert lease["kind"] == "lease" and lease["url"] == "https://a.test:8443/p?q=1"
    assert lease["host"] == "a.test:8443" and lease["attempt"] == 1 and lease["deadline"] == T0 + 30
    assert (lease["depth"], lease["parent"], lease["x"]) == (2, "https://a.test:8443/", {"y": [1]})


# ---- next ----------------------------------------------------------------------------------


def test_one_lease_per_host_and_batches_span_hosts(fr: Frontier) -> None:
    fr.add([url_rec(f"http://h{h}.test/{i}") for i in range(3) for h in range(5)], T0)
    leases = fr.next(100, 60, T0)
    assert sorted(r["host"] for r in leases) == [f"h{h}.test" for h in range(5)]
    assert fr.next(100, 60, T0 + 1) == []  # every host busy


def test_priority_first_then_fifo(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/low", priority=5), url_rec("http://a.test/1"),
            url_rec("http://a.test/2"), url_rec("http://a.test/top", priority=0)], T0)
    fr.add([url_rec("http://b.test/x", priority=3), url_rec("http://c.test/x", priority=0)], T0)
    # Across hosts the front queues decide: hosts whose next URL has priority 0 go first.
    first = fr.next(2, 60, T0)
    assert [r["url"] for r in first] == ["http://a.test/top", "http://c.test/x"]
    fr.complete([fetch(r) for r in first], T0)
    order, now = [], T0
    for _ in range(5):
        now += 10
        leases = fr.next(10, 60, now)
        order += [r["url"] for r in leases if r["host"] == "a.test"]
        fr.complete([fetch(r) for r in leases], now)
    # Within a host: priority, then arrival order.
    assert order == ["http://a.test/1", "http://a.test/2", "http://a.test/low"]


def test_never_before_next_allowed(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
    [lease] = fr.next(10, 60, T0)
    [ev] = fr.complete([fetch(lease, timings={"total": 0.6}, crawl_delay=None)], T0 + 1)
    assert ev["disposition"] == "done" and ev["next_allowed"] == pytest.approx(T0 + 4.0)  # 5 x 0.6
    assert fr.next(10, 60, T0 + 3.999) == []
    assert fr.stats(T0 + 3.999)["hosts_ready"] == 0
    assert [r["url"] for r in fr.next(10, 60, T0 + 4.0)] == ["http://a.test/2"]


def test_crawl_delay_from_fetch_results(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/1"), url_rec("http://a.test/2"), url_rec("http://a.test/3")], T0)
    [lease] = fr.next(1, 60, T0)
    [ev] = fr.complete([fetch(lease, crawl_delay=7)], T0)
    assert ev["next_allowed"] == T0 + 7
    [lease] = fr.next(1, 60, T0 + 7)
    [ev] = fr.complete([fetch(lease)], T0 + 7)  # remembered for the host
    assert ev["next_allowed"] == T0 + 14


# ---- complete: backoff, retries, parking ---------------------------------------------------


def test_429_retry_after_exact_and_requeued(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/1")], T0)
    [lease] = fr.next(1, 60, T0)
    [ev] = fr.complete([fetch(lease, "http-error", status=429, retry_after="120")], T0 + 1)
    assert ev["disposition"] == "backoff" and ev["next_allowed"] == T0 + 121
    assert fr.state_of("http://a.test/1") == "queued"
    assert fr.next(1, 60, T0 + 120.9) == []
    [again] = fr.next(1, 60, T0 + 121)
    assert again["url"] == "http://a.test/1" and again["attempt"] == 2


@pytest.mark.parametrize(("retry_after", "crawl_delay", "expected"), [(0, None, 1.0), ("0", 5, 5.0), (3, 5, 5.0)])
def test_backoff_never_undercuts_the_normal_delay(fr: Frontier, retry_after: object, crawl_delay: float | None,
                                                  expected: float) -> None:
    # Retry-After is a minimum: the host's default delay and Crawl-delay still apply.
    fr.add([url_rec("http://a.test/1")], T0)
    [lease] = fr.next(1, 60, T0)
    [ev] = fr.complete([fetch(lease, "http-error", status=429, retry_after=retry_after, crawl_delay=crawl_delay)], T0)
    assert ev["next_allowed"] == T0 + expected


def test_503_exponential_backoff_capped(tmp_path: Path) -> None:
    with make(tmp_path, backoff_cap=10.0) as f:
        f.add([url_rec("http://a.test/1")], T0)
        now, delays = T0, []
        for _ in range(5):
            [lease] = f.next(1, 60, now)
            [ev] = f.complete([fetch(lease, "http-error", status=503)], now)
            delays.append(ev["next_allowed"] - now)
            now = ev["next_allowed"]
        assert delays == [2.0, 4.0, 8.0, 10.0, 10.0]
        [lease] = f.next(1, 60, now)
        [ev] = f.complete([fetch(lease)], now)  # success resets the backoff
        assert ev["next_allowed"] - now == 1.0


def test_429_slows_other_hosts_on_the_same_ip(fr: Frontier) -> None:
    fr.add([url_rec(f"http://{h}.test/{i}") for h in "abc" for i in range(2)], T0)
    leases = fr.next(10, 60, T0)
    ips = {"a.test": "10.0.0.1", "b.test": "10.0.0.1", "c.test": "10.0.0.2"}
    fr.complete([fetch(r, ip=ips[r["host"]]) for r in leases], T0)
    by_host = {r["host"]: r for r in fr.next(10, 60, T0 + 1)}
    fr.complete([fetch(by_host["a.test"], "http-error", status=429, retry_after=100, ip="10.0.0.1")], T0 + 1)
    fr.add([url_rec("http://b.test/late")], T0 + 1)
    fr.complete([fetch(by_host[h], ip=ips[h]) for h in ("b.test", "c.test")], T0 + 1)
    fr.add([url_rec("http://c.test/late")], T0 + 1)
    # b.test shares a.test's address: it waits for the Retry-After too; c.test does not.
    assert [r["host"] for r in fr.next(10, 60, T0 + 50)] == ["c.test"]
    assert sorted(r["host"] for r in fr.next(10, 60, T0 + 101)) == ["a.test", "b.test"]


def test_per_ip_cap(tmp_path: Path) -> None:
    with make(tmp_path, per_ip=2) as f:
        hosts = [f"h{i}.test" for i in range(5)]
        f.add([url_rec(f"http://{h}/{i}") for h in hosts for i in range(3)], T0)
        # The address comes from earlier fetch results: until then no IP cap applies.
        first = f.next(10, 60, T0)
        assert len(first) == 5
        f.complete([fetch(r, ip="127.0.0.9") for r in first], T0)
        second = f.next(10, 60, T0 + 5)
        assert len(second) == 2
        assert f.stats(T0 + 5)["hosts_waiting_ip"] == 3
        f.complete([fetch(second[0], ip="127.0.0.9")], T0 + 5)
        third = f.next(10, 60, T0 + 5)  # one slot freed: exactly one more host
        assert len(third) == 1 and third[0]["host"] not in {r["host"] for r in second}


def test_hosts_waiting_for_an_ip_are_not_stranded_by_a_higher_cap(tmp_path: Path) -> None:
    with make(tmp_path, per_ip=1) as f:
        f.add([url_rec(f"http://h{i}.test/{j}") for i in range(3) for j in range(2)], T0)
        f.complete([fetch(r, ip="10.9.9.9") for r in f.next(10, 60, T0)], T0)
        assert len(f.next(10, 60, T0 + 5)) == 1
        assert f.stats(T0 + 5)["hosts_waiting_ip"] == 2
    with make(tmp_path, per_ip=3) as f:  # an operator raises --per-ip: nobody waits forever
        assert len(f.next(10, 60, T0 + 6)) == 2
        assert f.stats(T0 + 6)["hosts_waiting_ip"] == 0


def test_transport_errors_retry_then_drop(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/bad")], T0)
    now, dispositions = T0, []
    for _ in range(3):
        [lease] = fr.next(1, 60, now)
        [ev] = fr.complete([fetch(lease, "timeout", error="read timeout")], now)
        dispositions.append(ev["disposition"])
        now = ev["next_allowed"]
    assert dispositions == ["retry", "retry", "dropped"]
    assert fr.state_of("http://a.test/bad") == "dropped"
    assert (fr.stats(now)["retried"], fr.stats(now)["dropped"]) == (2, 1)  # what crawl stats reports
    assert fr.next(1, 60, now + DAY) == []
    assert fr.add([url_rec("http://a.test/bad")], now)["known"] == 1  # not this cycle


def test_failing_host_is_parked(tmp_path: Path) -> None:
    with make(tmp_path, park_after=3, park_seconds=4 * 3600.0) as f:
        f.add([url_rec(f"http://a.test/{i}") for i in range(5)], T0)
        now = T0
        for _ in range(3):
            [lease] = f.next(1, 60, now)
            [ev] = f.complete([fetch(lease, "connect-error")], now)
            now = ev["next_allowed"]
        assert ev["parked_until"] == pytest.approx(ev["ts"] + 4 * 3600.0)
        assert f.stats(ev["ts"] + 1)["hosts_parked"] == 1
        assert f.next(1, 60, ev["ts"] + 4 * 3600.0 - 1) == []
        assert len(f.next(1, 60, ev["ts"] + 4 * 3600.0)) == 1


@pytest.mark.parametrize("outcome", ["redirect", "robots-disallowed", "http-error", "too-large"])
def test_final_outcomes_are_recorded_not_retried(fr: Frontier, outcome: str) -> None:
    fr.add([url_rec("http://a.test/x")], T0)
    [lease] = fr.next(1, 60, T0)
    extra = {"status": 301, "location": "http://a.test/y"} if outcome == "redirect" else {"status": 404}
    [ev] = fr.complete([fetch(lease, outcome, **extra)], T0)
    assert ev["disposition"] == "done" and ev["outcome"] == outcome
    assert fr.state_of("http://a.test/x") == "done"
    assert fr.next(1, 60, T0 + DAY) == []


def test_deferred_goes_back_without_a_failure(fr: Frontier) -> None:
    # The fetcher spent the lease on robots.txt: the URL is next in line once the host is due.
    fr.add([url_rec("http://a.test/page"), url_rec("http://a.test/other")], T0)
    [lease] = fr.next(1, 60, T0)
    [ev] = fr.complete([fetch(lease, "deferred")], T0)
    assert ev["disposition"] == "deferred" and ev["next_allowed"] == T0 + 1
    assert fr.state_of("http://a.test/page") == "queued"
    [again] = fr.next(1, 60, T0 + 1)
    assert again["url"] == "http://a.test/page" and again["attempt"] == 2
    assert fr.dump("a.test", T0 + 1)["consecutive_failures"] == 0


def test_unreachable_robots_keeps_the_hosts_urls_queued_until_it_can_be_read(fr: Frontier) -> None:
    # RFC 9309: fetch nothing while robots.txt answers 5xx -- but lose nothing either.
    urls = [f"http://a.test/{n}" for n in range(3)]
    fr.add([url_rec(u) for u in urls] + [url_rec("http://b.test/")], T0)
    leases = {rec["host"]: rec for rec in fr.next(10, 60, T0)}
    robots = {"status": 503, "error": "robots.txt returned 503", "verdict": "unreachable"}
    [ev] = fr.complete([fetch(leases["a.test"], "robots-unreachable", retry_after=90.0, robots=robots),
                        ], T0)
    assert ev["disposition"] == "robots-wait" and ev["next_allowed"] == T0 + 90  # exactly when asked
    assert ev["robots_wait"] == {"since": T0, "next_check": T0 + 90, "status": 503, "checks": 1,
                                 "error": "robots.txt returned 503", "urls": 3, "new": True}
    [other] = fr.complete([fetch(leases["b.test"])], T0)  # another host: nothing about robots
    assert "robots_wait" not in other and "robots_resumed" not in other
    assert all(fr.state_of(u) == "queued" for u in urls)
    st = fr.stats(T0 + 1)
    assert (st["queued"], st["hosts_waiting_robots"], st["urls_waiting_robots"]) == (3, 1, 3)
    w = fr.robots_waiting(T0 + 1)
    assert [(x["host"], x["urls"], x["next_check"], x["checks"]) for x in w["list"]] == [("a.test", 3, T0 + 90, 1)]
    assert fr.dump("a.test", T0 + 1)["robots_wait"]["next_check"] == T0 + 90
    assert fr.next(10, 60, T0 + 89) == []  # nothing until the next check
    # a second failed check: still waiting, the count goes up, no failure or attempt counted
    [again] = fr.next(10, 60, T0 + 90)
    assert again["url"] == urls[0] and again["attempt"] == 1
    [ev] = fr.complete([fetch(again, "robots-unreachable", retry_after=180.0, robots=robots)], T0 + 90)
    assert ev["robots_wait"]["checks"] == 2 and not ev["robots_wait"]["new"]
    assert ev["robots_wait"]["since"] == T0
    assert fr.dump("a.test", T0 + 90)["consecutive_failures"] == 0
    # robots.txt answers again: the fetcher defers the page, and the wait is over
    [third] = fr.next(10, 60, T0 + 270)
    [ev] = fr.complete([fetch(third, "deferred")], T0 + 270)
    assert ev["disposition"] == "deferred" and ev["robots_resumed"] == {"since": T0, "checks": 2, "urls": 3}
    assert fr.robots_waiting(T0 + 271)["hosts"] == 0 and fr.stats(T0 + 271)["urls_waiting_robots"] == 0
    got = []
    now = T0 + 271
    while len(got) < 3:
        [lease] = fr.next(1, 60, now)
        [ev] = fr.complete([fetch(lease)], now)
        assert "robots_resumed" not in ev
        got.append(lease["url"])
        now = ev["next_allowed"]
    assert got == urls and fr.pending()["queued"] == 0  # every URL fetched, none lost


def test_next_wait_ends_when_only_robots_waits_are_left(tmp_path: Path) -> None:
    """`crawl frontier next --wait` (bin/crawl-pipeline's loop) does not sit out re-checks
    minutes apart: it ends, says why, and the URLs stay queued for the next run."""
    import subprocess
    import sys
    import time

    d = tmp_path / "D"
    with Frontier(d / "frontier") as f:
        now = time.time()
        f.add([url_rec("http://a.test/x"), url_rec("http://a.test/y")], now)
        [lease] = f.next(1, 60, now)
        [ev] = f.complete([fetch(lease, "robots-unreachable", retry_after=600.0)], now)
        assert ev["disposition"] == "robots-wait"
    res = subprocess.run([sys.executable, "-m", "crawl", "frontier", "next", "--dir", str(d), "--wait"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == "", res.stderr
    assert "waits on an unreachable robots.txt (1 host, 2 URLs, kept queued)" in res.stderr
    with Frontier(d / "frontier") as f:
        assert f.pending() == {"queued": 2, "in_flight": 0}


def test_robots_wait_without_retry_after_backs_off(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/x")], T0)
    [lease] = fr.next(1, 60, T0)
    [ev] = fr.complete([fetch(lease, "robots-unreachable")], T0)
    assert ev["disposition"] == "robots-wait" and ev["next_allowed"] == T0 + backoff_delay(DEFAULT, 1)
    [lease] = fr.next(1, 60, ev["next_allowed"])
    [ev] = fr.complete([fetch(lease, "robots-unreachable")], lease["deadline"] - 60)
    assert ev["next_allowed"] == lease["deadline"] - 60 + backoff_delay(DEFAULT, 2)
    assert fr.state_of("http://a.test/x") == "queued"


# ---- leases -----------------------------------------------------------------------------------


def test_expired_lease_returns_and_late_completion_changes_nothing(fr: Frontier) -> None:
    fr.add([url_rec("http://a.test/1")], T0)
    [lease] = fr.next(1, 60, T0)
    assert fr.next(1, 60, T0 + 59) == []
    assert fr.requeue_expired(T0 + 60) == 1
    assert fr.state_of("http://a.test/1") == "queued"
    before = snapshot(fr)
    [ev] = fr.complete([fetch(lease)], T0 + 61)
    assert ev["event"] == "frontier.unknown-lease" and "expired" in ev["error"]
    assert snapshot(fr) == before
    [again] = fr.next(1, 60, T0 + 61)  # the host waits a normal delay after an expiry
    assert again["attempt"] == 2 and again["lease"] != lease["lease"]


def test_url_that_expires_every_time_is_dropped(tmp_path: Path) -> None:
    with make(tmp_path, max_leases=3) as f:
        f.add([url_rec("http://a.test/poison"), url_rec("http://a.test/ok")], T0)
        now, seen = T0, []
        for _ in range(10):
            seen += [r["url"] for r in f.next(1, 10, now)]
            now += 20
        assert seen[:4] == ["http://a.test/poison"] * 3 + ["http://a.test/ok"]
        assert "http://a.test/poison" not in seen[4:]
        assert f.state_of("http://a.test/poison") == "dropped"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"lease": "00000000000000ff"}, "unknown"),
        ({"lease": "not-a-lease"}, "unknown"),
        ({"lease": None}, "unknown"),
        ({"status": "200"}, "bad status"),
        ({"status": 42}, "bad status"),
        ({"outcome": "exploded"}, "unknown outcome"),
        ({"url": "http://a.test/other"}, "does not match"),
        ({"kind": "url"}, "expected a fetch"),
    ],
)
def test_bad_fetch_records_leave_state_untouched(fr: Frontier, change: dict[str, Any], error: str) -> None:
    fr.add([url_rec("http://a.test/1")], T0)
    [lease] = fr.next(1, 60, T0)
    before = snapshot(fr)
    [ev] = fr.complete([{**fetch(lease), **change}], T0 + 1)
    assert "error" in ev and error in ev["error"]
    assert snapshot(fr) == before
    [ok] = fr.complete([fetch(lease)], T0 + 1)  # the real result still completes it
    assert ok["disposition"] == "done"


def test_missing_lease_field(fr: Frontier) -> None:
    before = snapshot(fr)
    [ev] = fr.complete([{"kind": "fetch", "v": 1, "url": "http://a.test/", "outcome": "ok"}], T0)
    assert ev["event"] == "frontier.bad-record" and "lease" in ev["error"]
    assert snapshot(fr) == before


def test_fifo_within_priority_across_blocks_requeues_and_promotions(fr: Frontier) -> None:
    # Long URLs fill a queue block (~1 KiB) every few entries, so blocks are
    # used up and started while the host is leased, requeued and re-added.
    pad = "p" * 300
    urls = [f"http://a.test/{pad}/{i}" for i in range(12)]
    fr.add([url_rec(u) for u in urls[:5]], T0)
    fr.add([url_rec(urls[5], due=T0 + 5)], T0)  # joins the queue when due, after what is queued by then
    order, now = [], T0
    for step in range(40):
        if step == 1:
            fr.add([url_rec(u) for u in urls[6:9]], now)
        if step == 2:
            fr.add([url_rec(urls[9], priority=0)], now)  # jumps ahead of everything
        if step == 8:
            fr.add([url_rec(u) for u in urls[10:]], now)
        leases = fr.next(10, 60, now)
        for lease in leases:
            first_try = lease["url"] not in order
            order.append(lease["url"])
            # The first try of urls[2] is rate limited: it goes back to the head of the queue.
            result = fetch(lease, "http-error", status=429) if lease["url"] == urls[2] and first_try else fetch(lease)
            fr.complete([result], now)
        now += 10
    assert order == urls[:2] + [urls[9], urls[2], urls[2]] + urls[3:5] + [urls[6], urls[7], urls[8], urls[5]] \
        + urls[10:]
    assert fr.stats(now)["queued"] == 0


# ---- stats and dump ---------------------------------------------------------------------------


def test_stats_and_dump(fr: Frontier) -> None:
    fr.add([url_rec(f"http://h{h}.test/{i}") for h in range(3) for i in range(2)], T0)
    fr.add([url_rec("http://h9.test/x", due=T0 + 1000)], T0)
    s = fr.stats(T0)
    assert (s["queued"], s["hosts"], s["hosts_ready"], s["in_flight"], s["delayed"]) == (7, 4, 3, 0, 1)
    assert s["backlog"] == 6
    leases = fr.next(2, 60, T0)
    s = fr.stats(T0)
    assert (s["queued"], s["in_flight"], s["hosts_ready"]) == (5, 2, 1)
    assert len(fr.next(10, 60, T0 + 0.5)) == 1
    assert fr.next(10, 60, T0 + 0.6) == []  # from here on no host is ready ...
    assert fr.next(10, 60, T0 + 1.0) == []
    assert fr.stats(T0 + 1)["idle_fraction"] == pytest.approx(0.4)  # ... 0.4 s of 1 s
    d = fr.dump(leases[0]["host"], T0)
    assert d["lease"]["url"] == leases[0]["url"] and len(d["queue"]) == 1 and d["queued"] == 1
    assert fr.dump("nowhere.test", T0) == {"host": "nowhere.test", "known": False}


# ---- host keys ----------------------------------------------------------------------------------

_HOSTISH = st.text(alphabet="abnxXYZ019-.:@[]_", min_size=1, max_size=12)


@given(scheme=st.sampled_from(["http", "https", "ftp"]), netloc=_HOSTISH,
       rest=st.sampled_from(["", "/", "/p?q=1", "?x", "#f"]))
@settings(max_examples=400, deadline=None)
def test_fast_host_path_agrees_with_canon(scheme: str, netloc: str, rest: str) -> None:
    # The sliced fast path must give exactly crawl.canon's politeness key, or step aside.
    from crawl.canon import host_of as canon_host_of
    from crawl.frontier.politeness import fast_host

    url = f"{scheme}://{netloc}{rest}"
    fast = fast_host(url)
    if fast is not None:
        assert fast == canon_host_of(url)
    assert fast_host(f"http://{'a' * 70}.test/") is None  # too long a label: canon decides


def test_a_frontier_of_another_layout_is_refused(tmp_path: Path) -> None:
    import lmdb

    from crawl.core import StateError

    env = lmdb.open(str(tmp_path / "frontier"), max_dbs=16)  # layout 1 had no "layout" stamp
    env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"seq", (5).to_bytes(8, "big"), db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(StateError, match="layout 1, this version of crawl reads layout 2"):
        Frontier(tmp_path / "frontier")
    with Frontier(tmp_path / "new") as f:  # a new one is stamped and opens again
        f.add([url_rec("http://a.test/")], T0)
    with Frontier(tmp_path / "new") as f:
        assert f.stats(T0)["queued"] == 1


def test_map_trim_releases_resident_pages_and_keeps_data(tmp_path: Path) -> None:
    from crawl.core.maptrim import file_backed_bytes

    with Frontier(tmp_path / "f", sync=False, map_budget=None) as f:
        f.add([url_rec(f"http://h{i % 2000}.test/some/longer/path/{i}") for i in range(60_000)], T0)
        with f.env.begin() as txn:  # touch every page of the map
            assert sum(len(v) for db in f.db.values() for _, v in txn.cursor(db=db)) > 2_000_000
        before = file_backed_bytes()
        assert before is not None
        assert f.trimmer.trim()
        assert file_backed_bytes() < before - 2_000_000  # type: ignore[operator]
        assert f.stats(T0)["queued"] == 60_000  # still all there
        assert len(f.next(5000, 60, T0)) == 2000


def test_map_trim_lets_go_of_every_lmdb_map_of_the_process(tmp_path: Path) -> None:
    # The budget is the process's whole file-backed RSS, so a trim that dropped only
    # the frontier's pages left a parse process (five environments, the recrawl map
    # the largest) over budget for good, trimming the frontier on every look.
    from crawl.core import open_env
    from crawl.core.maptrim import file_backed_bytes

    other = open_env(tmp_path / "other", sync=False)
    with other.begin(write=True) as txn:
        for i in range(30_000):
            txn.put(f"key-{i:08d}".encode(), b"v" * 200)
    with Frontier(tmp_path / "f", sync=False, map_budget=None) as f, other.begin() as txn:
        assert sum(len(v) for _, v in txn.cursor()) == 6_000_000  # every page of the other map resident
        before = file_backed_bytes()
        assert f.trimmer.trim()
        assert file_backed_bytes() < before - 4_000_000  # type: ignore[operator]
        assert txn.get(b"key-00012345") == b"v" * 200  # and nothing lost


def test_a_write_by_another_frontier_between_two_calls_is_seen(tmp_path: Path) -> None:
    # A Frontier reuses the host and address states its last transaction
    # committed only if no other transaction committed since (tx.Carry).
    a = Frontier(tmp_path / "frontier", Politeness(per_ip=1))
    b = Frontier(tmp_path / "frontier", Politeness(per_ip=1))  # shares the environment, as another process would
    try:
        a.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        a.complete([fetch(r, ip="10.0.0.1") for r in a.next(5, 60, T0)], T0)
        [second] = a.next(5, 60, T0 + 5)  # a now remembers a.test leased, 10.0.0.1 with one in flight
        [ev] = b.complete([fetch(second, ip="10.0.0.1")], T0 + 5)
        assert ev["disposition"] == "done"
        a.add([url_rec("http://a.test/3")], T0 + 10)
        assert [r["url"] for r in a.next(5, 60, T0 + 10)] == ["http://a.test/3"]
        assert b.stats(T0 + 10)["hosts_waiting_ip"] == 0
    finally:
        a.close()


def test_a_failed_transaction_leaves_nothing_for_the_next_one(tmp_path: Path) -> None:
    with make(tmp_path) as f:
        f.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        [lease] = f.next(5, 60, T0)

        def results() -> Any:
            yield fetch(lease)  # applied in memory (host released), then the batch fails
            raise RuntimeError("input broke")

        with pytest.raises(RuntimeError):
            f.complete(results(), T0 + 5)
        assert f.pending() == {"queued": 1, "in_flight": 1}
        f.add([url_rec("http://a.test/3", priority=0)], T0 + 10)  # a higher priority: a free host is rescheduled
        assert f.next(5, 60, T0 + 10) == []  # a.test/1 is still in flight: one lease per host
        [ev] = f.complete([fetch(lease)], T0 + 10)
        assert ev["disposition"] == "done"
        assert [r["url"] for r in f.next(5, 60, T0 + 20)] == ["http://a.test/3"]


# ---- one-step codecs of the lease path ----------------------------------------------------------


@given(url=st.sampled_from(["http://a.test/x?y", "https://a.test", "https://a.test:8443/p", "ftp://a.test/f",
                            "http://a.test.evil/", "http://a.test/\udcff"]),
       fields=st.sampled_from([None, {"depth": 3}, {"meta": {"k": [1, 2]}, "priority": 2}]),
       attempts=st.integers(0, 300), fails=st.integers(0, 300), hid=st.integers(0, 2**32 - 1),
       prio=st.integers(0, 255), seq=st.integers(0, 2**64 - 1))
@settings(max_examples=200, deadline=None)
def test_one_step_lease_codecs_agree_with_the_general_ones(url: str, fields: dict[str, Any] | None, attempts: int,
                                                          fails: int, hid: int, prio: int, seq: int) -> None:
    from crawl.frontier import hostqueue as hq

    entry = hq.encode_entry(url, "a.test", fields, attempts, fails)
    full = hq.decode_entry(entry, "a.test")
    got_url, end = hq.entry_url(entry, "a.test")
    assert (got_url, entry[end:]) == (full.url, full.extra)
    value = hq.lease_value_of(hq.queue_key(hid, prio, seq), 12.5, 10.0, 77, entry, attempts + 1)
    assert value == hq.lease_value(hid, prio, seq, 12.5, 10.0, 77, hq.with_counts(entry, attempts + 1, full.fails))
    assert hq.LEASE_HEAD.unpack_from(value) == (hid, prio, seq, 12.5, 10.0, 77)
