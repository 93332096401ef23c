"""What a mutation run (issue 21) found untested in robots.txt's policy: the
status table's edges (RFC 9309 section 2.3.1) and which group a User-Agent
with two product tokens gets (its first token that a group names)."""

from __future__ import annotations

import pytest

from crawl.robots import policy


@pytest.mark.parametrize(("status", "meaning"), [
    (199, "unreachable"), (200, "parse"), (299, "parse"), (300, "unavailable"), (301, "unavailable"),
    (399, "unavailable"), (404, "unavailable"), (428, "unavailable"), (429, "unreachable"),
    (430, "unavailable"), (499, "unavailable"), (500, "unreachable"), (503, "unreachable"),
    (600, "unreachable"), (0, "unreachable"),
])
def test_the_status_table_at_its_edges(status: int, meaning: str) -> None:
    got = policy.for_status(status)
    want = {"parse": None, "unavailable": policy.ALLOW_ALL, "unreachable": policy.DISALLOW_ALL}[meaning]
    assert got is want


BODY = b"""User-agent: crawl
Disallow: /first

User-agent: foobot
Disallow: /second

User-agent: *
Disallow: /
"""


def test_the_first_token_a_group_names_wins() -> None:
    rob = policy.parse(BODY)
    both = "crawl/0.1 (compatible; FooBot/1.1)"  # tokens: crawl, then foobot
    for _ in range(2):  # the second answer comes from the per-agent memo: the same
        assert not rob.allowed("http://h.test/first", both)
        assert rob.allowed("http://h.test/second", both)
        assert rob.decide("/first", both).group == "crawl"
    only_foo = "Mozilla/5.0 (compatible; FooBot/1.1)"
    assert rob.allowed("http://h.test/first", only_foo) and not rob.allowed("http://h.test/second", only_foo)
    assert not rob.allowed("http://h.test/x", "otherbot")
