"""Edges of the backoff rule that a mutation run found untested: a Retry-After
below zero is no Retry-After, level 0 waits as level 1, and from level 64 on the
step is the cap (2 ** 63 steps are not computed), whatever the base."""

from __future__ import annotations

import pytest

from crawl.frontier import Politeness
from crawl.frontier.politeness import backoff_delay


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
