"""Content codings decoded in bounded pieces (crawl.store.codings.Meter), against the
standard library's one-shot decoders.

The fetch exchange and the WARC reader both feed bodies to a Meter in pieces
of 64 KiB; whatever the split, the Meter must produce what ``gzip``,
``zlib`` and ``brotli`` produce in one go, and count all of it against its
caps.
"""

from __future__ import annotations

import gzip
import random
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.store import Bomb, Meter


def _feed(meter: Meter, body: bytes, step: int) -> None:
    for i in range(0, len(body), step):
        meter.feed(body[i:i + step])
    meter.finish()


def _page(n_words: int, seed: int = 1) -> bytes:
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(2, 9))) for _ in range(3000)]
    return " ".join(rnd.choice(words) for _ in range(n_words)).encode()


def test_a_brotli_page_larger_than_a_piece_comes_out_whole() -> None:
    """brotli stops at its output limit with output still inside; it must be drained
    (a 2 MB page once came out as its first 393 KB: parse and dedupe saw a third)."""
    text = _page(300_000)
    meter = Meter("br", 1 << 30, 1e9, keep=len(text))
    _feed(meter, brotli.compress(text, quality=5), 1 << 16)
    assert meter.decoded == len(text)
    assert meter.text() == text
    assert not meter.broken


def test_a_brotli_bomb_is_counted_and_stopped() -> None:
    """52 bytes that inflate to 32 MiB: all of it counts against the cap."""
    bomb = brotli.compress(b"\0" * (32 << 20), quality=5)
    meter = Meter("br", 4 << 20, 1e9)
    with pytest.raises(Bomb, match="exceeds 4194304 bytes"):
        _feed(meter, bomb, 1 << 16)


def test_brotli_under_gzip_is_undone_whole() -> None:
    text = _page(100_000, seed=2)
    meter = Meter("br, gzip", 1 << 30, 1e9, keep=len(text))
    _feed(meter, gzip.compress(brotli.compress(text, quality=5)), 1 << 16)
    assert meter.text() == text


_MEMBER = st.binary(min_size=0, max_size=300)


@settings(max_examples=150, deadline=None)
@given(st.lists(_MEMBER, min_size=1, max_size=12), st.binary(max_size=40), st.integers(1, 700))
def test_gzip_members_decode_as_their_concatenation_whatever_the_split(
        members: list[bytes], junk: bytes, step: int) -> None:
    """Split anywhere (inside a member, inside the two magic bytes between members):
    the members come out joined, and bytes after the last one are trailing."""
    body = b"".join(gzip.compress(m, mtime=0) for m in members)
    tail = b"" if junk[:1] == b"\x1f" else junk  # junk that starts like a member is another story
    meter = Meter("gzip", 1 << 30, 1e9, keep=1 << 20)
    _feed(meter, body + tail, step)
    assert meter.text() == b"".join(members)
    assert meter.trailing == len(tail)
    assert not meter.broken


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=5000), st.integers(1, 9000), st.booleans())
def test_deflate_wrapped_or_raw_decodes_whatever_the_split(data: bytes, step: int, raw: bool) -> None:
    if raw:
        c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = c.compress(data) + c.flush()
    else:
        body = zlib.compress(data)
    meter = Meter("deflate", 1 << 30, 1e9, keep=1 << 20)
    _feed(meter, body, step)
    assert meter.text() == data
    assert not meter.broken


def test_many_gzip_members_in_one_piece_are_all_read() -> None:
    """10,000 members (the cap) in one piece: each decoded once, none lost."""
    body = b"".join(gzip.compress(bytes([65 + i % 26]), mtime=0) for i in range(10_000))
    meter = Meter("gzip", 1 << 30, 1e9, keep=1 << 20)
    _feed(meter, body, len(body))
    assert meter.decoded == 10_000 and not meter.broken
    over = Meter("gzip", 1 << 30, 1e9)
    _feed(over, body + gzip.compress(b"one too many", mtime=0), len(body))
    assert "more than 10000 gzip members" in (over.broken or "")
