"""What a mutation run found untested in the per-IP slots (crawl/frontier/ipslots.py):
a node's share of an address's slots, who is woken when a slot frees (only a
host waiting for that address, only while the address has a free slot, and
it leaves the waiting list), the sweep that repairs waiters a raised
``--per-ip`` strands (as many as the address has free slots, at most 256 a
call), and an address with nothing in flight leaving the table. Real LMDB,
simulated clock; ``stats()["hosts_waiting_ip"]`` is what ``crawl frontier
stats`` shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawl.frontier import Frontier, Politeness
from crawl.frontier import hostqueue as hq

T0 = 1_000_000.0
IP = "10.0.0.1"


def _pol(per_ip: int) -> Politeness:
    return Politeness(per_ip=per_ip, default_delay=1.0, response_factor=0)


def _done(lease: dict[str, Any], ip: str | None = None) -> dict[str, Any]:
    rec = {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok", "status": 200}
    if ip is not None:
        rec["ip"] = ip
    return rec


def _learn(fr: Frontier, where: dict[str, str], urls_per_host: int = 2) -> None:
    """Queue ``urls_per_host`` URLs on each host and teach the frontier each host's address
    (one round of leases, completed at T0 with the ``ip`` field)."""
    fr.add([{"kind": "url", "v": 1, "url": f"http://{h}/{j}"} for h in where for j in range(urls_per_host)], T0)
    first = fr.next(len(where) + 10, 60, T0)
    assert sorted(x["host"] for x in first) == sorted(where)  # no address known yet: one per host
    fr.complete([_done(x, where[x["host"]]) for x in first], T0)


def _waiting(fr: Frontier) -> int:
    return int(fr.stats(T0)["hosts_waiting_ip"])


def _entries(fr: Frontier, name: str) -> int:
    with fr.env.begin() as txn:
        return int(txn.stat(fr.db[name])["entries"])


@pytest.mark.parametrize(("per_ip", "share", "want"), [(4, 2, 2), (8, 3, 2), (4, 3, 1), (2, 3, 1), (1, 5, 1)])
def test_a_node_gets_its_share_of_an_address_and_never_less_than_one_slot(
        tmp_path: Path, per_ip: int, share: int, want: int) -> None:
    hosts = {f"h{i}.test": IP for i in range(10)}
    with Frontier(tmp_path / "frontier", _pol(per_ip)) as fr:
        _learn(fr, hosts)
        fr.ip_share = {IP: share}  # the address's hosts are spread over ``share`` nodes (crawl/cluster)
        got = fr.next(10, 60, T0 + 5)
        assert len(got) == want  # per_ip // share, at least 1
        fr.ip_share = {"10.9.9.9": share}  # another address's share changes nothing here
        fr.complete([_done(x) for x in got], T0 + 5)
        assert len(fr.next(10, 60, T0 + 10)) == min(per_ip, 10 - want)  # the full --per-ip again


def test_a_woken_host_leaves_the_waiting_list(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", _pol(1)) as fr:
        _learn(fr, {"a.test": IP, "b.test": IP}, urls_per_host=3)
        [one] = fr.next(10, 60, T0 + 1)
        assert _waiting(fr) == 1  # the other host waits for the address
        fr.complete([_done(one)], T0 + 1)
        assert _waiting(fr) == 0  # its slot freed: the waiter is on the schedule again, not on the list
        [two] = fr.next(10, 60, T0 + 2)
        assert two["host"] != one["host"]
        fr.complete([_done(two)], T0 + 2)
        assert _waiting(fr) == 0 and _entries(fr, "ipwait") == 0


def test_a_slot_freed_on_one_address_wakes_no_host_of_another(tmp_path: Path) -> None:
    other = "10.0.0.2"  # its waiters' keys sort right after IP's
    with Frontier(tmp_path / "frontier", _pol(1)) as fr:
        _learn(fr, {"a.test": IP, "b.test": other, "c.test": other}, urls_per_host=3)
        got = fr.next(10, 60, T0 + 1)
        assert sorted(x["host"] for x in got)[0] == "a.test" and len(got) == 2
        assert _waiting(fr) == 1  # b or c waits for the other address
        fr.complete([_done(x) for x in got if x["host"] == "a.test"], T0 + 1)
        assert _waiting(fr) == 1  # IP's free slot is no business of the other address's waiter
        assert [x["host"] for x in fr.next(10, 60, T0 + 3)] == ["a.test"]  # its third URL; the waiter waits on
        assert _waiting(fr) == 1


def test_a_release_under_a_lowered_per_ip_wakes_nobody_while_the_address_is_full(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    with Frontier(path, _pol(2)) as fr:
        _learn(fr, {"a.test": IP, "b.test": IP, "c.test": IP})
        got = fr.next(10, 60, T0 + 1)
        assert len(got) == 2 and _waiting(fr) == 1
    with Frontier(path, _pol(1)) as fr:  # the next process runs with --per-ip 1
        fr.complete([_done(got[0])], T0 + 1)  # one still in flight: the address is full at 1
        assert _waiting(fr) == 1
        assert fr.next(10, 60, T0 + 5) == []
        fr.complete([_done(got[1])], T0 + 5)
        assert _waiting(fr) == 0
        [last] = fr.next(10, 60, T0 + 6)
        assert last["host"] not in {got[0]["host"], got[1]["host"]}


def test_a_raised_per_ip_wakes_as_many_stranded_hosts_as_the_address_has_free_slots(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    with Frontier(path, _pol(1)) as fr:
        _learn(fr, {f"h{i}.test": IP for i in range(5)})
        [first] = fr.next(10, 60, T0 + 1)
        assert _waiting(fr) == 4
    with Frontier(path, _pol(3)) as fr:  # --per-ip 3 now: two slots free, nobody releases one
        [one] = fr.next(1, 60, T0 + 2)  # the sweep wakes two, one of them is leased
        assert _waiting(fr) == 2  # the other two still wait: the address has no third free slot
        assert fr.stats(T0 + 2)["hosts_scheduled"] == 1  # the second woken one is due
        [two] = fr.next(5, 60, T0 + 2)
        assert len({first["host"], one["host"], two["host"]}) == 3
        assert fr.next(5, 60, T0 + 2) == [] and _waiting(fr) == 2


def test_the_sweep_wakes_at_most_256_stranded_hosts_a_call(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    n = 300
    with Frontier(path, _pol(1)) as fr:
        _learn(fr, {f"h{i}.test": IP for i in range(n + 1)})
        assert len(fr.next(n + 10, 60, T0 + 1)) == 1
        assert _waiting(fr) == n
    with Frontier(path, _pol(n + 10)) as fr:
        assert len(fr.next(1, 60, T0 + 2)) == 1
        assert _waiting(fr) == n - 256  # the rest at the next call
        assert len(fr.next(n + 10, 60, T0 + 2)) == n - 1  # the other 255 woken and the last 44
        assert _waiting(fr) == 0


def test_a_stranded_host_past_two_to_the_24_hosts_is_woken_by_its_own_id(tmp_path: Path) -> None:
    # a frontier that has created 2**24 hosts (fast-forwarded: its host id counter set there)
    path = tmp_path / "frontier"
    with Frontier(path, _pol(1)) as fr:
        with fr.env.begin(write=True) as txn:
            txn.put(b"hid", hq.u64(1 << 24), db=fr.db["meta"])
        _learn(fr, {"a.test": IP, "b.test": IP})
        [first] = fr.next(10, 60, T0 + 1)
        assert _waiting(fr) == 1
    with Frontier(path, _pol(2)) as fr:
        [second] = fr.next(10, 60, T0 + 2)
        assert {first["host"], second["host"]} == {"a.test", "b.test"}
        assert _waiting(fr) == 0


def test_an_address_with_nothing_in_flight_leaves_the_table(tmp_path: Path) -> None:
    # the table holds about one entry per lease in flight, not one per address ever seen
    with Frontier(tmp_path / "frontier", _pol(4)) as fr:
        where = {f"h{i}.test": f"10.0.1.{i}" for i in range(6)}
        _learn(fr, where)
        assert _entries(fr, "ips") == 0
        got = fr.next(10, 60, T0 + 1)
        assert len(got) == 6 and _entries(fr, "ips") == 6
        fr.complete([_done(x) for x in got[:2]], T0 + 1)
        assert _entries(fr, "ips") == 4
        fr.complete([_done(x) for x in got[2:]], T0 + 1)
        assert _entries(fr, "ips") == 0
