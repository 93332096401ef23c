"""Content codings (RFC 9110 8.4) decoded in bounded pieces, for counting and keeping.

Both the fetch exchange (to stop a compression bomb while it streams) and the
WARC reader (to hand parse and dedupe a page's text) decode bodies here, so
the rules are the same on both sides:

* ``Content-Encoding: gzip, br`` lists codings in the order they were applied;
  they are undone in reverse, each stage handing the next one pieces of at
  most 64 KiB, so no stage ever holds more than one piece of output;
* the size cap and the ratio cap apply to every stage's output, not only the
  last: a brotli layer can inflate into megabytes of empty deflate blocks
  that decode to nothing, and that work must be bounded too;
* gzip may hold several members (RFC 1952 2.2); they decode as their
  concatenation. Bytes after the end of the last member (or of a deflate or
  brotli stream) are counted in :attr:`Meter.trailing` and ignored;
* every decoding loop either produces output or consumes input on each turn,
  and output is capped, so one call does bounded work whatever the bytes.

A corrupt stream does not raise: metering stops and :attr:`Meter.broken`
says why (the raw body is still archived as it came).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import brotli

PIECE = 64 << 10
WINDOW = 4 << 10  # compressed bytes handed to zlib per call
MAX_CODINGS = 4  # "gzip, gzip, ..." a thousand times would be a thousand decoders
MAX_MEMBERS = 10_000  # gzip members in one body; each one is a new decoder
_GZIP_MAGIC = b"\x1f\x8b"
_KINDS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate", "br": "br"}


class Bomb(Exception):
    """A decoded size or ratio cap was crossed."""


class CorruptStream(Exception):
    """One coding's bytes cannot be decoded."""


def parse_codings(header: str) -> tuple[list[str], str]:
    """(decodable codings in the order they must be undone, note on what cannot be).

    Identity is dropped. Decoding stops at the outermost coding this module
    does not know: whatever lies under it cannot be reached.
    """
    names = [c.strip().lower() for c in header.split(",")]
    names = [c for c in names if c and c != "identity"]
    if len(names) > MAX_CODINGS:
        return [], f"more than {MAX_CODINGS} content codings ({len(names)}); not decoded"
    order: list[str] = []
    for name in reversed(names):
        kind = _KINDS.get(name)
        if kind is None:
            return order, f"unknown content coding {name[:40]!r}; not decoded past it"
        order.append(kind)
    return order, ""


class _Zlib:
    """gzip (members in a row) or deflate (zlib-wrapped, or raw as some servers send)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.trailing = 0
        self.members = 0
        self._done = False  # past the end: everything else is trailing
        self._between = b""  # gzip: bytes after a member, fewer than the two magic ones
        self._d: Any = self._new()
        # deflate: what came before the first decoded byte, so that a stream that
        # turns out to be raw deflate is decoded again from its start
        self._start: bytes | None = b"" if kind == "deflate" else None
        self._produced = False

    def _new(self) -> Any:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise CorruptStream(f"more than {MAX_MEMBERS} gzip members")
        if self.kind == "gzip":
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        if self.kind == "raw-deflate":
            return zlib.decompressobj(-zlib.MAX_WBITS)
        return zlib.decompressobj(zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._start is not None:
            self._start = self._start + data if len(self._start) < PIECE else None
        # zlib is handed WINDOW bytes at a time, through a view: what it copies back
        # (unused_data after a member's end, unconsumed_tail) is at most that, where
        # the whole rest of ``data`` per gzip member made many members quadratic.
        view, pos = memoryview(data), 0
        while pos < len(view):
            if self._done:
                self.trailing += len(view) - pos
                return
            if self._d is None:  # gzip, between two members
                magic = self._between + bytes(view[pos:pos + 2 - len(self._between)])
                if len(magic) < 2:
                    self._between = magic
                    return
                if magic != _GZIP_MAGIC:
                    self.trailing += len(self._between)
                    self._between = b""
                    self._done = True
                    continue
                self._d = self._new()
                if self._between:  # the first magic byte, from the previous piece
                    self._d.decompress(self._between)
                    self._between = b""
            window = view[pos:pos + WINDOW]
            try:
                out = self._d.decompress(window, PIECE)
            except zlib.error as exc:
                if self.kind == "deflate" and not self._produced and self._start is not None:
                    # RFC 9110 8.4.1.2 says zlib-wrapped; some servers send raw deflate
                    self.kind, self.members = "raw-deflate", 0
                    self._d = self._new()
                    view, pos, self._start = memoryview(self._start), 0, None
                    continue
                raise CorruptStream(f"{self.kind} stream is corrupt: {exc}") from None
            if out:
                self._produced = True
                self._start = None
                yield out
            if self._d.eof:
                # after the end, zlib keeps the rest in unused_data (and, with a
                # max_length, a stale copy in unconsumed_tail: never read it then)
                pos += len(window) - len(self._d.unused_data)
                if self.kind == "gzip":
                    self._d = None
                else:
                    self._done = True
                continue
            left = len(self._d.unconsumed_tail)
            if not out and left >= len(window):
                raise CorruptStream(f"{self.kind} decoder made no progress")
            pos += len(window) - left

    def finish(self) -> None:
        self.trailing += len(self._between)
        self._between = b""


class _Brotli:
    """br. The decoder cannot say where its stream ended inside a piece, so bytes
    after the end make the stream corrupt from that piece on (what came before
    is kept)."""

    kind = "br"

    def __init__(self) -> None:
        self.trailing = 0
        self._d = brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._d.is_finished():
            self.trailing += len(data)
            return
        try:
            out = self._d.process(data, output_buffer_limit=PIECE)
            # A full output buffer leaves the rest of this input's output inside the
            # decoder, and can_accept_more_data() does not always say so (brotli 1.2:
            # a 2 MB page came out as its first 98 KB, and a bomb was counted as
            # that much): ask again until nothing more comes out.
            while out:
                yield out
                if self._d.is_finished():
                    return
                out = self._d.process(b"", output_buffer_limit=PIECE)
        except brotli.error as exc:
            raise CorruptStream(f"br stream is corrupt: {exc}") from None

    def finish(self) -> None:
        pass


class Meter:
    """Decode a body as it streams: count its size, keep its first ``keep`` bytes.

    ``feed`` raises :class:`Bomb` as soon as any stage's output crosses
    ``max_decoded`` bytes, or (past 1 MiB) ``max_ratio`` times the raw bytes
    fed so far.
    """

    def __init__(self, encoding: str, max_decoded: int, max_ratio: float, keep: int = 0) -> None:
        order, self.broken = parse_codings(encoding)
        self.kind = ", ".join(order) or None
        self.max_decoded = max_decoded
        self.max_ratio = max_ratio
        self.keep = keep
        self.kept: list[bytes] = []
        self._kept_n = 0
        self.decoded = 0
        self.raw = 0
        self._stages: list[Any] = [_Brotli() if k == "br" else _Zlib(k) for k in order]
        self._counts = [0] * len(self._stages)
        self._stopped = False

    @property
    def trailing(self) -> int:
        """Bytes seen after the end of a stream (all stages), ignored."""
        return sum(s.trailing for s in self._stages)

    def _check(self, n: int) -> None:
        if n > self.max_decoded:
            raise Bomb(f"decoded body exceeds {self.max_decoded} bytes")
        if n > (1 << 20) and n > self.max_ratio * max(self.raw, 1):
            raise Bomb(f"decompression ratio above {self.max_ratio:g}:1")

    def _through(self, i: int, pieces: Iterable[bytes]) -> Iterator[bytes]:
        stage = self._stages[i]
        for piece in pieces:
            for out in stage.feed(piece):
                self._counts[i] += len(out)
                self._check(self._counts[i])
                yield out

    def _out(self, data: bytes) -> None:
        self.decoded += len(data)
        if self.keep and self._kept_n < self.keep:
            part = data[: self.keep - self._kept_n]
            self.kept.append(part)
            self._kept_n += len(part)
        self._check(self.decoded)

    def feed(self, chunk: bytes) -> None:
        """Raises Bomb when a cap is crossed; a corrupt stream just stops metering."""
        self.raw += len(chunk)
        if self._stopped:
            return
        pieces: Iterable[bytes] = (chunk,)
        for i in range(len(self._stages)):
            pieces = self._through(i, pieces)
        try:
            for piece in pieces:
                self._out(piece)
        except CorruptStream as exc:
            self._stopped = True
            self.broken = str(exc)

    def finish(self) -> None:
        """The body has ended: bytes held back between gzip members are trailing."""
        for stage in self._stages:
            stage.finish()

    def text(self) -> bytes:
        return b"".join(self.kept)
