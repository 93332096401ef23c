"""Hosts that wait for their address's slot (--per-ip) are woken when a slot is
freed, so they are not starved by a host on the same address that keeps having
URLs due (real LMDB, simulated clock as ``now``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crawl.frontier import Frontier, Politeness

T0 = 1_000_000.0
IP = "10.0.0.1"


def _done(lease: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok",
            "status": 200, "ip": IP}


def test_a_freed_slot_goes_to_the_host_that_waited_for_it(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(per_ip=1, default_delay=1.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": u} for u in
                ("http://a.test/1", "http://a.test/2", "http://a.test/3", "http://b.test/1", "http://b.test/2")], T0)
        first = fr.next(10, 60, T0)  # no address known yet: one lease per host
        assert sorted(x["host"] for x in first) == ["a.test", "b.test"]
        fr.complete([_done(x) for x in first], T0)  # now both are known to live on IP
        [one] = fr.next(10, 60, T0 + 1)  # one slot: one of them; the other waits for the address
        [ev] = fr.complete([_done(one)], T0 + 1)
        other = "b.test" if one["host"] == "a.test" else "a.test"
        # the host that waited was due first (T0 + 1): the freed slot is its, even for one lease
        [nxt] = fr.next(1, 60, T0 + 2)
        assert nxt["host"] == other, (one, nxt)
