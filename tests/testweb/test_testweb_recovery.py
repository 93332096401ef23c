"""The test web's endless redirect chains and its robots.txt that fails, then answers.

``/redirect/across-N`` bounces between the web's redirects hosts N times;
``--robots-recover N`` makes the 500 and timeout robots.txt variants fail N
times per host, then serve ``Disallow: /private/``; the audit forbids every
page of such a host until the server has answered its robots.txt with 200.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from conftest import TestWeb, start_testweb

from crawl.testweb.audit import audit


def test_across_chains_bounce_between_redirect_hosts_and_end_at_a_home_page(tmp_path: Path) -> None:
    with start_testweb(tmp_path, hosts=4, seed=41, pages=3, mix="redirects", hang=1) as web:
        a, b = web.with_behaviour("redirects")
        url, hosts = web.url(a, "/redirect/across-3"), []
        for _ in range(6):
            r = web.get(url)
            hosts.append(urlsplit(url).hostname)
            if r.status_code != 302:
                break
            url = r.headers["location"]
        # across-3, -2, -1, -0: four redirects, each to the other redirects host, then a home page
        assert hosts == [a, b, a, b, a] and url == web.url(a, "/") and r.status_code == 200
        assert web.get(web.url(0, "/redirect/across-3")).status_code == 404  # a plain host has none


def _robots_statuses(web: TestWeb, host: str, n: int) -> list[int]:
    out = []
    for _ in range(n):
        try:
            # a generous bound (a 500 can take seconds under load): the timeout variant
            # holds the connection for hang=1 s and closes it without an answer
            out.append(web.get(web.url(host, "/robots.txt"), timeout=30).status_code)
        except Exception:  # noqa: BLE001 - the timeout variant holds the connection: no status
            out.append(0)
    return out


def test_failing_robots_txt_recovers_after_n_requests(tmp_path: Path) -> None:
    with start_testweb(tmp_path, hosts=3, seed=42, pages=3, mix="500,timeout", robots_recover=2, hang=1) as web:
        r500, rhang = web.with_behaviour("500")[0], web.with_behaviour("timeout")[0]
        for host in (r500, rhang):
            robots = web.hosts[host]["robots"]
            assert robots["complete_disallow"] and robots["recovers_after"] == 2
            assert robots["recovered_rules"] == [["disallow", "/private/"]]
        assert _robots_statuses(web, r500, 4) == [500, 500, 200, 200]
        assert _robots_statuses(web, rhang, 3) == [0, 0, 200]
        assert b"Disallow: /private/" in web.get(web.url(r500, "/robots.txt")).content
        assert "recovers_after" not in web.hosts[web.host(0)]["robots"]  # a good robots.txt: nothing changes


def test_audit_forbids_pages_until_robots_txt_answered(tmp_path: Path) -> None:
    with start_testweb(tmp_path, hosts=2, seed=43, pages=3, mix="500", robots_recover=1) as web:
        host = web.with_behaviour("500")[0]

        def req(path: str, start: int, status: int = 200) -> dict:
            return {"host": host, "path": path, "start": start * 10**9, "end": start * 10**9 + 1000,
                    "status": status, "addr": "127.0.1.2", "conn": start, "ua": "crawl/0.1"}

        early = [req("/robots.txt", 0, 500), req("/", 10), req("/robots.txt", 20), req("/", 30),
                 req("/private/x.html", 40), req("/docs/y.html", 50)]
        got = [(v["rule"], v["requests"][0]["path"]) for v in audit(early, web.hosts, delay=1.0)]
        # before the 200: everything is forbidden; after it: only what the recovered file forbids
        assert got == [("disallowed", "/"), ("disallowed", "/private/x.html")]
        never = [r for r in early if r["path"] != "/robots.txt" or r["status"] != 200]
        assert len(audit(never, web.hosts, delay=1.0)) == 4  # it never answered: all four pages
