"""The decompression meter that enforces the decoded-size and ratio caps."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.exchange import Bomb, Meter, wire_url


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
