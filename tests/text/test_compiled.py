"""crawl/text/_compiled.c gives exactly what the Python definitions give.

The compiled loops replace crawl.text's tokenizer and crawl.dedupe.simhash's numpy
passes on dedupe's hot path; a fingerprint stored by one must match the
other's, so each is compared with the Python path (and the textbook loops)
on the test web's pages, on a table of awkward markup, and on random input.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_text import AGREE, DIFFER, _test_web_pages

from crawl.dedupe.simhash import (
    SEPARATORS,
    block_hash_slow,
    hash_texts,
    simhash_text_slow,
    simhashes,
    word_hash_slow,
)
from crawl.text import analyse, compiled

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@contextmanager
def python_path() -> Iterator[None]:
    compiled.use(False)
    try:
        yield
    finally:
        compiled.use(True)


def both(fn, *args):  # type: ignore[no-untyped-def]
    """``fn(*args)`` compiled, then in Python."""
    assert compiled.use(True), "crawl/text/_compiled.c was not built: `pip install -e .` needs a C compiler (gcc)"
    fast = fn(*args)
    with python_path():
        slow = fn(*args)
    return fast, slow


def test_the_compiled_loops_were_built_and_are_used() -> None:
    assert compiled.built is not None, "crawl/text/_compiled.c was not built: `pip install -e .` needs a C compiler (gcc)"
    assert compiled.active is compiled.built
    with python_path():
        assert compiled.active is None


def _folded(page: bytes) -> tuple[bytes, str | None, str | None]:
    doc = analyse(page, None, "http://h.test/dir/", folded=True)
    return doc.raw, doc.canonical, doc.error


def test_visible_text_of_every_test_web_page() -> None:
    for page in _test_web_pages():
        fast, slow = both(_folded, page)
        assert fast == slow


def test_visible_text_of_the_snippet_tables() -> None:
    for page, *_ in AGREE + DIFFER:
        fast, slow = both(_folded, page)
        assert fast == slow, page


# markup pieces chosen to hit every branch of the tokenizer: raw-text elements and their end
# tags in any case, comments of every shape, bogus comments, quoted values holding '>',
# self-closing and nested boilerplate, elements never closed, '<' that starts nothing
_PIECES = [
    b"<", b">", b"/", b"/>", b"!", b"?", b"-", b"--", b"=", b'"', b"'", b" ", b"\t", b"\n", b"\r", b"\r\n",
    b"<!--", b"-->", b"--!>", b"<!-->", b"<!--->", b"<!doctype html>", b"<?xml v?>", b"</ 3>", b"<3", b"< p",
    b"<script>", b"</script>", b"<SCRIPT type=x>", b"</sCrIpT >", b"<scripts>", b"<style>", b"</style>",
    b"<title>", b"</title", b"<textarea>", b"</textarea>", b"<noscript>", b"<iframe src='>'>",
    b"<nav>", b"</nav>", b"<NAV/>", b"<header>", b"</header>", b"<footer>", b"</footer>", b"<form>", b"</form>",
    b"<aside>", b"</aside>", b"<svg>", b"</svg>", b"<template>", b"</template>", b"<embed>", b"<button>",
    b"<p>", b"</p>", b"<P class=\"a>b\">", b"<div>", b"</div>", b"<br/>", b"<li>", b"<td>", b"<span>",
    b"</span>", b"<a href=", b"<a href='x'>", b"</a>", b"<img src=x/>", b"<body>", b"<BODY class=b>",
    b"<link rel=canonical href=/c>", b"<link rel=\"canonical\" href=\"http://c.test/x\">",
    b"word", b"Word", b"WORDS", b"&amp;", b"&", b"&eacute;", b"\xc3\xa9", b"\xc2\xa0", b"\xe2\x80\x83", b"\xff",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=60).map(b"".join))
@settings(max_examples=600, deadline=None)
def test_visible_text_of_random_markup(page: bytes) -> None:
    fast, slow = both(_folded, page)
    assert fast == slow


# nesting: boilerplate inside boilerplate, self-closed, never closed, closed by an outer end tag
_NESTING = [b"<nav>", b"</nav>", b"<nav/>", b"<form>", b"</form>", b"<div>", b"</div>", b"<br>", b"</br>", b"x"]
_NESTED = [b"<nav><NAV/></nav>x</nav>", b"<form><form></form>x</form>y", b"<div><nav>a</div>b", b"<nav><nav>a</nav>b",
           b"<nav></div><nav>a</nav>", b"<header><br><img>x</header>y", b"<nav><span/>x</nav>y", b"<nav><br></br>x"]


@given(st.one_of(st.sampled_from(_NESTED), st.lists(st.sampled_from(_NESTING), max_size=16).map(b"".join)))
@settings(max_examples=1500, deadline=None)
def test_visible_text_of_random_nesting(page: bytes) -> None:
    fast, slow = both(_folded, page)
    assert fast == slow


_TEXT_BYTES = st.sampled_from([b"a", b"B", b"\xc3", b"\xa9", b"\x80", b"z", b"!", b"9", b"y" * 9, b"x" * 33]
                              + [bytes([c]) for c in SEPARATORS])


def _hashed(texts: list[bytes], prefixes: list[int], n: int) -> tuple[list[int], list[list[int]], list[list[bytes]], list[int]]:
    hashes, cuts, keys, wholes = hash_texts(texts, prefixes, n)
    return hashes.tolist(), cuts, keys, wholes


@given(st.lists(st.lists(_TEXT_BYTES, max_size=200).map(b"".join), max_size=6), st.data(), st.integers(1, 5))
@settings(max_examples=300, deadline=None)
def test_hash_texts_equals_numpy_and_the_textbook_loops(texts: list[bytes], data: st.DataObject, n: int) -> None:
    prefixes = data.draw(st.lists(u64, min_size=len(texts), max_size=len(texts)))
    fast, slow = both(_hashed, texts, prefixes, n)
    assert fast == slow
    hashes, cuts, keys, wholes = fast
    for text, c, k, whole, prefix in zip(texts, cuts, keys, wholes, prefixes, strict=True):
        spaced = text.translate(bytes.maketrans(SEPARATORS.replace(b"\n", b""), b" " * 32))
        blocks = [line.split() for line in spaced.split(b"\n") if line.split()]
        assert hashes[c[0]:c[-1]] == [word_hash_slow(w) for b in blocks for w in b]
        assert k == [prefix.to_bytes(8, "big") + block_hash_slow([word_hash_slow(w) for w in b]).to_bytes(8, "big")
                     for b in blocks]
        assert whole == simhash_text_slow(text, n)


def test_hash_texts_of_every_test_web_page() -> None:
    texts = [analyse(page, folded=True).raw for page in _test_web_pages()]
    for i in range(0, len(texts), 16):
        group = texts[i:i + 16]
        fast, slow = both(_hashed, group, list(range(len(group))), 4)
        assert fast == slow


@given(st.lists(u64, max_size=700), st.lists(st.integers(0, 700), max_size=12), st.integers(1, 6))
@settings(max_examples=200, deadline=None)
def test_simhashes_equal_numpy(words: list[int], marks: list[int], n: int) -> None:
    a = np.array(words, dtype=np.uint64)
    cuts = sorted({m for m in marks if m <= a.size} | {0, a.size})
    spans = list(zip(cuts, cuts[1:], strict=False))
    fast, slow = both(simhashes, a, spans, n)
    assert fast == slow


def test_bad_arguments_are_errors_not_crashes() -> None:
    c = compiled.built
    assert c is not None
    for call in (lambda: c.hash_texts([b"a", "str"], [0, 0], 4), lambda: c.hash_texts([b"a"], [], 4),
                 lambda: c.hash_texts([b"a"], [0], 0), lambda: c.simhashes(np.zeros(3, np.uint64), [(2, 9)], 4),
                 lambda: c.simhashes(np.zeros(3, np.uint32), [(0, 1)], 4), lambda: c.visible_folded("str")):
        try:
            call()
        except (TypeError, ValueError, IndexError):
            continue
        raise AssertionError("no error")


def _entities(text: bytes) -> bytes:
    from crawl.text.extract import _entities as entities

    return entities(text, True)


def _fold(text: bytes) -> bytes:
    from crawl.text import fold

    return fold(text)


def test_folding_of_every_code_point() -> None:
    # str.lower() and the non-ASCII spaces, for each code point alone, between letters,
    # and as a character reference (the compiled fold hands U+0130 and capital sigma
    # back to Python, whose lower case of them depends on more than the code point)
    cps = [c for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    for i in range(0, len(cps), 20_000):
        chunk = cps[i:i + 20_000]
        text = " ".join(f"a{chr(c)}b {chr(c)}" for c in chunk).encode()
        fast, slow = both(_fold, text)
        assert fast == slow
        refs = " ".join(f"&#{c};x&#x{c:X}" for c in chunk[::97]).encode()
        fast, slow = both(_entities, text + b" " + refs)
        assert fast == slow


_FOLD_PIECES = [
    b"a", b"Z", b" ", b"\n", b"\t", b"\x0b", b"<", b"#", b";", b"&", b"&amp;", b"&AMP", b"&amp", b"&ampxyz;",
    b"&#65;", b"&#x41", b"&#X6a;", b"&#;", b"&#x;", b"&#", b"&eacute;", b"&Eacute", b"&notit;", b"&not",
    b"&#931;", b"&Sigma;", b"&#1114112;", b"&#55296;", b"&#128;", b"&#0;", b"&nbsp;", b"&ThickSpace;",
    b"&" + b"x" * 40 + b";", "É".encode(), "ß".encode(), "İ".encode(), "Σ".encode(), "ς".encode(),
    "Ⱥ".encode(), "\u00a0".encode(), "\u3000".encode(), "\u2003".encode(), "日本".encode(), "\U0001f600".encode(),
    b"\xff", b"\xc3", b"\xe2\x82",
]


@given(st.lists(st.sampled_from(_FOLD_PIECES), max_size=40).map(b"".join))
@settings(max_examples=800, deadline=None)
def test_folding_of_random_text(text: bytes) -> None:
    fast, slow = both(_entities, text)
    assert fast == slow
    fast, slow = both(_fold, text)
    assert fast == slow


@given(st.lists(st.sampled_from([b"a", b"\x00", b"\x7f", b"\x80", b"\xbf", b"\xc0\x80", b"\xc2\xa0", b"\xe2\x82\xac",
                                 b"\xed\xa0\x80", b"\xef\xbf\xbf", b"\xf0\x9f\x98\x80", b"\xf4\x90\x80\x80",
                                 b"\xf5", b"\xff", b"\xe2\x82", b"abcdefgh"]), max_size=40).map(b"".join))
@settings(max_examples=500, deadline=None)
def test_utf8_check_agrees_with_decode(data: bytes) -> None:
    from crawl.text.charset import Detected, to_utf8

    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert compiled.built is not None
    assert compiled.built.is_utf8(data) is valid
    fast, slow = both(to_utf8, data, Detected("utf-8", "meta"))
    assert fast == slow


def test_hash_texts_of_a_list_changed_while_it_is_read() -> None:
    # a prefix's __index__ (Python code) replaces a text the C loop has already measured: the
    # words found in the old text must not be read from the new, shorter one (out of bounds)
    c = compiled.built
    assert c is not None
    texts = [b"a b", b"word " * 2000 + b"x" * 40]
    original = list(texts)

    class Sneaky:
        def __index__(self) -> int:
            texts[1] = bytes(3)
            return 7

    got = c.hash_texts(texts, [Sneaky(), 1], 4)
    assert got == c.hash_texts(original, [7, 1], 4)


def test_simhashes_of_spans_changed_while_they_are_read() -> None:
    # an end's __index__ empties the list of spans while its (start, end) tuple is being read
    c = compiled.built
    assert c is not None
    words = np.arange(50, dtype=np.uint64)

    class Sneaky:
        def __index__(self) -> int:
            spans.clear()
            return 50

    spans: list[tuple[int, object]] = [(0, Sneaky()), (0, 50)]
    assert c.simhashes(words, spans, 4) == c.simhashes(words, [(0, 50), (0, 50)], 4)


def test_long_references_are_not_kept_from_page_to_page() -> None:
    # the fold keeps folded references for the next page; a page's numeric reference may be
    # megabytes of leading zeros (hex has no digit limit): 4,096 of those must not be kept
    import tracemalloc

    c = compiled.built
    assert c is not None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(16):
            assert c.fold_text(b"&#x" + b"0" * 1_000_000 + b"%x;" % (0x61 + i), True) == bytes([0x61 + i])
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4_000_000


def test_a_failing_long_word_hash_is_an_error() -> None:
    # the hash of a word over 32 bytes comes from a Python callable: what it raises (or a
    # result that is no int) must come back as that error, not a result with an error set
    from crawl.dedupe import simhash

    c = compiled.built
    assert c is not None
    constants = (*simhash._K, simhash._Q, simhash._C, simhash._P)
    try:
        c.configure_simhash(*constants, lambda word: "not an int")
        try:
            c.hash_texts([b"x" * 40], [0], 4)
        except TypeError:
            pass
        else:
            raise AssertionError("no error")
    finally:
        c.configure_simhash(*constants, simhash.xxhash.xxh3_64_intdigest)
    assert hash_texts([b"x" * 40], [0], 4)[0].tolist() == [simhash.xxhash.xxh3_64_intdigest(b"x" * 40)]


def test_simhashes_of_spans_given_as_lists() -> None:
    # any (start, end) pair, as the Python loop takes it: a list was a SystemError
    words = np.arange(50, dtype=np.uint64)
    fast, slow = both(simhashes, words, [[0, 20], [20, 50]], 4)
    assert fast == slow


def test_configure_text_forgets_the_references_folded_before() -> None:
    # the folded references are kept from call to call; configured again (other spaces),
    # a reference must fold by the new configuration, not the one it was first folded by
    from crawl.text import extract as text

    c = compiled.built
    assert c is not None
    config = ([t.encode() for t in text.RAW_TEXT_TAGS], [t.encode() for t in text.BLOCK_TAGS],
              text._CONTAINERS, sorted(text._VOID), text._unescape)
    try:
        assert c.fold_text(b"a&#x3000;b", True) == b"a b"
        c.configure_text(*config, text._UNICODE_SPACES.replace("\u3000", ""), 1)
        assert c.fold_text(b"a&#x3000;b", True) == "a\u3000b".encode()
    finally:
        c.configure_text(*config, text._UNICODE_SPACES, 2)
    assert c.fold_text(b"a&#x3000;b", True) == b"a b"


def test_hash_texts_called_again_from_inside_itself() -> None:
    # the long-word hash is Python (xxh3 may let another thread in): a call made meanwhile
    # must not reuse the scratch memory the first call is still reading
    import xxhash

    from crawl.dedupe import simhash

    c = compiled.built
    assert c is not None
    texts = [b" ".join(b"w%d" % i for i in range(3000)) + b" " + b"L" * 40 + b" tail", b"x y z " * 500]
    expected = c.hash_texts(texts, [1, 2], 4)

    def reentrant(word: bytes) -> int:
        assert c.hash_texts([b"q " * 20_000], [3], 4)  # a bigger one: it would grow (move) the scratch
        return xxhash.xxh3_64_intdigest(word)

    constants = (*simhash._K, simhash._Q, simhash._C, simhash._P)
    c.configure_simhash(*constants, reentrant)
    try:
        got = c.hash_texts(texts, [1, 2], 4)
    finally:
        c.configure_simhash(*constants, xxhash.xxh3_64_intdigest)
    assert got == expected
