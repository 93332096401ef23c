"""crawl parse against the bundled test web's ground truth.

The test web's generator knows, for every page, which links a correct parser
extracts (``Link.url``: resolved, with base href, nofollow and meta robots
applied by us here). Its router answers requests without a socket, so the
trap hosts can be walked link by link to show the heuristics end them.
"""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl.canon import canonicalize
from crawl.net import Limits
from crawl.parse import ParseConfig
from crawl.parse.pages import parse_body
from crawl.parse.traps import TrapPolicy
from crawl.testweb import Clock, Web, WebConfig
from crawl.testweb.content import page_html
from crawl.testweb.router import Request, Router

sys.path.insert(0, str(Path(__file__).parent.parent))
from fetchutil import run_batch  # noqa: E402

CFG = ParseConfig(traps=TrapPolicy(year=2026))


def test_every_page_gives_exactly_the_expected_links() -> None:
    web = Web(WebConfig(hosts=10, pages=25, seed=7))
    checked = base_pages = nofollow_pages = 0
    for i in range(10):
        for k in range(25):
            spec = web.page(i, k)
            url = web.url(i, spec.path)
            res = parse_body(url, [("Content-Type", "text/html; charset=utf-8")],
                             page_html(web, i, k, 0), config=CFG)
            got = [r["url"] for r in res.links if r["rel"] != ["canonical"]]
            expected: set[str] = set()
            if spec.meta_robots != "nofollow":
                expected = {canonicalize(lk.url).url for lk in spec.links
                            if lk.tag == "a" and "nofollow" not in lk.rel}
                expected.discard(canonicalize(url).url)
            else:
                nofollow_pages += 1
            assert set(got) == expected, (url, spec)
            assert len(got) == len(set(got))
            assert res.page is not None
            assert res.page["noindex"] is (spec.meta_robots == "noindex")
            base_pages += spec.base_href is not None
            checked += 1
    assert checked == 250 and base_pages > 10 and nofollow_pages > 5


def _walk(router: Router, web: Web, host: int, entry: str, limit: int) -> list[dict]:
    """Breadth-first over what parse emits, as seen + frontier would."""
    name = web.host_name(host)
    start = canonicalize(web.url(host, entry)).url
    queue, seen, links = deque([(start, 0)]), {start}, []
    while queue and len(seen) < limit:
        url, depth = queue.popleft()
        target = url.split(name, 1)[1] or "/"
        resp = router.handle(Request("GET", target, name))
        if resp.status != 200:
            continue
        res = parse_body(url, resp.headers, resp.body, parent={"depth": depth}, config=CFG)
        for rec in res.links:
            links.append(rec)
            if rec["url"] not in seen and rec["host"] == name:
                seen.add(rec["url"])
                queue.append((rec["url"], rec["depth"]))
    return links


@pytest.fixture(scope="module")
def trap_web() -> tuple[Web, Router, int]:
    web = Web(WebConfig(hosts=3, pages=10, mix="traps"))
    host = next(i for i in range(3) if web.host(i).behaviour == "traps")
    return web, Router(web, Clock(1767225600.0 + 40 * 86400)), host


def test_deep_path_trap_ends(trap_web: tuple[Web, Router, int]) -> None:
    web, router, host = trap_web
    links = _walk(router, web, host, "/deep/a/", limit=10_000)
    deep = {r["url"] for r in links if "/deep/" in r["url"]}
    base = f"http://{web.host_name(host)}/deep/a/"
    assert {base + "a/", base + "b/"} <= deep  # the first levels are followed: not blocked outright
    assert len(deep) < 40  # /deep/a/b/a/b and friends are dropped


def test_calendar_trap_ends_within_the_window(trap_web: tuple[Web, Router, int]) -> None:
    web, router, host = trap_web
    links = _walk(router, web, host, "/calendar/2026/01/", limit=10_000)
    cal = {r["url"] for r in links if "/calendar/" in r["url"]}
    assert all(r["trap"] == "calendar" for r in links if "/calendar/" in r["url"])
    # 2016-01 .. 2027-12 at most: the rest is "calendar-far" and dropped
    assert 24 < len(cal) <= 12 * 12


def test_facets_are_demoted_past_page_100(trap_web: tuple[Web, Router, int]) -> None:
    web, router, host = trap_web
    name = web.host_name(host)
    resp = router.handle(Request("GET", "/search?page=150&q=shoes", name))
    res = parse_body(f"http://{name}/search?page=150&q=shoes", resp.headers, resp.body,
                     parent={"priority": 1}, config=CFG)
    nxt = [r for r in res.links if "page=151" in r["url"]]
    assert nxt and nxt[0]["trap"] == "page>100" and nxt[0]["priority"] == 2


@pytest.mark.parametrize(
    ("path", "charset_source"),
    [
        ("/charset/bogus-label.html", "default"),  # unknown label: fall through to UTF-8
        ("/charset/invalid-bytes.html", "header"),
        ("/charset/conflict.html", "header"),  # header beats <meta>, as in browsers
    ],
)
def test_charset_pages(path: str, charset_source: str) -> None:
    web = Web(WebConfig(hosts=4, pages=4, mix="charset"))
    host = next(i for i in range(4) if web.host(i).behaviour == "charset")
    name = web.host_name(host)
    resp = Router(web, Clock(1767225600.0)).handle(Request("GET", path, name))
    res = parse_body(f"http://{name}{path}", resp.headers, resp.body, config=CFG)
    assert res.page is not None and res.page["type"] == "html"
    assert res.page["charset_source"] == charset_source


def test_wrong_content_types() -> None:
    web = Web(WebConfig(hosts=4, pages=4, mix="content-type"))
    host = next(i for i in range(4) if web.host(i).behaviour == "content-type")
    name = web.host_name(host)
    router = Router(web, Clock(1767225600.0))
    found = {}
    for path in web.entry_points(host):
        resp = router.handle(Request("GET", path, name))
        res = parse_body(f"http://{name}{path}", resp.headers, resp.body, config=CFG)
        found[path] = [r["url"] for r in res.links]
    assert found["/ct/missing.html"] == [f"http://{name}/"]  # sniffed as HTML
    assert found["/ct/wrong.html"] == [f"http://{name}/"]  # octet-stream: sniffed
    assert found["/ct/html-as-png.png"] == []  # the server said image: not parsed
    assert found["/ct/png-as-html.html"] == []  # binary junk labelled HTML: no crash


def test_fetch_then_parse_over_real_http(testweb: Any, tmp_path: Path) -> None:
    """The real pipeline: fetch from the running test web into WARCs, then `crawl parse`."""
    plain = [h for h, rec in testweb.hosts.items()
             if rec["behaviour"] == "plain" and rec["robots"]["variant"] == "simple"][:3]
    assert len(plain) == 3
    pages = [p for h in plain for p in testweb.pages_of(h)
             if p["status"] == 200 and p["content_type"].startswith("text/html")
             and not p["disallowed"] and p["behaviour"] is None][:20]
    sitemaps = [testweb.url(plain[0], "/sitemap.xml"), testweb.url(plain[0], "/sitemap-pages.xml")]
    d = tmp_path / "D"
    fetched = run_batch(d, [p["url"] for p in pages] + sitemaps, testweb.hosts_file.read_text(),
                        limits=Limits(connect=5.0, total=8.0))
    assert [r["outcome"] for r in fetched] == ["ok"] * len(fetched), fetched
    stdin = b"".join(orjson.dumps(r) + b"\n" for r in fetched)
    proc = subprocess.run([sys.executable, "-m", "crawl", "parse", "--dir", str(d)],
                          input=stdin, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = [orjson.loads(line) for line in proc.stdout.splitlines()]
    by_parent: dict[str, set[str]] = {}
    for rec in out:
        by_parent.setdefault(rec["parent"], set()).add(rec["url"])
    for p in pages:
        url = canonicalize(p["url"]).url
        expected: set[str] = set()
        if p["meta_robots"] != "nofollow":
            expected = {canonicalize(lk["url"]).url for lk in p["links"]
                        if lk["tag"] == "a" and "nofollow" not in lk["rel"]}
        if p["canonical"] and canonicalize(p["canonical"]).url != url:
            expected.add(canonicalize(p["canonical"]).url)
        expected.discard(url)
        assert by_parent.get(p["url"], set()) == expected, p["url"]
    index = [r for r in out if r["parent"] == sitemaps[0]]
    assert {r["source"] for r in index} == {"sitemap-index"} and len(index) == 2
    entries = [r for r in out if r["parent"] == sitemaps[1]]
    ordinary = {canonicalize(p["url"]).url for p in testweb.pages_of(plain[0]) if "approx_bytes" in p}
    assert {r["url"] for r in entries} == ordinary and len(entries) == len(ordinary)
    assert all(r["source"] == "sitemap" and r.get("lastmod") for r in entries)
