"""What a mutation run found untested in the robots cache's key: one origin per
scheme, host and port (RFC 9309 section 2.3: robots.txt applies to its origin),
the default port dropped, an IPv6 host kept in brackets; and a verdict read back
from the LMDB cache is the verdict written (what a later ``crawl fetch`` acts on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import pytest

from crawl.robots.fetch import RobotsCache, RobotsInfo, _info_from, origin_of


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



def _read_back(tmp_path: Path, entry: dict[str, Any], body: bytes = b"") -> RobotsInfo:
    """An entry written to a real LMDB robots cache and read back from it (as a later process does)."""
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4)
    try:
        RobotsCache(env).put("http://a.test", entry, body)
        got = RobotsCache(env).get("http://a.test")
        assert got is not None
        return _info_from(got[0], got[1], "http://a.test", "cache")
    finally:
        env.close()


def test_a_cached_unreachable_verdict_reads_back_with_its_checks(tmp_path: Path) -> None:
    info = _read_back(tmp_path, {"verdict": "unreachable", "status": 503, "fetched_at": 100.0, "error": "HTTP 503",
                                 "expires": 160.0, "checks": 3, "unreachable_since": 40.0})
    assert not info.robots.allowed("http://a.test/x", "crawl")
    assert info.summary() == {"origin": "http://a.test", "source": "cache", "verdict": "unreachable",
                              "status": 503, "fetched_at": 100.0, "error": "HTTP 503",
                              "next_check": 160.0, "checks": 3, "unreachable_since": 40.0}


def test_a_cached_unavailable_verdict_allows_everything(tmp_path: Path) -> None:
    info = _read_back(tmp_path, {"verdict": "unavailable", "status": 404, "fetched_at": 1.0, "error": "",
                                 "expires": 2.0})
    assert info.robots.allowed("http://a.test/private", "crawl") and info.status == 404
