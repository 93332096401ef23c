"""robots.txt fetching and caching: every RFC 9309 status rule, against real servers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawl import store
from crawl.robots.fetch import RECHECK, ROBOTS_TTL, UNREACHABLE_TTL, origin_of, recheck_delay

sys.path.insert(0, str(Path(__file__).parent.parent))
from fetchutil import run_batch  # noqa: E402
from hostile import Server, hosts_text  # noqa: E402


@pytest.fixture(scope="module")
def srv() -> Iterator[Server]:
    s = Server(delay=3.0).start()
    yield s
    s.stop()


def one(srv: Server, d: Path, host: str, path: str = "/ok", **kw: Any) -> dict[str, Any]:
    return run_batch(d, [srv.url(host, path)], hosts_text(), **kw)[0]


def robots_requests(srv: Server, host: str) -> int:
    return len(srv.state.requests(host, "/robots.txt"))


def test_origin_key() -> None:
    assert origin_of("HTTP://Example.COM:80/a?b") == "http://example.com"
    assert origin_of("https://example.com:8443/") == "https://example.com:8443"


def test_2xx_rules_are_obeyed_with_the_rule_reported(srv: Server, tmp_path: Path) -> None:
    r = one(srv, tmp_path, "allow.test", "/private/x")
    assert r["outcome"] == "robots-disallowed"
    assert r["robots"]["rule"] == "Disallow: /private" and r["robots"]["verdict"] == "parsed"
    assert "warc" not in r and "retry_after" not in r
    assert one(srv, tmp_path, "allow.test", "/ok")["outcome"] == "ok"


def test_crawl_delay_goes_into_the_result(srv: Server, tmp_path: Path) -> None:
    assert one(srv, tmp_path, "delay.test", "/ok")["crawl_delay"] == 7
    assert one(srv, tmp_path, "delay.test", "/no")["outcome"] == "robots-disallowed"


@pytest.mark.parametrize("host", ["r404.test", "r401.test"])
def test_4xx_means_allow_everything(srv: Server, tmp_path: Path, host: str) -> None:
    assert one(srv, tmp_path, host)["outcome"] == "ok"


@pytest.mark.parametrize("host", ["r500.test", "rtimeout.test", "rdrop.test"])
def test_5xx_timeout_and_transport_errors_mean_disallow_everything(
        srv: Server, tmp_path: Path, host: str) -> None:
    n = len(srv.state.requests(host, "/ok"))
    r = one(srv, tmp_path, host)
    # not a rule that refuses the URL: it waits for robots.txt to be checked again
    assert r["outcome"] == "robots-unreachable"
    assert r["robots"]["verdict"] == "unreachable" and "unreachable" in r["error"]
    assert r["robots"]["checks"] == 1 and r["robots"]["next_check"] > r["fetched_at"]
    assert 0 < r["retry_after"] <= RECHECK  # the first re-check is soon
    assert len(srv.state.requests(host, "/ok")) == n  # the page itself was never requested


def test_unreachable_robots_is_checked_again_with_backoff_or_retry_after(srv: Server, tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    clock = lambda: now[0]  # noqa: E731
    host = "delay.test"
    srv.state.robots_mode[host] = "503"
    try:
        waits = []
        for _ in range(4):
            before = robots_requests(srv, host)
            r = one(srv, tmp_path, host, clock=clock)
            assert r["outcome"] == "robots-unreachable" and robots_requests(srv, host) == before + 1
            waits.append(r["retry_after"])
            # asked again before the next check: the cached verdict answers, no request
            now[0] += r["retry_after"] - 1
            r = one(srv, tmp_path, host, clock=clock)
            assert r["outcome"] == "robots-unreachable" and robots_requests(srv, host) == before + 1
            assert r["retry_after"] == pytest.approx(1.0)
            now[0] += 1
        assert waits == [RECHECK, 2 * RECHECK, 4 * RECHECK, 8 * RECHECK]  # doubling, from the cache on disk
        assert recheck_delay(40, None) == UNREACHABLE_TTL  # ... up to 30 minutes
        srv.state.robots_mode[host] = "503-retry"  # Retry-After: 7 wins over the backoff
        r = one(srv, tmp_path, host, clock=clock)
        assert r["outcome"] == "robots-unreachable" and r["retry_after"] == 7 and r["robots"]["status"] == 503
        srv.state.robots_mode.pop(host)
        now[0] += 7
        assert one(srv, tmp_path, host, clock=clock)["outcome"] == "ok"  # readable again: crawled
        srv.state.robots_mode[host] = "503"
        now[0] += ROBOTS_TTL + 1  # the good copy expires, the file fails again: the count starts over
        r = one(srv, tmp_path, host, "/no", clock=clock)
        assert r["outcome"] == "robots-disallowed" and r["robots"]["source"] == "stale"  # RFC 9309 2.4
        assert one(srv, tmp_path, host, "/ok", clock=clock)["outcome"] == "ok"
    finally:
        srv.state.robots_mode.pop(host, None)


def test_redirects_are_followed_up_to_five_hops(srv: Server, tmp_path: Path) -> None:
    # rredir.test: 2 hops to "Disallow: /"; rredir6.test: 6 hops, so unavailable (allow all)
    assert one(srv, tmp_path, "rredir.test")["outcome"] == "robots-disallowed"
    assert one(srv, tmp_path, "rredir6.test")["outcome"] == "ok"
    hops = [r["path"] for r in srv.state.requests("rredir6.test") if r["path"].startswith("/robots")]
    assert len(hops) == 6  # robots.txt + 5 redirects followed, then we stopped


def test_large_file_is_parsed_up_to_500_kib(srv: Server, tmp_path: Path) -> None:
    assert one(srv, tmp_path, "rbig.test", "/early")["outcome"] == "robots-disallowed"
    assert one(srv, tmp_path, "rbig.test", "/late")["outcome"] == "http-error"  # allowed: 404 page


def test_cache_24h_then_refetch(srv: Server, tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    clock = lambda: now[0]  # noqa: E731
    host = "delay.test"
    before = robots_requests(srv, host)
    one(srv, tmp_path, host, clock=clock)
    one(srv, tmp_path, host, clock=clock)
    now[0] += ROBOTS_TTL - 60
    one(srv, tmp_path, host, clock=clock)
    assert robots_requests(srv, host) == before + 1  # cached in LMDB across runs
    now[0] += 120  # past 24 h
    one(srv, tmp_path, host, clock=clock)
    assert robots_requests(srv, host) == before + 2


def test_stale_copy_used_while_unreachable(srv: Server, tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    clock = lambda: now[0]  # noqa: E731
    host = "stale.test"
    assert one(srv, tmp_path, host, "/private", clock=clock)["outcome"] == "robots-disallowed"
    srv.state.robots_mode[host] = "503"
    try:
        now[0] += ROBOTS_TTL + 1
        r = one(srv, tmp_path, host, "/ok", clock=clock)
        assert r["outcome"] == "ok"  # the stale good copy still applies
        r = one(srv, tmp_path, host, "/private", clock=clock)
        assert r["outcome"] == "robots-disallowed" and r["robots"]["source"] in ("stale", "cache")
        # an unreachable verdict is re-checked soon, not after 24 h
        n = robots_requests(srv, host)
        now[0] += UNREACHABLE_TTL + 1
        one(srv, tmp_path, host, "/ok", clock=clock)
        assert robots_requests(srv, host) == n + 1
    finally:
        srv.state.robots_mode.pop(host)
    now[0] += UNREACHABLE_TTL + 1
    assert one(srv, tmp_path, host, "/ok", clock=clock)["outcome"] == "ok"


def test_a_robots_txt_cut_short_is_unreachable_not_half_a_file(srv: Server, tmp_path: Path) -> None:
    # The part that arrived ("Disallow: /priv") would allow /ok, which the whole file disallows.
    n = len(srv.state.requests("allow.test", "/ok"))
    srv.state.robots_mode["allow.test"] = "cut"
    try:
        r = one(srv, tmp_path, "allow.test", "/ok")
    finally:
        srv.state.robots_mode.pop("allow.test")
    assert r["robots"]["verdict"] == "unreachable", r
    assert len(srv.state.requests("allow.test", "/ok")) == n  # the page was never asked for


def test_without_a_cached_copy_unreachable_is_disallow(srv: Server, tmp_path: Path) -> None:
    srv.state.robots_mode["allow.test"] = "503"
    try:
        assert one(srv, tmp_path, "allow.test", "/ok")["outcome"] == "robots-unreachable"
    finally:
        srv.state.robots_mode.pop("allow.test")


def test_robots_fetch_is_archived_and_identifies_itself(srv: Server, tmp_path: Path) -> None:
    one(srv, tmp_path, "delay.test")
    req = srv.state.requests("delay.test", "/robots.txt")[-1]
    assert req["headers"]["user-agent"].startswith("crawl/0.1 (+http")
    from crawl.store import cdxj

    hits = cdxj.lookup(tmp_path / "warc", srv.url("delay.test", "/robots.txt"))
    assert hits
    ptr = {"file": hits[0]["filename"], "offset": hits[0]["offset"], "length": hits[0]["length"]}
    assert b"Crawl-delay: 7" in store.read_response(tmp_path / "warc", ptr).body


def test_one_robots_fetch_per_origin_under_concurrency(srv: Server, tmp_path: Path) -> None:
    host = "other.test"
    before = robots_requests(srv, host)
    urls = [srv.url(host, f"/ok{i}") for i in range(20)]
    res = run_batch(tmp_path, urls, hosts_text())
    assert {r["outcome"] for r in res} == {"ok"}
    assert robots_requests(srv, host) == before + 1


def test_fetch_robots_sync_live_mode(srv: Server, tmp_path: Path) -> None:
    from crawl.robots.fetch import fetch_robots_sync

    hosts = tmp_path / "hosts"
    hosts.write_text(hosts_text())
    before = robots_requests(srv, "allow.test")
    info = fetch_robots_sync(srv.url("allow.test", "/x"), resolve_file=hosts, allow_private=True)
    assert info.verdict == "parsed" and not info.robots.allowed("/private/a", "crawl")
    assert robots_requests(srv, "allow.test") == before + 1  # live: fetched, no cache given
    info = fetch_robots_sync(srv.url("r500.test", "/x"), resolve_file=hosts, allow_private=True)
    assert info.verdict == "unreachable" and info.status == 500
    assert info.error == "robots.txt returned 500"  # the operator reads why
    far = fetch_robots_sync(srv.url("rredir6.test", "/x"), resolve_file=hosts, allow_private=True)
    assert far.verdict == "unavailable" and far.error.startswith("more than 5 redirects")
    refused = fetch_robots_sync(srv.url("allow.test", "/x"), resolve_file=hosts)
    assert refused.verdict == "unreachable" and "private" in refused.error
    assert robots_requests(srv, "allow.test") == before + 1  # the refused address was never dialled
