"""The decompression meter that enforces the decoded-size and ratio caps."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.net.request import wire_url
from crawl.store import Bomb, Meter


def _encode(kind: str, data: bytes) -> bytes:
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "deflate":
        return zlib.compress(data)
    if kind == "raw-deflate":
        c = zlib.compressobj(wbits=-15)
        return c.compress(data) + c.flush()
    if kind == "br":
        return brotli.compress(data, quality=1)
    return data


def _feed(m: Meter, raw: bytes, cuts: list[int]) -> None:
    pos = 0
    for c in sorted(set(cuts)):
        m.feed(raw[pos:c])
        pos = c
    m.feed(raw[pos:])


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=20000), kind=st.sampled_from(["gzip", "deflate", "raw-deflate", "br", ""]),
       cuts=st.lists(st.integers(min_value=0, max_value=30000), max_size=8))
def test_meter_counts_and_keeps_exactly_what_decodes(data: bytes, kind: str, cuts: list[int]) -> None:
    raw = _encode(kind, data)
    header = "deflate" if kind == "raw-deflate" else kind
    m = Meter(header, max_decoded=10 << 20, max_ratio=1e9, keep=5000)
    _feed(m, raw, [c for c in cuts if c <= len(raw)])
    assert m.decoded == len(data) and m.raw == len(raw)
    assert m.text() == data[:5000]
    assert not m.broken


def test_raw_deflate_is_recognised_whatever_the_first_chunk() -> None:
    # a server that sends raw deflate as "deflate", one byte at a time (a slow drip): the
    # zlib decoder takes the first byte before it fails, and it must not be lost
    data = b"a page of text " * 200
    raw = _encode("raw-deflate", data)
    for first in (1, 2, 3, len(raw)):
        m = Meter("deflate", max_decoded=10 << 20, max_ratio=1e9, keep=100_000)
        _feed(m, raw, list(range(first, len(raw))) if first == 1 else [first])
        assert (m.decoded, m.text(), m.broken) == (len(data), data, "")


@pytest.mark.parametrize("kind", ["gzip", "br"])
def test_bombs_stop_early(kind: str) -> None:
    raw = _encode(kind, bytes(100 << 20))
    m = Meter(kind, max_decoded=50 << 20, max_ratio=100)
    with pytest.raises(Bomb, match="ratio"):
        _feed(m, raw, list(range(0, len(raw), 16384)))
    assert m.decoded < 5 << 20  # stopped within a few 64 KiB pieces of the 1 MiB floor


def test_decoded_cap_without_ratio() -> None:
    data = bytes(range(256)) * 40000  # ~10 MB, compresses only modestly... with a huge ratio cap
    m = Meter("gzip", max_decoded=1 << 20, max_ratio=1e9)
    with pytest.raises(Bomb, match="exceeds"):
        m.feed(gzip.compress(data))


def test_corrupt_stream_stops_metering_without_failing() -> None:
    m = Meter("gzip", max_decoded=1 << 20, max_ratio=100)
    m.feed(b"this is not gzip at all")
    assert m.broken and m.raw == 23


@pytest.mark.parametrize("url, wire, host_header", [
    ("http://a.test/x?y=1#frag", ("http", "a.test", 80, "/x?y=1"), "a.test"),
    ("http://a.test?q", ("http", "a.test", 80, "/?q"), "a.test"),
    ("http://a.test:80/", ("http", "a.test", 80, "/"), "a.test"),
    ("http://a.test:8080", ("http", "a.test", 8080, "/"), "a.test:8080"),
    ("https://[::1]:8443/p", ("https", "::1", 8443, "/p"), "[::1]:8443"),
    ("https://a.test/p", ("https", "a.test", 443, "/p"), "a.test"),
    # not wire-safe as written: httpx's encoder (IDNA host, percent-encoded path)
    ("http://bücher.de/ä b", ("http", "xn--bcher-kva.de", 80, "/%C3%A4%20b"), "xn--bcher-kva.de"),
    ("http://user:pw@a.test/", ("http", "a.test", 80, "/"), "a.test"),
])
def test_wire_url_gives_request_target_and_host_header(url: str, wire: tuple[str, str, int, str],
                                                       host_header: str) -> None:
    got, netloc = wire_url(url)
    assert tuple(got) == wire
    assert netloc == host_header


@pytest.mark.parametrize("url", ["http://a.test:99999/", "ftp://a.test/", "http:///nohost"])
def test_wire_url_refuses_what_no_request_can_be_made_of(url: str) -> None:
    with pytest.raises(ValueError):
        wire_url(url)


# -- gzip members, trailing bytes, chains of codings (hostile-input issue, items 1 and 12) --

def test_bytes_after_the_end_of_a_gzip_stream_are_counted_not_looped_on() -> None:
    # this exact input hung Meter.feed for ever (it looped on zlib's stale unconsumed_tail)
    data = b"x" * 70000
    m = Meter("gzip", max_decoded=50_000_000, max_ratio=100.0, keep=1 << 20)
    m.feed(gzip.compress(data) + b"\n")
    m.finish()
    assert (m.decoded, m.text(), m.trailing, m.broken) == (70000, data, 1, "")


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.binary(max_size=3000), min_size=1, max_size=5),
       garbage=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=8),
       kind=st.sampled_from(["gzip", "deflate"]))
def test_members_decode_as_their_concatenation_and_garbage_is_ignored(
        parts: list[bytes], garbage: bytes, cuts: list[int], kind: str) -> None:
    if kind == "gzip":
        raw = b"".join(gzip.compress(p) for p in parts)
        expected = b"".join(parts)
        if garbage[:2] == b"\x1f\x8b":
            garbage = b"!" + garbage
    else:
        raw, expected = zlib.compress(parts[0]), parts[0]
        garbage = b"".join(parts[1:]) + garbage
    m = Meter(kind, max_decoded=10 << 20, max_ratio=1e9, keep=1 << 20)
    _feed(m, raw + garbage, [c for c in cuts if c <= len(raw) + len(garbage)])
    m.finish()
    assert (m.text(), m.decoded, m.trailing, m.broken) == (expected, len(expected), len(garbage), "")


def test_garbage_between_members_ends_the_body() -> None:
    raw = gzip.compress(b"one") + b"junk" + gzip.compress(b"two")
    m = Meter("gzip", max_decoded=1 << 20, max_ratio=1e9, keep=100)
    m.feed(raw)
    assert m.text() == b"one" and m.trailing == 4 + len(gzip.compress(b"two"))


def test_bytes_after_a_brotli_stream_keep_what_came_before() -> None:
    data = b"page text " * 1000
    m = Meter("br", max_decoded=1 << 20, max_ratio=1e9, keep=1 << 20)
    m.feed(brotli.compress(data))
    m.feed(b"more")
    assert m.text() == data and m.trailing == 4 and not m.broken


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=5000),
       chain=st.lists(st.sampled_from(["gzip", "deflate", "br"]), min_size=1, max_size=4),
       cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=6))
def test_a_chain_of_codings_is_undone_in_reverse(data: bytes, chain: list[str], cuts: list[int]) -> None:
    raw = data
    for kind in chain:  # applied in header order
        raw = _encode(kind, raw)
    m = Meter(", ".join(chain), max_decoded=10 << 20, max_ratio=1e9, keep=1 << 20)
    _feed(m, raw, [c for c in cuts if c <= len(raw)])
    assert (m.text(), m.broken) == (data, "")


def test_the_bomb_caps_apply_to_every_stage_of_a_chain() -> None:
    # brotli inflating into megabytes of empty stored deflate blocks: the last stage
    # yields nothing, yet the work is bounded by the caps on the middle stage
    empty_blocks = b"\x78\x01" + b"\x00\x00\x00\xff\xff" * (4 << 20)
    raw = brotli.compress(empty_blocks, quality=5)
    m = Meter("deflate, br", max_decoded=10 << 20, max_ratio=100)
    with pytest.raises(Bomb):
        m.feed(raw)
    assert m.decoded == 0
    # and a gzip bomb under a brotli layer is stopped by the ratio of the whole chain
    raw = brotli.compress(gzip.compress(bytes(64 << 20)), quality=5)
    m = Meter("gzip, br", max_decoded=50 << 20, max_ratio=100)
    with pytest.raises(Bomb, match="ratio"):
        _feed(m, raw, list(range(0, len(raw), 4096)))
    assert m.decoded < 8 << 20


def test_unknown_and_too_many_codings_are_said_not_guessed() -> None:
    m = Meter("gzip, x-custom", max_decoded=1 << 20, max_ratio=1e9, keep=100)
    m.feed(b"opaque")
    assert m.text() == b"opaque" and "x-custom" in m.broken
    m = Meter(", ".join(["gzip"] * 1000), max_decoded=1 << 20, max_ratio=1e9, keep=100)
    m.feed(b"opaque")
    assert m.text() == b"opaque" and "more than" in m.broken
    m = Meter("identity, gzip", max_decoded=1 << 20, max_ratio=1e9, keep=100)
    m.feed(gzip.compress(b"plain"))
    assert (m.text(), m.broken) == (b"plain", "")


def test_many_tiny_members_are_bounded() -> None:
    raw = gzip.compress(b"") * 20_000
    m = Meter("gzip", max_decoded=1 << 20, max_ratio=1e9)
    m.feed(raw)
    assert "gzip members" in m.broken
