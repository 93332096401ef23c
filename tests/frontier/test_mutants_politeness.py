"""Edges of the politeness rules that a mutation run found untested: a Retry-After
below zero is no Retry-After, level 0 waits as level 1, from level 64 on the step
is the cap (2 ** 63 steps are not computed) whatever the base; a priority out of
0..9 is clamped into it, and 3 and 6 query parameters each lower it a level."""

from __future__ import annotations

import pytest

from crawl.frontier import Politeness, parse_retry_after
from crawl.frontier.politeness import backoff_delay, effective_priority


@pytest.mark.parametrize("retry_after", [-0.5, -1.0, -1e-9])
def test_a_negative_retry_after_is_ignored_not_honoured_as_zero(retry_after: float) -> None:
    cfg = Politeness(default_delay=0.1, backoff_base=3.0)
    assert backoff_delay(cfg, 1, retry_after) == 3.0
    assert backoff_delay(cfg, 1, 0.0) == 0.0  # zero itself is honoured: "now"


def test_level_zero_waits_as_level_one() -> None:
    cfg = Politeness(default_delay=0.0, backoff_base=3.0)
    assert backoff_delay(cfg, 0) == backoff_delay(cfg, 1) == 3.0
    assert backoff_delay(cfg, 2) == 6.0


def test_the_doubling_stops_at_level_64() -> None:
    # a base small enough that 2 ** 62 steps stay below the cap tells the bound apart
    tiny = 2.0 ** -70
    cfg = Politeness(default_delay=0.0, backoff_base=tiny, backoff_cap=1000.0)
    assert backoff_delay(cfg, 63) == tiny * 2.0 ** 62
    assert backoff_delay(cfg, 64) == 1000.0
    assert backoff_delay(cfg, 65) == 1000.0


def test_a_negative_number_is_no_retry_after() -> None:
    assert parse_retry_after(-0.5, 0.0) is None and parse_retry_after(-1, 0.0) is None
    assert parse_retry_after(0, 0.0) == 0.0 and parse_retry_after(2.5, 0.0) == 2.5


@pytest.mark.parametrize(("priority", "want"), [(-5, 0), (-1, 0), (0, 0), (1, 1), (9, 9), (10, 9), (15, 9)])
def test_a_priority_out_of_range_is_clamped_to_it(priority: int, want: int) -> None:
    assert effective_priority("http://a.test/", priority) == want


@pytest.mark.parametrize(("url", "want"), [
    ("http://a.test/?a=1&b=2", 1), ("http://a.test/?a=1&b=2&c=3", 2),
    ("http://a.test/?a&b&c&d&e", 2), ("http://a.test/?a&b&c&d&e&f", 3),
    ("?a&b&c", 2),  # the '?' at position 0 starts a query too
    ("http://a.test/a&b&c&d&e&f&", 1),  # '&' without a '?' is no parameter
])
def test_query_parameters_lower_the_priority_at_3_and_6(url: str, want: int) -> None:
    assert effective_priority(url, 1) == want
