"""A lease that runs out: the host's delay counts from the expiry (real LMDB,
simulated clock as the ``now`` argument).

The fetcher that held the lease may have reached the host just before it
died, so the frontier treats an expiry as a request that may have happened
then: the host waits its normal delay before the URL is leased again.
"""

from __future__ import annotations

from pathlib import Path

from crawl.frontier import Frontier, Politeness

T0 = 1_000_000.0


def test_an_expired_lease_holds_the_host_for_its_delay_from_the_expiry(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        [lease] = fr.next(1, 60, T0)
        assert fr.next(1, 60, T0 + 59) == []  # still leased
        assert fr.requeue_expired(T0 + 60) == 1
        assert fr.next(1, 60, T0 + 60.5) == []  # not 0.5 s after a request that may have reached it
        [again] = fr.next(1, 60, T0 + 61)
        assert again["url"] == lease["url"] and again["attempt"] == 2


def test_an_expiry_found_by_next_itself_holds_the_host_too(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=2.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        fr.next(1, 60, T0)
        assert fr.next(1, 60, T0 + 60) == []  # next finds the expiry and puts the URL back ...
        assert fr.next(1, 60, T0 + 61.9) == []  # ... but the host waits 2 s from then
        [again] = fr.next(1, 60, T0 + 62)
        assert again["attempt"] == 2
