"""Visible text of an HTML page, without boilerplate, in blocks.

Near-duplicate detection only works on what a reader sees as *the page*:
navigation, headers, footers, sidebars, scripts and styles change between
the print, mobile and tracking versions of one article while the article
stays the same, and a rotating advert would move every byte-level hash. So
those elements are cut (``BOILERPLATE_TAGS``), and the rest is returned as
blocks (paragraphs, list items, headings, cells) so that ``crawl dedupe`` can
also drop blocks it has seen repeated across many pages of one host.

One parse serves both the text and the ``<link rel=canonical>`` a page
declares (:func:`analyse`); ``crawl parse`` may import :func:`visible_text`
and :func:`canonical_link`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urljoin

from lxml import etree

BOILERPLATE_TAGS = (
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside",
    "svg", "iframe", "form", "button", "select", "textarea", "object", "embed", "canvas",
)
BLOCK_TAGS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
    "td", "th", "tr", "table", "pre", "blockquote", "section", "article", "main",
    "figcaption", "figure", "address", "br", "hr", "title", "caption", "summary", "details",
)
_SPACE_RE = re.compile(r"\s+")
_MAX_BYTES = 8 << 20  # parse at most 8 MiB of a page: enough text to fingerprint it


@dataclass
class Doc:
    """What dedupe needs from one page."""

    blocks: list[str] = field(default_factory=list)
    canonical: str | None = None
    title: str = ""
    error: str | None = None

    @property
    def text(self) -> str:
        return " ".join(self.blocks)


_PARSERS: dict[str | None, etree.HTMLParser] = {}


def _parser(encoding: str | None) -> etree.HTMLParser:
    """One parser per encoding, reused (building one costs more than a small parse).

    ``etree.HTMLParser``, not ``lxml.html``'s: the latter calls back into
    Python for every element to pick its class, a third of the parse time.
    """
    p = _PARSERS.get(encoding)
    if p is None:
        if len(_PARSERS) > 32:
            _PARSERS.clear()
        p = _PARSERS[encoding] = etree.HTMLParser(
            encoding=encoding, remove_comments=True, remove_pis=True, recover=True,
            no_network=True, huge_tree=False)
    return p


def _parse(body: bytes, encoding: str | None) -> etree._Element | None:
    try:
        return etree.fromstring(body[:_MAX_BYTES], _parser(encoding))
    except (etree.ParserError, etree.XMLSyntaxError, ValueError, LookupError):
        if encoding is not None:  # a bogus charset label: let lxml guess
            return _parse(body, None)
        return None


_CONTROL = bytes(c for c in range(32) if c not in b"\t\n\r\f") + b"\x7f"


def _looks_binary(head: bytes) -> bool:
    """NULs or many control bytes: an image, an archive, junk. UTF-16 has a BOM."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    if b"\0" in head:
        return True
    return len(head) - len(head.translate(None, _CONTROL)) > len(head) // 20


def analyse(body: bytes, encoding: str | None = None, base_url: str | None = None) -> Doc:
    """Parse once; return the boilerplate-free text blocks and the canonical link.

    Never raises on content: binary junk or an empty body gives a Doc with
    no blocks and ``error`` saying why.
    """
    if not body.strip():
        return Doc(error="empty body")
    if _looks_binary(body[:1024]):
        return Doc(error="binary content, not HTML")
    root = _parse(body, encoding)
    if root is None:
        return Doc(error="no HTML document could be parsed")
    doc = Doc(canonical=canonical_link(root, base_url))
    title = root.find(".//title")
    if title is not None and title.text:
        doc.title = _SPACE_RE.sub(" ", title.text).strip()
    etree.strip_elements(root, *BOILERPLATE_TAGS, "head", with_tail=False)
    # mark block boundaries with newlines, then read all text in one C pass
    for el in root.iter(*BLOCK_TAGS):
        el.tail = "\n" + el.tail if el.tail else "\n"
        el.text = "\n" + el.text if el.text else "\n"
    text = "".join(root.itertext())
    doc.blocks = list(filter(None, map(" ".join, map(str.split, text.split("\n")))))
    return doc


def visible_text(html: bytes, encoding: str | None = None) -> str:
    """The text a reader sees as the page, boilerplate removed, one line."""
    return analyse(html, encoding).text


def canonical_link(html: bytes | etree._Element, base_url: str | None = None) -> str | None:
    """The absolute URL of ``<link rel="canonical">``, or None.

    Only the first such link counts (as search engines do); a relative href
    is resolved against ``base_url``.
    """
    root = html if isinstance(html, etree._Element) else _parse(html, None)
    if root is None:
        return None
    for link in root.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        href = (link.get("href") or "").strip()
        if "canonical" in rel and href:
            return urljoin(base_url, href) if base_url else href
    return None


def words(text: str) -> list[bytes]:
    """Lowercase UTF-8 tokens split on white space, punctuation kept.

    Bytes, because the shingles are hashed as bytes: encoding the text once
    beats encoding every shingle. ``str.lower``, ``encode`` and
    ``bytes.split`` each run once per document, in C; punctuation stuck to a
    word is the same in every copy of a text, so it costs no recall.
    """
    return text.lower().encode("utf-8", "replace").split()


def shingles(tokens: list[bytes], n: int = 4) -> list[bytes]:
    """Overlapping ``n``-word shingles; a text shorter than ``n`` is one shingle.

    Shingles, not single words: word frequencies cannot tell a page from a
    reshuffling of the same page.
    """
    if len(tokens) < n:
        return [b" ".join(tokens)] if tokens else []
    return list(map(b" ".join, zip(*(tokens[i:] for i in range(n)), strict=False)))
