"""Leases ahead (crawl/frontier/handoff.py) against real LMDB files: while a
host's request is in flight its next URLs are leased, so the answer's end
only starts the next request. The host is held by the chain (nobody else
leases it, one address slot), the chain's leases complete as released
early, a chain given back leaves the answer behind it to apply its backoff,
and nothing is lost or leased twice when the chain never completes (SIGKILL).
The simulated clock is ``now``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_handoff import T0, answer, make, snapshot, url_rec

from crawl.frontier import Frontier


def started(f: Frontier, urls: list[str], t: float = T0) -> dict[str, Any]:
    """A host whose answer time is known (one URL fetched and completed); its next lease."""
    f.add([url_rec(u) for u in urls], t)
    [a] = f.next(10, 60, t)
    f.complete([answer(a, ended_at=t)], t)
    [b] = f.next(10, 60, t + 10)
    return b


def test_a_chain_holds_its_host_and_completes_in_turn(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        b = started(f, [f"http://a.test/{i}" for i in range(6)])
        assert b["url"] == "http://a.test/1"
        c, d = f.lease_ahead(b, T0 + 1, 60, None, 2)
        assert [c["url"], d["url"]] == ["http://a.test/2", "http://a.test/3"]  # in queue order
        assert f.state_of("http://a.test/3") == "leased"
        assert f.next(10, 60, T0 + 1) == []  # one in flight per host: the chain holds it
        assert f.lease_ahead(b, T0 + 1, 60, None, 2) == []  # only after the newest of the chain
        # b and c answer and complete (released early: their host names d)
        evs = f.complete([answer(b, ended_at=T0 + 1.1), answer(c, ended_at=T0 + 1.2)], T0 + 1.3)
        assert [e["disposition"] for e in evs] == ["done", "done"]
        assert f.next(10, 60, T0 + 1.3) == []
        [e] = f.lease_ahead(d, T0 + 1.3, 60, answer(c, ended_at=T0 + 1.2), 1)
        assert e["url"] == "http://a.test/4"
        f.complete([answer(d, ended_at=T0 + 1.4)], T0 + 1.4)
        assert f.next(10, 60, T0 + 1.4) == []  # e still holds the host
        f.complete([answer(e, ended_at=T0 + 1.5)], T0 + 1.5)  # the chain's last: a plain completion
        assert [r["url"] for r in f.next(10, 60, T0 + 1.5)] == ["http://a.test/5"]
        assert f.pending()["in_flight"] == 1
        assert f.stats(T0 + 1.5)["in_flight"] == 1


@pytest.mark.parametrize("cfg", [
    {"default_delay": 1.0},  # the default delay: its completion frees it in time
    {"default_delay": 0.0, "response_factor": 60.0},  # 60 x 0.01 s
])
def test_no_lease_ahead_for_a_long_delay_nor_without_a_commit(tmp_path: Path, cfg: dict[str, Any]) -> None:
    with make(tmp_path, **cfg) as f:
        b = started(f, [f"http://a.test/{i}" for i in range(3)], T0)
        before = snapshot(f)
        assert f.lease_ahead(b, T0 + 1, 60, None, 4) == []
        assert snapshot(f) == before


def test_no_lease_ahead_before_the_hosts_answer_time_is_known(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        f.add([url_rec(f"http://a.test/{i}") for i in range(3)], T0)
        [a] = f.next(10, 60, T0)  # the host's first lease: robots.txt may come first
        before = snapshot(f)
        assert f.lease_ahead(a, T0, 60, None, 4) == []
        assert snapshot(f) == before


@pytest.mark.parametrize(("outcome", "status"), [
    ("http-error", 429), ("http-error", 503), ("http-error", 500), ("timeout", None), ("deferred", None)])
def test_a_chain_given_back_leaves_the_backoff_to_the_answer_behind_it(tmp_path: Path, outcome: str,
                                                                       status: int | None) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0, backoff_base=30.0) as f:
        b = started(f, [f"http://a.test/{i}" for i in range(5)])
        ahead = f.lease_ahead(b, T0 + 1, 60, None, 3)
        assert [r["url"] for r in ahead] == [f"http://a.test/{i}" for i in (2, 3, 4)]
        bad = answer(b, outcome, status, ended_at=T0 + 1.1, retry_after=120 if status == 429 else None)
        assert f.give_back(ahead, bad, T0 + 1.1) == 3
        assert all(f.state_of(r["url"]) == "queued" for r in ahead)
        assert f.next(10, 60, T0 + 1.1) == []  # b still holds the host until its completion
        [ev] = f.complete([bad], T0 + 1.2)
        if outcome != "deferred":
            assert ev["disposition"] in ("backoff", "retry"), ev
            assert ev["next_allowed"] >= T0 + 1.1 + 30  # the backoff, not the 0 s delay
            assert f.next(10, 60, T0 + 20) == []
        # then b's URL again (a retry) or not (a deferral), and the chain's in its order,
        # each counted one attempt: a lease given back was never requested
        leased, t = [], T0 + 200
        while (batch := f.next(10, 60, t)):
            leased += [(r["url"], r["attempt"]) for r in batch]
            f.complete([answer(r, ended_at=t) for r in batch], t)
            t += 0.01
        assert leased[-3:] == [(f"http://a.test/{i}", 1) for i in (2, 3, 4)]
        assert [u for u, _ in leased[:-3]] == ["http://a.test/1"]


def test_a_chain_keeps_one_address_slot(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0, per_ip=1) as f:
        f.add([url_rec(f"http://h{i}.test/{j}") for i in range(2) for j in range(4)], T0)
        first = f.next(10, 60, T0)
        f.complete([answer(r, ended_at=T0) for r in first], T0)  # both hosts on 127.0.0.7 now
        [x] = f.next(10, 60, T0 + 1)
        ahead = f.lease_ahead(x, T0 + 1, 60, None, 2)
        assert len(ahead) == 2 and {r["host"] for r in ahead} == {x["host"]}
        assert f.next(10, 60, T0 + 1) == []  # the address's one slot is the chain's
        f.complete([answer(r, ended_at=T0 + 1.1) for r in (x, ahead[0])], T0 + 1.1)
        assert f.next(10, 60, T0 + 1.1) == []  # still: its last lease holds it
        f.complete([answer(ahead[1], ended_at=T0 + 1.2)], T0 + 1.2)
        [y] = f.next(10, 60, T0 + 1.2)
        assert y["host"] != x["host"]
        f.complete([answer(y, ended_at=T0 + 1.3)], T0 + 1.3)
        assert f.stats(T0 + 1.3)["in_flight"] == 0


def test_a_chain_that_never_completes_comes_back_once_each(tmp_path: Path) -> None:
    # A killed run: b in flight, c and d leased ahead, nothing completed.
    with make(tmp_path, default_delay=0.0, response_factor=0.0, per_ip=1) as f:
        b = started(f, [f"http://a.test/{i}" for i in range(5)])
        ahead = f.lease_ahead(b, T0 + 1, 60, None, 2)
        assert len(ahead) == 2
        got = f.release_leases(T0 + 2, taken_after=T0 - 1)
        assert got["released"] == 3 and got["kept"] == 0
        assert all(f.state_of(f"http://a.test/{i}") == "queued" for i in range(1, 5))
        leased = []
        t = T0 + 2
        while (batch := f.next(10, 60, t)):
            assert len(batch) == 1  # one in flight per host, and the address's one slot
            leased += [r["url"] for r in batch]
            f.complete([answer(r, ended_at=t) for r in batch], t)
            t += 0.01
        assert sorted(leased) == [f"http://a.test/{i}" for i in range(1, 5)]
        assert f.pending() == {"queued": 0, "in_flight": 0}


def test_an_expired_chain_lease_is_leased_again_only_once(tmp_path: Path) -> None:
    with make(tmp_path, default_delay=0.0, response_factor=0.0) as f:
        b = started(f, [f"http://a.test/{i}" for i in range(4)])
        [c] = f.lease_ahead(b, T0 + 1, 10, None, 1)  # c lives until T0 + 11
        f.complete([answer(b, ended_at=T0 + 1.1)], T0 + 1.1)
        assert f.requeue_expired(T0 + 12) == 1  # c never fetched: its host is free again
        assert f.give_back([c], answer(b), T0 + 12) == 0  # too late: nothing to give back
        got = f.next(10, 60, T0 + 12)
        assert [r["url"] for r in got] == ["http://a.test/2"]
        assert f.pending() == {"queued": 1, "in_flight": 1}
