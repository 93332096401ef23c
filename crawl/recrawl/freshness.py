"""Freshness math: change rates, revisit intervals, the freshness metric.

Pure functions, no state, no clock: crawl/recrawl/recrawler.py keeps the per-URL
history and calls these.

The model (Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT
2003): a page changes as a Poisson process with rate ``lambda`` (changes per
second). A crawler does not see changes, only whether the page differs from
the copy it holds when it looks again, at irregular intervals. For visit
``i`` after an interval ``t_i`` the probability of seeing a change is
``1 - exp(-lambda * t_i)``; the log-likelihood of a history with changed
intervals C and unchanged intervals U is::

    L(lambda) = sum_C log(1 - exp(-lambda t_i)) - lambda * sum_U t_j

Its maximum is the root of ``sum_C t_i / (exp(lambda t_i) - 1) = sum_U t_j``
(their irregular-interval estimator). That has no finite root when every
visit saw a change and is 0 when none did, so we add a Gamma prior centred
on the host's average rate (``prior_weight`` pseudo-changes): a new page
starts exactly at its host's average and its own history takes over as it
grows. The estimate is the posterior mode, found by bisection on a
monotone function.

Scheduling follows the design note: next fetch ~ ``now + c / (rate x
importance)``, clamped between ``min_interval`` and ``max_interval``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence

from crawl.core import parse_duration as core_parse_duration

DAY = 86400.0

# Sitemap <changefreq> (sitemaps.org protocol) as a prior rate, changes/second.
CHANGEFREQ_RATE = {
    "always": 1 / 600.0,
    "hourly": 1 / 3600.0,
    "daily": 1 / DAY,
    "weekly": 1 / (7 * DAY),
    "monthly": 1 / (30 * DAY),
    "yearly": 1 / (365 * DAY),
    "never": 1 / (3650 * DAY),
}

_LO, _HI = 1e-12, 10.0  # changes per second: once in 30,000 years .. ten a second


def estimate_rate(
    observations: Iterable[tuple[float, bool]], prior_rate: float, prior_weight: float = 1.0,
    folded: Sequence[float] = (0.0, 0.0, 0.0),
) -> float:
    """Change rate (per second) from ``(interval seconds, changed)`` observations.

    Why this estimator: visits are irregular (backoffs, pings, budget slips),
    and the naive "changes / time" undercounts because two changes between
    visits look like one; the likelihood above accounts for both.

    Args:
        observations: one pair per re-visit; intervals <= 0 are ignored.
        prior_rate: the rate to believe with no history (the host average).
        prior_weight: how many pseudo-changes the prior is worth.
        folded: older history in three numbers: unchanged seconds (exact: the
            likelihood only needs their sum), changed intervals and their
            seconds (approximated as equal intervals). Lets a page that never
            changes become confidently static without keeping every visit.

    Returns:
        The posterior mode, within [1e-12, 10] changes per second.
    """
    prior_rate = min(max(prior_rate, _LO), _HI)
    changed: list[float] = []
    quiet = 0.0
    for t, ch in observations:
        if t > 0:
            if ch:
                changed.append(t)
            else:
                quiet += t
    old_quiet, old_n, old_secs = (max(float(x), 0.0) for x in folded[:3])
    old_t = old_secs / old_n if old_n > 0 else 0.0
    w = max(prior_weight, 0.0)
    if not changed and w == 0 and not old_t:
        return _LO
    beta = quiet + old_quiet + w / prior_rate
    if not changed and not old_t:  # no change seen yet (most pages of a first crawl): the mode is w / beta
        return min(max(w / beta, _LO), _HI)

    def slope(lam: float) -> float:  # d log-posterior / d lambda: decreasing in lambda
        s = w / lam - beta
        if old_t and lam * old_t < 700:
            s += old_n * old_t / math.expm1(lam * old_t)
        for t in changed:
            x = lam * t
            if x < 700:
                s += t / math.expm1(x)
        return s

    lo, hi = math.log(_LO), math.log(_HI)
    if slope(_HI) >= 0:
        return _HI
    while hi - lo > 1e-6:  # bisection in log space to 1e-6 relative: ~25 steps
        mid = (lo + hi) / 2
        if slope(math.exp(mid)) > 0:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def next_interval(rate: float, importance: float, c: float, lo: float, hi: float) -> float:
    """Seconds until the next visit: ``c / (rate x importance)`` within [lo, hi].

    ``c`` is the expected number of changes (weighted by importance) a page
    may accumulate before we look again; a larger budget means a smaller c.
    """
    denom = max(rate, _LO) * max(importance, 1e-6)
    return min(max(c / denom, lo), hi)


def _gain(x: float) -> float:
    """d(freshness)/d(visit frequency) x rate, at x = rate x interval:
    ``1 - (1 + x) exp(-x)``, rising from 0 to 1."""
    return -math.expm1(-x) - x * math.exp(-x)


def optimal_interval(rate: float, importance: float, mu: float, lo: float, hi: float) -> float:
    """Seconds until the next visit under the freshness-optimal policy.

    Why not always ``c / rate``: Cho & Garcia-Molina ("Synchronizing a
    database to improve freshness", SIGMOD 2000) prove that visiting pages
    in proportion to their change rate is *worse* than a uniform schedule:
    a page that changes every few minutes is stale again before the next
    visit whatever we do, so fetches spent on it buy little. Maximising
    ``sum importance x freshness`` for a given number of fetches (Lagrange
    multiplier ``mu``: the freshness one more fetch per second must buy)
    gives, per page, the ``x = rate x interval`` with
    ``1 - (1 + x) e^-x = mu x rate / importance``; when the right-hand side
    is 1 or more the page is not worth visiting and gets ``hi``. For slowly
    changing pages this is ~ sqrt(2 mu / (rate x importance)).
    """
    rate = max(rate, _LO)
    y = mu * rate / max(importance, 1e-6)
    if y >= 1.0:
        return hi
    x = _solve_gain(y)
    return hi if x is None else min(max(x / rate, lo), hi)


def _solve_gain(y: float) -> float | None:
    """x with _gain(x) = y (0 < y < 1): Newton from the small-x form
    sqrt(2y), kept inside a shrinking bracket; None beyond x = 50."""
    if _gain(50.0) < y:
        return None
    a, b = 0.0, 50.0
    x = min(math.sqrt(2 * y), 49.0)
    for _ in range(60):
        g = _gain(x) - y
        if g < 0:
            a = x
        else:
            b = x
        d = x * math.exp(-x)  # _gain'(x)
        nx = x - g / d if d > 0 else (a + b) / 2
        if not a < nx < b:
            nx = (a + b) / 2
        if abs(nx - x) <= 1e-9 * x:
            return nx
        x = nx
    return x


def mu_for_c(c: float, mean_rate: float) -> float:
    """The ``mu`` at which a page of average rate and importance 1 is visited
    every ``c / mean_rate`` seconds, so ``c`` means the same under both policies."""
    return _gain(c) / max(mean_rate, _LO)


def solve_mu(pages: list[tuple[float, float]], fetches_per_second: float, lo: float, hi: float) -> float:
    """The ``mu`` whose optimal intervals over ``pages`` ((rate, importance)
    pairs) add up to ``fetches_per_second`` visits (bisection in log space)."""
    if not pages or fetches_per_second <= 0:
        return 1e12

    def load(mu: float) -> float:
        return sum(1.0 / optimal_interval(r, w, mu, lo, hi) for r, w in pages)

    a, b = math.log(1e-6), math.log(1e12)
    if load(math.exp(a)) <= fetches_per_second:
        return math.exp(a)
    while b - a > 0.01:  # mu to 1%: the load it gives is within ~1% too
        mid = (a + b) / 2
        if load(math.exp(mid)) > fetches_per_second:
            a = mid
        else:
            b = mid
    return math.exp(b)


def c_for_budget(weighted_rate_sum: float, fetches_per_second: float, c_min: float = 0.01,
                 c_max: float = 100.0) -> float:
    """The ``c`` that makes the model's planned visits add up to the budget.

    Unclamped, page i is visited ``rate_i x importance_i / c`` times a second,
    so the total is ``sum(rate x importance) / c``; solving for the budget
    gives ``c``. The clamps shift this a little; the budget is still enforced
    when due URLs are emitted.
    """
    if fetches_per_second <= 0 or weighted_rate_sum <= 0:
        return c_max
    return min(max(weighted_rate_sum / fetches_per_second, c_min), c_max)


def expected_freshness(rate: float, interval: float) -> float:
    """Time-averaged probability that a copy is current, Poisson changes,
    visits every ``interval`` seconds: ``(1 - exp(-r I)) / (r I)``."""
    x = rate * interval
    if x <= 1e-12:
        return 1.0
    return -math.expm1(-x) / x


def fraction_fresh(pairs: Iterable[tuple[object, object]]) -> float:
    """The freshness metric at one instant: the fraction of stored copies
    whose version equals the live version. ``pairs`` is (stored, live)."""
    n = fresh = 0
    for stored, live in pairs:
        n += 1
        fresh += stored == live
    return fresh / n if n else 1.0


def sampled_freshness(
    visits: Mapping[str, Sequence[float]],
    version_at: Callable[[str, float], object],
    start: float,
    end: float,
    samples: int,
    rng: random.Random,
) -> float:
    """Average freshness over ``samples`` random instants in [start, end).

    ``visits[page]`` is the sorted list of fetch times of that page; the
    stored copy at instant t is the version fetched at the last visit <= t
    (a page not yet fetched counts as stale).
    """
    from bisect import bisect_right

    total = 0.0
    for _ in range(samples):
        t = rng.uniform(start, end)
        pairs = []
        for page, times in visits.items():
            k = bisect_right(times, t)
            stored = version_at(page, times[k - 1]) if k else object()
            pairs.append((stored, version_at(page, t)))
        total += fraction_fresh(pairs)
    return total / samples if samples else 1.0


def split_budget(capacity: int, recrawl_due: int, discovery_ready: int, share: float) -> tuple[int, int]:
    """Divide ``capacity`` fetches between re-crawl and discovery.

    Each side is guaranteed its share (``share`` for re-crawl, the rest for
    discovery) so neither starves; what one side cannot use goes to the
    other, so capacity is never left idle while work waits.

    Returns:
        (re-crawl slots, discovery slots), summing to at most ``capacity``.
    """
    share = min(max(share, 0.0), 1.0)
    reserved = math.floor(capacity * share + 0.5)
    rec = min(recrawl_due, reserved)
    disc = min(discovery_ready, capacity - rec)
    rec = min(recrawl_due, capacity - disc)
    return rec, disc


_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": DAY}


def parse_budget(text: str) -> float:
    """``"5/s"``, ``"300/m"``, ``"1000/h"``, ``"2.5"`` (per second) -> fetches per second.

    Raises:
        ValueError: with a message naming the accepted forms.
    """
    num, _, unit = text.strip().partition("/")
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    per = _UNITS.get(unit.strip().lower() or "s")
    if per is None or not value > 0 or math.isinf(value):
        raise ValueError(f"budget {text!r}: expected a positive rate such as 5/s, 300/m or 1000/h")
    return value / per


def parse_duration(text: str) -> float:
    """Seconds in ``text``, more than 0 (a revisit interval): the grammar of
    every time flag (:func:`crawl.core.parse_duration`), one error message."""
    return core_parse_duration(text, positive=True)
