"""What a mutation run found untested in the completion (crawl/frontier/complete.py):
the exact bounds of a status code (100..999, both ends kept, 99 and 1000
refused even with a good lease), a url that is not a non-empty string refused
as such (not as a mismatch, not with a traceback). Real LMDB, simulated clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawl.frontier import Frontier, Politeness

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
