"""Moving hosts out of a frontier whole (crawl/frontier/slices.py), on real LMDB files.

What a shared crawl's handoff relies on: every queued URL of the moved
hosts leaves exactly once (ready and delayed, fields kept), done URLs leave
as fingerprints, a host with a lease in flight stays, the other hosts are
untouched, and a sink that fails leaves the frontier as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawl.frontier import (
    Frontier,
    Politeness,
    host_names,
    merge_done,
    merge_host_state,
    take_hosts,
)
from crawl.frontier.leases import fingerprint

T0 = 1_000_000.0


def url_rec(url: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "url", "v": 1, "url": url, **fields}


def done(lease: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok", "status": 200}


def drain_urls(fr: Frontier, now: float) -> set[str]:
    """Every URL the frontier still hands out, leasing and completing until it is empty."""
    got: set[str] = set()
    t = now
    while fr.pending()["queued"] or fr.pending()["in_flight"]:
        t += 100.0
        leases = fr.next(100, 30.0, t)
        got |= {x["url"] for x in leases}
        fr.complete([done(x) for x in leases], t)
    return got


@pytest.fixture
def fr(tmp_path: Path) -> Any:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=2.0)) as f:
        yield f


def test_take_hosts_moves_queued_delayed_and_done_urls_once(fr: Frontier) -> None:
    urls = [f"http://h{i % 4}.test/p{i}" for i in range(40)]
    fr.add([url_rec(u, depth=2, anchor=f"a{i}") for i, u in enumerate(urls)], T0)
    fr.add([url_rec("http://h0.test/later", due=T0 + 500)], T0)
    first = fr.next(10, 30.0, T0)  # one lease per host
    assert len(first) == 4
    by_host = {x["host"]: x for x in first}
    fr.complete([done(by_host["h0.test"]), done(by_host["h2.test"])], T0 + 1)  # h1, h3 stay in flight
    out: list[dict[str, Any]] = []
    got = take_hosts(fr, ["h0.test", "h1.test", "h2.test"], T0 + 1.5, out.extend)
    assert sorted(got["busy"]) == ["h1.test"]
    assert got["hosts"] == 2
    moved = [r["url"] for r in out if r["kind"] == "url"]
    assert len(moved) == len(set(moved)) == 9 + 1 + 9  # h0: 9 ready + 1 delayed; h2: 9 ready
    assert {u.split("/")[2] for u in moved} == {"h0.test", "h2.test"}
    delayed = [r for r in out if r["kind"] == "url" and "due" in r]
    assert [r["url"] for r in delayed] == ["http://h0.test/later"] and delayed[0]["due"] == T0 + 500
    plain = next(r for r in out if r.get("url") == "http://h0.test/p4")
    assert plain["depth"] == 2 and plain["anchor"] == "a4"  # the record's fields travel with it
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    assert set(hosts) == {"h0.test", "h2.test"}
    assert hosts["h0.test"]["next_allowed"] >= T0 + 1 + 2.0  # the delay after its last fetch travels
    seen = {r["host"]: r["fps"] for r in out if r["kind"] == "seen"}
    assert seen == {"h0.test": [f"{fingerprint(by_host['h0.test']['url']):016x}"],
                    "h2.test": [f"{fingerprint(by_host['h2.test']['url']):016x}"]}
    # per host: its state first, then its URLs, then what is done
    kinds = [r["kind"] for r in out if (r.get("host") or r["url"].split("/")[2]) == "h0.test"]
    assert kinds[0] == "host" and kinds[-1] == "seen"
    # what stays: h1 (busy) and h3 untouched, nothing of h0/h2
    assert fr.pending()["queued"] == 9 + 9
    fr.complete([done(by_host["h1.test"]), done(by_host["h3.test"])], T0 + 2)
    left = drain_urls(fr, T0 + 2)
    assert {u.split("/")[2] for u in left} == {"h1.test", "h3.test"} and len(left) == 18
    # nothing lost: leased + moved + left is every URL
    assert {x["url"] for x in first} | set(moved) | left == set(urls) | {"http://h0.test/later"}


def test_take_hosts_sink_failure_changes_nothing(fr: Frontier) -> None:
    fr.add([url_rec(f"http://a.test/{i}") for i in range(5)], T0)

    def broken(recs: list[dict[str, Any]]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        take_hosts(fr, ["a.test"], T0, broken)
    assert fr.pending()["queued"] == 5
    assert len(drain_urls(fr, T0)) == 5


def test_moved_urls_can_come_back_and_host_state_only_moves_later(fr: Frontier, tmp_path: Path) -> None:
    fr.add([url_rec(f"http://a.test/{i}") for i in range(3)], T0)
    [lease] = fr.next(1, 30.0, T0)
    fr.complete([done(lease)], T0 + 1)
    out: list[dict[str, Any]] = []
    take_hosts(fr, host_names(fr), T0 + 1, out.extend)
    assert fr.pending() == {"queued": 0, "in_flight": 0}
    assert fr.next(10, 30.0, T0 + 100) == []
    with Frontier(tmp_path / "other", Politeness(default_delay=2.0)) as b:
        host = next(r for r in out if r["kind"] == "host")
        b.add([url_rec("http://a.test/new")], T0)
        assert merge_host_state(b, [host], T0 + 1) == 1
        assert b.next(1, 30.0, T0 + 1.5) == []  # the old owner's delay holds on the new one
        assert merge_host_state(b, [{**host, "next_allowed": T0}], T0 + 1) == 1  # never earlier
        assert b.next(1, 30.0, host["next_allowed"] - 0.01) == []
        assert [x["url"] for x in b.next(1, 30.0, host["next_allowed"] + 0.01)] == ["http://a.test/new"]
    # the same URLs added back to the old frontier are queued again (their known state left too)
    assert fr.add([r for r in out if r["kind"] == "url"], T0 + 200)["added"] == 2


def test_lease_filter_and_ip_share(fr: Frontier) -> None:
    fr.add([url_rec(f"http://h{i}.test/{j}") for i in range(6) for j in range(3)], T0)
    first = fr.next(10, 30.0, T0)
    fr.complete([{**done(x), "ip": "127.0.1.1"} for x in first], T0 + 1)  # all six on one address
    fr.lease_filter = lambda host: host != "h0.test"
    t = T0 + 10
    got = fr.next(10, 30.0, t)
    assert len(got) == 4 and "h0.test" not in {x["host"] for x in got}  # per_ip 4
    fr.complete([done(x) for x in got], t + 0.1)
    fr.ip_share = {"127.0.1.1": 3}  # the address's hosts are spread over three nodes
    t += 10
    got = fr.next(10, 30.0, t)
    assert len(got) == 1  # 4 // 3
    fr.complete([done(x) for x in got], t + 0.1)
    fr.lease_filter = None  # refused hosts come back on the schedule
    fr.ip_share = {}
    t += 10
    assert "h0.test" in {x["host"] for x in fr.next(10, 30.0, t)}


def test_merge_done_takes_out_copies_queued_before_the_slice(fr: Frontier) -> None:
    """A previous owner's done URLs win over links that came first: ready and delayed
    copies leave the queue, a leased copy is left to its lease, other URLs stay."""
    urls = [f"http://h{i % 3}.test/q{i}" for i in range(30)]
    fr.add([url_rec(u, priority=i % 3) for i, u in enumerate(urls)], T0)
    fr.add([url_rec("http://h0.test/later", due=T0 + 500)], T0)
    leased = fr.next(10, 30.0, T0)  # one per host: in flight during the merge
    in_flight = {x["url"] for x in leased}
    gone = [u for u in urls[::4] if u not in in_flight] + ["http://h0.test/later"]
    seen = [{"kind": "seen", "host": h, "fps": [f"{fingerprint(u):016x}" for u in [*gone, *in_flight]
                                                 if f"//{h}/" in u]} for h in ("h0.test", "h1.test", "h2.test")]
    seen.append({"kind": "seen", "host": "h9.test", "fps": [f"{fingerprint('http://h9.test/x'):016x}"]})
    before = fr.pending()["queued"]
    got = merge_done(fr, seen, T0 + 1)
    assert got == {"done": len(gone) + 1, "unqueued": len(gone), "leased": len(in_flight)}
    assert fr.pending()["queued"] == before - len(gone)
    assert merge_done(fr, seen, T0 + 2)["unqueued"] == 0  # twice changes nothing
    fr.complete([done(x) for x in leased], T0 + 2)
    assert drain_urls(fr, T0 + 600) == set(urls) - set(gone) - in_flight
    # known as done here now: a later link is a no-op, on a host never seen before too
    assert fr.add([url_rec(u) for u in [*gone, "http://h9.test/x"]], T0 + 700)["added"] == 0
