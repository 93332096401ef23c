"""The fetcher against the bundled test web: every page of it, checked against its manifest."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from crawl import store
from crawl.core import records
from crawl.net import Limits
from crawl.store import cdxj

sys.path.insert(0, str(Path(__file__).parent.parent))
from fetchutil import run_batch  # noqa: E402


def test_whole_test_web_against_the_manifest(testweb: Any, tmp_path: Path) -> None:
    hosts_text = testweb.hosts_file.read_text()
    # robots files and media are covered elsewhere; keep one image per host
    urls = sorted(u for u, p in testweb.pages.items() if "robots" not in p["path"]
                  and not p["path"].endswith((".png", ".pdf")) or p["path"].endswith("photo-0.png"))
    # generous limits: the machine is shared, and the hostile pages are tested elsewhere
    res = {r["url"]: r for r in run_batch(tmp_path / "D", urls, hosts_text, concurrency=64,
                                           limits=Limits(connect=5.0, total=5.0))}
    assert set(res) == set(urls)
    warc = tmp_path / "D" / "warc"
    checked = 0
    for url, page in testweb.pages.items():
        if url not in res:
            continue
        r = res[url]
        host = testweb.hosts[page["host"]]
        robots = host["robots"]
        assert r["outcome"] in records.OUTCOMES
        assert r["ip"] == host["address"]  # the override's address, in the result
        if robots["variant"] in ("500", "timeout"):
            assert r["outcome"] == "robots-unreachable", (url, r)
            assert r["robots"]["verdict"] == "unreachable"
            continue
        if page.get("disallowed"):
            assert r["outcome"] == "robots-disallowed", (url, r)
            continue
        if page.get("behaviour") or host["behaviour"] in ("slow", "busy", "reset", "redirects"):
            continue  # covered by the hostile-server tests; outcomes vary with timing
        ctype = (page.get("content_type") or "").split(";")[0]
        if page["status"] == 200 and ctype == "text/html":
            assert r["outcome"] == "ok", (url, r)
            if checked < 40:  # byte-exact against a direct request to the server
                direct = testweb.get(url)
                assert store.read_response(warc, r["warc"]).body == direct.content
                checked += 1
        elif page["status"] == 200 and ctype in ("image/png", "application/pdf"):
            assert r["outcome"] == "skipped-content-type", (url, r)
        elif 300 <= page["status"] < 400:
            assert r["outcome"] == "redirect" and r["location"], (url, r)
        elif page["status"] >= 400:
            assert r["outcome"] == "http-error", (url, r)
    assert checked >= 20
    # oversize robots.txt (> 500 KiB) is still parsed and obeyed
    big = [p["url"] for h in testweb.with_behaviour("oversize") for p in testweb.pages_of(h)
           if p.get("disallowed") and p["url"] in res]
    assert big and all(res[u]["outcome"] == "robots-disallowed" for u in big)
    _, n = cdxj.build(warc)
    assert n >= sum(1 for r in res.values() if "warc" in r)


def test_bomb_huge_and_endless_pages_of_the_test_web(testweb: Any, tmp_path: Path) -> None:
    urls = []
    for b in ("huge", "gzip-bomb", "endless"):
        for h in testweb.with_behaviour(b):
            urls += [p["url"] for p in testweb.pages_of(h) if p.get("behaviour") == b]
    assert urls
    res = run_batch(tmp_path / "D", urls, testweb.hosts_file.read_text())
    for r in res:
        assert r["outcome"] in ("too-large", "timeout"), r
        assert r.get("truncated") or r["outcome"] == "timeout"


def test_one_host_is_served_over_one_kept_alive_connection(start_testweb_factory: Any,
                                                            tmp_path: Path) -> None:
    """Sequential requests to a host reuse its connection (robots.txt included)."""
    with start_testweb_factory(tmp_path / "w", hosts=2, seed=3, pages=6, mix="plain") as web:
        host = web.host(0)
        urls = [p["url"] for p in web.pages_of(host) if p["status"] == 200
                and not p.get("disallowed")
                and (p.get("content_type") or "").startswith("text/html")][:5]
        assert len(urls) >= 3
        res = run_batch(tmp_path / "D", urls, web.hosts_file.read_text(), concurrency=1,
                        limits=Limits(connect=5.0, total=5.0))
        assert [r["outcome"] for r in res] == ["ok"] * len(urls)
        log = [r for r in web.requests() if r["host"].split(":")[0] == host]
        assert len(log) == len(urls) + 1  # and robots.txt
        assert len({r["conn"] for r in log}) == 1, log


def test_gzip_members_and_trailing_bytes_fetch_store_and_parse_whole(testweb: Any, tmp_path: Path) -> None:
    """The test web's gzip-multi page (three members) and gzip-trailing page (garbage after
    the stream) are fetched, archived as sent, and parsed to the links that only the last
    part holds: by the fetch and again by ``crawl parse`` reading the WARC."""
    import subprocess
    import sys

    import orjson

    pages = []
    for b in ("gzip-multi", "gzip-trailing"):
        for h in testweb.with_behaviour(b):
            pages += [p for p in testweb.pages_of(h) if p.get("behaviour") == b]
    assert len(pages) == 2
    d = tmp_path / "D"
    res = run_batch(d, [p["url"] for p in pages], testweb.hosts_file.read_text())
    for r, p in zip(res, pages, strict=True):
        assert r["outcome"] == "ok" and not r.get("truncated"), r
        if p["behaviour"] == "gzip-trailing":
            assert "after the end of the gzip body" in r["error"]
    out = subprocess.run([sys.executable, "-m", "crawl", "parse", "--dir", str(d)],
                         input=b"".join(orjson.dumps(r) + b"\n" for r in res),
                         capture_output=True, timeout=60, check=True).stdout
    links = {orjson.loads(line)["url"] for line in out.splitlines()}
    for p in pages:
        expected = {lk["url"] for lk in p["links"]}
        assert expected and expected <= links, (p["url"], expected - links)
