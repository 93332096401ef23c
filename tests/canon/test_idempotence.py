"""Canonicalising twice changes nothing, and decoding an escape never makes one.

``canon(canon(x)) == canon(x)`` is what lets every stage canonicalise
again without moving a URL to another key; a percent rule that turned
``%4%44`` into ``%4D`` broke it (the next run made ``M``, another
resource). Checked on stray-percent shapes that the general URL strategy
of test_canon.py rarely builds, and over the committed seed corpus
(tests/fuzz/corpus/canon/, one URL per line), which the fuzz harness
also reads.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawl.canon import CanonError, canonicalize
from crawl.canon.rules import _pct

CORPUS = Path(__file__).resolve().parent.parent / "fuzz" / "corpus" / "canon"

# Pieces that make and break escapes: lone '%', '%h', hex digits, escapes of
# hex digits (which decode to what can complete a stray '%'), and others.
_PIECE = st.sampled_from([
    "%", "%%", "%4", "%2", "4", "1", "D", "d", "a", "g", "%44", "%4d", "%34", "%31", "%61",
    "%30", "%41", "%2F", "%2f", "%25", "%7e", "%5F", "%2E", "-", "~", "/", "é",
])
_TEXT = st.lists(_PIECE, max_size=10).map("".join)

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _corpus() -> list[str]:
    lines = []
    for path in sorted(CORPUS.glob("*.txt")):
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    return lines


def test_the_corpus_is_there() -> None:
    assert len(_corpus()) >= 50


@pytest.mark.parametrize("url", _corpus())
def test_idempotent_over_the_corpus(url: str) -> None:
    try:
        once = canonicalize(url)
    except CanonError:
        return
    assert canonicalize(once.url) == once


@PROPS
@given(_TEXT, _TEXT)
@example("%4%44", "")
@example("%%34%31", "q=%0%30")
def test_idempotent_with_stray_percents(path: str, query: str) -> None:
    url = f"http://a.test/{path}?{query}"
    try:
        once = canonicalize(url)
    except CanonError:
        return
    assert canonicalize(once.url) == once


@PROPS
@given(_TEXT)
@example("%4%44")
@example("%%34%31")
@example("%0%30")
def test_percent_rule_keeps_the_bytes_a_server_sees(text: str) -> None:
    """Decoding unreserved escapes and upper-casing the rest leave the
    percent-decoded bytes as they were; a new escape would change them
    (``%4%44`` decodes to ``%4D``, ``%4D`` to ``M``)."""
    text = text.replace("é", "%C3%A9")  # the rule sees ada's output: ASCII only
    out = _pct(text)
    assert unquote_to_bytes(out) == unquote_to_bytes(text)
    assert _pct(out) == out


@pytest.mark.parametrize(("raw", "want"), [
    ("http://a.test/%4%44", "http://a.test/%4%44"),
    ("http://a.test/%%34%31", "http://a.test/%%341"),
    ("http://a.test/%0%30", "http://a.test/%0%30"),
    ("http://a.test/?q=%4%44", "http://a.test/?q=%4%44"),
    ("http://a.test/%4%4d", "http://a.test/%4M"),  # 'M' cannot finish an escape
    ("http://a.test/%41%42", "http://a.test/AB"),  # no stray '%': decoded as before
])
def test_no_new_escape(raw: str, want: str) -> None:
    assert canonicalize(raw).url == want


@pytest.mark.parametrize(("raw", "want"), [
    ("http://2..", "http://0.0.0.2/"),
    ("http://1.2../a", "http://1.0.0.2/a"),
    ("http://0x7f.1../", "http://127.0.0.1/"),  # loopback in disguise: the policy must see it
    ("http://example.com.../x", "http://example.com/x"),
])
def test_a_host_with_trailing_dots_is_canonical_after_one_pass(raw: str, want: str) -> None:
    """WHATWG drops one empty last label before its "ends in a number" check,
    so ``2..`` is a domain until the root-dot rule strips the dots; the host is
    then read again (found by the canon fuzz target)."""
    once = canonicalize(raw)
    assert once.url == want
    assert canonicalize(once.url) == once
