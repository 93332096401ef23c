"""RSS and Atom feeds: the entries a site says are new, with their dates.

A feed is the cheapest change signal a site offers: its entries are the
pages that changed, newest first. Like sitemaps, feeds are recognised by
their root element (``<rss>``, ``<feed>`` of Atom, RSS 1.0's ``<rdf:RDF>``)
whatever the Content-Type, and read with the same locked-down XML parser.

Entries come back as :class:`crawl.parse.sitemap.Entry` with the entry's date in
``lastmod`` (ISO 8601; RSS's RFC 822 dates are converted).
"""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

from . import sitemap
from .sitemap import Entry, Sitemap, local_name

_SNIFF = re.compile(rb"<(?:[A-Za-z_][\w.\-]*:)?(rss|feed|RDF)[\s>/]")
_SNIFF_BYTES = 2048


def _rfc822_to_iso(value: str) -> str | None:
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _rss_item(item: object) -> Entry | None:
    link = guid = date = None
    permalink = True
    for child in item:  # type: ignore[attr-defined]
        name = local_name(child.tag)
        if name == "link" and link is None:
            link = (child.text or "").strip() or None
        elif name == "guid" and guid is None:
            guid = (child.text or "").strip() or None
            permalink = (child.get("isPermaLink") or "true").lower() != "false"
        elif name in ("pubDate", "date", "updated") and date is None:
            text = (child.text or "").strip()
            date = (_rfc822_to_iso(text) if name == "pubDate" else text) or None
    loc = link or (guid if permalink else None)
    return Entry(loc, date) if loc else None


def _atom_entry(entry: object) -> Entry | None:
    href = date = None
    for child in entry:  # type: ignore[attr-defined]
        name = local_name(child.tag)
        if name == "link" and href is None:
            if (child.get("rel") or "alternate") == "alternate" and child.get("href"):
                href = child.get("href").strip()
        elif name in ("updated", "published") and date is None:
            date = (child.text or "").strip() or None
    return Entry(href, date) if href else None


def parse(body: bytes, max_urls: int = sitemap.MAX_URLS) -> Sitemap | None:
    """Entries of an RSS (0.9x, 1.0, 2.0) or Atom feed; None if the body is neither.

    ``kind`` is "rss" or "atom". Never raises on content.
    """
    inflated = sitemap.gunzip(body)
    if inflated is not None:
        body = inflated
    m = _SNIFF.search(body, 0, _SNIFF_BYTES)
    if m is None:
        return None
    root, error = sitemap.load_xml(body, "feed")
    if root is None:
        return Sitemap("rss" if m.group(1) != b"feed" else "atom", error=error)
    top = local_name(root.tag)
    if top not in ("rss", "RDF", "feed"):
        return None
    atom = top == "feed"
    result = Sitemap("atom" if atom else "rss", error=error)
    for el in root.iter("{*}entry" if atom else "{*}item"):
        if len(result.entries) >= max_urls:
            result.cut += 1
            continue
        e = _atom_entry(el) if atom else _rss_item(el)
        if e is not None:
            result.entries.append(e)
    return result
