"""XML sitemaps and sitemap indexes (crawl/parse/sitemap.py and parse_body)."""

from __future__ import annotations

import gzip

from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.parse import ParseConfig, sitemap
from crawl.parse.pages import parse_body

URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://a.test/one</loc><lastmod>2026-01-02</lastmod><changefreq>daily</changefreq></url>
  <url><loc> http://a.test/two?utm_source=x </loc></url>
  <url><lastmod>2026-01-02</lastmod></url>
  <url><loc>http://a.test/one</loc></url>
  <url><loc>javascript:alert(1)</loc></url>
</urlset>"""

INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>http://a.test/sitemap-1.xml</loc><lastmod>2026-03-01T10:00:00Z</lastmod></sitemap>
  <sitemap><loc>http://a.test/sitemap-2.xml.gz</loc></sitemap>
</sitemapindex>"""


def test_urlset_entries_become_links_with_lastmod() -> None:
    res = parse_body("http://a.test/sitemap.xml", [("Content-Type", "application/xml")], URLSET,
                     parent={"depth": 0, "priority": 0})
    got = [(r["url"], r.get("lastmod"), r["source"], r["depth"], r["priority"]) for r in res.links]
    assert got == [
        ("http://a.test/one", "2026-01-02", "sitemap", 1, 0),
        ("http://a.test/two", None, "sitemap", 1, 0),  # canonicalised, white space stripped
    ]
    assert res.links[0]["changefreq"] == "daily"
    assert res.counts["dup_in_page"] == 1 and res.counts["not_http"] == 1
    assert res.page is not None and res.page["type"] == "urlset"


def test_sitemap_index_entries_are_marked() -> None:
    res = parse_body("http://a.test/sitemap_index.xml", [("Content-Type", "text/xml")], INDEX)
    assert [r["source"] for r in res.links] == ["sitemap-index", "sitemap-index"]
    assert res.links[0]["lastmod"] == "2026-03-01T10:00:00Z"
    assert res.page is not None and res.page["type"] == "sitemapindex"


def test_detected_by_content_not_by_label() -> None:
    # served as text/plain or octet-stream, still a sitemap; gzip without Content-Encoding too
    for ctype in ("text/plain", "application/octet-stream", ""):
        assert len(parse_body("http://a.test/s", [("Content-Type", ctype)], URLSET).links) == 2
    gz = gzip.compress(URLSET)
    res = parse_body("http://a.test/sitemap.xml.gz", [("Content-Type", "application/x-gzip")], gz)
    assert len(res.links) == 2


def test_no_namespace_and_prefixed_namespace() -> None:
    plain = b"<urlset><url><loc>http://a.test/p</loc></url></urlset>"
    assert [e.loc for e in sitemap.parse(plain).entries] == ["http://a.test/p"]  # type: ignore[union-attr]
    prefixed = (b'<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">'
                b"<sm:url><sm:loc>http://a.test/q</sm:loc></sm:url></sm:urlset>")
    assert [e.loc for e in sitemap.parse(prefixed).entries] == ["http://a.test/q"]  # type: ignore[union-attr]


def test_cap_counts_the_cut() -> None:
    body = b"<urlset>" + b"".join(
        b"<url><loc>http://a.test/%d</loc></url>" % i for i in range(120)) + b"</urlset>"
    res = parse_body("http://a.test/s.xml", [], body, config=ParseConfig(max_sitemap_urls=100))
    assert len(res.links) == 100
    assert res.counts["links_cut"] == 20
    assert res.page is not None and res.page["cut"] == 20


def test_truncated_sitemap_gives_what_it_has() -> None:
    body = URLSET[: URLSET.index(b"<url><loc> http")]  # cut mid-document
    sm = sitemap.parse(body)
    assert sm is not None and [e.loc for e in sm.entries] == ["http://a.test/one"]
    assert sm.error


def test_xxe_and_entity_bombs_are_not_expanded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xxe = (f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file://{secret}">]>'
           f"<urlset><url><loc>http://a.test/&x;</loc></url></urlset>").encode()
    sm = sitemap.parse(xxe)
    assert sm is not None
    assert all("TOP-SECRET" not in e.loc for e in sm.entries)
    lol = (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
           b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">'
           b'<!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;"><!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">'
           b'<!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;"><!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">]>'
           b"<urlset><url><loc>http://a.test/&g;</loc></url></urlset>")
    sm = sitemap.parse(lol)
    assert sm is not None
    assert all(len(e.loc) < 1000 for e in sm.entries)


def test_gzip_bomb_is_capped() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (8 << 20))
    out = sitemap.gunzip(bomb, limit=1 << 20)
    assert out is not None and len(out) == 1 << 20
    assert sitemap.gunzip(b"not gzip") is None
    assert sitemap.gunzip(b"\x1f\x8bbroken") is None


def test_html_is_not_a_sitemap() -> None:
    assert sitemap.parse(b"<html><body><a href=/urlset>x</a></body></html>") is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "<url>", "</url>", "<loc>", "</loc>", "http://a.test/", "x", "<lastmod>", "2026", "</lastmod>",
    "<sitemap>", "<!DOCTYPE x [<!ENTITY e 'y'>]>", "&e;", "&amp;", "\x00", "\xff", "<", "]]>",
    "<![CDATA[", "<?xml version='1.0'?>", " ", "é",
]), max_size=30), st.sampled_from(["<urlset>", "<sitemapindex>"]))
def test_any_sitemap_like_body_never_raises(parts: list[str], root: str) -> None:
    body = (root + "".join(parts)).encode("utf-8", "surrogateescape")
    res = parse_body("http://a.test/sitemap.xml", [("Content-Type", "text/xml")], body)
    assert res.page is not None and res.page["type"] in ("urlset", "sitemapindex")
    for rec in res.links:
        assert rec["url"].startswith("http")


def test_sitemap_priority_travels_and_moves_the_hint() -> None:
    body = b"""<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc>http://a.test/top</loc><priority>1.0</priority><changefreq>hourly</changefreq></url>
      <url><loc>http://a.test/mid</loc><priority>0.5</priority></url>
      <url><loc>http://a.test/low</loc><priority>0.1</priority></url>
      <url><loc>http://a.test/none</loc></url>
      <url><loc>http://a.test/bad</loc><priority>high</priority></url>
      <url><loc>http://a.test/nan</loc><priority>nan</priority></url>
    </urlset>"""
    res = parse_body("http://a.test/sitemap.xml", [("Content-Type", "text/xml")], body,
                     parent={"depth": 0, "priority": 1})
    got = {r["url"].rsplit("/", 1)[1]: (r["priority"], r.get("sitemap_priority"))
           for r in res.links}
    assert got == {"top": (0, 1.0), "mid": (1, 0.5), "low": (2, 0.1), "none": (1, None),
                   "bad": (1, None), "nan": (1, None)}
    assert res.links[0]["changefreq"] == "hourly"
    assert res.counts["bad_sitemap_priority"] == 2
    # the hint never leaves 0 .. 9
    top = parse_body("http://a.test/sitemap.xml", [("Content-Type", "text/xml")], body,
                     parent={"depth": 0, "priority": 0})
    assert top.links[0]["priority"] == 0
