"""How much of a page libxml2 may read: one page's parse work, bounded before it starts.

libxml2 2.14 (through lxml) is linear in most of what a page can hold, but
not in all of it, and its linear costs differ a hundredfold by shape:

* Each attribute of an element is appended to a linked list walked from its
  head (``xmlNewPropInternal``), so one tag with n attributes costs n²/2
  steps: 64,000 attributes in one 565 KB tag took 58 s of CPU.
* Each end tag looks for its element in the stack of open elements from the
  top, and so does each ``<body>`` (``htmlParseEndTag``, ``htmlParseStartTag``):
  one that matches nothing open walks the whole stack, up to 2,048 deep (we
  parse with ``huge_tree``). 2,040 open ``<div>`` and 5 MB of ``</x>`` took 4.6 s.
* 5 MB of ``<p>`` is 1.25 million elements and 0.8 s of tree; 5 MB of prose 7 ms;
  a tag's attributes cost about 0.25 us each. (The walk over the tree in Python
  costs more per element than the tree: :mod:`crawl.parse.links` bounds it.)

Why counts before the parse, and no CPU deadline during it: no deadline can
stop the first two (libxml2 reads a whole tag's attributes in one call, and
walks its stack inside one); feeding libxml2 in slices, to look at a clock
between two, made tag-dense pages 1.3-4x slower to parse (measured in 1 MiB
and 16 KiB slices); and a deadline makes a page's links depend on the
machine and its load, while a page parsed again (after a crash, or as the
stored copy of a 304) should give the same links. So the bounds here are
counts over the page's bytes, each cheap: :meth:`bytes.count` and compiled
regex scans for every page, a Python loop over the tags only for pages with
thousands of them. Where crawl/text/_compiled.c was built, the attribute
search and counts and the stack model (with its tokens) run there in single
passes (``many_attributes``, ``count_attributes``, ``stack_cut``): the regex
and Python versions here stay the definition, the fallback, and what
tests/parse/test_parse_fast.py holds the C to. Hitting one cuts the page at the start of the tag where
it was hit: libxml2 reads up to there, the links before the cut are kept,
and the page event says which bound stopped the parse and where
(:class:`Limit`).

How each bound is found, and why it cannot be fooled by markup that this
scan reads differently from libxml2 (comments, scripts, stray quotes):

* ``tags``: every ``<`` counts (one in text or a script too): never fewer
  than libxml2 finds, at memchr speed. At most :data:`MAX_TAGS` are read.
* ``attributes``: a tag with :data:`MANY_ATTRIBUTES` or more is searched for
  starting at *every* ``<`` followed by a letter, not only where a tokenizer
  would put a tag, so whatever libxml2 reads as a tag is looked at from its
  own start, with the HTML tokenizer's attribute rules (which libxml2 2.14
  follows). Such a tag with more than :data:`MAX_ATTRIBUTES` stops the parse;
  the attributes counted in such tags are budgeted (:data:`ATTRIBUTE_BUDGET`),
  which also bounds this search's own retries inside a long tag.
* ``nesting``: on pages with enough tags for it to matter, a model of
  libxml2's stack of open elements (void elements, the usual implied closes,
  end-tag priorities, raw-text elements and comments skipped) counts the
  steps of those stack walks (:data:`STACK_STEPS`). It reads tags in order,
  so markup it misreads could hide end tags from it; the tag cap still
  bounds what that can cost (30,000 end tags over 2,048 open elements).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice

from crawl.text import compiled

MAX_TAGS = 30_000  # '<' per page: about 20 ms of tree at most, and the links walked
MANY_ATTRIBUTES = 16  # a tag with this many is counted exactly
MAX_ATTRIBUTES = 256  # in one tag: 33,000 list steps
ATTRIBUTE_BUDGET = 60_000  # attributes counted in tags of MANY_ATTRIBUTES or more, per page
STACK_STEPS = 10_000_000  # steps of libxml2's walks over its stack of open elements (~30 ms)
MAX_DEPTH = 2048  # libxml2's nesting limit with huge_tree: it stops reading there
ATTRIBUTE_TOTAL = 150_000  # attributes of all tags, counted on pages of MODEL_TAGS or more (~40 ms)
# With fewer end tags and <body>s than this, stack walks (2,048 deep at most) cannot reach
# STACK_STEPS; with fewer tags than that, their attributes (fewer than MANY_ATTRIBUTES
# each, or counted by the search) cannot reach ATTRIBUTE_TOTAL; under both, no model.
MODEL_WALKS = STACK_STEPS // MAX_DEPTH
MODEL_ATTRIBUTE_TAGS = (ATTRIBUTE_TOTAL - ATTRIBUTE_BUDGET) // (MANY_ATTRIBUTES - 1)
MODEL_TAGS = min(MODEL_WALKS, MODEL_ATTRIBUTE_TAGS)

REASONS = ("tags", "attributes", "nesting")  # Limit.reason

_WS = rb"\t\n\f\r "
_TAG_NAME = rb"[A-Za-z][^" + _WS + rb"/>]*+"
# One attribute as the HTML tokenizer reads it: separators (a '/' not before '>'), a
# name (anything but white space, '/', '>'; '=' only first), an optional value.
_NAME_VALUE = (rb"[^" + _WS + rb"/>][^" + _WS + rb"/>=]*+"
               rb"(?:[" + _WS + rb"]*+=[" + _WS + rb"]*+(?:\"[^\"]*+\"?|'[^']*+'?|[^" + _WS + rb">]*+))?")
_ATTRIBUTE = rb"(?>(?:[" + _WS + rb"]|/(?!>))*+" + _NAME_VALUE + rb")"
_OPEN = re.compile(rb"<" + _TAG_NAME)
_MANY = re.compile(_ATTRIBUTE + b"{%d}" % MANY_ATTRIBUTES)
_MORE = re.compile(rb"(?:" + _ATTRIBUTE + rb"){0,%d}+" % (MAX_ATTRIBUTES - MANY_ATTRIBUTES + 1))
# Counts the attributes in a run of them: found from a name, so that a run of white
# space is skipped a byte at a time, not scanned again from each byte (quadratic).
_ONE = re.compile(_NAME_VALUE)
_NTH = re.compile(rb"(?:[^<]*+<){%d}" % MAX_TAGS)

# The model's tokens, read from the page lower-cased: (raw-text element name, its
# attributes, end-tag slash, name, attributes, self-closing slash). A tag's extent
# follows the HTML tokenizer (a quote opens a value only after '='); a raw-text
# element's content is skipped to its end tag; comments, doctypes and bogus comments
# give tuples of empty strings.
_RAW = rb"script|style|xmp|iframe|noembed|noframes|textarea|title"
_REST = rb"((?:[^>=/]++|=[" + _WS + rb"]*+(?:\"[^\"]*+\"?|'[^']*+'?)?|/(?!>))*+)"
_TOKEN = re.compile(
    rb"<(?:!--(?:-?>|.*?(?:--!?>|\Z))"
    rb"|(" + _RAW + rb")(?=[" + _WS + rb"/>])" + _REST + rb"(?:>(?:.*?(?=</\1[" + _WS + rb"/>])|.*)|\Z)"
    rb"|plaintext(?=[" + _WS + rb"/>]).*"
    rb"|(/?)([a-z][^" + _WS + rb"/>]*+)" + _REST + rb"(?:(/)>|>|\Z)"
    rb"|[!?/][^>]*+(?:>|\Z))",
    re.S)
_TOKENS_PER_COUNT = 1024  # tokens whose attributes are counted in one call, to find a cut

# libxml2's element table, the parts the stack model needs.
_VOID = frozenset(b"area base basefont br col frame hr img input isindex link meta param".split())
_PRIORITY = {b"div": 150, b"td": 160, b"th": 160, b"tr": 170, b"thead": 180, b"tbody": 180,
             b"tfoot": 180, b"table": 190, b"head": 200, b"body": 200, b"html": 220}
_DISCARDED = (b"html", b"body", b"head")
# end priority -> the elements of a higher one (which an end tag of that priority cannot close)
_OUTRANK = {r: frozenset(n for n, q in _PRIORITY.items() if q > r) for r in {100, *_PRIORITY.values()}}


def _closers() -> dict[bytes, frozenset[bytes]]:
    """Start tag -> the open elements it closes when they are on top (libxml2's htmlStartClose, in part)."""
    closed_by = {
        b"p": b"address blockquote body caption center col colgroup dd dir div dl dt fieldset form frameset "
              b"h1 h2 h3 h4 h5 h6 head hr li listing menu ol p pre table tbody td tfoot th title tr ul xmp",
        b"li": b"li", b"option": b"optgroup option", b"tr": b"tbody tfoot tr",
        b"td": b"tbody td tfoot th tr", b"th": b"tbody td tfoot th tr", b"dt": b"dd dl", b"dd": b"dt",
        b"a": b"a fieldset table td th", b"thead": b"tbody tfoot", b"tbody": b"tbody tfoot",
    }
    out: dict[bytes, set[bytes]] = {}
    for old, news in closed_by.items():
        for new in news.split():
            out.setdefault(new, set()).add(old)
    return {k: frozenset(v) for k, v in out.items()}


_CLOSES = _closers()
if compiled.built is not None:  # the same tables for crawl/text/_compiled.c's stack_cut
    compiled.built.configure_budget(tuple(_RAW.split(b"|")), _VOID, _PRIORITY, _CLOSES, MAX_DEPTH)


@dataclass(frozen=True, slots=True)
class Limit:
    """Where the parse of a page stops short of its end, and the bound that stopped it.

    ``at`` is a byte offset in the page as UTF-8 (the start of a tag);
    ``reason`` is one of :data:`REASONS`.
    """

    at: int
    reason: str


def limit(utf8: bytes) -> Limit | None:
    """The first bound the page breaks, if any; None for a page read whole.

    The model goes first where it runs: it may cut an attribute-dense page
    early, and the attribute search then reads only up to its cut.
    """
    end, reason = len(utf8), ""
    tags = utf8.count(b"<")
    if tags > MAX_TAGS:
        m = _NTH.match(utf8)
        end, reason = (utf8.find(b"<", m.end()) if m else len(utf8)), "tags"
    if tags >= MODEL_TAGS:  # fewer '<' cannot make that many end tags, nor attributes
        found = _model(utf8, end)
        if found is not None:
            end, reason = found
    at = _attributes(utf8, end)
    if at is not None:
        end, reason = at, "attributes"
    return Limit(end, reason) if reason else None


def _attributes(utf8: bytes, end: int) -> int | None:
    """The start of the first tag with more than MAX_ATTRIBUTES attributes, or of the
    tag where those counted in tags of MANY_ATTRIBUTES or more pass ATTRIBUTE_BUDGET."""
    c = compiled.active
    if c is not None:  # the same search and counts in one compiled pass
        return c.many_attributes(utf8, end, MANY_ATTRIBUTES, MAX_ATTRIBUTES, ATTRIBUTE_BUDGET)
    counted = 0
    pos = 0
    while (tag := _OPEN.search(utf8, pos, end)) is not None:
        m = _MANY.match(utf8, tag.end(), end)
        if m is None:
            # Fewer attributes: so have the tags from a '<' inside this name (a tag name
            # runs to white space, '/' or '>', '<' included), which end with it and
            # share its attributes. Past the name: `<b<b<b...` is one pass, not n*n.
            pos = tag.end()
            continue
        more = _MORE.match(utf8, m.end(), end)
        n = MANY_ATTRIBUTES + (len(_ONE.findall(utf8, more.start(), more.end())) if more else 0)
        counted += n
        if n > MAX_ATTRIBUTES or counted > ATTRIBUTE_BUDGET:
            return tag.start()
        pos = tag.start() + 1
    return None


def _model(utf8: bytes, end: int) -> tuple[int, str] | None:
    """Where, in ``utf8[:end]``, the attributes of all tags pass ATTRIBUTE_TOTAL
    ("attributes") or the modelled stack walks pass STACK_STEPS ("nesting"),
    whichever is first; None if neither. Each count runs only where its budget
    can be reached: on MODEL_ATTRIBUTE_TAGS tokens, on MODEL_WALKS end tags and <body>s.
    """
    low = utf8[:end].lower()
    walks = low.count(b"</") + low.count(b"<body") >= MODEL_WALKS
    attrs = low.count(b"<") >= MODEL_ATTRIBUTE_TAGS and _attribute_bound(low) > ATTRIBUTE_TOTAL
    if not (walks or attrs):
        return None  # neither budget can be reached: no tokens needed (a head of 200,000 <link>)
    if not walks:  # attributes alone: tokens read only as far as the count passes its budget
        return _attribute_cut(low)
    c = compiled.active
    if not attrs and c is not None:  # walks alone: tokens and model in one compiled pass
        found = c.stack_cut(low, STACK_STEPS)
        return None if found is None else (found[1], "nesting")
    tokens = _TOKEN.findall(low)
    cut, reason = len(tokens), ""
    # an attribute takes two bytes at least (a name and what ends it): fewer bytes, no count
    if attrs and len(tokens) >= MODEL_ATTRIBUTE_TAGS and \
            sum(map(len, (t[1] + t[4] for t in tokens))) > 2 * ATTRIBUTE_TOTAL:
        i = _attribute_total(tokens, ATTRIBUTE_TOTAL)
        if i is not None:
            cut, reason = i, "attributes"
    if walks:
        i = _stack_steps(tokens[:cut], STACK_STEPS)
        if i is not None:
            cut, reason = i, "nesting"
    if not reason:
        return None
    m = next(islice(_TOKEN.finditer(low), cut, None), None)
    return (m.start() if m is not None else end), reason


def _findall_count(data: bytes) -> int:
    return len(_ONE.findall(data))


def _counter() -> Callable[[bytes], int]:
    """How many attributes :data:`_ONE` finds in some bytes: compiled (without a
    list of 150,000 matches made to be counted), or by the regex."""
    c = compiled.active
    return _findall_count if c is None else c.count_attributes


def _attribute_bound(low: bytes) -> int:
    """At least as many as the attributes the count in :func:`_attribute_total` can find.

    Every attribute it counts starts right after white space, a ``/`` or a
    quote of the page (a tag's attributes begin after the white space or
    ``/`` that ends its name; the next one after a separator, or straight
    after a quoted value), so those bytes bound them, counted at memchr speed.
    """
    c = compiled.active
    if c is not None:
        return c.count_bytes(low, b" \t\n\r\f/\"'")
    return (low.count(b" ") + low.count(b"\t") + low.count(b"\n") + low.count(b"\r") + low.count(b"\f")
            + low.count(b"/") + low.count(b'"') + low.count(b"'"))


def _attribute_cut(low: bytes, budget: int = ATTRIBUTE_TOTAL) -> tuple[int, str] | None:
    """The same count as :func:`_attribute_total`, tokenizing lazily: the page
    is read a thousand tokens at a time and no further than the cut, whose
    offset comes with its token (a page of 15-attribute tags cut a third of
    the way in was read whole, then again to the cut)."""
    count = _counter()
    total = 0
    tokens = _TOKEN.finditer(low)
    while group := list(islice(tokens, _TOKENS_PER_COUNT)):
        parts = [(t[1], t[4]) for t in (m.groups(b"") for m in group)]
        n = count(b" ".join(a + b" " + b for a, b in parts))
        if total + n > budget:
            for m, (a, b) in zip(group, parts, strict=True):
                total += count(a) + count(b)
                if total > budget:
                    return m.start(), "attributes"
        total += n
    return None


def _attribute_total(tokens: list[tuple[bytes, ...]], budget: int) -> int | None:
    """The index of the token whose attributes take the page's count past ``budget``.

    Counted a thousand tokens at a time (one compiled scan each), then one by
    one in the thousand where the count passes.
    """
    count = _counter()
    total = 0
    for first in range(0, len(tokens), _TOKENS_PER_COUNT):
        group = tokens[first:first + _TOKENS_PER_COUNT]
        n = count(b" ".join(t[1] + b" " + t[4] for t in group))
        if total + n > budget:
            for i, t in enumerate(group, first):
                total += count(t[1]) + count(t[4])
                if total > budget:
                    return i
        total += n
    return None


def _stack_steps(tokens: list[tuple[bytes, ...]], budget: int) -> int | None:
    """The index of the token at which libxml2's stack walks pass ``budget`` steps.

    An end tag costs the distance from the top to its element, or the whole
    depth when nothing open matches; when an element of higher end priority
    lies above it, it closes nothing (``htmlAutoCloseOnClose``), stays open
    and costs as much again the next time. A ``<body>`` costs the depth. The
    model's stack may be deeper than libxml2's (it knows only the usual
    implied closes), which errs on the side of counting more. An end tag
    closing the top is the common case and takes the shortest path; searches
    down the stack run in C (list slices), so the model stays cheaper than
    the walks it counts.
    """
    stack: list[bytes] = []  # open elements' names, the top last
    opened: dict[bytes, int] = {}  # name -> how many are open
    rank_of = _PRIORITY.get
    closes_of = _CLOSES.get
    steps = 0
    discarded = 0  # misplaced html/body/head start tags: libxml2 then ignores as many end tags
    changes = 0  # changes to the stack (a blocked end tag's walks stay the same until one)
    blocked: tuple[int, int, bytes] | None = None  # (depth, changes, name) of the last blocked end tag
    blocked_steps = 0
    for i, (raw, _, slash, name, _, closing) in enumerate(tokens):
        if slash:
            if stack and stack[-1] == name and not (discarded and name in _DISCARDED):
                stack.pop()
                opened[name] -= 1
                changes += 1
                continue
            if discarded and name in _DISCARDED:
                discarded -= 1
                continue
            depth = len(stack)
            if not opened.get(name):
                steps += depth
            elif blocked == (depth, changes, name):  # the same end tag blocked again: same walks
                steps += blocked_steps
            else:
                j = depth - 1 - stack[::-1].index(name)
                steps += depth - j
                if not _OUTRANK[rank_of(name, 100)].isdisjoint(stack[j + 1:]):
                    steps += depth - j  # the second walk, up to the element that blocks
                    blocked, blocked_steps = (depth, changes, name), 2 * (depth - j)
                else:
                    changes += 1
                    for top in stack[j:]:
                        opened[top] -= 1
                    del stack[j:]
        else:
            if raw:
                name, closing = raw, b""
            elif not name:
                continue
            if name in _DISCARDED:
                if name == b"body":
                    steps += len(stack)
                    if steps > budget:
                        return i
                if (name == b"body" and opened.get(b"body")) or (name == b"html" and stack) \
                        or (name == b"head" and len(stack) != 1):
                    discarded += 1
                    continue
            closes = closes_of(name)
            while closes and stack and stack[-1] in closes:
                opened[stack.pop()] -= 1
                changes += 1
            if closing or name in _VOID or len(stack) >= MAX_DEPTH:
                continue
            stack.append(name)
            opened[name] = opened.get(name, 0) + 1
            changes += 1
            continue
        if steps > budget:
            return i
    return None
