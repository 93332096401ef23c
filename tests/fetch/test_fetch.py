"""The fetcher against a misbehaving loopback server: outcomes, limits, WARC, DNS."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl import store
from crawl.fetch import DEFAULT_USER_AGENT
from crawl.fetch.batch import retry_after, type_wanted
from crawl.net import Limits
from crawl.store import cdxj

sys.path.insert(0, str(Path(__file__).parent.parent))
from fetchutil import run_batch  # noqa: E402
from hostile import HTML, Server, bomb, hosts_text  # noqa: E402


@pytest.fixture(scope="module")
def srv() -> Iterator[Server]:
    bomb("gzip"), bomb("br")  # build once, before any client timer runs
    s = Server(delay=3.0).start()
    yield s
    s.stop()


def fetch(srv: Server, tmp_path: Path, *paths: str, host: str = "allow.test", **kw: Any) -> list[dict[str, Any]]:
    return run_batch(tmp_path / "D", [srv.url(host, p) for p in paths], hosts_text(), **kw)


def by_path(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["url"].split(":", 2)[2].split("/", 1)[1]: r for r in results}


def test_outcomes_of_a_mixed_batch(srv: Server, tmp_path: Path) -> None:
    res = by_path(fetch(srv, tmp_path, "/ok", "/gzip", "/chunked", "/redirect", "/retry", "/notfound",
                        "/image", "/drop", "/partial", "/garbage", "/big-headers", "/private"))
    want = {"ok": "ok", "gzip": "ok", "chunked": "ok", "redirect": "redirect", "retry": "http-error",
            "notfound": "http-error", "image": "skipped-content-type", "drop": "protocol-error",
            "partial": "protocol-error", "garbage": "protocol-error", "big-headers": "protocol-error",
            "private": "robots-disallowed"}
    assert {k: r["outcome"] for k, r in res.items()} == want
    assert res["redirect"]["location"] == srv.url("allow.test", "/ok-target")
    assert res["retry"]["retry_after"] == 120 and res["retry"]["status"] == 503
    assert res["image"]["bytes"] == 0 and "warc" not in res["image"]
    assert res["partial"]["truncated"] == "disconnect" and "warc" in res["partial"]
    assert "too large" in res["big-headers"]["error"]
    ok = res["ok"]
    assert ok["ip"] == "127.0.0.1" and ok["status"] == 200 and ok["content_type"] == "text/html"
    assert ok["bytes"] == len(HTML) and ok["digest"].startswith("sha1:")
    assert set(ok["timings"]) >= {"dns", "first_byte", "total"}
    for r in res.values():  # every result is a fetch record for its input
        assert r["kind"] == "fetch" and r["v"] == 1 and "fetched_at" in r


def test_bodies_read_back_byte_exact_and_warcio_check_passes(srv: Server, tmp_path: Path) -> None:
    from warcutil import warcio_check

    res = by_path(fetch(srv, tmp_path, "/ok", "/gzip", "/chunked"))
    d = tmp_path / "D" / "warc"
    assert store.read_response(d, res["ok"]["warc"]).body == HTML
    assert store.read_response(d, res["gzip"]["warc"]).body == HTML * 50
    assert store.read_response(d, res["chunked"]["warc"]).body == HTML
    files = cdxj.warc_files(d)
    assert warcio_check(files) == 0
    recs = [r for f in files for r in ArchiveIterator(open(f, "rb"))]
    kinds = {r.rec_type for r in recs}
    assert {"warcinfo", "request", "response", "metadata"} <= kinds
    req = next(r for r in recs if r.rec_type == "request"
               and r.rec_headers.get_header("WARC-Target-URI").endswith("/ok"))
    assert req.http_headers.get_header("User-Agent") == DEFAULT_USER_AGENT
    assert req.http_headers.get_header("Host") == f"allow.test:{srv.port}"  # the name, not the IP
    assert cdxj.lookup(d, srv.url("allow.test", "/ok"))


def test_limits_end_hostile_routes_in_time(srv: Server, tmp_path: Path) -> None:
    # size caps with a roomy clock (a loaded machine must not turn them into timeouts) ...
    res = by_path(fetch(srv, tmp_path, "/huge", "/endless", "/gzip-bomb", "/br-bomb",
                        limits=Limits(connect=5.0, total=20.0)))
    # ... and the clock caps with a short one
    res.update(by_path(fetch(srv, tmp_path, "/slow-headers", "/trickle")))
    assert res["huge"]["outcome"] == "too-large" and res["huge"]["bytes"] == 5_000_000
    assert res["endless"]["outcome"] == "too-large" and res["endless"]["truncated"] == "length"
    for b in ("gzip-bomb", "br-bomb"):
        assert res[b]["outcome"] == "too-large", res[b]
        assert "ratio" in res[b]["error"] or "decoded" in res[b]["error"]
        assert res[b]["bytes"] < 1_000_000
    assert res["slow-headers"]["outcome"] == "timeout" and "warc" not in res["slow-headers"]
    assert res["trickle"]["outcome"] == "timeout" and res["trickle"]["truncated"] == "time"
    for k in ("slow-headers", "trickle"):  # loose: the outcomes already prove the caps fired
        assert res[k]["timings"]["total"] < 1.5 + 5.0
    d = tmp_path / "D" / "warc"
    got = store.read_response(d, res["huge"]["warc"])
    assert len(got.body) == 5_000_000 and got.truncated == "length"


def test_conditional_refetch_gets_304_and_a_revisit_record(srv: Server, tmp_path: Path) -> None:
    first = fetch(srv, tmp_path, "/etag")[0]
    assert first["outcome"] == "ok" and first["etag"] == '"v1"'
    second = fetch(srv, tmp_path, "/etag")[0]
    assert second["outcome"] == "not-modified" and second["status"] == 304
    assert second["refers_to"] == first["warc"] and second["digest"] == first["digest"]
    sent = srv.state.requests("allow.test", "/etag")[-1]["headers"]
    assert sent["if-none-match"] == '"v1"' and sent["if-modified-since"]
    d = tmp_path / "D" / "warc"
    rv = store.read_response(d, second["warc"])
    assert rv.record_type == "revisit" and rv.status == 304
    assert store.read_response(d, second["refers_to"]).body == HTML
    third = fetch(srv, tmp_path, "/etag", conditional=False)[0]
    assert third["outcome"] == "ok"


def test_private_addresses_refused_unless_allowed(srv: Server, tmp_path: Path) -> None:
    n = len(srv.state.log)
    res = fetch(srv, tmp_path, "/ok", allow_private=False)[0]
    assert res["outcome"] == "private-address" and res["ip"] == "127.0.0.1"
    assert "--allow-private" in res["error"]
    assert len(srv.state.log) == n  # not a single byte was sent
    ok = fetch(srv, tmp_path, "/ok", allow_private=False, cidrs=("127.0.0.0/8",))[0]
    assert ok["outcome"] == "ok"


def test_dns_errors_and_invalid_urls(tmp_path: Path) -> None:
    res = run_batch(tmp_path / "D", ["http://unknown.test/", "ftp://x.test/", "http://x.test:99999/"],
                    hosts_text())
    assert [r["outcome"] for r in res] == ["dns-error", "invalid-url", "invalid-url"]


def test_connect_error(tmp_path: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    res = run_batch(tmp_path / "D", [f"http://allow.test:{port}/ok"], hosts_text(), robots=False)
    assert res[0]["outcome"] == "connect-error"


def test_lease_fields_pass_through(srv: Server, tmp_path: Path) -> None:
    lease = {"kind": "lease", "v": 1, "lease": "L1", "url": srv.url("allow.test", "/ok"),
             "host": "allow.test", "attempt": 2, "deadline": 9e9, "depth": 3, "custom": {"x": 1}}
    r = run_batch(tmp_path / "D", [lease], hosts_text())[0]
    assert r["kind"] == "fetch" and r["lease"] == "L1" and r["attempt"] == 2
    assert r["custom"] == {"x": 1} and r["depth"] == 3
    # this lease was spent on robots.txt: the page waits for the host's next turn
    assert r["outcome"] == "deferred" and "warc" not in r
    again = run_batch(tmp_path / "D", [lease], hosts_text())[0]
    assert again["outcome"] == "ok" and again["lease"] == "L1"


def test_a_redirect_past_five_in_a_row_is_stored_not_followed(srv: Server, tmp_path: Path) -> None:
    url = srv.url("allow.test", "/redirect")
    plain, fourth, sixth = run_batch(tmp_path / "D", [url, {"kind": "url", "url": url, "hops": 4},
                                                      {"kind": "url", "url": url, "hops": 5}], hosts_text())
    assert plain["outcome"] == fourth["outcome"] == "redirect" and "hops" not in plain
    assert sixth["outcome"] == "redirect-limit" and sixth["hops"] == 5 and sixth["status"] == 301
    assert sixth["location"] == srv.url("allow.test", "/ok-target") and "not followed" in sixth["error"]
    assert "warc" in sixth  # the response is archived like any other


def test_content_type_option(srv: Server, tmp_path: Path) -> None:
    r = fetch(srv, tmp_path, "/image", content_types=("*/*",))[0]
    assert r["outcome"] == "ok" and r["bytes"] > 2_000_000


def test_helpers() -> None:
    assert type_wanted("text/html; charset=utf-8", ("text/html",))
    assert type_wanted("application/rss+xml", ("application/xml",))
    assert not type_wanted("image/png", ("text/html",))
    assert type_wanted(None, ("text/html",))
    assert retry_after("120", 0) == 120
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 - 60) == 60
    assert retry_after("soon", 0) is None


def test_zstd_warc_store(srv: Server, tmp_path: Path) -> None:
    from crawl.fetch import StoreOptions

    res = by_path(fetch(srv, tmp_path, "/ok", "/gzip", store=StoreOptions(compression="zstd")))
    d = tmp_path / "D" / "warc"
    assert res["ok"]["warc"]["file"].endswith(".warc.zst")
    assert store.read_response(d, res["gzip"]["warc"]).body == HTML * 50
    for f in cdxj.warc_files(d):
        assert store.scan(f).torn_at is None
    _, n = cdxj.build(d, rescan=True)
    assert n >= 3  # robots.txt + 2 pages
