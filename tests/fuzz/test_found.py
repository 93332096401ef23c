"""Bugs the fuzz targets found in code other engineers own, pinned until fixed.

Each test states the behaviour the package promises and is marked
``xfail(strict=True)``: it fails today, and the day the bug is fixed it
passes, the strict mark turns that into a failure, and whoever fixed it
drops the mark (and moves the test next to the package's own tests).
"""

from __future__ import annotations

import pytest

from crawl.canon import canonicalize


@pytest.mark.xfail(strict=True, reason=(
    "crawl/canon: a host with two or more trailing dots is not canonical after one pass. "
    "WHATWG drops one empty last label before its 'ends in a number' check, so '2..' and "
    "'0x7f.1..' stay domains; the root-dot rule then strips every dot, leaving '2' and "
    "'0x7f.1', which the next pass reads as the IPv4 addresses 0.0.0.2 and 127.0.0.1: two "
    "fingerprints for one URL (found by the canon fuzz target)"))
@pytest.mark.parametrize("url", ["http://2..", "http://1.2../a", "http://0x7f.1../"])
def test_canonicalising_a_host_with_trailing_dots_twice_changes_nothing(url: str) -> None:
    once = canonicalize(url)
    assert canonicalize(once.url) == once
