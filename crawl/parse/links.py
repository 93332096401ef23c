"""Link extraction from HTML with lxml: hrefs as written, nothing resolved.

One pass over the parsed tree collects everything the parse stage needs
from a page: outlinks (``a``, ``area``, ``link``, ``iframe``, ``frame``,
``meta refresh``), the first ``<base href>``, ``rel=canonical``, the meta
robots directives meant for us, and the title. Resolving, canonicalising and
filtering happen in :mod:`crawl.parse`, so this module only knows HTML.

libxml2's HTML parser building a tree, walked with ``iter(*tags)``, was the
fastest variant measured in scripts/bench_parse.py: the tag filter runs in
C, so only link-bearing elements cost Python time. Pages with markup after
``</html>`` take a slower path that does not lose it (see :func:`_elements`).

:func:`scan` reads the page's facts (base, canonical, robots, title) first,
in a walk over only ``base``, ``meta``, ``link`` and ``title``, and hands out
the links as a :class:`LinkStream`, made one at a time: the parse stage stops
taking them at its links-per-page cap and only counts the rest, so a page of
60,000 links costs little more than its tree past the cap.

The work of one page is bounded before the parse: :mod:`crawl.parse.budget`
finds where a count (tags, attributes, stack walks) says libxml2 must stop
reading, and only the page up to there is parsed (:attr:`HtmlPage.limit`,
:attr:`HtmlPage.limit_at`). The walk over the tree is bounded too:
:data:`MAX_WALKED` link-bearing elements (limit "links"), :data:`FACT_ELEMENTS`
for the page's facts, :data:`ANCHOR_NODES` for one link's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

from lxml import etree

from . import budget

# Tags we look at, in C-filtered walks of the tree: the page's facts, then
# the link-bearing elements in document order.
_TAGS = ("a", "area", "link", "iframe", "frame", "base", "meta", "title")
_HEAD_TAGS = ("base", "meta", "link", "title")
_LINK_TAGS = ("a", "area", "link", "iframe", "frame", "meta")

# <link rel> values that name sub-resources or endpoints, not pages to crawl.
RESOURCE_RELS = frozenset(
    {
        "stylesheet", "icon", "shortcut", "apple-touch-icon",
        "apple-touch-icon-precomposed", "mask-icon", "manifest", "preload",
        "prefetch", "preconnect", "dns-prefetch", "modulepreload", "prerender",
        "pingback", "edituri", "wlwmanifest", "openid.server", "openid.delegate",
        "openid2.provider", "openid2.local_id", "webmention", "fluid-icon",
    }
)

# Directives a robots meta tag or X-Robots-Tag may carry with a colon, which
# are therefore not a "user-agent:" prefix.
_COLON_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


class RawLink(NamedTuple):
    """One link as written on the page.

    ``position`` is the link's index among all link-bearing elements in
    document order, so it says where on the page the link was, even when
    others around it were dropped. ``element`` is kept so that anchor text is
    only computed for links that are actually emitted. A NamedTuple, made
    with ``tuple.__new__`` on the hot path: several times cheaper than a
    dataclass instance.
    """

    href: str
    source: str
    rel: tuple[str, ...]
    position: int
    element: etree._Element | None = None


_new = tuple.__new__
LinkTuple = tuple[str, str, tuple[str, ...], int, "etree._Element | None"]


@dataclass(slots=True)
class HtmlPage:
    """What one HTML document says about its links."""

    links: list[RawLink] = field(default_factory=list)
    base: str | None = None
    canonical: str | None = None
    robots: set[str] = field(default_factory=set)
    title: str | None = None
    error: str | None = None
    # Why the parse stopped short of the end of the page (a budget.REASONS entry,
    # "depth" when libxml2 gave up at its nesting limit, "links" when the walk
    # stopped at MAX_WALKED), and where (a byte offset in the UTF-8 page; None
    # for "depth" and "links").
    limit: str | None = None
    limit_at: int | None = None


# Comments and processing instructions never hold links; dropping them keeps
# the tree small. no_network: a page never makes libxml2 fetch anything.
_PARSER_OPTIONS: dict[str, Any] = {
    "encoding": "utf-8",
    "remove_comments": True,
    "remove_pis": True,
    "no_network": True,
    "collect_ids": False,
    "default_doctype": False,
    # libxml2 stops reading at nesting depth 256 without this, silently
    # losing every later link; tag soup (unclosed <div>s in a loop) gets
    # there. With it the limit is 2048, which we report when hit.
    "huge_tree": True,
}
_TREE_PARSER = etree.HTMLParser(**_PARSER_OPTIONS)
_END_HTML = re.compile(rb"</html", re.I)
_MARKUP = re.compile(rb"<[A-Za-z]")

def _markup_after_end(utf8: bytes) -> bool:
    """Is there markup after the first ``</html>`` end tag? (libxml2 drops it.)

    One case-insensitive scan (~1 GB/s); measured cheaper than always using
    the pull parser.
    """
    m = _END_HTML.search(utf8)
    return m is not None and _MARKUP.search(utf8, m.end()) is not None


def _elements(utf8: bytes) -> tuple[list[etree._Element], str | None]:
    """The elements of :data:`_TAGS` in document order, and a parse error if any."""
    src, error = _document(utf8)
    return (list(src.iter(*_TAGS)) if isinstance(src, etree._Element) else src), error


def _document(utf8: bytes, end: int | None = None
              ) -> tuple[etree._Element | list[etree._Element], str | None]:
    """The parsed tree, or the elements of :data:`_TAGS` in document order.

    Only ``utf8[:end]`` is read. Two ways to the same elements. The fast one
    builds the tree, which is then walked with a C-level tag filter.
    libxml2 2.14's tree builder, though, drops all markup after ``</html>``,
    which browsers (and so link authors) treat as part of the body; for such
    pages an ``HTMLPullParser`` with the same tag filter is used, whose
    start events still report those elements (returned as a list).
    """
    if end is not None and end < len(utf8):
        utf8 = utf8[:end]
    if not _markup_after_end(utf8):
        try:
            root = etree.fromstring(utf8, _TREE_PARSER)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
            return [], f"unparsable HTML: {exc}"
        if root is None:
            return [], "unparsable HTML: no document element"
        return root, _stopped_early(_TREE_PARSER.error_log)
    parser = etree.HTMLPullParser(events=("start",), tag=_TAGS, **_PARSER_OPTIONS)
    error = None
    try:
        parser.feed(utf8)
        parser.close()
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        error = f"unparsable HTML: {exc}"
    # Read the events even after an error: whatever was parsed is kept.
    return [el for _, el in parser.read_events()], error or _stopped_early(parser.error_log)


DEPTH_ERROR = "elements nested deeper than 2048: the rest of the page was not read"


def _stopped_early(log: Any) -> str | None:
    """Why libxml2 gave up before the end of the document, if it did."""
    if not len(log):
        return None
    for entry in log:
        if "Excessive depth" in entry.message:
            return DEPTH_ERROR
    return None


def robots_directives(values: list[str], agent: str) -> set[str]:
    """Directives from robots meta contents or X-Robots-Tag values for ``agent``.

    An X-Robots-Tag value may start with ``name:`` to address one crawler
    ("otherbot: noindex"); such directives apply only when the name is our
    product token. ``none`` expands to ``noindex, nofollow``.
    """
    out: set[str] = set()
    agent = agent.lower()
    for value in values:
        target: str | None = None
        for part in value.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if ":" in part:
                key, rest = part.split(":", 1)
                key = key.strip()
                if key not in _COLON_DIRECTIVES:
                    target = key
                    part = rest.strip()
                    if not part:
                        continue
            if target is not None and target != agent:
                continue
            if part == "none":
                out.update(("noindex", "nofollow"))
            else:
                out.add(part.split(":", 1)[0].strip())
    return out


# The walk over the tree, bounded like the parse: in Python each element costs
# 2-10 us, far more than libxml2 took to build it.
MAX_WALKED = 12_000  # link-bearing elements read per page (the default --max-links and a fifth)
FACT_ELEMENTS = 2_000  # base, meta, link and title elements read for the page's facts
ANCHOR_NODES = 64  # elements of a link looked at for its text (links nested in links
# each hold the rest of the page: serialising them whole was quadratic)


def _subtree_text(el: etree._Element, want: int) -> str:
    """The text inside ``el`` in document order, as ``tostring(method="text")`` gives
    it, but stopping after ``want`` characters or :data:`ANCHOR_NODES` elements."""
    parts: list[str] = []
    size = 0
    nodes = 0
    for event, node in etree.iterwalk(el, events=("start", "end")):
        if event == "start":
            nodes += 1
            if nodes > ANCHOR_NODES:
                break
            piece = node.text
        elif node is el:
            break
        else:
            piece = node.tail
        if piece:
            parts.append(piece)
            size += len(piece)
            if size >= want:
                break
    return "".join(parts)


def anchor_text(el: etree._Element | None, limit: int) -> str:
    """The visible text of a link, white space collapsed, at most ``limit`` chars."""
    if el is None or limit <= 0:
        return ""
    # <a>text</a>, the common case, without serialising (an <area> is void:
    # it has neither children nor text).
    text = None if len(el) else el.text
    if text and not text.isspace():
        pass
    elif el.tag == "area":
        text = el.get("alt") or ""
    else:
        text = _subtree_text(el, limit * 4)
        if not text.strip():
            text = el.get("title") or el.get("aria-label") or ""
            if not text:
                img = next((e for e in islice(el.iter(), ANCHOR_NODES) if e.tag == "img"), None)
                text = (img.get("alt") or "") if img is not None else ""
    if len(text) <= limit and text.isprintable() and "  " not in text and text.strip() == text:
        return text  # nothing to collapse or cut
    text = " ".join(text[: limit * 4].split())
    return text[:limit].rstrip()


def refresh_target(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh content="5; url=...">``.

    Follows WHATWG HTML's "shared declarative refresh steps": skip the delay,
    one ``;`` or ``,``, an optional ``url=``, and strip one pair of quotes.
    Written as a scan, not a regex: a backtracking pattern here was
    quadratic on long runs of white space (found by a test).
    """
    s = content[:4096].strip()
    i = 0
    while i < len(s) and (s[i].isdigit() or s[i] == "."):
        i += 1
    s = s[i:].lstrip()
    if s[:1] in (";", ","):
        s = s[1:].lstrip()
    if s[:3].lower() == "url":
        rest = s[3:].lstrip()
        if rest[:1] == "=":
            s = rest[1:].lstrip()
    if s[:1] in ("'", '"'):
        end = s.find(s[0], 1)
        s = s[1:end] if end > 0 else s[1:]
    s = s.strip()
    return s or None


# rel attribute as written -> its tokens lower-cased; pages repeat a few values
# ("nofollow", "stylesheet") thousands of times. Bounded (DESIGN invariant 5).
_RELS: dict[str, tuple[str, ...]] = {}
# token tuples made only of RESOURCE_RELS (a <link> to a sub-resource, not a page)
_RESOURCE_ONLY: set[tuple[str, ...]] = set()


def _rels(rel: str) -> tuple[str, ...]:
    """``tuple(rel.lower().split())``, remembered."""
    rels = tuple(rel.lower().split())
    if len(_RELS) >= 4096:
        _RELS.clear()
        _RESOURCE_ONLY.clear()
    if rels and RESOURCE_RELS.issuperset(rels):
        _RESOURCE_ONLY.add(rels)
    _RELS[rel] = rels
    return rels


class LinkStream:
    """A page's links in document order, each made when it is asked for.

    Iterate to get :class:`RawLink` objects; after stopping early,
    :meth:`count_rest` counts the links that were not taken, without making
    them. ``position`` numbers links as :func:`extract` does.
    """

    __slots__ = ("_els", "_agent", "_canonical_pending", "position", "walk_cut")

    def __init__(self, elements: Iterable[etree._Element], agent: str, canonical: bool) -> None:
        self._els = iter(elements)
        self._agent = agent.lower()
        # The first <link rel=canonical href> is the page's canonical, not a link.
        self._canonical_pending = canonical
        self.position = 0
        self.walk_cut = False  # stopped at MAX_WALKED elements

    def __iter__(self) -> Iterator[LinkTuple]:
        """The links, as plain tuples in :class:`RawLink`'s field order on the
        hot path (unpack them; :func:`extract` makes RawLinks)."""
        pos = self.position
        for walked, el in enumerate(self._els, 1):
            if walked > MAX_WALKED:  # the rest are not read: the page's parse is cut here
                self.walk_cut = True
                return
            tag = el.tag
            if tag == "a" or tag == "area":
                href = el.get("href")
                if href is None:
                    continue
                rel = el.get("rel")
                raw: LinkTuple = (href, tag, (_RELS.get(rel) or _rels(rel)) if rel else (), pos, el)
            elif tag == "iframe" or tag == "frame":
                src = el.get("src")
                if src is None:
                    continue
                raw = (src, tag, (), pos, None)
            else:
                found = self._other(el)
                if found is None:
                    continue
                raw = found
            pos += 1
            self.position = pos
            yield raw

    def _other(self, el: etree._Element) -> LinkTuple | None:
        """The link of a ``link`` or ``meta`` element, if it is one."""
        if el.tag == "link":
            href = el.get("href")
            rel_attr = el.get("rel")
            if href is None or not rel_attr:
                return None
            rels = _RELS.get(rel_attr) or _rels(rel_attr)
            if self._canonical_pending and "canonical" in rels:
                self._canonical_pending = False
                return None
            if rels and rels not in _RESOURCE_ONLY:
                return (href, "link", rels, self.position, None)
            return None
        if el.tag == "meta":
            name = (el.get("name") or "").lower()
            if name == "robots" or name == self._agent:
                return None
            if (el.get("http-equiv") or "").lower() == "refresh":
                target = refresh_target(el.get("content") or "")
                if target:
                    return (target, "meta-refresh", ("refresh",), self.position, None)
        return None

    def count_rest(self) -> int:
        """How many links are left, counted without making them."""
        n = 0
        for el in self._els:  # keys(): about twice as fast as get() when the value is not needed
            tag = el.tag
            if tag == "a" or tag == "area":
                n += "href" in el.keys()
            elif tag == "iframe" or tag == "frame":
                n += "src" in el.keys()
            elif self._other(el) is not None:
                n += 1
        self.position += n
        return n


def scan(utf8: bytes, agent: str = "crawl") -> tuple[HtmlPage, LinkStream]:
    """Parse a UTF-8 HTML document: its facts now, its links as a stream.

    The page's ``links`` list stays empty; the links come from the stream,
    in document order. Never raises on content: a document libxml2 cannot
    make a tree of (binary junk, an empty body) yields a page with ``error``
    set and an empty stream. The parse stops at the first bound of
    :mod:`crawl.parse.budget` the page breaks; ``limit`` and ``limit_at`` say so.
    """
    page = HtmlPage()
    if not utf8.strip():
        page.error = "empty document"
        return page, LinkStream((), agent, False)
    cut = budget.limit(utf8)
    src, page.error = _document(utf8, cut.at if cut else None)
    if cut is not None:
        page.limit, page.limit_at = cut.reason, cut.at
    elif page.error == DEPTH_ERROR:
        page.limit = "depth"
    if isinstance(src, etree._Element):
        head: Iterable[etree._Element] = islice(src.iter(*_HEAD_TAGS), FACT_ELEMENTS)
        body: Iterable[etree._Element] = src.iter(*_LINK_TAGS)
    else:  # the pull parser's list of elements
        head = [el for el in src if el.tag in _HEAD_TAGS][:FACT_ELEMENTS]
        body = [el for el in src if el.tag in _LINK_TAGS]
    robots: list[str] = []
    lower_agent = agent.lower()
    for el in head:
        tag = el.tag
        if tag == "link":
            if page.canonical is None and el.get("href") is not None:
                rel_attr = el.get("rel")
                if rel_attr and "canonical" in rel_attr.lower().split():
                    page.canonical = el.get("href")
        elif tag == "meta":
            name = (el.get("name") or "").lower()
            if name == "robots" or name == lower_agent:
                content = el.get("content")
                if content:
                    robots.append(content)
        elif tag == "base":
            if page.base is None and el.get("href") is not None:
                page.base = el.get("href")
        elif tag == "title" and page.title is None:  # split() only what can make 200 chars
            page.title = " ".join((el.text or "")[:4096].split())[:200]
    if robots:
        page.robots = robots_directives(robots, agent)
    return page, LinkStream(body, agent, page.canonical is not None)


def extract(utf8: bytes, agent: str = "crawl") -> HtmlPage:
    """Parse a UTF-8 HTML document and collect its links, in document order.

    Never raises on content: a document libxml2 cannot make a tree of
    (binary junk, an empty body) yields a page with ``error`` set and no links.
    """
    page, stream = scan(utf8, agent)
    page.links = [_new(RawLink, raw) for raw in stream]
    return page
