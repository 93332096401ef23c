"""What a mutation run found untested in the completion (crawl/frontier/complete.py):
the exact bounds of a status code (100..999, both ends kept, 99 and 1000
refused even with a good lease), a url that is not a non-empty string refused
as such (not as a mismatch, not with a traceback). Real LMDB, simulated clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawl.frontier import Frontier, FrontierView, Politeness

T0 = 1_000_000.0


def _fetch(lease: dict[str, Any], **fields: Any) -> dict[str, Any]:
    rec = {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "http-error",
           "status": 404}
    rec.update(fields)
    return rec


@pytest.fixture
def leased(tmp_path: Path) -> Any:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        [lease] = fr.next(1, 60, T0)
        yield fr, lease


@pytest.mark.parametrize("status", [99, 1000, 0, -200, True])
def test_a_status_out_of_100_to_999_is_refused_even_with_a_good_lease(leased: Any, status: Any) -> None:
    fr, lease = leased
    [ev] = fr.complete([_fetch(lease, status=status)], T0 + 1)
    assert ev["event"] == "frontier.bad-record", ev
    assert ev["error"] == f"bad status {status!r} (expected an HTTP status code 100..999 or null)"
    assert fr.stats(T0 + 1)["in_flight"] == 1  # the lease is still there for the real result
    [ok] = fr.complete([_fetch(lease)], T0 + 1)
    assert ok["disposition"] == "done"


@pytest.mark.parametrize(("status", "disposition"), [(100, "done"), (999, "retry"), (None, "done")])
def test_statuses_100_and_999_are_kept(leased: Any, status: Any, disposition: str) -> None:
    fr, lease = leased
    [ev] = fr.complete([_fetch(lease, status=status)], T0 + 1)
    assert ev["event"] == "frontier.complete" and ev["status"] == status, ev
    assert ev["disposition"] == disposition  # an http-error of 500 or more is retried


@pytest.mark.parametrize("status", [100, 999])
def test_a_record_with_a_good_status_is_refused_for_what_is_wrong_with_it(leased: Any, status: int) -> None:
    # the status passes; the missing lease is the record's fault (the exact check, not the quick one)
    fr, lease = leased
    rec = _fetch(lease, status=status)
    del rec["lease"]
    [ev] = fr.complete([rec], T0 + 1)
    assert ev["event"] == "frontier.bad-record"
    assert ev["error"].startswith('no "lease" field'), ev


@pytest.mark.parametrize("url", ["", 5, None, ["http://a.test/1"], b"http://a.test/1"])
def test_a_url_that_is_not_a_non_empty_string_is_refused_as_such(leased: Any, url: Any) -> None:
    fr, lease = leased
    [ev] = fr.complete([_fetch(lease, url=url)], T0 + 1)
    assert ev["event"] == "frontier.bad-record" and ev["error"] == 'no "url" string', ev
    assert fr.stats(T0 + 1)["in_flight"] == 1


def _one(tmp_path: Path, **cfg: Any) -> tuple[Frontier, dict[str, Any]]:
    fr = Frontier(tmp_path / "frontier", Politeness(**cfg))
    fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(4)], T0)
    [lease] = fr.next(1, 60, T0)
    return fr, lease


def _noted(tmp_path: Path, now: float) -> Any:
    """The cause of a.test's wait as ``crawl why`` reads it."""
    h = FrontierView(tmp_path / "frontier").host("a.test", now)
    assert h is not None
    return h["noted"]


def test_an_expired_lease_waits_the_hosts_own_delay_from_its_last_answer_time(tmp_path: Path) -> None:
    # the last answer took 2 s: 5 x 2 = 10 s between requests, also after an expiry
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=5.0)
    with fr:
        [ev] = fr.complete([_fetch(lease, outcome="ok", status=200, ended_at=T0 + 2,
                                   timings={"total": 2.0})], T0 + 2)
        assert ev["next_allowed"] == T0 + 12
        [second] = fr.next(1, 30, T0 + 12)  # never completed: expires at T0 + 42
        assert fr.next(1, 30, T0 + 42) == []  # expired now; the host waits 10 s from here
        assert fr.next(1, 30, T0 + 51.9) == []
        [again] = fr.next(1, 30, T0 + 52)
        assert again["url"] == second["url"] and again["attempt"] == 2


def test_a_crawl_delay_below_one_second_is_honoured(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=0.1, response_factor=0, backoff_base=0.1)
    with fr:
        [ev] = fr.complete([_fetch(lease, outcome="ok", status=200, ended_at=T0 + 1, crawl_delay=0.5)], T0 + 1)
        assert ev["next_allowed"] == T0 + 1.5
        [nxt] = fr.next(1, 60, T0 + 1.5)
        # a 429 without Retry-After waits at least the Crawl-delay kept from before, not --delay
        [ev] = fr.complete([_fetch(nxt, status=429, ended_at=T0 + 2)], T0 + 2)
        assert ev["disposition"] == "backoff" and ev["next_allowed"] == T0 + 2.5


def test_only_a_parked_host_reports_parked_until(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0, park_after=2, park_seconds=3600.0)
    with fr:
        [ev] = fr.complete([_fetch(lease, outcome="timeout", status=None, ended_at=T0)], T0)
        assert ev["disposition"] == "retry" and "parked_until" not in ev
        assert _noted(tmp_path, T0)["cause"] == "error-backoff"
        [nxt] = fr.next(1, 60, ev["next_allowed"])
        [ev] = fr.complete([_fetch(nxt, outcome="timeout", status=None, ended_at=ev["next_allowed"])],
                           ev["next_allowed"])
        assert ev["parked_until"] == nxt["deadline"] - 60 + 3600  # the second failure in a row parks it
        assert _noted(tmp_path, T0)["cause"] == "parked"
        [nxt] = fr.next(1, 60, ev["parked_until"])
        [ev] = fr.complete([_fetch(nxt, status=429, ended_at=ev["parked_until"])], ev["parked_until"])
        assert ev["disposition"] == "backoff" and "parked_until" not in ev
        assert _noted(tmp_path, T0)["cause"] == "backoff"


def test_consecutive_transport_errors_double_the_wait_and_are_counted(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0, backoff_base=2.0, max_retries=10)
    with fr:
        t, waits = T0, []
        for _ in range(3):
            [ev] = fr.complete([_fetch(lease, outcome="connect-error", status=None, ended_at=t)], t)
            assert ev["disposition"] == "retry"
            waits.append(ev["next_allowed"] - t)
            t = ev["next_allowed"]
            [lease] = fr.next(1, 60, t)
        assert waits == [2.0, 4.0, 8.0]
        assert fr.stats(t)["retried"] == 3 and fr.stats(t)["backoffs"] == 0


def test_rate_limits_are_counted_as_backoffs(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0)
    with fr:
        [ev] = fr.complete([_fetch(lease, status=503, ended_at=T0)], T0)
        [lease] = fr.next(1, 60, ev["next_allowed"])
        fr.complete([_fetch(lease, status=429, ended_at=ev["next_allowed"])], ev["next_allowed"])
        assert fr.stats(T0)["backoffs"] == 2 and fr.stats(T0)["retried"] == 0


def test_a_normal_answer_ends_the_backoff_the_failures_and_the_parking(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0, backoff_base=2.0, park_after=2,
                     park_seconds=100.0)
    with fr:
        def answer(lease: dict[str, Any], t: float, **fields: Any) -> dict[str, Any]:
            [ev] = fr.complete([_fetch(lease, ended_at=t, **fields)], t)
            return ev

        ev = answer(lease, T0, status=429)
        assert ev["next_allowed"] == T0 + 2
        t = T0 + 2
        ev = answer(fr.next(1, 60, t)[0], t, outcome="timeout", status=None)  # level 2, failure 1
        assert ev["next_allowed"] == t + 4 and "parked_until" not in ev
        t = ev["next_allowed"]
        ev = answer(fr.next(1, 60, t)[0], t, outcome="ok", status=200)
        assert ev["next_allowed"] == t + 1
        h = fr.dump("a.test", t)
        assert (h["backoff_level"], h["consecutive_failures"]) == (0, 0)
        t += 1
        ev = answer(fr.next(1, 60, t)[0], t, outcome="timeout", status=None)  # the first failure again
        assert ev["next_allowed"] == t + 2 and "parked_until" not in ev  # level 1; not parked (1 < 2)
        t = ev["next_allowed"]
        ev = answer(fr.next(1, 60, t)[0], t, outcome="timeout", status=None)  # the second in a row parks
        assert ev["parked_until"] == t + 100 and ev["next_allowed"] == t + 100  # the wait is the parking
        t = ev["parked_until"]
        assert fr.dump("a.test", t - 1)["parked_until"] == t
        ev = answer(fr.next(1, 60, t)[0], t, outcome="ok", status=200)
        h = fr.dump("a.test", t)
        assert h["parked_until"] is None and (h["backoff_level"], h["consecutive_failures"]) == (0, 0)


def test_each_disposition_is_counted(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, response_factor=0, max_retries=1)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(4)], T0)
        leases = {x["host"]: x for x in fr.next(10, 60, T0)}
        evs = fr.complete([_fetch(leases["h0.test"], outcome="ok", status=200),
                           _fetch(leases["h1.test"], outcome="deferred", status=None),
                           _fetch(leases["h2.test"], outcome="timeout", status=None),  # max_retries 1: dropped
                           _fetch(leases["h3.test"], outcome="not-modified", status=304)], T0 + 1)
        assert [e["disposition"] for e in evs] == ["done", "deferred", "dropped", "done"]
        st = fr.stats(T0 + 1)
        assert (st["done"], st["deferred"], st["dropped"], st["retried"], st["backoffs"]) == (2, 1, 1, 0, 0)


def test_robots_waits_are_counted_in_stats(tmp_path: Path) -> None:
    # the README's stats list names the counter; it was counted and never shown
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0)
    with fr:
        [ev] = fr.complete([_fetch(lease, outcome="robots-unreachable", status=None, retry_after=30.0)], T0)
        assert ev["disposition"] == "robots-wait"
        [lease] = fr.next(1, 60, T0 + 30)
        fr.complete([_fetch(lease, outcome="robots-unreachable", status=None, retry_after=30.0)], T0 + 30)
        st = fr.stats(T0 + 30)
        assert st["robots_waits"] == 2 and st["retried"] == 0 and st["hosts_waiting_robots"] == 1


@pytest.mark.parametrize(("status", "disposition"), [(499, "done"), (500, "retry"), (501, "retry"), (404, "done")])
def test_an_http_error_from_500_up_is_retried(leased: Any, status: int, disposition: str) -> None:
    fr, lease = leased
    [ev] = fr.complete([_fetch(lease, status=status)], T0 + 1)
    assert ev["disposition"] == disposition


def test_a_5xx_with_retry_after_waits_it(tmp_path: Path) -> None:
    fr, lease = _one(tmp_path, default_delay=1.0, response_factor=0, backoff_base=2.0)
    with fr:
        [ev] = fr.complete([_fetch(lease, status=500, retry_after="30", ended_at=T0)], T0)
        assert ev["disposition"] == "retry" and ev["next_allowed"] == T0 + 30
        [lease] = fr.next(1, 60, T0 + 30)
        [ev] = fr.complete([_fetch(lease, status=502, ended_at=T0 + 30)], T0 + 30)  # none: the backoff, level 2
        assert ev["next_allowed"] == T0 + 30 + 4


@pytest.mark.parametrize(("ip", "kept"), [("10.0.0.1", True), ("a" * 64, True), ("a" * 65, False), ("", False),
                                          (17, False)])
def test_the_address_a_result_names_is_learned_up_to_64_characters(leased: Any, ip: Any, kept: bool) -> None:
    fr, lease = leased
    fr.complete([_fetch(lease, ip=ip)], T0 + 1)
    assert fr.dump("a.test", T0 + 1)["ip"] == (ip if kept else None)


def test_robots_waits_start_and_end_whatever_else_is_in_the_batch(tmp_path: Path) -> None:
    # one complete() of several results: a wait starts after a result that found no host waiting,
    # and ends after a result that found one
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/{j}"} for i in range(3) for j in range(3)], T0)
        got = {x["host"]: x for x in fr.next(10, 60, T0)}
        evs = fr.complete([_fetch(got["h0.test"], outcome="ok", status=200),
                           _fetch(got["h1.test"], outcome="robots-unreachable", status=None, retry_after=10.0),
                           _fetch(got["h2.test"], outcome="ok", status=200)], T0)
        assert evs[1]["robots_wait"]["new"] is True and "robots_wait" not in evs[0]
        assert fr.stats(T0)["hosts_waiting_robots"] == 1
        got = {x["host"]: x for x in fr.next(10, 60, T0 + 10)}
        assert set(got) == {"h0.test", "h1.test", "h2.test"}
        evs = fr.complete([_fetch(got["h0.test"], outcome="ok", status=200),
                           _fetch(got["h1.test"], outcome="ok", status=200),  # past robots.txt now
                           _fetch(got["h2.test"], outcome="ok", status=200)], T0 + 10)
        assert evs[1]["robots_resumed"]["checks"] == 1 and "robots_resumed" not in evs[0]
        assert fr.stats(T0 + 10)["hosts_waiting_robots"] == 0


def test_a_late_completion_of_an_early_released_lease_keeps_the_later_leases_delay(tmp_path: Path) -> None:
    # L1 released at the end of its answer (the hand-off), the host leased again (L2) and released
    # again; L1's completion, arriving after that, must not pull the host's next request back to L1's delay
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.2, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(4)], T0)
        [l1] = fr.next(1, 60, T0)
        r1 = _fetch(l1, outcome="ok", status=200, ended_at=T0 + 0.1)
        assert fr.handoff(r1, T0 + 0.1) == (True, None)
        [l2] = fr.next(1, 60, T0 + 0.3)
        assert fr.handoff(_fetch(l2, outcome="ok", status=200, ended_at=T0 + 0.4), T0 + 0.4)[0]
        [ev] = fr.complete([r1], T0 + 0.45)
        assert ev["disposition"] == "done" and ev["next_allowed"] == pytest.approx(T0 + 0.6)
        assert fr.next(1, 60, T0 + 0.5) == []
        assert len(fr.next(1, 60, T0 + 0.6)) == 1
