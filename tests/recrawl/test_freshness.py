"""crawl/recrawl/freshness.py: the change-rate estimator, revisit intervals, budget split."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.recrawl import parse_budget, parse_duration, split_budget
from crawl.recrawl.freshness import (
    DAY,
    estimate_rate,
    expected_freshness,
    fraction_fresh,
    next_interval,
    optimal_interval,
    sampled_freshness,
    solve_mu,
)

HOUR = 3600.0


def poisson_history(rate: float, visits: int, rng: random.Random) -> list[tuple[float, bool]]:
    """Visit a page whose changes are a Poisson process, at irregular intervals
    (uniform between 0.1 and 3 mean change gaps), and report what a crawler sees."""
    obs = []
    t = 0.0
    next_change = rng.expovariate(rate)
    for _ in range(visits):
        gap = rng.uniform(0.1, 3.0) / rate
        t += gap
        changed = next_change <= t
        while next_change <= t:
            next_change += rng.expovariate(rate)
        obs.append((gap, changed))
    return obs


@pytest.mark.parametrize("rate", [1 / HOUR, 1 / DAY, 1 / (7 * DAY)])
def test_estimator_recovers_poisson_rates_within_15_percent(rate: float) -> None:
    # 400 irregular visits: Cho & Garcia-Molina's estimator is consistent, so the
    # stated tolerance is +-15% (the prior is given a wrong rate on purpose).
    rng = random.Random(7)
    for trial in range(5):
        obs = poisson_history(rate, 400, rng)
        est = estimate_rate(obs, prior_rate=rate * 10, prior_weight=0.5)
        assert abs(est / rate - 1) < 0.15, (trial, est / rate)


def test_naive_estimate_is_biased_where_the_mle_is_not() -> None:
    # why the estimator exists: changes/time undercounts when visits are sparse
    rng = random.Random(3)
    rate = 1 / DAY
    obs = poisson_history(rate, 400, rng)
    naive = sum(ch for _, ch in obs) / sum(t for t, _ in obs)
    mle = estimate_rate(obs, prior_rate=rate, prior_weight=0.0)
    assert naive / rate < 0.8
    assert abs(mle / rate - 1) < 0.15


def test_regular_intervals_match_the_closed_form() -> None:
    # with equal intervals I the MLE is -ln(1 - X/n) / I (Cho & Garcia-Molina, sec. 4)
    obs = [(HOUR, True)] * 3 + [(HOUR, False)] * 7
    est = estimate_rate(obs, prior_rate=1.0, prior_weight=0.0)
    assert est == pytest.approx(-math.log(1 - 3 / 10) / HOUR, rel=1e-6)


def test_no_history_gives_the_prior_and_all_changed_stays_finite() -> None:
    assert estimate_rate([], prior_rate=1 / DAY) == pytest.approx(1 / DAY, rel=1e-6)
    all_changed = estimate_rate([(DAY, True)] * 20, prior_rate=1 / (7 * DAY), prior_weight=0.5)
    assert 1 / DAY < all_changed < 1.0
    quiet = [estimate_rate([(DAY, False)] * n, prior_rate=1 / DAY, prior_weight=0.5) for n in (1, 10, 100)]
    assert quiet[0] > quiet[1] > quiet[2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 1e7), st.booleans()), max_size=40),
       st.floats(1e-9, 1e-2), st.floats(1.0, 1e7))
def test_one_more_change_never_lowers_the_estimate(obs, prior, gap) -> None:
    a = estimate_rate(obs + [(gap, False)], prior)
    b = estimate_rate(obs + [(gap, True)], prior)
    assert 1e-12 <= a <= b <= 10.0


def test_next_interval_is_c_over_rate_times_importance_clamped() -> None:
    assert next_interval(1 / DAY, 1.0, 0.5, HOUR, 90 * DAY) == pytest.approx(DAY / 2)
    assert next_interval(1 / DAY, 2.0, 0.5, HOUR, 90 * DAY) == pytest.approx(DAY / 4)
    assert next_interval(1.0, 1.0, 0.5, HOUR, 90 * DAY) == HOUR
    assert next_interval(0.0, 1.0, 0.5, HOUR, 90 * DAY) == 90 * DAY


@settings(max_examples=80, deadline=None)
@given(st.floats(1e-9, 1e-2), st.floats(0.1, 10), st.floats(1.0, 1e6))
def test_optimal_interval_stays_in_bounds_and_favours_importance(rate, imp, mu) -> None:
    a = optimal_interval(rate, imp, mu, HOUR, 90 * DAY)
    b = optimal_interval(rate, imp * 2, mu, HOUR, 90 * DAY)
    assert HOUR <= b <= a <= 90 * DAY


def test_optimal_policy_gives_up_on_pages_it_cannot_keep_fresh() -> None:
    mu = 1000.0
    assert optimal_interval(1 / 60, 1.0, mu, HOUR, 90 * DAY) == 90 * DAY  # changes every minute
    slow = optimal_interval(1 / (30 * DAY), 1.0, mu, HOUR, 90 * DAY)
    assert slow == pytest.approx(math.sqrt(2 * mu * 30 * DAY), rel=0.05)  # small-x form


def test_optimal_beats_uniform_and_proportional_for_the_same_fetches() -> None:
    # Cho & Garcia-Molina's result, checked with the analytic freshness of
    # Poisson pages: proportional < uniform <= optimal at equal budget.
    rng = random.Random(5)
    pages = [(rng.choice([1 / HOUR, 1 / DAY, 1 / (7 * DAY), 1 / (60 * DAY)]), 1.0) for _ in range(300)]
    budget = len(pages) / DAY  # one fetch per page per day on average
    mu = solve_mu(pages, budget, 60.0, 365 * DAY)
    opt = [optimal_interval(r, w, mu, 60.0, 365 * DAY) for r, w in pages]
    assert sum(1 / i for i in opt) == pytest.approx(budget, rel=0.03)
    c = sum(r for r, _ in pages) / budget
    f_opt = sum(expected_freshness(r, i) for (r, _), i in zip(pages, opt, strict=True)) / len(pages)
    f_uni = sum(expected_freshness(r, DAY) for r, _ in pages) / len(pages)
    f_prop = sum(expected_freshness(r, c / r) for r, _ in pages) / len(pages)
    assert f_prop < f_uni < f_opt


def test_expected_freshness_edges() -> None:
    assert expected_freshness(0.0, DAY) == 1.0
    assert expected_freshness(1 / DAY, DAY) == pytest.approx(1 - math.exp(-1))


def test_fraction_fresh_and_sampled_freshness() -> None:
    assert fraction_fresh([(1, 1), (1, 2), (3, 3), (0, 0)]) == 0.75
    assert fraction_fresh([]) == 1.0

    def version_at(page: str, t: float) -> int:
        return int(t // 100) if page == "fast" else 0

    visits = {"fast": [0.0, 100.0, 200.0, 300.0], "static": [0.0]}
    f = sampled_freshness(visits, version_at, 0.0, 400.0, 500, random.Random(1))
    assert f == pytest.approx(1.0)  # fetched right at each change: always current
    f = sampled_freshness({"fast": [0.0], "static": [0.0]}, version_at, 0.0, 400.0, 500, random.Random(1))
    assert 0.55 < f < 0.7  # fast is current only during its first 100 s


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1000), st.integers(0, 2000), st.integers(0, 2000), st.floats(0, 1))
def test_split_budget_reserves_each_share_and_wastes_nothing(cap, rec_due, disc, share) -> None:
    r, d = split_budget(cap, rec_due, disc, share)
    assert 0 <= r <= rec_due and 0 <= d <= disc and r + d <= cap
    reserved = math.floor(cap * share + 0.5)
    assert r >= min(rec_due, reserved)  # re-crawl never starves
    assert d >= min(disc, cap - reserved)  # nor does discovery
    assert r + d == min(cap, rec_due + disc)  # idle capacity only when there is no work


def test_parse_budget_and_duration() -> None:
    assert parse_budget("5/s") == 5.0
    assert parse_budget("300/m") == 5.0
    assert parse_budget("3600/h") == 1.0
    assert parse_budget("2.5") == 2.5
    assert parse_duration("90d") == 90 * DAY
    assert parse_duration("30m") == 1800.0
    assert parse_duration("45") == 45.0
    for bad in ("", "0/s", "-1/s", "5/week", "fast", "inf"):
        with pytest.raises(ValueError, match="expected a positive rate"):
            parse_budget(bad)
    for bad in ("", "0", "1w", "soon"):
        with pytest.raises(ValueError, match="expected seconds"):
            parse_duration(bad)
