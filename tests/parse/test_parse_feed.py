"""RSS and Atom feeds as link sources (crawl/parse/feed.py through parse_body)."""

from __future__ import annotations

import gzip

from crawl.parse import ParseConfig, feed
from crawl.parse.pages import parse_body

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>
<link>http://a.test/</link>
<item><title>One</title><link>http://a.test/one?utm_source=rss</link>
      <pubDate>Wed, 10 Jun 2026 04:00:00 GMT</pubDate></item>
<item><guid>http://a.test/two</guid><pubDate>not a date</pubDate></item>
<item><guid isPermaLink="false">tag:a.test,2026:3</guid></item>
</channel></rss>"""

ATOM = b"""<feed xmlns="http://www.w3.org/2005/Atom"><title>x</title><link href="http://a.test/"/>
<entry><link rel="self" href="/self"/><link href="/e1"/><updated>2026-01-01T00:00:00Z</updated></entry>
<entry><link rel="alternate" type="text/html" href="http://a.test/e2"/>
       <published>2025-12-31</published></entry>
<entry><title>no link</title></entry>
</feed>"""

RDF = b"""<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
  xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><link>http://a.test/</link></channel>
<item rdf:about="http://a.test/r1"><link>http://a.test/r1</link><dc:date>2026-02-02</dc:date></item>
</rdf:RDF>"""


def links_of(body: bytes, ctype: str = "application/rss+xml", **cfg: object) -> list[tuple]:
    res = parse_body("http://a.test/feed.xml", [("Content-Type", ctype)], body,
                     parent={"priority": 1}, config=ParseConfig(**cfg))  # type: ignore[arg-type]
    return [(r["url"], r.get("lastmod"), r["source"], r["priority"]) for r in res.links]


def test_rss_items_with_dates_in_iso_form() -> None:
    assert links_of(RSS) == [
        ("http://a.test/one", "2026-06-10T04:00:00+00:00", "feed", 1),
        ("http://a.test/two", None, "feed", 1),  # an unreadable date is left out
    ]  # a guid that is not a permalink is no URL


def test_atom_entries_resolve_relative_links_and_skip_self() -> None:
    assert links_of(ATOM, "application/atom+xml") == [
        ("http://a.test/e1", "2026-01-01T00:00:00Z", "feed", 1),
        ("http://a.test/e2", "2025-12-31", "feed", 1),
    ]


def test_rss_1_0() -> None:
    assert links_of(RDF, "application/rdf+xml") == [("http://a.test/r1", "2026-02-02", "feed", 1)]


def test_detected_whatever_the_label_and_gzip() -> None:
    assert len(links_of(RSS, "text/plain")) == 2
    assert len(links_of(gzip.compress(ATOM), "application/octet-stream")) == 2


def test_page_event_and_counters() -> None:
    res = parse_body("http://a.test/feed.xml", [], RSS)
    assert res.page is not None and res.page["type"] == "rss"
    assert res.counts["pages_feed"] == 1 and "pages_sitemap" not in res.counts


def test_cap_and_damage() -> None:
    body = b"<rss><channel>" + b"".join(
        b"<item><link>http://a.test/%d</link></item>" % i for i in range(30)) + b"</channel></rss>"
    res = parse_body("http://a.test/f", [], body, config=ParseConfig(max_sitemap_urls=10))
    assert len(res.links) == 10 and res.counts["links_cut"] == 20
    truncated = feed.parse(RSS[: RSS.index(b"<item><guid>")])
    assert truncated is not None and [e.loc for e in truncated.entries] == [
        "http://a.test/one?utm_source=rss"]
    assert truncated.error


def test_html_is_not_a_feed() -> None:
    assert feed.parse(b"<html><body><p>feed me</p><feed>") is None
    assert feed.parse(b"<feedback>nope</feedback>") is None
