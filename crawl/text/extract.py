"""Visible text of an HTML page, without boilerplate, in blocks.

Near-duplicate detection only works on what a reader sees as *the page*:
navigation, headers, footers, sidebars, scripts and styles change between
the print, mobile and tracking versions of one article while the article
stays the same, and a rotating advert would move every byte-level hash. So
those elements are cut (``BOILERPLATE_TAGS``), and the rest is returned as
blocks (paragraphs, list items, headings, cells) so that ``crawl dedupe`` can
also drop blocks it has seen repeated across many pages of one host.

Why a tokenizer and not a tree: dedupe needs the text, the block boundaries
and one link, never the tree, and building a tree (libxml2 via lxml) cost
more than all the hashing after it (about 60% of ``crawl dedupe``'s CPU on a
26 KB article). Here one compiled regex cuts the page into text and tags
(comments, ``<script>``/``<style>``-like elements whose content is not markup,
and doctypes are consumed whole, in C); a block tag becomes a newline, any
other tag nothing; a boilerplate element's text is dropped up to its end tag
(same-name nesting counted; an element never closed ends where an element
opened before it closes, as a parser would close it). Tag names are
lower-cased first, so the patterns are literal and fast. Behaviour follows
the HTML standard's tokenizer: quoted attribute values may hold ``>``, a tag
cut off by the end of the page is dropped, ``<`` not followed by a letter is
text. Where it knowingly differs from the lxml tree it replaced
(tests/text/test_text.py holds it to that tree on the test web and on a table of
snippets): ``<title>`` is dropped wherever it is (browsers never show it; the
tree kept one misplaced in the body), ``<embed>`` is empty (libxml2 let it
swallow what followed), a stray end tag of a block element still ends a block,
and an undeclared page is UTF-8 when it decodes as UTF-8 (libxml2 read it as
Latin-1).

The text stays UTF-8 bytes to the hash; :func:`analyse` with ``folded=True``
returns it already folded (:func:`fold`) for :mod:`crawl.dedupe.simhash`.
That folded path, the one dedupe takes, runs compiled where the install
built crawl/text/_compiled.c (the tokenizer, the boilerplate cut and the folding in
single passes; see crawl.text.compiled); the code here defines what it computes
and is the fallback, and tests/text/test_compiled.py holds the two together.
"""

from __future__ import annotations

import html as htmllib
import os
import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import compress, repeat
from urllib.parse import urljoin

from . import charset, compiled

BOILERPLATE_TAGS = (
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside",
    "svg", "iframe", "form", "button", "select", "textarea", "object", "embed", "canvas",
)
BLOCK_TAGS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
    "td", "th", "tr", "table", "pre", "blockquote", "section", "article", "main",
    "figcaption", "figure", "address", "br", "hr", "caption", "summary", "details",
)
# content is not markup (the tokenizer reads on to the end tag) and is never shown:
# dropped whole. <title> lives in <head>, which the reader never sees either.
RAW_TEXT_TAGS = ("script", "style", "textarea", "title", "iframe", "noscript", "noembed", "noframes")
# what str.split() counts as white space beyond ASCII (crawl.dedupe.simhash cuts ASCII white space)
_UNICODE_SPACES = "\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_UNICODE_SPACE = re.compile(f"[{_UNICODE_SPACES}]")
_MAX_BYTES = 8 << 20  # read at most 8 MiB of a page: enough text to fingerprint it

_END = rb"(?=[\t\n\f\r />]|\Z)"  # a tag name ends here
_VALUE = rb"""=[\t\n\f\r ]*+(?:"[^"]*+(?:"|\Z)|'[^']*+(?:'|\Z))"""  # a quoted value may hold '>'
_REST = rb"(?:" + _VALUE + rb"|[^>])*+(?:>|\Z)"  # attributes and the '>' (or the end of the page)
_RAW = b"|".join(n.encode() + _END + _REST + rb"(?:.*?</" + n.encode() + _END + rb"[^>]*+(?:>|\Z)|.*)"
                 for n in RAW_TEXT_TAGS)
# split() gives text, then per token: the tag name ("/p" for an end tag; None for a
# comment, a raw-text element or a doctype) and "/" when the tag closes itself
_TOKEN = re.compile(
    rb"<(?:" + _RAW
    + rb"|!--(?:-?>|.*?(?:--!?>|\Z))"
    + rb"|(/?[a-z][^\t\n\f\r />]*+)(?:" + _VALUE + rb"|/(?!>)|[^>/])*+(?:(/)>|>|\Z)"
    + rb"|[!?/][^>]*+(?:>|\Z))",
    re.S)
_TAG_NAME = re.compile(rb"</?[A-Za-z][^\t\n\f\r />]*")
_UPPER_TAG_NAME = re.compile(rb"</?[a-z]*[A-Z]")
_LINK = re.compile(rb"<link" + _END + rb"((?:" + _VALUE + rb"|[^>])*+)")
_ATTR = re.compile(rb"""([^\t\n\f\r "'>/=]+)(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r >]*)))?""")

_NL = b"\n"
_SEPARATOR = {name: _NL for t in BLOCK_TAGS for name in (t.encode(), b"/" + t.encode())}
# elements dropped with their content; embed is void (no content, no text)
_CONTAINERS = [t.encode() for t in BOILERPLATE_TAGS if t not in RAW_TEXT_TAGS and t != "embed"]
_CONTAINER_TAGS = frozenset(_CONTAINERS + [b"/" + t for t in _CONTAINERS])
_VOID = frozenset(b"area base br col embed hr img input link meta param source track wbr".split())
# a decimal reference of thousands of digits: int() refuses it (ValueError), html.unescape with it
_LONG_DECIMAL = re.compile(r"&#([0-9]{4000,})(;?)")


def _short_decimal(m: re.Match[str]) -> str:
    digits = m.group(1).lstrip("0") or "0"
    return "\ufffd" if len(digits) > 7 else f"&#{digits}{m.group(2)}"  # 8 digits: past U+10FFFF


def _unescape(s: str) -> str:
    """``html.unescape``, which never raises: a decimal reference too long for ``int()``
    is read without its leading zeros, and one still that long is U+FFFD, as html.unescape
    makes any number past U+10FFFF."""
    if "&#" in s and _LONG_DECIMAL.search(s):
        s = _LONG_DECIMAL.sub(_short_decimal, s)
    return htmllib.unescape(s)


if compiled.built is not None:
    compiled.built.configure_text([t.encode() for t in RAW_TEXT_TAGS], [t.encode() for t in BLOCK_TAGS],
                                  _CONTAINERS, sorted(_VOID), _unescape, _UNICODE_SPACES,
                                  int.from_bytes(os.urandom(8), "little"))


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


def _utf8(body: bytes, encoding: str | None) -> bytes:
    """The page as UTF-8: a BOM, then ``encoding`` (the header's), then ``<meta charset>``.

    A page that declares nothing is UTF-8 if it decodes as UTF-8, else
    windows-1252 (what an old undeclared page is, and the web's "latin-1").
    """
    if body.isascii():  # most pages: the same bytes in every encoding a page may use
        return body
    found = charset.detect(body)
    given = charset.normalize(encoding)
    if given and found.source != "bom":
        found = charset.Detected(given, "given")
    elif found.source == "default":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            found = charset.Detected("cp1252", "guess")
    return charset.to_utf8(body, found)[0]


def analyse(body: bytes, encoding: str | None = None, base_url: str | None = None, *,
            folded: bool = False) -> Doc:
    """Read once; return the boilerplate-free text blocks and the canonical link.

    ``encoding`` is the charset a Content-Type header named, if any.
    ``folded=True`` returns the text lower-cased with every space ASCII
    (:func:`fold`), as dedupe hashes it: the whole page is lower-cased
    in one C call before it is cut, cheaper than lower-casing tag names one by one.
    Never raises on content: binary junk or an empty body gives a Doc with
    no blocks and ``error`` saying why.
    """
    if not body.strip():
        return Doc(error="empty body")
    if _looks_binary(body[:1024]):
        return Doc(error="binary content, not HTML")
    page = _utf8(body[:_MAX_BYTES], encoding)
    if folded and compiled.active is not None:  # the same text in one pass (crawl/text/_compiled.c)
        text, head = compiled.active.visible_folded(page)
        low = page[:head].lower() if head >= 0 else page.lower()  # all _canonical reads
        return Doc(raw=_entities(text, True), canonical=_canonical(page, low, base_url))
    if folded:
        marked = page.lower()
    elif _UPPER_TAG_NAME.search(page):
        marked = _TAG_NAME.sub(lambda m: m.group().lower(), page)
    else:
        marked = page
    canonical = _canonical(page, marked if folded else page.lower(), base_url)
    return Doc(raw=_visible(marked, folded), canonical=canonical)


def _visible(marked: bytes, folded: bool) -> bytes:
    """The text of a page whose tag names are lower case, a newline at every block tag."""
    parts = _TOKEN.split(marked)
    names = parts[1::3]
    out: list[bytes] = [b""] * (2 * len(names) + 1)  # text, separator, text, ...
    out[0::2] = parts[0::3]
    out[1::2] = map(_SEPARATOR.get, names, repeat(b""))
    marks = list(compress(range(len(names)), map(_CONTAINER_TAGS.__contains__, names)))
    if marks:
        _cut(out, names, parts[2::3], marks)
    text = b"".join(out)
    if b"\r" in text:  # a parser reads CR LF and a lone CR as LF
        text = text.replace(b"\r\n", _NL).replace(b"\r", _NL)
    return _entities(text, folded)


def _entities(text: bytes, folded: bool) -> bytes:
    """Character references decoded (and the text folded, when ``folded``)."""
    if folded and compiled.active is not None and (b"&" in text or not text.isascii()):
        out = compiled.active.fold_text(text, True)  # None: a text only str.lower() folds right
        if out is not None:
            return out  # type: ignore[no-any-return]
    if b"&" in text:
        s = _unescape(text.decode("utf-8", "replace"))
        return (_fold_str(s) if folded else s).encode("utf-8", "replace")
    return fold(text) if folded and not text.isascii() else text


def _cut(out: list[bytes], names: list[bytes | None], closes: list[bytes | None], marks: list[int]) -> None:
    """Empty what is inside boilerplate elements (``marks``: the tokens of their tags).

    Token i is the tag between texts ``out[2 * i]`` and ``out[2 * i + 2]``;
    ``out[2 * i + 1]`` is what it became (a newline or nothing). An element
    ends at the end tag that closes it (:func:`_closers`), else where a
    parser would close it (:func:`_implied_end`); what lies inside a cut
    element is not looked at again, so the whole page is read a bounded
    number of times (a page of ``<nav>x</div>`` repeated once read the rest
    of the page for every ``<nav>``).
    """
    closer = _closers(names, closes, marks)
    k = 0
    while k < len(marks):
        start = marks[k]
        name = names[start]
        k += 1
        if not name or name[0] == 47 or closes[start]:  # a stray end tag, or <x/>: nothing inside
            continue
        end = closer.get(start)
        if end is None:  # never closed: it ends before the end tag that closes it
            end = _implied_end(names, closes, start)
            stop = 2 * end + 1
        else:
            stop = 2 * end + 2
        k = bisect_right(marks, end)
        out[2 * start + 1:stop] = repeat(b"", stop - 2 * start - 1)


def _closers(names: list[bytes | None], closes: list[bytes | None], marks: list[int]) -> dict[int, int]:
    """The end tag that closes each boilerplate element, counting same-name nesting.

    Per tag name, a stack of open elements: an end tag closes the innermost.
    A ``<form>`` never nests (the standard ignores a form inside a form), so
    its end tag closes every form still open.
    """
    closer: dict[int, int] = {}
    open_: dict[bytes, list[int]] = {}
    for m in marks:
        name = names[m]
        assert name is not None  # marks are tags
        if name[0] == 47:
            pending = open_.get(name[1:])
            if pending:
                if name == b"/form":
                    closer.update(dict.fromkeys(pending, m))
                    pending.clear()
                else:
                    closer[pending.pop()] = m
        elif not closes[m]:
            open_.setdefault(name, []).append(m)
    return closer


def _implied_end(names: list[bytes | None], closes: list[bytes | None], start: int) -> int:
    """Where an element opened at token ``start`` and never closed ends.

    At the first end tag of an element opened before it (a parser closes
    ours there too), or at the end of the page.
    """
    opened: dict[bytes, int] = {}
    for j in range(start + 1, len(names)):
        n = names[j]
        if n is None:
            continue
        if n[0] == 47:
            if not opened.get(n[1:]):
                return j
            opened[n[1:]] -= 1
        elif n not in _VOID and not closes[j]:
            opened[n] = opened.get(n, 0) + 1
    return len(names)


def _canonical(page: bytes, low: bytes, base_url: str | None) -> str | None:
    """The first ``<link rel=canonical href>`` in the head, outside comments and scripts.

    Only before ``<body``: search engines ignore a canonical link anywhere
    else, and a long page is not searched to its end for one. Found in
    ``low`` (the page lower-cased), read from ``page`` at the same offsets
    (lower-casing keeps every byte in place), so the URL keeps its case.

    Read once, front to back: the last comment and script openers and
    closers are carried from one ``<link`` to the next, a comment or script
    is skipped to its end, and a link tag to its ``>``. (Searching the page
    from its start at every ``<link``, and each tag to the page's next ``>``,
    took minutes for a head of 200,000 of them.) At most
    :data:`MAX_HEAD_LINKS` link tags are looked at: real heads hold tens, and
    each costs a few microseconds of Python (200,000 took 0.8 s).
    """
    head = low.find(b"<body")
    if head < 0:
        head = len(low)
    if low.find(b"canonical", 0, head) < 0:
        return None
    last = dict.fromkeys((b"<!--", b"-->", b"<script", b"</script"), -1)  # each one's last place before pos
    seen = 0  # last holds what lies before seen
    pos = low.find(b"<link", 0, head)
    looked = 0
    while pos >= 0 and looked < MAX_HEAD_LINKS:
        looked += 1
        for mark in _MARKS.finditer(low, seen, pos):  # none straddles seen or pos: both hold '<link'
            last[mark.group()] = mark.start()
        seen = pos
        if last[b"<!--"] > last[b"-->"] or last[b"<script"] > last[b"</script"]:
            closer = b"-->" if last[b"<!--"] > last[b"-->"] else b"</script"
            end = low.find(closer, pos, head)  # nothing in there is a tag
            if end < 0:
                return None
            pos = low.find(b"<link", end, head)
            continue
        m = _LINK.match(low, pos)
        if m and low.find(b"canonical", pos, m.end()) >= 0:
            attrs: dict[bytes, bytes] = {}
            for a in _ATTR.finditer(page, *m.span(1)):
                attrs.setdefault(a.group(1).lower(), a.group(2) or a.group(3) or a.group(4) or b"")
            href = _unescape(attrs.get(b"href", b"").decode("utf-8", "replace")).strip()
            if b"canonical" in attrs.get(b"rel", b"").lower().split() and href:
                if not base_url or href.startswith(("http://", "https://")):
                    return href  # absolute: urljoin would parse both URLs to hand it back (most pages)
                return urljoin(base_url, href)
        pos = low.find(b"<link", max(pos + 5, m.end() if m else 0), head)
    return None


_MARKS = re.compile(rb"<!--|-->|<script|</script")
MAX_HEAD_LINKS = 2_000  # <link> tags (and skipped comments, scripts) read for a canonical link


def _fold_str(s: str) -> str:
    return _UNICODE_SPACE.sub(" ", s.lower())


def fold(raw: bytes) -> bytes:
    """``raw`` lower-cased, with every non-ASCII space made an ASCII one.

    What :func:`crawl.dedupe.simhash.word_hashes` cuts into words: the same words
    ``str.lower().split()`` would give. ASCII text (most pages) stays bytes.
    """
    if raw.isascii():
        return raw.lower()
    if compiled.active is not None:
        out = compiled.active.fold_text(raw, False)  # None: a text only str.lower() folds right
        if out is not None:
            return out  # type: ignore[no-any-return]
    return _fold_str(raw.decode("utf-8", "replace")).encode("utf-8", "replace")


def visible_text(html: bytes, encoding: str | None = None) -> str:
    """The text a reader sees as the page, boilerplate removed, one line."""
    return analyse(html, encoding).text


def canonical_link(html: bytes, base_url: str | None = None) -> str | None:
    """The absolute URL of ``<link rel="canonical">``, or None.

    Only the first such link counts (as search engines do); a relative href
    is resolved against ``base_url``.
    """
    return analyse(html, None, base_url).canonical
