"""The parse stage's fast paths give exactly what their definitions give.

Two of them: ``_Emitter.stream``, the per-link loop written out for HTML
pages, against the loop over :meth:`_Emitter.emit` it replaced; and
crawl/text/_compiled.c's ``stack_cut``, the tokens and stack model of
:mod:`crawl.parse.budget` in one compiled pass, against the Python regex
and model. Both are compared on the test web's pages, on hostile pages
(the shapes of scripts/bench_parse.py, smaller) and on random markup.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice

import pytest
from cputime import cpu_seconds_at_most

from crawl.parse import ParseConfig, budget, links
from crawl.parse import pages as P
from crawl.parse.traps import TrapPolicy
from crawl.testweb import Web, WebConfig
from crawl.testweb.content import page_html
from crawl.text import compiled

HTML = [("Content-Type", "text/html; charset=utf-8")]
_FIRST = b"<html><body><a href=/first>first</a>"


def _fill(unit: bytes, head: bytes = _FIRST, size: int = 400_000) -> bytes:
    return head + unit * ((size - len(head)) // len(unit))


def hostile() -> dict[str, bytes]:
    deep = _FIRST + b"<div>" * 2040
    return {
        "links": b"<html><body>" + b"".join(
            b'<p>words <a href="/s/page-%d.html?x=%d" rel=%s>anchor %d</a></p>\n'
            % (i, i, (b"nofollow", b"ugc", b"x")[i % 3], i) for i in range(9000)),
        "one link": _fill(b"<a href=/x>x</a>"),
        "stray end tags": _fill(b"</x>", deep),
        "blocked end tags": _fill(b"</span>", _FIRST + b"<span>" + b"<div>" * 2000),
        "repeated body": _fill(b"<body>", deep),
        "unclosed p": _fill(b"<p>x"),
        "nested anchors": _fill(b"<a href=/n><span>text "),
        "head of links": b"<html><head>" + b"<link rel=x href=/a>" * 20_000,
        "raw text and comments": _fill(b"<script>if (a</b) x()</script><!-- </div> --><title>t</title></q>",
                                       deep),
        "traps and junk": b"<html><body>" + b"".join(
            b"<a href='/cal/2031/%d/%d/'>c</a><a href='mailto:x@y'>m</a><a href='http://[::1'>b</a>"
            b"<a href='/a/b/a/b/a/b/%d'>r</a><meta http-equiv=refresh content='0; url=/r%d'>"
            b"<iframe src=/f%d></iframe><area href=/m%d alt=map>"
            % (i, i, i, i, i, i) for i in range(3000)),
    }


def web_pages() -> list[tuple[str, bytes]]:
    web = Web(WebConfig(hosts=4, pages=15, mix="plain"))
    return [(web.url(i, web.page(i, k).path), page_html(web, i, k, 0)) for i in range(4) for k in range(15)]


# -- the emitter ---------------------------------------------------------------------
def emit_each(self: P._Emitter, stream: links.LinkStream, nofollow: bool) -> None:
    """The loop _Emitter.stream replaced: one emit() call per link."""
    r, cfg = self.result, self.cfg
    for href, source, rels, position, element in stream:
        if len(r.links) >= cfg.max_links:
            r.add("links_cut", 1 + stream.count_rest())
            break
        penalty = 0
        if nofollow or "nofollow" in rels:
            if not cfg.follow_nofollow:
                r.add("nofollow_links")
                continue
            penalty += 1
        elif rels and not P._DEMOTING_RELS.isdisjoint(rels):
            penalty += 1
        if position >= P.POSITION_DEMOTE:
            penalty += 1
        self.emit(href, source, rels, position, source == "meta-refresh", penalty, element)


@contextmanager
def slow_emitter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as m:
        m.setattr(P._Emitter, "stream", emit_each)
        yield


CONFIGS = [
    ParseConfig(traps=TrapPolicy(year=2026), rejects=True),
    ParseConfig(follow_nofollow=True, max_links=1000, anchor_chars=10),
    ParseConfig(traps=TrapPolicy(mode="off"), max_links=50),
]


def _result(url: str, body: bytes, cfg: ParseConfig, parent: dict[str, object]) -> tuple[object, ...]:
    res = P.parse_body(url, HTML, body, config=cfg, parent=parent, now=1.0)
    return res.links, res.rejects, list(res.counts.items()), res.page


@pytest.mark.parametrize("cfg", CONFIGS, ids=["traps-rejects", "follow-nofollow", "traps-off"])
def test_the_written_out_link_loop_gives_what_emit_gives(cfg: ParseConfig,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [*web_pages(), *(("http://h.test/dir/x.html", b) for b in hostile().values())]
    parents = [{"depth": 2, "priority": 3}, {"depth": 0, "duplicate_of": "x"}]
    links_made = 0
    for n, (url, body) in enumerate(cases):
        parent = parents[n % 2]
        fast = _result(url, body, cfg, parent)
        with slow_emitter(monkeypatch):
            slow = _result(url, body, cfg, parent)
        assert fast == slow, url
        links_made += len(fast[0])  # type: ignore[arg-type]
    assert links_made > 500


# -- the compiled stack model ----------------------------------------------------------
def python_cut(low: bytes, steps: int, tokens: list[tuple[bytes, ...]] | None = None) -> tuple[int, int] | None:
    """budget's Python tokens and model: (token index, its offset) where the walks pass ``steps``."""
    i = budget._stack_steps(budget._TOKEN.findall(low) if tokens is None else tokens, steps)
    if i is None:
        return None
    m = next(islice(budget._TOKEN.finditer(low), i, None), None)
    return i, (m.start() if m is not None else len(low))


def compiled_cut(low: bytes, steps: int) -> tuple[int, int] | None:
    assert compiled.built is not None, "crawl/text/_compiled.c was not built: `pip install -e .` needs gcc"
    found = compiled.built.stack_cut(low, steps)
    return None if found is None else tuple(found)


def test_the_compiled_stack_model_cuts_where_the_python_one_does_on_hostile_and_test_web_pages() -> None:
    pages = [*hostile().values(), *(b for _, b in web_pages())]
    cuts = 0
    for body in pages:
        low = body.lower()
        tokens = budget._TOKEN.findall(low)
        for steps in (budget.STACK_STEPS, 1_000_000, 5_000, 50):
            want = python_cut(low, steps, tokens)
            assert compiled_cut(low, steps) == want, (body[:80], steps)
            cuts += want is not None
    assert cuts > 10


_PIECES = [b"<div>", b"</div>", b"<p>", b"</p>", b"<body>", b"<html>", b"<head>", b"</body>", b"</html>",
           b"<table>", b"</table>", b"<tr>", b"<td>", b"</td>", b"</tr>", b"<li>", b"</li>", b"<span>",
           b"</span>", b"<a href='/x>y'>", b"</a>", b'<b c="d>">', b"<br/>", b"<img/>", b"<x/ y>", b"</x>",
           b"<script>", b"</script>", b"<script/>", b"<SCRIPT a=1>", b"</script x>", b"<style>", b"</style",
           b"<textarea x=1>", b"</textarea >", b"<title>t</title>", b"<titles>", b"<plaintext>",
           b"<!-- c -->", b"<!-->", b"<!--->", b"<!---->", b"<!--", b"-->", b"--!>", b"<!doctype html>", b"<!",
           b"<?x>", b"</ x>", b"</1>", b"<1>", b"< ", b"<", b">", b"/", b"/>", b"=", b"= ", b"'", b'"', b"x",
           b" ", b"\n", b"<option>", b"<optgroup>", b"<dd>", b"<dt>", b"<dl>", b"<thead>", b"<tbody>",
           b"\xc3\xa9", b"<\xc3\xa9>"]


def test_the_compiled_stack_model_cuts_where_the_python_one_does_on_random_markup() -> None:
    rnd = random.Random(15)
    cuts = 0
    for _ in range(6000):
        low = b"".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 80))).lower()
        steps = rnd.choice((0, 1, 3, 10, 30, 100))
        want = python_cut(low, steps)
        assert compiled_cut(low, steps) == want, (low, steps)
        cuts += want is not None
    assert cuts > 1000


def test_the_budget_gives_the_same_limits_compiled_and_in_python() -> None:
    pages = [*hostile().values(), _fill(b"</x>", _FIRST + b"<div>" * 2040, 5_000_000)]
    reasons = set()
    for body in pages:
        assert compiled.use(True)
        fast = budget.limit(body)
        compiled.use(False)
        try:
            slow = budget.limit(body)
        finally:
            compiled.use(True)
        assert fast == slow
        reasons.add(fast.reason if fast else None)
    assert {"nesting", "tags"} <= reasons


# -- the compiled attribute counts -------------------------------------------------------
_ATTRIBUTE_PIECES = [b"<div", b"<B", b"<a", b"<", b">", b"/>", b"/", b" ", b"\t", b"\n", b"\f", b"\r", b"a", b"x1",
                     b"=", b" = ", b'"', b"'", b'"v a>l"', b"'v>'", b"v", b"v=w", b"<1", b"<br/", b"\xc3\xa9",
                     b"&amp;", b"-->", b"<!--"]


def _attribute_soup(rnd: random.Random) -> bytes:
    parts = []
    for _ in range(rnd.randint(0, 30)):
        if rnd.random() < 0.2:  # a tag of many attributes, around the thresholds
            n = rnd.choice((budget.MANY_ATTRIBUTES - 1, budget.MANY_ATTRIBUTES, budget.MAX_ATTRIBUTES,
                            budget.MAX_ATTRIBUTES + 1, rnd.randint(0, 400)))
            sep = rnd.choice((b" ", b"/", b'="x" ', b"\n", b"=y "))
            parts.append(b"<t " + sep.join(b"a%d" % i for i in range(n)) + rnd.choice((b">", b"/>", b"")))
        else:
            parts.append(rnd.choice(_ATTRIBUTE_PIECES))
    return b"".join(parts)


def test_the_compiled_attribute_counts_are_the_regex_counts() -> None:
    assert compiled.built is not None, "crawl/text/_compiled.c was not built: `pip install -e .` needs gcc"
    c = compiled.built
    rnd = random.Random(19)
    for _ in range(4000):
        data = _attribute_soup(rnd)
        start, end = sorted(rnd.randint(0, len(data) + 2) for _ in range(2))
        assert c.count_attributes(data) == len(budget._ONE.findall(data)), data
        assert c.count_attributes(data, start, end) == len(budget._ONE.findall(data, start, end)), data
        chars = b" \t\n\r\f/\"'"
        assert c.count_bytes(data, chars) == sum(data.count(bytes([ch])) for ch in chars)


def test_the_compiled_attribute_search_cuts_where_the_regex_one_does() -> None:
    assert compiled.built is not None, "crawl/text/_compiled.c was not built: `pip install -e .` needs gcc"
    rnd = random.Random(23)
    cuts = 0
    pages = [_attribute_soup(rnd) * rnd.choice((1, 10, 60)) for _ in range(800)]
    for data in pages:
        end = rnd.randint(0, len(data))
        compiled.use(False)
        try:
            want = budget._attributes(data, end), budget._attribute_cut(data.lower(), 3000)
        finally:
            compiled.use(True)
        got = budget._attributes(data, end), budget._attribute_cut(data.lower(), 3000)
        assert got == want, data[:200]
        cuts += want[0] is not None
    assert cuts > 50


def _attributes_from_every_lt(data: bytes, end: int) -> int | None:
    """The search's definition: a tag tried from every '<' (n*n on `<b<b<b...`)."""
    many = re.compile(rb"<" + budget._TAG_NAME + budget._ATTRIBUTE + b"{%d}" % budget.MANY_ATTRIBUTES)
    counted, pos = 0, 0
    while (m := many.search(data, pos, end)) is not None:
        more = budget._MORE.match(data, m.end(), end)
        n = budget.MANY_ATTRIBUTES + (len(budget._ONE.findall(data, more.start(), more.end())) if more else 0)
        counted += n
        if n > budget.MAX_ATTRIBUTES or counted > budget.ATTRIBUTE_BUDGET:
            return m.start()
        pos = m.start() + 1
    return None


def test_the_attribute_search_skips_only_names_that_cannot_start_a_tag() -> None:
    """The search steps past a tag name whose tag has few attributes: the tags from a
    '<' inside it (`<b<b`) end with it and share its attributes. It cuts where trying
    every '<' cuts, compiled and in Python, on soups built of names with '<' in them."""
    rnd = random.Random(29)
    pieces = [*_ATTRIBUTE_PIECES, b"<b<b", b"<a<a<a", b"b<", b"<x<y z"]
    cuts = 0
    for _ in range(600):
        data = b"".join(rnd.choice(pieces) if rnd.random() < 0.7 else _attribute_soup(rnd)
                        for _ in range(rnd.randint(1, 40))) * rnd.choice((1, 20))
        end = rnd.randint(0, len(data))
        want = _attributes_from_every_lt(data, end)
        compiled.use(False)
        try:
            assert budget._attributes(data, end) == want, data[:200]
        finally:
            compiled.use(True)
        assert budget._attributes(data, end) == want, data[:200]
        cuts += want is not None
    assert cuts > 20


def test_a_tag_name_full_of_angle_brackets_is_searched_in_linear_time() -> None:
    """`<bbbbbbbbbb` 29,000 times (under the tags cap) is one tag name: tried from every
    '<' it took 2 s compiled and over 5 s in Python (16,000 of `<b`: 0.56 / 1.5 s)."""
    page = b"<html><body><p>" + b"<bbbbbbbbbb" * 29_000 + b" a>x</p>"
    for fast in (True, False):
        compiled.use(fast)
        try:
            with cpu_seconds_at_most(0.5):
                assert budget.limit(page) is None
                assert budget._attributes(page, len(page)) is None
        finally:
            compiled.use(True)
