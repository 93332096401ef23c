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

The text stays UTF-8 bytes from lxml to the hash: libxml2 serialises the
cleaned tree as text in one C call (``tostring(method="text")``), block
boundaries are newlines written into the tails around block elements
(short strings, unlike the paragraphs themselves), and :func:`fold` lower-
cases it for :func:`crawl.simhash.word_hashes`, which cuts it into words and
blocks in numpy. No word is ever a Python string on the way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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
# what str.split() counts as white space beyond ASCII (crawl.simhash cuts ASCII white space)
_UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_MAX_BYTES = 8 << 20  # parse at most 8 MiB of a page: enough text to fingerprint it


@dataclass
class Doc:
    """What dedupe needs from one page."""

    raw: bytes = b""  # the visible text, UTF-8, with a newline at every block boundary
    canonical: str | None = None
    error: str | None = None

    @property
    def blocks(self) -> list[str]:
        """The non-empty blocks, white space collapsed (for people and tests; dedupe hashes ``raw``)."""
        lines = self.raw.decode("utf-8", "replace").split("\n")
        return list(filter(None, map(" ".join, map(str.split, lines))))

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
            no_network=True, huge_tree=False, collect_ids=False)  # ids: no lookup table
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
    if head.isascii() and head.lstrip()[:1] == b"<":  # markup: parse it (quick, most pages)
        return False
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
    canonical = canonical_link(root, base_url)  # before _visible cuts the head
    return Doc(raw=_visible(root), canonical=canonical)


def _ending_newline(t: str | None) -> str | None:
    """``t`` ending in a newline, or None when it already does (nothing to write)."""
    if not t:
        return "\n"
    return None if t[-1] == "\n" else t + "\n"


def _visible(root: etree._Element) -> bytes:
    """The text of ``root`` without boilerplate, a newline around every block element.

    The newlines go into the short strings next to each block (the tail of
    the element before it, or its parent's text, and its own tail), never
    into the paragraph itself: rewriting a long text costs a decode and an
    encode each time. Then libxml2 writes all text out in one call.
    """
    etree.strip_elements(root, *BOILERPLATE_TAGS, "head", with_tail=False)
    for el in root.iter(*BLOCK_TAGS):
        # a string that already ends (or starts) with a newline is left alone:
        # in formatted HTML ("</p>\n<p>") most are, and reading is cheaper than writing
        prev = el.getprevious()
        if prev is not None:
            t = _ending_newline(prev.tail)
            if t is not None:
                prev.tail = t
        else:
            parent = el.getparent()
            if parent is not None:
                t = _ending_newline(parent.text)
                if t is not None:
                    parent.text = t
        t = el.tail
        if not t:
            el.tail = "\n"
        elif t[0] != "\n":
            el.tail = "\n" + t
    return etree.tostring(root, method="text", encoding="utf-8", with_tail=False)


def fold(raw: bytes) -> bytes:
    """``raw`` lower-cased, with every non-ASCII space made an ASCII one.

    What :func:`crawl.simhash.word_hashes` cuts into words: the same words
    ``str.lower().split()`` would give. ASCII text (most pages) stays bytes.
    """
    if raw.isascii():
        return raw.lower()
    text = _UNICODE_SPACE.sub(" ", raw.decode("utf-8", "replace").lower())
    return text.encode("utf-8", "replace")


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
