"""The one grammar of time flags and config keys (crawl.core.parse_duration)."""

from __future__ import annotations

import pytest

from crawl.core import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 30.0), ("0.5", 0.5), (".25", 0.25), ("0", 0.0), ("30s", 30.0), ("0.5s", 0.5),
    ("250ms", 0.25), ("5m", 300.0), ("1h30m", 5400.0), ("2d", 172800.0), ("2d12h", 216000.0),
    ("1m0.5s", 60.5), ("1h30m15s", 5415.0), (" 5M ", 300.0), (7, 7.0), (2.5, 2.5),
])
def test_accepted(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1w", "-1", "-5s", "5 m", "1h 30m", "30m1h", "5m5m",
                                  "1s500", "inf", "nan", "1e3", "0x10", "s", "m5"])
def test_refused_with_one_message(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration.*expected seconds or d/h/m/s/ms parts"):
        parse_duration(text)


def test_positive_refuses_zero() -> None:
    assert parse_duration("1ms", positive=True) == 0.001
    for zero in ("0", "0s", 0.0):
        with pytest.raises(ValueError, match="more than 0"):
            parse_duration(zero, positive=True)


def test_format_round_trips() -> None:
    for seconds in (0.25, 1.0, 59.5, 60.0, 5400.0, 86400.0 * 2 + 3600, 90061.0):
        assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)
    assert format_duration(5400) == "1h30m"
