"""Retry-After as the frontier reads it from a fetch record: any JSON value may
arrive there (a hand-written record, another fetcher), and only seconds or an
HTTP-date count (RFC 9110 10.2.3); anything else is no Retry-After at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawl.frontier import Frontier, Politeness, parse_retry_after

T0 = 1_000_000.0


@pytest.mark.parametrize("value", [[], [5], {"s": 5}, b"5", True, float("nan"), -3, "soon", "-5", ""])
def test_what_is_not_seconds_or_a_date_is_no_retry_after(value: object) -> None:
    assert parse_retry_after(value, T0) is None


@pytest.mark.parametrize(("value", "seconds"), [(7, 7.0), (2.5, 2.5), ("120", 120.0), (" 30 ", 30.0),
                                                ("Mon, 12 Jan 1970 13:46:40 GMT", 0.0)])
def test_seconds_and_dates(value: object, seconds: float) -> None:
    assert parse_retry_after(value, T0) == seconds  # a date in the past means now


def test_a_429_with_a_garbled_retry_after_backs_off_as_without_one(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(backoff_base=4.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        [lease] = fr.next(1, 60, T0)
        [ev] = fr.complete([{"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"],
                             "outcome": "http-error", "status": 429, "retry_after": ["2"]}], T0)
        assert ev["disposition"] == "backoff" and ev["next_allowed"] == T0 + 4.0
