"""The parse work of one page is bounded (crawl/parse/budget.py, crawl/parse/links.py).

Each hostile shape is parsed at a size and at twice that size. The work is
counted, not timed, from what libxml2 itself built out of the part of the
page it was given (``parse_limit_at`` says where the parse stopped), in the
terms of libxml2 2.14's own loops:

* one step per element;
* per element with a attributes, a(a+1)/2 steps: each attribute is appended
  to a list walked from its head (``xmlNewPropInternal``);
* per end tag and per ``<body>`` read, one walk over the stack of open
  elements, as deep as the tree (``htmlParseEndTag``, ``htmlParseStartTag``).

Doubling the input may at most about double that work (quadratic shapes
fail that), and each part stays under the budget's bound (shapes that are
linear but heavy, thousands of stack steps per byte, fail that). The links
before the cut are kept, and the page event names the bound.
"""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from cputime import cpu_seconds_at_most
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from crawl.parse import ParseConfig
from crawl.parse.budget import (
    _ONE,
    _TOKEN,
    ATTRIBUTE_TOTAL,
    MAX_ATTRIBUTES,
    MAX_DEPTH,
    MAX_TAGS,
    STACK_STEPS,
    _attribute_bound,
    _attribute_cut,
    _attribute_total,
)
from crawl.parse.links import ANCHOR_NODES, FACT_ELEMENTS, MAX_WALKED, anchor_text
from crawl.parse.pages import PageResult, parse_body
from crawl.testweb import Web, WebConfig
from crawl.testweb.content import page_html

PAGE = "http://a.test/"
HTML = [("Content-Type", "text/html; charset=utf-8")]
RATIO = 2.5  # "about double"
HEAD = b"<html><body><a href=/first>first</a><a href=/second>second</a>"
FIRST = ["http://a.test/first", "http://a.test/second"]
# libxml2 as crawl.parse.links runs it (huge_tree: 2,048 deep)
_PARSER = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True,
                           collect_ids=False, default_doctype=False, huge_tree=True)
_WALKS = re.compile(rb"</|<body", re.I)


@dataclass(frozen=True)
class Work:
    elements: int
    attributes: int
    list_steps: int  # appending attributes
    stack_steps: int  # end tags and <body>s walking the stack of open elements

    @property
    def total(self) -> int:
        return self.elements + self.list_steps + self.stack_steps


def libxml2_work(body: bytes, res: PageResult) -> Work:
    """The work libxml2 does on the part of ``body`` the parse read, counted from its tree."""
    assert res.page is not None
    at = res.page.get("parse_limit_at")
    read = body if at is None else body[:at]
    root = etree.fromstring(read, _PARSER)
    elements = attributes = list_steps = depth = deepest = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        if event == "end":
            depth -= 1
            continue
        depth += 1
        deepest = max(deepest, depth)
        a = len(el.attrib)
        elements += 1
        attributes += a
        list_steps += a * (a + 1) // 2
    walks = len(_WALKS.findall(read))
    return Work(elements, attributes, list_steps, walks * min(deepest, MAX_DEPTH))


def parse(body: bytes, **cfg: object) -> PageResult:
    return parse_body(PAGE, HTML, body, config=ParseConfig(**cfg))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Shape:
    name: str
    make: Callable[[int], bytes]
    n: int
    reason: str  # the bound that stops it, at size 2n


def _tag_with(n: int, name: bytes = b"div") -> bytes:
    return b"<" + name + b" " + b" ".join(b"a%d" % i for i in range(n)) + b">"


SHAPES = [
    # 58 s of CPU for 64,000 attributes before: quadratic
    Shape("one-tag-many-attributes", lambda n: HEAD + _tag_with(n) + b"<a href=/after>after</a>", 1000,
          "attributes"),
    # tags of fifteen attributes each (each under the search's threshold): linear, but heavy
    Shape("attributes-in-every-tag", lambda n: HEAD + _tag_with(15, b"br") * n, 12_000, "attributes"),
    # an end tag that matches nothing open walks the whole stack
    Shape("stray-end-tags", lambda n: HEAD + b"<div>" * 2000 + b"</x>" * n, 6000, "nesting"),
    # a higher-priority element above it keeps </span> from closing: it walks again each time
    Shape("blocked-end-tags", lambda n: HEAD + b"<span>" + b"<div>" * 2000 + b"</span>" * n, 6000,
          "nesting"),
    # each <body> walks the stack looking for the first one
    Shape("body-tags", lambda n: HEAD + b"<div>" * 2000 + b"<body>" * n, 6000, "nesting"),
    # elements: 1.25 million in 5 MB of <p>
    Shape("many-elements", lambda n: HEAD + b"<p>x" * n, 40_000, "tags"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_hostile_page_work_is_bounded(shape: Shape) -> None:
    small, big = shape.make(shape.n), shape.make(2 * shape.n)
    r1, r2 = parse(small), parse(big)
    w1, w2 = libxml2_work(small, r1), libxml2_work(big, r2)
    assert w2.total <= RATIO * w1.total, f"{shape.name}: work grew {w2.total / w1.total:.2f}x ({w1} -> {w2})"
    for w in (w1, w2):
        assert w.elements <= MAX_TAGS + 8
        assert w.attributes <= ATTRIBUTE_TOTAL + MAX_ATTRIBUTES
        assert w.list_steps <= ATTRIBUTE_TOTAL * MAX_ATTRIBUTES // 2
        assert w.stack_steps <= 1.2 * STACK_STEPS, f"{shape.name}: {w}"
    assert r2.page is not None and r2.page["parse_limit"] == shape.reason
    assert 0 < r2.page["parse_limit_at"] < len(big)
    assert r2.counts["parse_limit"] == 1
    assert [r["url"] for r in r2.links][:2] == FIRST  # the links before the cut are kept


def test_the_cut_falls_at_a_tag_and_keeps_everything_before_it() -> None:
    body = HEAD + b"<a href=/third>third</a>" + _tag_with(MAX_ATTRIBUTES + 1) + b"<a href=/after>after</a>"
    res = parse(body)
    assert res.page is not None and res.page["parse_limit"] == "attributes"
    assert body[res.page["parse_limit_at"]:].startswith(b"<div a0 a1")
    assert [r["url"] for r in res.links] == [*FIRST, "http://a.test/third"]
    # one attribute fewer is read whole
    whole = parse(HEAD + _tag_with(MAX_ATTRIBUTES) + b"<a href=/after>after</a>")
    assert whole.page is not None and "parse_limit" not in whole.page
    assert [r["url"] for r in whole.links] == [*FIRST, "http://a.test/after"]


def test_a_tag_hidden_in_a_comment_the_scan_misreads_is_still_found() -> None:
    # the comment ends inside what a tokenizer would take for a quoted value;
    # the tag after it is libxml2's, with 2,000 attributes: searched from every '<'
    body = HEAD + b'<!--<x b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 b16 c="-->' + _tag_with(2000)[:-1] + b'">'
    res = parse(body)
    assert res.page is not None and res.page["parse_limit"] == "attributes"
    assert libxml2_work(body, res).list_steps < 1000


def test_ordinary_pages_are_read_whole() -> None:
    web = Web(WebConfig(hosts=2, pages=20, min_size=30_000, max_size=60_000, mix="plain"))
    for i in range(2):
        for k in range(20):
            res = parse(page_html(web, i, k, 0))
            assert res.page is not None and "parse_limit" not in res.page and "parse_limit" not in res.counts


def test_the_walk_over_the_tree_is_bounded_too() -> None:
    # Python pays 2-10 us per link-bearing element: past MAX_WALKED the rest is not read
    body = HEAD + b"".join(b"<link rel=next href=/l%d>" % i for i in range(MAX_WALKED + 500))
    res = parse(body, max_links=10 * MAX_WALKED)
    assert res.page is not None and res.page["parse_limit"] == "links" and "parse_limit_at" not in res.page
    assert len(res.links) == MAX_WALKED and [r["url"] for r in res.links][:2] == FIRST
    # the page's facts come from its first FACT_ELEMENTS base, meta, link and title elements
    late = b"<html><head>" + b"<meta name=x content=y>" * FACT_ELEMENTS + b"<meta name=robots content=nofollow>"
    early = b"<html><head>" + b"<meta name=x content=y>" * (FACT_ELEMENTS - 1) + b"<meta name=robots content=nofollow>"
    assert parse(late + b"<a href=/a>a</a>").page["nofollow"] is False  # type: ignore[index]
    assert parse(early + b"<a href=/a>a</a>").page["nofollow"] is True  # type: ignore[index]


def test_libxml2_giving_up_at_its_nesting_limit_is_a_parse_limit() -> None:
    res = parse(HEAD + b"<span>" * (MAX_DEPTH + 100) + b"<a href=/deep>deep</a>")
    assert res.page is not None and res.page["parse_limit"] == "depth"
    assert "parse_limit_at" not in res.page and res.counts["parse_limit"] == 1
    assert [r["url"] for r in res.links] == FIRST


def test_anchor_text_reads_a_bounded_part_of_a_link() -> None:
    # Links nested in links each hold the rest of the page; their text is taken
    # from at most ANCHOR_NODES elements, so 2n of them cost 2n, not 4n squared.
    doc = etree.fromstring(b"<a href=/x>" + b"<b></b>" * ANCHOR_NODES + b"far</a>", _PARSER)
    a = next(doc.iter("a"))
    assert anchor_text(a, 100) == ""  # the text lies past the elements looked at
    near = etree.fromstring(b"<a href=/x>" + b"<b></b>" * (ANCHOR_NODES - 2) + b"near</a>", _PARSER)
    assert anchor_text(next(near.iter("a")), 100) == "near"
    nested = parse(HEAD + b"".join(b"<a href=/n%d><span>word " % i for i in range(1000)))
    anchors = [r.get("anchor") for r in nested.links[2:]]
    assert len(anchors) == 1000 and all(a and a.startswith("word word") for a in anchors[:-64])


def test_a_huge_title_costs_no_more_than_its_first_characters() -> None:
    body = b"<html><head><title>" + b"wo " * 1_000_000 + b"</title></head><body><a href=/x>x</a>"
    parse(body)  # warm
    tracemalloc.start()
    try:
        res = parse(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.page is not None and res.page["title"] == " ".join(["wo"] * 100)[:200]
    assert peak < 8 * len(body)  # splitting the whole title made a million strings (> 50 MB)


def test_a_link_header_of_angle_brackets_is_read_in_linear_time() -> None:
    # <([^>]*)> backtracked from every '<': 100 KB (the head's cap) took about a minute
    with cpu_seconds_at_most(10.0):
        headers = HTML + [("Link", "<" * 100_000), ("Link", "</c>; rel=canonical")]
        res = parse_body(PAGE, headers, b"<a href=/x>x</a>")
        assert [r["url"] for r in res.links] == ["http://a.test/c", "http://a.test/x"]


_SOUP = st.lists(st.sampled_from([
    b"<a", b"<div", b"<link", b"</a>", b"</div>", b">", b"/>", b" ", b"\t", b"\n", b"/", b"=", b'"', b"'",
    b"x", b"href", b"=v", b'="q q"', b"='s'", b"<!--", b"-->", b"<script>", b"</script>", b"<body"]),
    max_size=300).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(_SOUP)
def test_the_attribute_bound_is_never_below_the_attributes_counted(page: bytes) -> None:
    """The model skips its attribute count when this memchr bound is under the
    budget (a head of 200,000 ``<link>``), so the bound must hold for any markup."""
    low = page.lower()
    tokens = _TOKEN.findall(low)
    counted = sum(len(_ONE.findall(t[1])) + len(_ONE.findall(t[4])) for t in tokens)
    assert _attribute_bound(low) >= counted


@settings(max_examples=300, deadline=None)
@given(_SOUP, st.integers(0, 40))
def test_the_lazy_attribute_count_cuts_where_the_whole_count_does(page: bytes, budget: int) -> None:
    """Pages that only the attribute budget can stop are tokenized lazily, up to
    the cut; the cut must be the token where the count over all tokens passes."""
    low = page.lower()
    tokens = _TOKEN.findall(low)
    i = _attribute_total(tokens, budget)
    want = None if i is None else (next(m for k, m in enumerate(_TOKEN.finditer(low)) if k == i).start(), "attributes")
    assert _attribute_cut(low, budget) == want
