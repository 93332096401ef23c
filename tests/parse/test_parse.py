"""The parse stage's core: HTML pages in, link records out (crawl/parse/pages.py)."""

from __future__ import annotations

import os

import pytest
from cputime import cpu_seconds_at_most
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.canon import canonicalize
from crawl.parse import ParseConfig, parse_fetch
from crawl.parse.pages import PageResult, parse_body, parse_redirect
from crawl.parse.traps import TrapPolicy
from crawl.store import StoredResponse

PAGE = "http://a.test/dir/page.html"
HTML = [("Content-Type", "text/html")]


def parse(body: bytes | str, headers: list[tuple[str, str]] | None = None,
          parent: dict | None = None, **cfg: object) -> PageResult:
    if isinstance(body, str):
        body = body.encode()
    return parse_body(PAGE, HTML if headers is None else headers, body,
                      parent=parent, config=ParseConfig(**cfg))  # type: ignore[arg-type]


def urls(res: PageResult) -> list[str]:
    return [r["url"] for r in res.links]


def test_links_from_every_element_kind() -> None:
    res = parse("""<html><head><link rel="alternate" href="/feed">
        <link rel="stylesheet" href="/s.css"><link rel="icon" href="/i.ico">
        <meta http-equiv="refresh" content="3;url=/moved"></head><body>
        <a href="a">a</a><map><area href="/area" alt="x"></map>
        <iframe src="/if"></iframe><frameset><frame src="/fr"></frameset></body></html>""")
    got = {(r["source"], r["url"]) for r in res.links}
    assert got == {
        ("link", "http://a.test/feed"),
        ("meta-refresh", "http://a.test/moved"),
        ("a", "http://a.test/dir/a"),
        ("area", "http://a.test/area"),
        ("iframe", "http://a.test/if"),
        ("frame", "http://a.test/fr"),
    }  # stylesheets and icons are sub-resources, not pages


def test_record_fields() -> None:
    res = parse('<a href="/x?utm_source=y&b=2&a=1#frag">Hello <b>world</b>\n  again</a>',
                parent={"depth": 4, "priority": 2, "url": PAGE})
    (rec,) = res.links
    c = canonicalize("http://a.test/x?a=1&b=2")
    assert rec["kind"] == "link" and rec["v"] == 1
    assert rec["url"] == c.url and rec["fp"] == c.fp_hex and rec["host"] == "a.test"
    assert (rec["parent"], rec["depth"], rec["priority"], rec["position"]) == (PAGE, 5, 2, 0)
    assert (rec["rel"], rec["source"], rec["anchor"]) == ([], "a", "Hello world again")
    assert "trap" not in rec


def test_base_href_is_honoured_first_one_only() -> None:
    res = parse('<head><base href="http://b.test/base/"><base href="http://c.test/">'
                '</head><a href="rel">x</a><a href="/abs">y</a>')
    assert urls(res) == ["http://b.test/base/rel", "http://b.test/abs"]
    assert res.page is not None and res.page["base"] == "http://b.test/base/"


def test_relative_base_resolves_against_page() -> None:
    res = parse('<base href="../other/"><a href="x">x</a>')
    assert urls(res) == ["http://a.test/other/x"]


def test_duplicates_within_a_page_and_self_links_are_dropped() -> None:
    res = parse('<a href="/a">1</a><a href="/a#top">2</a><a href="http://A.TEST/a">3</a>'
                '<a href="">self</a><a href="#x">self</a><a href="page.html">self</a>')
    assert urls(res) == ["http://a.test/a"]
    assert res.counts["dup_in_page"] == 5


def test_rel_nofollow_is_dropped_and_counted() -> None:
    res = parse('<a rel="nofollow" href="/n">n</a><a rel="ugc" href="/u">u</a><a href="/f">f</a>',
                parent={"priority": 1})
    assert urls(res) == ["http://a.test/u", "http://a.test/f"]
    assert res.counts["nofollow_links"] == 1
    assert [r["priority"] for r in res.links] == [2, 1]  # ugc: one step lower
    kept = parse('<a rel="NoFollow external" href="/n">n</a>', follow_nofollow=True,
                 parent={"priority": 1})
    assert [(r["url"], r["priority"], r["rel"]) for r in kept.links] == [
        ("http://a.test/n", 2, ["nofollow", "external"])]


@pytest.mark.parametrize("meta", ["nofollow", "NOINDEX, NOFOLLOW", "none"])
def test_meta_robots_nofollow_suppresses_links_but_not_the_canonical(meta: str) -> None:
    res = parse(f'<meta name="robots" content="{meta}"><link rel=canonical href="/c">'
                '<a href="/a">a</a><a href="/b">b</a>')
    assert urls(res) == ["http://a.test/c"]
    assert res.counts["nofollow_links"] == 2
    assert res.page is not None and res.page["nofollow"] is True


def test_meta_robots_for_our_token_and_not_for_others() -> None:
    assert urls(parse('<meta name="crawl" content="nofollow"><a href="/a">a</a>')) == []
    assert urls(parse('<meta name="otherbot" content="nofollow"><a href="/a">a</a>')) != []
    mine = parse('<meta name="mybot" content="nofollow"><a href="/a">a</a>', agent="mybot")
    assert urls(mine) == []


def test_noindex_is_a_page_property_not_a_link_filter() -> None:
    res = parse('<meta name="robots" content="noindex"><a href="/a">a</a>')
    assert urls(res) == ["http://a.test/a"]
    assert res.page is not None and res.page["noindex"] is True and res.page["nofollow"] is False
    assert res.counts["noindex_pages"] == 1


@pytest.mark.parametrize(
    ("values", "nofollow", "noindex"),
    [
        (["nofollow"], True, False),
        (["noindex"], False, True),
        (["none"], True, True),
        (["otherbot: nofollow"], False, False),
        (["crawl: nofollow"], True, False),
        (["otherbot: noindex, crawl: nofollow"], True, False),
        (["unavailable_after: 2030-01-01", "noindex"], False, True),
    ],
)
def test_x_robots_tag(values: list[str], nofollow: bool, noindex: bool) -> None:
    headers = HTML + [("X-Robots-Tag", v) for v in values]
    res = parse('<a href="/a">a</a>', headers=headers)
    assert res.page is not None
    assert (res.page["nofollow"], res.page["noindex"]) == (nofollow, noindex)
    assert (urls(res) == []) is nofollow


def test_canonical_is_recorded_and_enqueued_at_the_same_depth() -> None:
    res = parse('<link rel="canonical" href="/canon?utm_medium=x"><a href="/a">a</a>',
                parent={"depth": 3, "priority": 2})
    canon = res.links[0]
    assert (canon["url"], canon["rel"], canon["depth"], canon["priority"]) == (
        "http://a.test/canon", ["canonical"], 3, 2)
    assert res.page is not None and res.page["canonical"] == "http://a.test/canon"
    hdr = parse("<p>no links</p>", headers=HTML + [
        ("Link", '<https://a.test/style.css>; rel="preload", <http://a.test/c2>; rel="canonical"')])
    assert urls(hdr) == ["http://a.test/c2"]


def test_invalid_hrefs_are_counted_and_rejected_only_on_request() -> None:
    body = ('<a href="http://[::1">v6</a><a href="http://exa mple.com/">sp</a>'
            '<a href="mailto:x@y.z">m</a><a href="javascript:void(0)">j</a>'
            f'<a href="/{"x" * 3000}">long</a><a href="/ok">ok</a>')
    res = parse(body)
    assert urls(res) == ["http://a.test/ok"]
    assert res.counts["invalid_hrefs"] == 3 and res.counts["not_http"] == 2
    assert res.rejects == []
    res = parse(body, rejects=True)
    assert [r["kind"] for r in res.rejects] == ["reject"] * 3
    errors = [r["error"].split(":")[0] for r in res.rejects]
    assert errors[-1] == "too-long"
    assert all(r["parent"] == PAGE and r["source"] == "a" for r in res.rejects)


def test_max_url_length_is_configurable() -> None:
    cfg = ParseConfig(rejects=True).with_max_url_length(40)
    res = parse_body(PAGE, HTML, b'<a href="/short">s</a><a href="/' + b"y" * 50 + b'">l</a>',
                     config=cfg)
    assert urls(res) == ["http://a.test/short"]
    assert res.rejects[0]["error"].startswith("too-long")


def test_ten_thousand_link_cap_counts_the_cut() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a>' for i in range(10_050))
    res = parse(body)
    assert len(res.links) == 10_000
    assert res.counts["links_cut"] == 50
    assert res.page is not None and res.page["cut"] == 50 and res.page["links"] == 10_000
    assert res.links[-1]["url"] == "http://a.test/p9999"
    small = parse(body, max_links=10)
    assert len(small.links) == 10 and small.counts["links_cut"] == 10_040


def test_the_cut_counts_every_kind_of_link_past_the_cap_and_nothing_else() -> None:
    mixed = ('<a href="/a{i}">a</a><a name="x{i}">no href</a><area href="/m{i}" alt=m>'
             '<iframe src="/f{i}"></iframe><iframe></iframe><link rel="next" href="/n{i}">'
             '<link rel="stylesheet" href="/s{i}.css"><link rel="canonical" href="/c{i}">'
             '<meta http-equiv="refresh" content="0; url=/r{i}"><meta name="robots" content="all">'
             '<a href="mailto:x{i}@a.test">mail</a><a href="/a{i}">again</a>')
    body = '<link rel="canonical" href="/canon">' + "".join(mixed.format(i=i) for i in range(40))
    whole = parse(body, max_links=100_000)
    made = whole.counts["links"] + whole.counts["not_http"] + whole.counts["dup_in_page"]
    for cap in (1, 7, 50, 150):
        res = parse(body, max_links=cap)
        assert len(res.links) == cap
        assert res.links == whole.links[:cap]
        # the cut is every link (as written, before any filter) not looked at
        looked = sum(res.counts.get(k, 0) for k in ("links", "not_http", "dup_in_page"))
        assert res.counts["links_cut"] == made - looked, cap


def test_priority_hints() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a>' for i in range(102))
    res = parse(body, parent={"priority": 3})
    assert [r["priority"] for r in res.links[98:]] == [3, 3, 4, 4]  # far down the page: lower
    dup = parse('<a href="/a">a</a>', parent={"priority": 3, "duplicate_of": "http://a.test/o"})
    assert dup.links[0]["priority"] == 4  # a near-duplicate's outlinks matter less
    low = parse('<a rel="ugc" href="/cal/2026/05/">a</a>',
                parent={"priority": 8, "duplicate_of": "x"}, traps=TrapPolicy(year=2026))
    assert low.links[0]["priority"] == 9  # capped at the lowest priority


def test_traps_demote_or_drop_with_reason() -> None:
    res = parse('<a href="/cal/2026/05/">cal</a><a href="/a/b/a/b">loop</a>'
                '<a href="/s?a=1&b=2&c=3&d=4&e=5&f=6">facets</a>',
                parent={"priority": 1}, rejects=True, traps=TrapPolicy(year=2026))
    assert [(r["url"], r["trap"], r["priority"]) for r in res.links] == [
        ("http://a.test/cal/2026/05/", "calendar", 2),
        ("http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6", "query-params>5", 2),
    ]
    assert res.rejects[0]["error"] == "trap: repeated-segments"
    assert res.counts["trap_dropped"] == 1 and res.counts["trap_demoted"] == 2
    off = parse('<a href="/a/b/a/b">loop</a>', traps=TrapPolicy(mode="off"))
    assert urls(off) == ["http://a.test/a/b/a/b"]


def test_anchor_text_is_collapsed_capped_and_falls_back_to_alt() -> None:
    res = parse(f'<a href="/1">{"word " * 100}</a><a href="/2"><img src="x.png" alt="Logo"></a>'
                '<a href="/3" title="Titled"> </a>', anchor_chars=20)
    assert [r.get("anchor") for r in res.links] == ["word word word word", "Logo", "Titled"]


def test_malformed_html_still_yields_links() -> None:
    body = ('<html><body><div><p><a href="/one">one<a href=/two>two</p></div>'
            '<table><tr><td><a href="/three"</td></tr><a href=\'/four\' <b>x</i>'
            '<!-- <a href="/commented"> --><a href="/five"><<<>>></a><a href= "/six" >')
    got = urls(parse(body))
    assert {"http://a.test/one", "http://a.test/two", "http://a.test/five",
            "http://a.test/six"} <= set(got)
    assert "http://a.test/commented" not in got


@pytest.mark.parametrize("end", ["</body></html>", "</HTML>", "</Html >"])
def test_markup_after_the_end_of_html_is_not_lost(end: str) -> None:
    # libxml2's tree builder drops it; browsers (and link authors) do not.
    res = parse(f'<html><body><a href="/a">a</a>{end}\n<a href="/after">b <i>c</i></a>'
                '<!DOCTYPE html><html><body><a href="/glued">g</a></body></html>\n')
    assert urls(res) == ["http://a.test/a", "http://a.test/after", "http://a.test/glued"]
    assert res.links[1]["anchor"] == "b c"


def test_binary_junk_never_crashes() -> None:
    rng = os.urandom  # fresh junk each run; the property is "no exception"
    for n in (1, 7, 100, 5000, 70000):
        for ctype in ("text/html", "application/octet-stream", "image/png", ""):
            res = parse_body(PAGE, [("Content-Type", ctype)], rng(n))
            assert res.page is not None
    res = parse_body(PAGE, HTML, b"\x00\xff" * 1000 + b'<a href="/after">x</a>')
    assert urls(res) == ["http://a.test/after"]


def test_empty_and_non_html_bodies() -> None:
    res = parse(b"")
    assert res.links == [] and res.page is not None and res.page["error"] == "empty document"
    img = parse_body(PAGE, [("Content-Type", "image/png")], b'<a href="/x">')
    assert img.links == [] and img.counts == {"pages_other": 1}
    sniffed = parse_body(PAGE, [], b'<!DOCTYPE html><a href="/x">x</a>')
    assert urls(sniffed) == ["http://a.test/x"]


def test_charset_from_meta_resolves_non_ascii_hrefs() -> None:
    body = '<meta charset="windows-1251"><a href="/путь">ссылка</a>'.encode("cp1251")
    res = parse(body)
    assert urls(res) == ["http://a.test/%D0%BF%D1%83%D1%82%D1%8C"]
    assert res.links[0]["anchor"] == "ссылка"
    assert res.page is not None and res.page["charset"] == "cp1251"


def test_page_event_summarises_the_page() -> None:
    res = parse_body(PAGE, HTML, b"<title> The  Title </title><a href='/a'>a</a>",
                     parent={"fetched_at": 1234.5})
    ev = res.page
    assert ev is not None
    assert (ev["kind"], ev["event"], ev["url"], ev["ts"]) == ("event", "page", PAGE, 1234.5)
    assert (ev["title"], ev["links"], ev["type"], ev["charset"]) == ("The Title", 1, "html", "utf-8")


def test_parse_fetch_dispatches_by_outcome() -> None:
    stored = StoredResponse(url=PAGE, status=200, headers=HTML, body=b'<a href="/a">a</a>',
                            content_type="text/html")
    ok = {"kind": "fetch", "url": PAGE, "outcome": "ok", "warc": {"file": "f", "offset": 0,
                                                                   "length": 1}}
    assert urls(parse_fetch(ok, lambda rec: stored)) == ["http://a.test/a"]

    redirect = {"kind": "fetch", "url": PAGE, "outcome": "redirect", "status": 301,
                "location": "/new#x", "depth": 2, "priority": 1}
    (link,) = parse_fetch(redirect, lambda rec: stored).links
    assert (link["url"], link["rel"], link["source"], link["depth"], link["parent"]) == (
        "http://a.test/new", ["redirect"], "redirect", 2, PAGE)

    for outcome in ("http-error", "timeout", "robots-disallowed", "not-modified"):
        res = parse_fetch({"url": PAGE, "outcome": outcome}, lambda rec: stored)
        assert res.links == [] and res.counts == {"not_parsed": 1}
    assert parse_fetch({"url": PAGE, "outcome": "ok"}, lambda r: stored).counts == {"no_body": 1}

    # a 304 is parsed from the copy it refers to (a retry after a crash must not lose links)
    ptr = {"file": "old.warc.gz", "offset": 7, "length": 9}
    read_ptrs: list[dict] = []
    res = parse_fetch({"url": PAGE, "outcome": "not-modified", "refers_to": ptr,
                       "warc": {"file": "new.warc.gz", "offset": 0, "length": 1}},
                      lambda rec: read_ptrs.append(rec["warc"]) or stored)
    assert urls(res) == ["http://a.test/a"] and read_ptrs == [ptr]


def test_unreadable_body_is_counted_not_fatal() -> None:
    def broken(rec: dict) -> StoredResponse:
        raise OSError("No such file")

    rec = {"url": PAGE, "outcome": "ok", "warc": {"file": "gone.warc.gz", "offset": 0, "length": 9}}
    res = parse_fetch(rec, broken, ParseConfig(rejects=True))
    assert res.counts == {"unreadable": 1} and res.links == []
    assert res.error and "No such file" in res.error
    assert res.rejects[0]["error"].startswith("unreadable body")


def test_redirect_without_location() -> None:
    res = parse_redirect({"url": PAGE, "outcome": "redirect"}, ParseConfig(rejects=True))
    assert res.links == [] and res.counts["invalid_hrefs"] == 1
    assert res.rejects[0]["error"] == "redirect without a location"


def test_redirect_hops_count_up_and_stop_at_the_limit() -> None:
    """A redirect keeps its depth, so the hop count is what ends a chain (records.MAX_REDIRECTS)."""
    from crawl.core import records

    stored = StoredResponse(url=PAGE, status=200, headers=HTML,
                            body=b'<a href="/a">a</a><link rel=canonical href="/c">', content_type="text/html")
    ok = {"kind": "fetch", "url": PAGE, "outcome": "ok", "hops": 3, "warc": {"file": "f", "offset": 0, "length": 1}}
    # links of a page start again at 0: the field is absent, whatever the page's own hops
    assert all("hops" not in r for r in parse_fetch(ok, lambda rec: stored).links)
    hop, step = {"kind": "fetch", "url": PAGE, "outcome": "redirect", "status": 302, "depth": 1}, 0
    while True:
        res = parse_redirect({**hop, "location": f"/r{step}"}, ParseConfig(rejects=True))
        if not res.links:
            break
        (link,) = res.links
        assert link["hops"] == step + 1 and link["depth"] == 1
        hop, step = {**hop, "url": link["url"], "hops": link["hops"]}, step + 1
    assert step == records.MAX_REDIRECTS == 5  # five redirects followed, the sixth is not
    assert res.counts == {"redirects": 1, "redirect_limit": 1}
    assert res.rejects[0]["error"].startswith("redirect-limit") and res.rejects[0]["input"] == "/r5"
    # fetch's own verdict is honoured too (a redirect-limit record still carries its location)
    res = parse_fetch({"url": PAGE, "outcome": "redirect-limit", "status": 301, "location": "/x", "hops": 5},
                      lambda rec: stored)
    assert res.links == [] and res.counts["redirect_limit"] == 1


html_bits = st.sampled_from([
    "<a href='", "'>", "</a>", "<base href=", "<link rel=canonical href=", "<meta name=robots content=",
    "nofollow", "http://", "//x.test/", "../", "?", "#", "&amp;", "\x00", "\xe9", "<", ">", '"',
    "<iframe src=", "<area href=", "javascript:", " ", "/", "%", "[", "]", ":", "<title>",
])


@settings(max_examples=150, deadline=None)
@given(st.lists(html_bits, max_size=40))
def test_any_markup_gives_canonical_http_links(parts: list[str]) -> None:
    res = parse("".join(parts), rejects=True)
    seen = set()
    for rec in res.links:
        assert rec["url"].startswith(("http://", "https://"))
        assert canonicalize(rec["url"]).url == rec["url"]
        assert rec["fp"] not in seen
        seen.add(rec["fp"])
    assert res.page is not None


def test_odd_parent_fields_do_not_crash() -> None:
    for depth, priority in (("deep", "high"), (None, None), (True, -3), (2.5, [1])):
        res = parse('<a href="/a">a</a>', parent={"depth": depth, "priority": priority})
        assert (res.links[0]["depth"], res.links[0]["priority"]) == (1, 1)


def test_fetch_record_without_url_string() -> None:
    res = parse_fetch({"kind": "fetch", "url": 42, "outcome": "ok"}, lambda rec: None)  # type: ignore[arg-type,return-value]
    assert res.counts == {"bad_records": 1} and res.error and "URL string" in res.error


def test_a_failure_inside_one_page_is_that_pages_alone() -> None:
    # headers that are not (name, value) pairs: the parse fails, the stage goes on
    broken = StoredResponse(url=PAGE, status=200, headers=[("Content-Type",)],  # type: ignore[list-item]
                            body=b"<a href=/a>", content_type="text/html")
    rec = {"url": PAGE, "outcome": "ok", "warc": {"file": "f", "offset": 0, "length": 1}}
    res = parse_fetch(rec, lambda r: broken)
    assert res.counts == {"parse_failures": 1} and res.links == []
    assert res.error and res.error.startswith(PAGE)


@pytest.mark.parametrize(
    ("content", "target"),
    [
        ("3;url=/moved", "/moved"),
        ("5; URL='/x'", "/x"),
        (' 2 ; url = "http://x.test/" ', "http://x.test/"),
        ("1, /q", "/q"),
        ("url=/a", "/a"),
        ("0; url.html", "url.html"),  # "url" not followed by "=" is part of the URL
        ("0", None),
        ("0;  ", None),
    ],
)
def test_meta_refresh_targets(content: str, target: str | None) -> None:
    from crawl.parse.links import refresh_target

    assert refresh_target(content) == target


def test_hostile_attribute_and_header_values_stay_linear() -> None:
    # Both were once regexes that backtracked quadratically on white space.
    with cpu_seconds_at_most(10.0):
        body = f'<meta http-equiv="refresh" content="0; url=a{" " * 200_000}b"><a href="/x">x</a>'
        assert urls(parse(body)) == ["http://a.test/dir/a", "http://a.test/x"]
        headers = HTML + [("Link", "<" + " " * 200_000), ("Link", "<a>;" * 50_000)]
        assert urls(parse('<a href="/x">x</a>', headers=headers)) == ["http://a.test/x"]


def test_deep_tag_soup_keeps_its_links_and_says_where_it_gave_up() -> None:
    # 300 unclosed <div>s: past libxml2's default depth limit of 256
    soup = "".join(f'<a href="/{i}"><div>item {i} ' for i in range(300))
    res = parse(soup)
    assert len(res.links) == 300 and res.page is not None and res.page.get("error") is None
    abyss = parse("".join(f'<a href="/{i}"><div>' for i in range(3000)))
    assert 1000 <= len(abyss.links) < 3000
    assert abyss.page is not None and "nested deeper" in abyss.page["error"]
    assert abyss.counts["parse_errors"] == 1
