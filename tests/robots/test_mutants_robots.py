"""What a mutation run found untested in the robots cache's key: one origin per
scheme, host and port (RFC 9309 section 2.3: robots.txt applies to its origin),
the default port dropped, an IPv6 host kept in brackets."""

from __future__ import annotations

import pytest

from crawl.robots.fetch import origin_of


@pytest.mark.parametrize(("url", "origin"), [
    ("https://A.test:443/x", "https://a.test"),
    ("http://a.test:80/x", "http://a.test"),
    ("https://a.test:80/x", "https://a.test:80"),
    ("http://a.test:443/x", "http://a.test:443"),
    ("https://a.test:444/x", "https://a.test:444"),
    ("https://a.test:442/x", "https://a.test:442"),
    ("http://[::1]:8080/x", "http://[::1]:8080"),
    ("http://[2001:DB8::1]/x", "http://[2001:db8::1]"),
])
def test_the_cache_key_is_the_origin(url: str, origin: str) -> None:
    assert origin_of(url) == origin
