"""The hand-off (crawl/frontier/handoff.py) against real LMDB files: a host freed
at the end of its answer, its next URL leased in the same commit, the old
lease completed later without touching the host, and nothing lost or leased
twice when the results never complete. The simulated clock is ``now``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawl.frontier import Frontier, Politeness

T0 = 1_000_000.0


def url_rec(url: str) -> dict[str, Any]:
    return {"kind": "url", "v": 1, "url": url}


def answer(lease: dict[str, Any], outcome: str = "ok", status: int | None = 200, **fields: Any) -> dict[str, Any]:
    """A fetch record as the fetcher makes it at the end of the answer."""
    return {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": outcome,
            "status": status, "ip": "127.0.0.7", "timings": {"total": 0.01}, **fields}


def make(tmp_path: Path, **cfg: Any) -> Frontier:
    return Frontier(tmp_path / "frontier", Politeness(**cfg))


def snapshot(f: Frontier) -> dict[str, list[tuple[bytes, bytes]]]:
    with f.env.begin() as txn:
        return {name: list(txn.cursor(db=db)) for name, db in f.db.items()}


def test_the_next_url_of_the_host_is_leased_at_the_end_of_the_answer(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        f.add([url_rec(f"http://a.test/{i}") for i in range(3)], T0)
        [a] = f.next(10, 60, T0)
        released, b = f.handoff(answer(a, ended_at=T0 + 0.5), T0 + 0.5, 60)
        assert released and b is not None and b["url"] == "http://a.test/1" and b["host"] == "a.test"
        assert f.pending()["in_flight"] == 2  # a's result is not durable yet: its lease stays
        assert f.next(10, 60, T0 + 0.6) == []  # one in flight per host: b holds it
        assert f.state_of("http://a.test/0") == "leased"
        [ev] = f.complete([answer(a, ended_at=T0 + 0.5)], T0 + 0.7)
        assert ev["disposition"] == "done" and f.state_of("http://a.test/0") == "done"
        assert f.next(10, 60, T0 + 0.8) == []  # the completion left b's hold alone
        [ev] = f.complete([answer(b, ended_at=T0 + 0.9)], T0 + 0.9)
        assert [r["url"] for r in f.next(10, 60, T0 + 0.9)] == ["http://a.test/2"]
        assert f.pending()["in_flight"] == 1


def test_the_delay_runs_from_the_end_of_the_answer_and_nothing_is_leased_before(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.3, response_factor=0.0) as f:
        f.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        [a] = f.next(10, 60, T0)
        released, b = f.handoff(answer(a, ended_at=T0 + 1.0), T0 + 1.1, 60)
        assert released and b is None  # not due until T0 + 1.3
        assert f.next(10, 60, T0 + 1.299) == []
        # the completion comes later still, and does not push the host back
        [ev] = f.complete([answer(a, ended_at=T0 + 1.0)], T0 + 1.2)
        assert ev["next_allowed"] == pytest.approx(T0 + 1.3)
        assert [r["url"] for r in f.next(10, 60, T0 + 1.3)] == ["http://a.test/2"]


@pytest.mark.parametrize(("cfg", "fields"), [
    ({"default_delay": 1.0}, {}),  # the default delay
    ({"default_delay": 0.0, "response_factor": 5.0}, {"timings": {"total": 0.2}}),  # 5 x 0.2 s
    ({"default_delay": 0.0}, {"crawl_delay": 2}),  # robots.txt's Crawl-delay
])
def test_a_host_with_a_long_delay_is_left_to_its_completion(tmp_path: Path, cfg: dict[str, Any],
                                                           fields: dict[str, Any]) -> None:
    # its completion frees it in time; a hand-off would be one more commit per answer
    with make(tmp_path, **cfg) as f:
        f.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        [a] = f.next(10, 60, T0)
        before = snapshot(f)
        assert f.handoff({**answer(a, ended_at=T0 + 1), **fields}, T0 + 1, 60) == (False, None)
        assert snapshot(f) == before


@pytest.mark.parametrize(("outcome", "status"), [
    ("http-error", 429), ("http-error", 503), ("http-error", 500), ("timeout", None),
    ("connect-error", None), ("robots-unreachable", None), ("deferred", None)])
def test_failures_and_waits_keep_the_host_until_their_completion(tmp_path: Path, outcome: str,
                                                                 status: int | None) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        f.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        [a] = f.next(10, 60, T0)
        before = snapshot(f)
        assert f.handoff(answer(a, outcome, status, ended_at=T0 + 1), T0 + 1, 60) == (False, None)
        assert snapshot(f) == before  # their backoff rules need the completion


def test_an_unknown_or_mismatched_lease_changes_nothing(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        f.add([url_rec("http://a.test/1"), url_rec("http://a.test/2")], T0)
        [a] = f.next(10, 60, T0)
        before = snapshot(f)
        assert f.handoff({**answer(a), "url": "http://a.test/2"}, T0 + 1, 60) == (False, None)
        assert f.handoff({**answer(a), "lease": "00000000000000ff"}, T0 + 1, 60) == (False, None)
        assert snapshot(f) == before
        assert f.handoff(answer(a), T0 + 1, 0)[0]  # released, nothing leased
        before = snapshot(f)
        assert f.handoff(answer(a), T0 + 1, 60) == (False, None)  # twice: once only
        assert snapshot(f) == before


def test_the_address_slot_is_free_at_the_end_of_the_answer(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.3, response_factor=0.0, per_ip=1) as f:
        f.add([url_rec(f"http://h{i}.test/{j}") for i in range(2) for j in range(2)], T0)
        first = f.next(10, 60, T0)
        f.complete([answer(r, ended_at=T0) for r in first], T0)  # both hosts on 127.0.0.7 now
        t = T0 + 0.3
        [x] = f.next(10, 60, t)
        assert f.next(10, 60, t) == []  # the address's one slot is x's
        assert f.handoff(answer(x, ended_at=t), t, 60) == (True, None)  # x's host waits 0.3 s
        [y] = f.next(10, 60, t)  # the other host, before x's result is durable
        assert y["host"] != x["host"]
        f.complete([answer(x, ended_at=t), answer(y, ended_at=t + 0.1)], t + 0.1)
        assert f.stats(t + 0.1)["in_flight"] == 0


def test_results_that_never_complete_come_back_once_each(tmp_path: Path) -> None:
    # A killed run: a released, b leased in the hand-off, neither completed.
    with make(tmp_path, default_delay=0.0, response_factor=0.0, per_ip=1) as f:
        f.add([url_rec(f"http://a.test/{i}") for i in range(3)], T0)
        [a] = f.next(10, 60, T0)
        _, b = f.handoff(answer(a, ended_at=T0 + 1), T0 + 1, 60)
        assert b is not None
        got = f.release_leases(T0 + 2, taken_after=T0 - 1)
        assert got["released"] == 2 and got["kept"] == 0
        assert f.state_of("http://a.test/0") == "queued" and f.state_of("http://a.test/1") == "queued"
        leased = []
        t = T0 + 2
        while (batch := f.next(10, 60, t)):
            assert len(batch) == 1  # one in flight per host, and the address's one slot
            leased += [r["url"] for r in batch]
            f.complete([answer(r, ended_at=t) for r in batch], t)
            t += 0.01
        assert sorted(leased) == [f"http://a.test/{i}" for i in range(3)]
        assert f.pending() == {"queued": 0, "in_flight": 0}


def test_an_expired_released_lease_leaves_the_later_lease_alone(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        f.add([url_rec(f"http://a.test/{i}") for i in range(3)], T0)
        [a] = f.next(10, 10, T0)
        _, b = f.handoff(answer(a, ended_at=T0 + 1), T0 + 1, 60)  # b lives until T0 + 61
        assert b is not None
        assert f.requeue_expired(T0 + 20) == 1  # a's result never came
        assert f.state_of("http://a.test/0") == "queued"
        assert f.next(10, 60, T0 + 20) == []  # b still holds the host
        f.complete([answer(b, ended_at=T0 + 21)], T0 + 21)
        assert [r["url"] for r in f.next(10, 60, T0 + 21)] == ["http://a.test/0"]
