"""The synthetic test web, checked over real HTTP against its own manifest.

Read-only checks use the shared ``testweb`` fixture; anything that changes
server state (busy counters, the simulated clock, the request log) runs on a
private web started by ``start_testweb``.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import lxml.html
import pytest
from conftest import ROOT, TESTWEB_CLOCK, TestWeb, start_testweb
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.testweb import Web, WebConfig, content
from crawl.testweb.audit import audit
from crawl.testweb.generator import PROFILES, rules_disallow


def _path(url: str) -> str:
    s = urlsplit(url)
    return s.path + ("?" + s.query if s.query else "")


def _extract(html: bytes, url: str) -> list[tuple[str, str]]:
    """(tag, absolute URL) of every <a href> and <img src>, honouring <base href>."""
    doc = lxml.html.fromstring(html)
    base = doc.xpath("//base/@href")
    base_url = urljoin(url, base[0]) if base else url
    out = []
    for el in doc.iter("a", "img"):
        href = el.get("href") if el.tag == "a" else el.get("src")
        if href is not None:
            out.append((el.tag, urljoin(base_url, href)))
    return out


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory):
    """A web whose state tests may change: simulated clock, short hang, fast slow host."""
    with start_testweb(tmp_path_factory.mktemp("private"), hosts=20, seed=7, pages=6,
                       clock=TESTWEB_CLOCK, latency=0.05, drip=0.002, hang=1,
                       huge_bytes=3_000_000, bomb_bytes=64 << 20) as web:
        yield web


# -- generator -----------------------------------------------------------------
def test_same_config_same_bytes_other_seed_other_web() -> None:
    a, b = Web(WebConfig(seed=3, port=8080)), Web(WebConfig(seed=3, port=8080))
    c = Web(WebConfig(seed=4, port=8080))
    assert content.page_html(a, 0, 5, 0) == content.page_html(b, 0, 5, 0)
    assert a.page(2, 3) == b.page(2, 3)
    assert content.page_html(a, 0, 5, 0) != content.page_html(c, 0, 5, 0)


def test_a_web_is_the_same_in_another_process() -> None:
    """No hash randomisation, no global state: a fresh interpreter serves the same bytes."""
    import hashlib

    from crawl.testweb.manifest import page_records

    web = Web(WebConfig(seed=11, hosts=25, pages=6, port=8080))
    code = ("import hashlib, orjson; from crawl.testweb import Web, WebConfig, content; "
            "from crawl.testweb.manifest import page_records; "
            "w = Web(WebConfig(seed=11, hosts=25, pages=6, port=8080)); h = hashlib.sha256(); "
            "[h.update(content.page_html(w, i, k, 3)) for i in range(25) for k in range(6)]; "
            "[h.update(orjson.dumps(r)) for i in range(25) for r in page_records(w, i, 1.78e9)]; "
            "print(h.hexdigest())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           check=True, env={"PYTHONHASHSEED": "random", "PATH": ""}).stdout.strip()
    import orjson

    h = hashlib.sha256()
    for i in range(25):
        for k in range(6):
            h.update(content.page_html(web, i, k, 3))
    for i in range(25):
        for r in page_records(web, i, 1.78e9):
            h.update(orjson.dumps(r))
    assert other == h.hexdigest()


def test_first_hosts_cover_every_profile() -> None:
    web = Web(WebConfig(hosts=len(PROFILES)))
    assert [(web.host(i).behaviour, web.host(i).robots) for i in range(len(PROFILES))] == list(PROFILES)
    mirror = next(web.host(i) for i in range(len(PROFILES)) if web.host(i).behaviour == "mirror")
    assert web.host(mirror.mirror_of).behaviour == "mirror-origin"


def test_a_mix_restricts_behaviours() -> None:
    web = Web(WebConfig(hosts=50, mix="traps,busy"))
    assert {web.host(i).behaviour for i in range(50)} == {"plain", "traps", "busy"}
    plain = Web(WebConfig(hosts=50, mix="plain"))
    assert {(plain.host(i).behaviour, plain.host(i).robots) for i in range(50)} == {("plain", "simple")}
    with pytest.raises(ValueError, match="unknown behaviour"):
        WebConfig(hosts=5, mix="nope")


def test_a_hundred_thousand_hosts_cost_nothing_until_asked() -> None:
    web = Web(WebConfig(hosts=100_000))
    assert web.host_index(web.host_name(99_999)) == 99_999
    assert web.host_index("h100000.test") is None
    addrs = {web.address(i) for i in range(0, 100_000, 997)}
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("127.0.0.0/8") for a in addrs)
    assert len(addrs) == 16  # many hosts per address: per-IP limits matter


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), host=st.integers(0, 59), k=st.integers(0, 29))
def test_every_href_resolves_to_its_manifest_url(seed: int, host: int, k: int) -> None:
    web = Web(WebConfig(seed=seed, hosts=60, pages=30, port=8123))
    spec = web.page(host, k)
    page_url = web.url(host, spec.path)
    base = urljoin(page_url, spec.base_href) if spec.base_href else page_url
    for link in spec.links:
        assert urljoin(base, link.href) == link.url
    assert web.page_index(spec.path) == k


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.integers(0, 29), host=st.integers(0, 39))
def test_html_links_are_exactly_the_manifest_links(seed: int, k: int, host: int) -> None:
    web = Web(WebConfig(seed=seed, hosts=40, pages=30, port=8123))
    spec = web.page(host, k)
    html = content.page_html(web, host, k, 0)
    found = _extract(html, web.url(host, spec.path))
    assert found == [(lk.tag, lk.url) for lk in spec.links]


def test_page_sizes_span_the_range() -> None:
    web = Web(WebConfig(hosts=5, pages=200, port=80))
    sizes = [len(content.page_html(web, 0, k, 0)) for k in range(200)]
    assert min(sizes) >= 2000 and max(sizes) <= 210 * 1024
    assert max(sizes) > 50 * 1024 and sorted(sizes)[100] < 20 * 1024


def test_robots_matcher_follows_rfc9309_precedence() -> None:
    rules = [("disallow", "/private/"), ("allow", "/private/open-"), ("allow", "/news/"),
             ("disallow", "/news/"), ("disallow", "/*.pdf$")]
    assert rules_disallow(rules, "/private/x.html")
    assert not rules_disallow(rules, "/private/open-x.html")  # longer allow wins
    assert not rules_disallow(rules, "/news/a.html")  # tie: allow wins
    assert rules_disallow(rules, "/files/a.pdf")
    assert not rules_disallow(rules, "/files/a.pdf?x=1")  # '$' anchors the end


# -- the served web against the manifest ---------------------------------------
def test_files_and_addresses(testweb: TestWeb) -> None:
    lines = [ln.split() for ln in testweb.hosts_file.read_text().splitlines() if not ln.startswith("#")]
    names = [n for _, n in lines]
    assert set(testweb.host_names) <= set(names) and len(testweb.host_names) == 40
    for addr, _ in lines:
        assert ipaddress.ip_address(addr) in ipaddress.ip_network("127.0.0.0/8")
    per_addr: dict[str, int] = {}
    for name in testweb.host_names:
        per_addr[testweb.address(name)] = per_addr.get(testweb.address(name), 0) + 1
    assert max(per_addr.values()) > 1
    seeds = testweb.seeds_file.read_text().split()
    assert seeds == [testweb.url(i, "/") for i in range(40)]
    assert all(f":{testweb.port}/" in u for u in testweb.pages)
    assert any(n.endswith(".shop.test") for n in testweb.host_names)
    assert testweb.manifest["port"] == testweb.port


def test_every_page_of_a_plain_host_matches_the_manifest(testweb: TestWeb) -> None:
    for rec in testweb.pages_of(0):
        r = testweb.get(rec["url"])
        assert r.status_code == rec["status"], rec["url"]
        if rec["status"] == 200:
            assert r.headers["content-type"] == rec["content_type"]
        if rec["content_type"] and rec["content_type"].startswith("text/html") and rec["status"] == 200 \
                and rec["behaviour"] is None:
            found = _extract(r.content, rec["url"])
            assert found == [(lk["tag"], lk["url"]) for lk in rec["links"]]
            doc = lxml.html.fromstring(r.content)
            assert doc.xpath("//link[@rel='canonical']/@href") == [rec["canonical"]]
            assert doc.xpath("//meta[@name='robots']/@content") == ([rec["meta_robots"]] if rec["meta_robots"] else [])


def test_special_urls_of_every_host_answer_as_listed(testweb: TestWeb) -> None:
    skip = {"endless", "huge", "gzip-bomb", "reset-head", "reset-body", "robots-timeout", "busy"}
    checked = 0
    for rec in testweb.pages.values():
        if rec["behaviour"] in skip or rec["host"] in testweb.with_behaviour("slow"):
            continue
        r = testweb.get(rec["url"])
        assert r.status_code == rec["status"], rec["url"]
        if "location" in rec:
            assert urljoin(rec["url"], r.headers["location"]) == rec["location"]
        if rec["status"] == 200:
            assert r.headers.get("content-type") == rec["content_type"], rec["url"]
        checked += 1
    assert checked > 500


def test_pdf_and_png_are_real(testweb: TestWeb) -> None:
    assert testweb.get(testweb.url(0, "/files/report-0.pdf")).content.startswith(b"%PDF-1.4")
    png = testweb.get(testweb.url(0, "/img/photo-1.png")).content
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")


def test_sitemaps_list_every_page_with_lastmod(testweb: TestWeb) -> None:
    index = lxml.etree.fromstring(testweb.get(testweb.url(0, "/sitemap.xml")).content)
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = index.xpath("//s:sitemap/s:loc/text()", namespaces=ns)
    assert locs == [testweb.url(0, "/sitemap-pages.xml"), testweb.url(0, "/sitemap-files.xml")]
    urlset = lxml.etree.fromstring(testweb.get(locs[0]).content)
    pages = [p for p in testweb.pages_of(0) if p.get("version") is not None]
    assert urlset.xpath("//s:url/s:loc/text()", namespaces=ns) == [p["url"] for p in pages]
    assert len(urlset.xpath("//s:url/s:lastmod", namespaces=ns)) == len(pages)


# -- robots variants -----------------------------------------------------------
def test_robots_variants(testweb: TestWeb) -> None:
    rules_host = testweb.with_behaviour("rules")[0]
    body = testweb.get(testweb.url(rules_host, "/robots.txt")).text
    assert "User-agent: crawl" in body and "Crawl-delay: 2" in body and "Sitemap: http://" in body
    assert testweb.hosts[rules_host]["robots"]["crawl_delay"] == 2.0
    assert testweb.get(testweb.url(testweb.with_behaviour("404")[0], "/robots.txt")).status_code == 404
    assert testweb.get(testweb.url(testweb.with_behaviour("500")[0], "/robots.txt")).status_code == 500
    huge = testweb.get(testweb.url(testweb.with_behaviour("oversize")[0], "/robots.txt")).content
    assert len(huge) > 500 * 1024
    assert b"Disallow: /blog/" not in huge[: 500 * 1024] and b"Disallow: /blog/" in huge
    redirected = testweb.with_behaviour("redirect")[0]
    r = testweb.get(testweb.url(redirected, "/robots.txt"))
    assert r.status_code == 301
    r2 = testweb.get(urljoin(str(testweb.url(redirected, "/robots.txt")), r.headers["location"]))
    assert r2.status_code == 302
    final = testweb.get(testweb.url(redirected, r2.headers["location"]))
    assert "Disallow: /docs/" in final.text
    for name in testweb.with_behaviour("500") + testweb.with_behaviour("timeout"):
        assert all(p["disallowed"] for p in testweb.pages_of(name) if p["path"] != "/robots.txt")


def test_manifest_disallowed_agrees_with_the_crawlers_robots_parser(testweb: TestWeb) -> None:
    from crawl import robots  # our own parser: a broken import is a failure, never a skip
    for variant in ("simple", "rules", "oversize", "redirect"):
        name = testweb.with_behaviour(variant)[0]
        url = testweb.url(name, "/robots.txt")
        r = testweb.get(url)
        for _ in range(3):
            if r.status_code in (301, 302):
                url = urljoin(url, r.headers["location"])
                r = testweb.get(url)
        parsed = robots.parse(r.content)
        for page in testweb.pages_of(name):
            assert parsed.allowed(page["path"], "crawl") == (not page["disallowed"]), (variant, page["path"])


def test_robots_timeout_holds_the_connection_without_an_answer(private: TestWeb) -> None:
    name = private.with_behaviour("timeout")[0]
    t0 = time.monotonic()
    with pytest.raises(httpx.HTTPError):
        private.get(private.url(name, "/robots.txt"), timeout=5)
    assert time.monotonic() - t0 >= 0.9  # hang=1: the server holds it for a second


# -- behaviours ------------------------------------------------------------------
def test_near_duplicates(testweb: TestWeb) -> None:
    name = testweb.with_behaviour("near-dups")[0]
    variants = [p for p in testweb.pages_of(name) if (p["behaviour"] or "").startswith("near-dup:")]
    assert {v["behaviour"] for v in variants} == {f"near-dup:{v}" for v in ("tracking", "print", "mobile", "ref")}

    def words(b: bytes) -> set[str]:
        return set(lxml.html.fromstring(b).text_content().split())

    for v in variants:
        original = testweb.get(v["canonical"]).content
        body = testweb.get(v["url"]).content
        if v["duplicate_of"]:
            assert body == original
        else:
            assert body != original
            a, b = words(original), words(body)
            assert len(a & b) / len(a | b) > 0.8


def test_exact_mirror_across_hosts(testweb: TestWeb) -> None:
    mirror = testweb.with_behaviour("mirror")[0]
    origin = testweb.hosts[mirror]["mirror_of"]
    for rec in testweb.pages_of(origin)[:12]:
        a = testweb.get(testweb.url(origin, rec["path"]))
        b = testweb.get(testweb.url(mirror, rec["path"]))
        assert a.content == b.content and a.headers.get("etag") == b.headers.get("etag")
    rec = testweb.pages[testweb.url(mirror, "/")]
    assert rec["duplicate_of"] == testweb.url(origin, "/")


def test_traps_never_end(testweb: TestWeb) -> None:
    name = testweb.with_behaviour("traps")[0]
    traps = {t["name"]: t for t in testweb.hosts[name]["traps"]}
    assert set(traps) == {"calendar", "session", "deep", "facets"}
    for trap in traps.values():
        url, seen = trap["entry"], set()
        for _ in range(6):  # follow the last link six times: always a new URL, always 200
            r = testweb.get(url)
            assert r.status_code == 200, url
            seen.add(url)
            url = _extract(r.content, url)[-1][1] if trap["name"] != "deep" else urljoin(url, "a/")
            assert testweb.pages.get(url) is None or testweb.pages[url]["trap"]
        assert len(seen) == 6


def test_redirect_chain_loop_and_cross_host(testweb: TestWeb) -> None:
    name = testweb.with_behaviour("redirects")[0]
    url, statuses = testweb.url(name, "/redirect/chain-5"), []
    for _ in range(10):
        r = testweb.get(url)
        statuses.append(r.status_code)
        if r.status_code == 200:
            break
        url = urljoin(url, r.headers["location"])
    assert statuses == [301, 308, 307, 303, 302, 301, 200]
    loop = testweb.get(testweb.url(name, "/redirect/loop-a"))
    back = testweb.get(testweb.url(name, loop.headers["location"]))
    assert back.headers["location"] == "/redirect/loop-a"
    away = testweb.pages[testweb.url(name, "/redirect/away")]
    assert urlsplit(away["location"]).hostname != name


def test_busy_pages_answer_429_and_503_then_200(private: TestWeb) -> None:
    name = private.with_behaviour("busy")[0]
    expected = [(429, "2"), (429, None), (503, "date"), (503, None)]
    before = len(private.requests())
    for n, (status, retry) in enumerate(expected):
        url = private.url(name, f"/busy/{n}.html")
        r = private.get(url)
        assert r.status_code == status
        ra = r.headers.get("retry-after")
        if retry == "date":
            assert ra is not None and ra.endswith("GMT")
        else:
            assert ra == retry
        assert private.get(url).status_code == 200
    # the log keeps the wait each answer asked for, in seconds after its end
    log = [(r["path"], r["status"], r.get("retry_after")) for r in private.requests(before)]
    assert [x[:2] for x in log] == [(f"/busy/{n}.html", s) for n, (st, _) in enumerate(expected)
                                    for s in (st, 200)]
    waits = [w for _, _, w in log]
    assert waits[0] == 2.0 and waits[1::2] == [None] * 4 and waits[2] is None and waits[6] is None
    assert 2.0 < waits[4] <= 3.0  # "now + 3 s" as an HTTP-date, whole seconds


def test_slow_host_drips(private: TestWeb) -> None:
    name = private.with_behaviour("slow")[0]
    t0 = time.monotonic()
    r = private.get(private.url(name, "/"))
    assert r.status_code == 200 and time.monotonic() - t0 >= 0.05


def test_resets(private: TestWeb) -> None:
    name = private.with_behaviour("reset")[0]
    for path in ("/reset/head.html", "/reset/body.html"):
        with pytest.raises(httpx.HTTPError):
            private.get(private.url(name, path))


def test_endless_huge_and_gzip_bomb_stream(private: TestWeb) -> None:
    client = httpx.Client(timeout=10)
    for behaviour, path in (("endless", "/stream/endless.html"), ("huge", "/huge.html"),
                            ("gzip-bomb", "/bomb.html")):
        name = private.with_behaviour(behaviour)[0]
        url = f"http://{private.address(name)}:{private.port}{path}"
        with client.stream("GET", url, headers={"Host": name}) as r:
            got = 0
            raw = b""
            for chunk in r.iter_raw():
                raw += chunk if len(raw) < 65536 else b""
                got += len(chunk)
                if got >= 2_000_000:
                    break
        assert got >= 2_000_000 or behaviour == "gzip-bomb"
        if behaviour == "endless":
            assert "content-length" not in r.headers and r.headers["transfer-encoding"] == "chunked"
        if behaviour == "huge":
            assert r.headers["content-length"] == "3000000"
        if behaviour == "gzip-bomb":
            assert r.headers["content-encoding"] == "gzip"
            d = zlib.decompressobj(31)
            out = d.decompress(raw, 1 << 20)
            assert out == bytes(len(out)) and len(out) == 1 << 20  # a ratio above 1000:1
        head = client.head(url, headers={"Host": name})
        assert head.status_code == 200 and head.content == b""
        if behaviour == "huge":
            assert head.headers["content-length"] == "3000000"
    client.close()
    small = content.gzip_bomb(8 << 20)
    assert gzip.decompress(small) == bytes(8 << 20)
    d, inflated, data = zlib.decompressobj(31), 0, small  # one member: every decoder sees it all
    while data:
        inflated += len(d.decompress(data, 1 << 20))
        data = d.unconsumed_tail
    assert inflated == 8 << 20 and d.eof and len(small) < (8 << 20) // 500


def test_content_types_and_charsets(testweb: TestWeb) -> None:
    ct = testweb.with_behaviour("content-type")[0]
    assert "content-type" not in testweb.get(testweb.url(ct, "/ct/missing.html")).headers
    assert testweb.get(testweb.url(ct, "/ct/png-as-html.html")).content.startswith(b"\x89PNG")
    cs = testweb.with_behaviour("charset")[0]
    bad = testweb.get(testweb.url(cs, "/charset/invalid-bytes.html")).content
    with pytest.raises(UnicodeDecodeError):
        bad.decode("utf-8")
    assert "x-no-such-charset" in testweb.get(testweb.url(cs, "/charset/bogus-label.html")).headers["content-type"]


def test_conditional_requests_and_change_over_time(private: TestWeb) -> None:
    changing = next(p for p in private.pages.values() if p.get("change_period"))
    r = private.get(changing["url"])
    etag, lm = r.headers["etag"], r.headers["last-modified"]
    assert private.get(changing["url"], headers={"If-None-Match": etag}).status_code == 304
    assert private.get(changing["url"], headers={"If-Modified-Since": lm}).status_code == 304
    private.advance_clock(changing["change_period"])
    r2 = private.get(changing["url"], headers={"If-None-Match": etag})
    assert r2.status_code == 200 and r2.headers["etag"] != etag and r2.content != r.content
    static = next(p for p in private.pages.values()
                  if p.get("version") is not None and p["change_period"] is None)
    before = private.get(static["url"])
    private.advance_clock(30 * 86400)
    assert private.get(static["url"], headers={"If-None-Match": before.headers["etag"]}).status_code == 304


def test_unknown_host_head_and_pipelining(testweb: TestWeb) -> None:
    r = httpx.get(f"http://{testweb.addresses[0]}:{testweb.port}/", headers={"Host": "nowhere.test"})
    assert r.status_code == 404
    head = testweb.get(testweb.url(0, "/"), method="HEAD")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 2000
    import socket

    with socket.create_connection((testweb.address(0), testweb.port)) as s:
        req = f"GET / HTTP/1.1\r\nHost: {testweb.host(0)}\r\n\r\n".encode()
        s.sendall(req * 2 + f"GET /robots.txt HTTP/1.1\r\nHost: {testweb.host(0)}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 3


# -- the request log and the audit -------------------------------------------------
def test_request_log_records_every_request(private: TestWeb) -> None:
    before = len(private.requests())
    with httpx.Client() as c:
        for _ in range(3):
            c.get(f"http://{private.address(1)}:{private.port}/", headers={"Host": private.host(1)})
    log = private.requests(before)
    assert len(log) == 3 and len({r["conn"] for r in log}) == 1  # keep-alive: one connection
    for r in log:
        assert r["host"] == private.host(1) and r["path"] == "/" and r["status"] == 200
        assert r["addr"] == private.address(1) and r["start"] <= r["end"] <= time.monotonic_ns()
        assert r["bytes"] > 0


HOSTS = {
    "a.test": {"robots": {"rules": [["disallow", "/private/"]], "crawl_delay": None}},
    "b.test": {"robots": {"rules": [], "crawl_delay": 2.0}},
    "c.test": {"robots": {"rules": [["disallow", "/"]], "complete_disallow": True}},
}
S = 1_000_000_000  # one second in ns


def _req(host: str, start: float, end: float, path: str = "/", addr: str = "127.0.1.1") -> dict:
    return {"host": host, "start": int(start * S), "end": int(end * S), "path": path, "addr": addr,
            "conn": 1, "status": 200, "ua": "crawl/0.1"}


def test_audit_finds_each_known_violation_and_nothing_else() -> None:
    log = [
        _req("a.test", 0, 0.1, "/robots.txt"), _req("a.test", 1.1, 1.2),  # fine
        _req("a.test", 2.3, 2.5), _req("a.test", 2.4, 2.6, "/x"),  # overlap
        _req("a.test", 3.2, 3.3, "/private/p.html"),  # disallowed (gap 0.6: also a gap)
        _req("b.test", 0, 0.1, addr="127.0.1.2"), _req("b.test", 1.5, 1.6, addr="127.0.1.2"),  # gap < 2
        _req("b.test", 3.6, 3.7, addr="127.0.1.2"),  # fine: 2.0 s after
        _req("c.test", 0, 0.1, "/robots.txt", "127.0.1.3"), _req("c.test", 5, 5.1, "/any", "127.0.1.3"),
    ]
    found = sorted((v["rule"], v["host"], v["requests"][-1]["path"]) for v in audit(log, HOSTS))
    assert found == sorted([
        ("overlap", "a.test", "/x"), ("gap", "a.test", "/private/p.html"),
        ("disallowed", "a.test", "/private/p.html"), ("gap", "b.test", "/"),
        ("disallowed", "c.test", "/any"),
    ])


def _answer(host: str, start: float, end: float, status: int, retry_after: float | None = None) -> dict:
    rec = {**_req(host, start, end, "/busy.html"), "status": status}
    if retry_after is not None:
        rec["retry_after"] = retry_after
    return rec


@pytest.mark.parametrize(
    ("log", "found"),
    [
        # Retry-After: 5 is honoured (5.0 s after the answer ended), and the robots.txt counts too
        ([_answer("a.test", 0, 1, 429, 5), _req("a.test", 6, 6.1)], []),
        ([_answer("a.test", 0, 1, 503, 5), _req("a.test", 5.9, 6, "/robots.txt")], [("retry-after", "/robots.txt")]),
        # every request inside the wait is one violation; one that overlaps the answer is overlap's
        ([_answer("a.test", 0, 1, 429, 5), _req("a.test", 0.5, 0.6, "/o"), _req("a.test", 2, 2.1, "/x"),
          _req("a.test", 4, 4.1, "/y"), _req("a.test", 6.1, 6.2)],
         [("overlap", "/o"), ("retry-after", "/x"), ("retry-after", "/y")]),
        # no Retry-After: back off at least --backoff (here 2 s), past the normal 0.5 s
        ([_answer("a.test", 0, 1, 429), _req("a.test", 2, 2.1)], [("backoff", "/")]),
        ([_answer("a.test", 0, 1, 503), _req("a.test", 3, 3.1)], []),
        # Retry-After: 0 asks for nothing beyond the normal delay; other statuses ask for nothing
        ([_answer("a.test", 0, 1, 429, 0), _req("a.test", 1.6, 1.7)], []),
        ([_answer("a.test", 0, 1, 500), _req("a.test", 1.6, 1.7)], []),
        ([_answer("a.test", 0, 1, 301, 60), _req("a.test", 1.6, 1.7)], []),
        # the wait is per host: another host on the same address need not wait
        ([_answer("a.test", 0, 1, 429, 5), _req("b.test", 1.1, 1.2)], []),
    ],
)
def test_audit_holds_clients_to_retry_after_and_backoff(log: list[dict], found: list[tuple[str, str]]) -> None:
    hosts = {"a.test": {"robots": {"rules": []}}, "b.test": {"robots": {"rules": []}}}
    got = [(v["rule"], v["requests"][-1]["path"]) for v in audit(log, hosts, delay=0.5, backoff=2.0)]
    assert sorted(got) == sorted(found)


def test_audit_tolerance_applies_to_the_asked_wait() -> None:
    hosts = {"a.test": {"robots": {"rules": []}}}
    log = [_answer("a.test", 0, 1, 429, 5), _req("a.test", 5.95, 6)]
    assert [v["rule"] for v in audit(log, hosts, delay=0)] == ["retry-after"]
    assert audit(log, hosts, delay=0, tolerance=0.1) == []


def test_audit_per_ip_counts_concurrency_across_hosts() -> None:
    hosts = {f"h{n}.test": {"robots": {"rules": []}} for n in range(6)}
    log = [_req(f"h{n}.test", 0 + n * 0.01, 1) for n in range(5)]  # 5 at once on one address
    log += [_req(f"h{n}.test", 1, 1.5) for n in range(4)]  # back-to-back is not concurrent
    log += [_req(f"h{n}.test", 10, 11, addr="127.0.1.9") for n in range(4)]  # at the limit
    v = [x for x in audit(log, hosts, delay=0) if x["rule"] == "per-ip"]
    assert len(v) == 1 and v[0]["peak"] == 5 and v[0]["addr"] == "127.0.1.1"
    assert [x["rule"] for x in audit(log, hosts, delay=0)] == ["per-ip"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(1.0, 3.0), st.floats(0.001, 0.5)),
                min_size=1, max_size=40), st.data())
def test_audit_is_silent_on_polite_schedules_and_catches_an_injected_one(sched, data) -> None:
    hosts = {f"h{n}.test": {"robots": {"rules": [["disallow", "/no/"]]}} for n in range(5)}
    clock = {n: 0.0 for n in range(5)}
    log = []
    for host, gap, duration in sched:  # each host sequential, waiting >= 1 s between requests
        start = clock[host] + gap
        log.append(_req(f"h{host}.test", start, start + duration, addr=f"127.0.1.{host + 1}"))
        clock[host] = start + duration
    assert audit(log, hosts, delay=1.0, per_ip=1) == []
    victim = data.draw(st.sampled_from(log))
    kind = data.draw(st.sampled_from(["disallowed", "gap"]))
    if kind == "disallowed":
        log.append({**victim, "path": "/no/x.html", "start": victim["start"] + 1,
                    "end": victim["start"] + 1, "addr": "127.0.9.9", "host": "h9.test"})
        hosts["h9.test"] = hosts["h0.test"]
    else:
        log.append({**victim, "start": victim["end"] + S // 2, "end": victim["end"] + S // 2 + 1,
                    "addr": "127.0.9.9"})
    rules = {v["rule"] for v in audit(log, hosts, delay=1.0, per_ip=1)}
    assert kind in rules


def test_audit_command_on_a_real_crawl_like_session(tmp_path: Path) -> None:
    with start_testweb(tmp_path, hosts=3, pages=3, mix="plain", clock=TESTWEB_CLOCK) as web:
        with httpx.Client() as c:
            for path in ("/robots.txt", "/", "/private/x-4.html"):
                c.get(f"http://{web.address(0)}:{web.port}{path}",
                      headers={"Host": web.host(0), "User-Agent": "crawl/0.1 (+https://example.test)"})
            web.get(web.url(0, "/private/y-4.html"))  # "crawl-tests": another product, not audited
        web.requests()
        cmd = [sys.executable, "-m", "crawl", "testweb", "audit", str(web.dir), "--json", "--agent", "crawl"]
        p = subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert recs[-1]["kind"] == "audit" and recs[-1]["requests"] == 4
    assert sorted(r["rule"] for r in recs[:-1]) == ["disallowed", "gap", "gap"]
    clean = subprocess.run([*cmd[:-2], "--agent", "nobody"], capture_output=True, cwd=ROOT, timeout=60)
    assert clean.returncode == 0


def test_audit_catches_a_client_that_ignores_slow_down_answers(tmp_path: Path) -> None:
    """Through the real server and the command: its log carries the wait each busy
    answer asked for, and asking again at once breaks retry-after (or backoff)."""
    with start_testweb(tmp_path, hosts=3, pages=3, mix="busy", clock=TESTWEB_CLOCK) as web:
        name = web.with_behaviour("busy")[0]
        ua = {"User-Agent": "crawl/0.1 (+https://example.test)"}
        for n in range(4):  # each answers 429/503 once, then 200 straight away
            assert web.get(web.url(name, f"/busy/{n}.html"), headers=ua).status_code in (429, 503)
            assert web.get(web.url(name, f"/busy/{n}.html"), headers=ua).status_code == 200
        web.requests()
        cmd = [sys.executable, "-m", "crawl", "testweb", "audit", str(web.dir), "--json", "--agent", "crawl",
               "--delay", "0.5"]
        p = subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert recs[-1]["kind"] == "audit" and recs[-1]["backoff"] == 1.0  # twice --delay by default
    # each answer is blamed for the requests that came too soon after it (gaps aside)
    blamed = {(v["rule"], v["requests"][0]["path"], v["required"]) for v in recs[:-1] if v["rule"] != "gap"}
    by_answer = {(rule, path) for rule, path, _ in blamed}
    assert by_answer == {("retry-after", "/busy/0.html"), ("backoff", "/busy/1.html"),
                         ("retry-after", "/busy/2.html"), ("backoff", "/busy/3.html")}
    asked = {path: wait for rule, path, wait in blamed if rule == "retry-after"}
    assert asked["/busy/0.html"] == 2.0 and 2.0 < asked["/busy/2.html"] <= 3.0  # "2" and an HTTP-date


def test_audit_of_real_concurrent_requests(tmp_path: Path) -> None:
    """Threads hitting one slow host at once: the server's own log shows overlap and per-ip."""
    import threading

    with start_testweb(tmp_path, hosts=2, pages=3, mix="slow", addresses=1, latency=0.3,
                       drip=0.001, clock=TESTWEB_CLOCK) as web:
        slow = web.with_behaviour("slow")[0]

        def fetch() -> None:
            with httpx.Client() as c:
                c.get(f"http://{web.address(slow)}:{web.port}/robots.txt", headers={"Host": slow})

        threads = [threading.Thread(target=fetch) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        log = web.requests()
        hosts = {h: rec for h, rec in web.hosts.items()}
    assert len(log) == 3 and len({r["conn"] for r in log}) == 3
    rules = sorted(v["rule"] for v in audit(log, hosts, delay=0, per_ip=2))
    assert rules == ["overlap", "overlap", "per-ip"]


def test_big_webs_list_hosts_and_compute_pages_on_demand(tmp_path: Path) -> None:
    with start_testweb(tmp_path, hosts=30, pages=4, full_manifest_limit=10,
                       clock=TESTWEB_CLOCK) as web:
        assert web.pages == {} and len(web.hosts) == 30
        assert web.manifest["pages_listed"] is False
        name = web.host(11)
        p = subprocess.run([sys.executable, "-m", "crawl", "testweb", "manifest", str(web.dir),
                            "--host", name], capture_output=True, cwd=ROOT, timeout=60, check=True)
        recs = [json.loads(line) for line in p.stdout.splitlines()]
        assert recs[0]["kind"] == "host" and recs[0]["host"] == name
        for rec in recs[1:]:
            if rec.get("version") is not None or rec["behaviour"] == "redirect-chain":
                assert web.get(rec["url"]).status_code == rec["status"]
        bad = subprocess.run([sys.executable, "-m", "crawl", "testweb", "manifest", str(web.dir),
                              "--host", "nowhere.test"], capture_output=True, cwd=ROOT, timeout=60)
        assert bad.returncode == 2 and b"nowhere.test" in bad.stderr


def test_help_documents_the_options(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from crawl.commands.testweb import command

    runner = CliRunner()
    serve = runner.invoke(command, ["serve", "--help"]).output
    for word in ("--hosts", "--seed", "--port", "--agent", "--mix", "--clock", "admin.testweb.test"):
        assert word in serve
    audit_help = runner.invoke(command, ["audit", "--help"]).output
    assert "--per-ip" in audit_help and "--json" in audit_help
    bad = runner.invoke(command, ["serve", "--out", str(tmp_path / "x"), "--mix", "nonsense"])
    assert bad.exit_code != 0 and not (tmp_path / "x").exists()
    assert "unknown behaviour(s) in --mix: nonsense" in str(bad.exception)


def test_a_busy_port_is_a_clear_error(private: TestWeb, tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "crawl", "testweb", "serve", "--out", str(tmp_path / "w"),
                        "--hosts", "3", "--port", str(private.port)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1 and "choose another --port" in p.stderr and "Traceback" not in p.stderr


def test_requests_in_flight_at_shutdown_are_logged(tmp_path: Path) -> None:
    """SIGTERM while a robots.txt hangs: the log still has that request."""
    import threading

    with start_testweb(tmp_path, hosts=5, pages=2, hang=30, clock=TESTWEB_CLOCK) as web:
        name = web.with_behaviour("timeout")[0]
        import socket

        received = threading.Event()
        answers: list[bytes] = []

        def hang() -> None:
            with socket.create_connection((web.address(name), web.port), timeout=20) as s:
                # Pipelined behind a page: the server reads both in one go and answers
                # the page at once, so its answer means robots.txt is being held now.
                s.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n"
                          f"GET /robots.txt HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
                data = b""
                while b"</html>" not in data:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                received.set()
                while chunk := s.recv(65536):  # then closed without an answer
                    data += chunk
                answers.append(data)

        t = threading.Thread(target=hang)
        t.start()
        assert received.wait(20), "the page in front of robots.txt was never answered"
        web.stop()  # SIGTERM, then wait for the process
        t.join()
        with open(web.dir / "requests.log", "rb") as f:
            log = [json.loads(line) for line in f]
    assert answers and answers[0].count(b"HTTP/1.1 ") == 1  # the page only
    hung = [r for r in log if r["host"] == name and r["path"] == "/robots.txt"]
    assert len(hung) == 1 and hung[0]["status"] == 0
