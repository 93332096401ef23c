"""Spider-trap heuristics (crawl/parse/traps.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawl.parse import traps
from crawl.parse.traps import DEMOTE, DROP, TrapPolicy

P = TrapPolicy(year=2026)


@pytest.mark.parametrize(
    ("url", "depth", "reason", "action"),
    [
        ("http://a.test/" + "/".join(f"s{i}" for i in range(16)), 1, "path-depth>15", DROP),
        ("http://a.test/a/b/a/b", 1, "repeated-segments", DROP),
        ("http://a.test/x/y/x/y/x/y/", 1, "repeated-segments", DROP),
        ("http://a.test/img/img/img", 1, "repeated-segments", DROP),
        ("http://a.test/events/2026/05/", 1, "calendar", DEMOTE),
        ("http://a.test/2026-05-17", 1, "calendar", DEMOTE),
        ("http://a.test/cal?month=2026-05", 1, "calendar", DEMOTE),
        ("http://a.test/cal?year=2027&month=1", 1, "calendar", DEMOTE),
        ("http://a.test/cal?event_date=", 1, "calendar", DEMOTE),
        ("http://a.test/cal/3001/01/", 1, "calendar-far", DROP),
        ("http://a.test/cal?month=1850-01", 1, "calendar-far", DROP),
        ("http://a.test/calendar/2015/12/", 1, "calendar-far", DROP),
        ("http://a.test/calendar/2028/01/", 1, "calendar-far", DROP),
        ("http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6", 1, "query-params>5", DEMOTE),
        ("http://a.test/page", 16, "depth>15", DEMOTE),
        ("http://a.test/search?color=red&page=101", 1, "page>100", DEMOTE),
        ("http://a.test/list?offset=5000", 1, "page>100", DEMOTE),
    ],
)
def test_rules_fire(url: str, depth: int, reason: str, action: str) -> None:
    v = traps.check(url, depth, P)
    assert v is not None and (v.reason, v.action) == (reason, action)


@pytest.mark.parametrize(
    "url",
    [
        "http://a.test/",
        "http://a.test",
        "http://a.test?x=1",
        "http://a.test/blog/2024/05/my-post",  # a dated post, not a calendar view
        "http://a.test/docs/docs/intro",  # a segment twice is common and harmless
        "http://a.test/s?a=1&b=2&c=3&d=4&e=5",  # exactly at the limit
        "http://a.test/x?update=1&weekday=2",  # date-ish words inside other keys
        "http://a.test/" + "/".join(f"s{i}" for i in range(15)),
        "http://a.test/item/2024",  # a year without a month: a product number as often as not
        "http://a.test/search?page=100",
        "http://a.test/search?page=abc",
    ],
)
def test_ordinary_urls_pass(url: str) -> None:
    assert traps.check(url, 3, P) is None


def test_first_rule_wins_and_drops_come_first() -> None:
    # deep, repetitive and with many params: the drop rule's reason is recorded
    url = "http://a.test/a/b/a/b?p=1&q=2&r=3&s=4&t=5&u=6"
    v = traps.check(url, 20, P)
    assert v == traps.Verdict("repeated-segments", DROP)


def test_modes() -> None:
    url = "http://a.test/a/b/a/b"
    assert traps.check(url, 0, TrapPolicy(mode="demote")) == traps.Verdict("repeated-segments", DEMOTE)
    assert traps.check(url, 0, TrapPolicy(mode="off")) is None


def test_far_dates_need_a_present_year() -> None:
    # Without a year the rule cannot say "far", so it only demotes.
    v = traps.check("http://a.test/cal/3001/01/", 0, TrapPolicy(year=None))
    assert v == traps.Verdict("calendar", DEMOTE)


def test_default_policy_knows_the_present_year() -> None:
    import time

    year = time.gmtime().tm_year
    assert TrapPolicy().year == year
    assert traps.check(f"http://a.test/cal/{year + 5}/01/") == traps.Verdict("calendar-far", DROP)


def test_thresholds_are_configurable() -> None:
    p = TrapPolicy(max_path_segments=3, max_query_params=1, max_depth=2)
    assert traps.check("http://a.test/a/b/c/d", 0, p).reason == "path-depth>3"  # type: ignore[union-attr]
    assert traps.check("http://a.test/?a=1&b=2", 0, p).reason == "query-params>1"  # type: ignore[union-attr]
    assert traps.check("http://a.test/", 3, p).reason == "depth>2"  # type: ignore[union-attr]


segment = st.text(alphabet="abcxyz0123", min_size=1, max_size=4)


@given(st.lists(segment, min_size=1, max_size=6), st.integers(min_value=2, max_value=4))
def test_any_path_repeated_back_to_back_is_a_trap(segs: list[str], times: int) -> None:
    # /P/P (a run of 2+ segments twice) or any segment three times: a loop.
    path = "/".join(segs * times)
    v = traps.check(f"http://a.test/{path}", 0, TrapPolicy(max_path_segments=100))
    if len(segs) >= 2 or times >= 3:
        assert v is not None and v.action == DROP


@given(st.text(max_size=300), st.integers(min_value=0, max_value=100))
def test_never_raises(url: str, depth: int) -> None:
    v = traps.check(url, depth, P)
    assert v is None or v.action in (DROP, DEMOTE)


_SEGS = st.sampled_from(["a", "b", "2024", "05", "17", "2024-05", "x.html", "", "page", "3001"])
_KEYS = st.sampled_from(["a", "page", "P", "offset", "month", "ev_date", "Ev.Date", "x", "start",
                         "update", "mon", "dt", ""])
_VALUES = st.sampled_from(["", "1", "101", "2024", "1850-01", "abc", "2024-05-17", "=="])


@given(
    segs=st.lists(_SEGS, max_size=18),
    slash=st.booleans(),
    params=st.lists(st.tuples(_KEYS, _VALUES), max_size=7),
    mark=st.booleans(),
    depth=st.integers(0, 20),
    mode=st.sampled_from(["default", "demote"]),
)
def test_fast_clean_check_agrees_with_the_rules(segs: list[str], slash: bool,
                                                params: list[tuple[str, str]], mark: bool,
                                                depth: int, mode: str) -> None:
    url = "http://a.test/" + "/".join(segs) + ("/" if slash and segs else "")
    if params or mark:
        url += "?" + "&".join(f"{k}={v}" if v else k for k, v in params)
    policy = TrapPolicy(mode=mode, year=2026)
    u = traps.shape(url, depth)
    slow = next((v for rule in traps.RULES if (v := rule(u, policy)) is not None), None)
    if traps._clean(url, depth, policy):
        assert slow is None, url
    if slow is not None and mode == "demote":
        slow = traps.Verdict(slow.reason, DEMOTE)
    assert traps.check(url, depth, policy) == slow
