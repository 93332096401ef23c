"""XML sitemaps and sitemap indexes (sitemaps.org protocol 0.9).

A sitemap is recognised by what it is, not by what the server calls it: a
``<urlset>`` or ``<sitemapindex>`` root near the start of the body (servers
label sitemaps text/xml, application/xml, text/plain or octet-stream), also
inside a gzip file (``sitemap.xml.gz`` served without Content-Encoding).

The XML comes from the network, so the parser is locked down: no DTD
loading, no entity expansion (XXE, billion laughs), no network, no huge
trees, and recover mode so a truncated sitemap still gives its first URLs.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field

from lxml import etree

from .config import MAX_SITEMAP_URLS

# sitemaps.org: at most 50,000 URLs and 50 MiB (uncompressed) per file.
MAX_URLS = MAX_SITEMAP_URLS
MAX_BYTES = 50 << 20

_SNIFF = re.compile(rb"<(?:[A-Za-z_][\w.\-]*:)?(urlset|sitemapindex)[\s>/]")
_SNIFF_BYTES = 2048


@dataclass(slots=True)
class Entry:
    loc: str
    lastmod: str | None = None
    changefreq: str | None = None
    priority: str | None = None


@dataclass(slots=True)
class Sitemap:
    """``kind`` is "urlset" or "sitemapindex"; ``cut`` counts entries over the cap."""

    kind: str
    entries: list[Entry] = field(default_factory=list)
    cut: int = 0
    error: str | None = None


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        huge_tree=False,
        load_dtd=False,
        dtd_validation=False,
        recover=True,
        remove_comments=True,
        remove_pis=True,
    )


_PARSER = _parser()


def gunzip(body: bytes, limit: int = MAX_BYTES) -> bytes | None:
    """Inflate a gzip body up to ``limit`` bytes; None if it is not gzip.

    The cap is what keeps a gzip bomb from filling memory: the rest is cut.
    """
    if not body.startswith(b"\x1f\x8b"):
        return None
    try:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress(body, limit)
    except zlib.error:
        return None


def sniff(body: bytes) -> str | None:
    """"urlset" or "sitemapindex" if the body starts like a sitemap."""
    m = _SNIFF.search(body, 0, _SNIFF_BYTES)
    return m.group(1).decode() if m else None


def _local(tag: object) -> str:
    if not isinstance(tag, str):
        return ""  # comments and PIs have a function as their tag
    return tag.rpartition("}")[2]


def load_xml(body: bytes, what: str) -> tuple[etree._Element | None, str | None]:
    """The root of an XML document from the network, and the first error.

    Uses the locked-down parser (no DTD, no entities, no network); in
    recover mode, so a damaged document still gives what could be read.
    """
    try:
        root = etree.fromstring(body, _PARSER)
    except (etree.XMLSyntaxError, ValueError) as exc:
        return None, f"unparsable {what}: {exc}"
    if root is None:
        return None, f"unparsable {what}: no document element"
    error = None
    if len(_PARSER.error_log):
        first = _PARSER.error_log[0]
        error = f"{what} XML error at line {first.line}: {first.message}"
    return root, error


def local_name(tag: object) -> str:
    """An element's tag without its namespace ("" for comments and PIs)."""
    return _local(tag)


def parse(body: bytes, max_urls: int = MAX_URLS) -> Sitemap | None:
    """Entries of a sitemap or sitemap index; None if the body is neither.

    Never raises on content. A sitemap libxml2 can only partly read gives the
    entries it could read, with ``error`` set.
    """
    inflated = gunzip(body)
    if inflated is not None:
        body = inflated
    kind = sniff(body)
    if kind is None:
        return None
    result = Sitemap(kind)
    root, result.error = load_xml(body, "sitemap")
    if root is None:
        return result
    want = "url" if kind == "urlset" else "sitemap"
    entries = result.entries
    for item in root:
        if _local(item.tag) != want:
            continue
        if len(entries) >= max_urls:
            result.cut += 1
            continue
        fields: dict[str, str] = {}
        for child in item:
            name = _local(child.tag)
            if name in ("loc", "lastmod", "changefreq", "priority") and name not in fields:
                fields[name] = (child.text or "").strip()
        loc = fields.get("loc")
        if loc:
            entries.append(
                Entry(
                    loc,
                    fields.get("lastmod") or None,
                    fields.get("changefreq") or None,
                    fields.get("priority") or None,
                )
            )
    return result
