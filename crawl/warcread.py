"""Reading WARC records back: by pointer, or every record of a file.

:func:`read_response` is what parse and dedupe call with a fetch record's
``warc`` pointer ({file, offset, length}); it decodes the body of its
transfer and content encodings in bounded pieces, so a stored compression
bomb cannot blow up a reader. :func:`scan` walks a file member by member
(every gzip member or zstd frame must be complete, trailer included) and
reports where a torn last record starts, which is how a crash is detected.
"""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brotli
import zstandard
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader

from .errors import CrawlError


class _BrotliCompat:
    """warcio 1.8 sets ``unused_data`` on brotli's Decompressor, which brotli >= 1.2
    forbids, so ``warcio check`` and content_stream crash on ``br`` bodies.
    This adapter is registered in its place when crawl.store is imported."""

    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self.unused_data = None

    def decompress(self, data: bytes) -> bytes:
        return bytes(self._d.process(data))


BufferedReader.DECOMPRESSORS["br"] = _BrotliCompat

@dataclass
class StoredResponse:
    """One stored HTTP response, body decoded of transfer and content encoding.

    ``status`` is 304 with an empty body for a revisit record; ``record_type``
    says which it was.
    """

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    content_type: str
    record_type: str = "response"
    date: str = ""
    truncated: str | None = None


def _open_slice(path: Path, offset: int, length: int) -> io.BytesIO:
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return io.BytesIO(data)


def _decoded_body(rec: Any, max_body: int) -> tuple[bytes, bool]:
    """The record's body without transfer/content encoding, at most ``max_body`` bytes.

    Decoded here with :class:`crawl.exchange.Meter` (bounded pieces), not
    warcio's content_stream, which inflates a whole block at once and so
    would let a stored compression bomb explode in a reader's memory.
    """
    from warcio.bufferedreaders import ChunkedDataReader

    from .exchange import Bomb, Meter

    h = rec.http_headers
    raw = rec.raw_stream
    if (h.get_header("Transfer-Encoding") or "").lower() == "chunked":
        raw = ChunkedDataReader(raw)
    meter = Meter(h.get_header("Content-Encoding") or "", max_body, float("inf"), keep=max_body)
    cut = False
    try:
        while chunk := raw.read(1 << 16):
            meter.feed(chunk)
    except Bomb:
        cut = True
    return meter.text(), cut


@functools.lru_cache(maxsize=1024)
def _warc_path(warc_dir: str, name: str) -> Path:
    """The file a pointer names, refused if it leaves the WARC directory.

    Cached: a crawl has a handful of WARC files and parse reads each one
    thousands of times; resolving the path every time was ~1.5% of
    ``crawl run``'s CPU.
    """
    from .io import ensure_inside

    return ensure_inside(Path(warc_dir), Path(name))


def read_response(warc_dir: Path, warc: dict[str, Any], *, max_body: int = 64 << 20) -> StoredResponse:
    """Read back the response a fetch result points to (``warc`` = {file, offset, length}).

    ``max_body`` caps the *decoded* body, so a stored compression bomb cannot
    blow up a reader. Raises CrawlError if the pointer does not lead to a
    response or revisit record.
    """
    path = _warc_path(str(warc_dir), str(warc["file"]))
    try:
        stream = _open_slice(path, int(warc["offset"]), int(warc["length"]))
        for rec in ArchiveIterator(stream):
            if rec.rec_type not in ("response", "revisit") or rec.http_headers is None:
                break
            h = rec.http_headers
            body, cut = (b"", False) if rec.rec_type == "revisit" else _decoded_body(rec, max_body)
            ctype = h.get_header("Content-Type") or ""
            return StoredResponse(
                url=rec.rec_headers.get_header("WARC-Target-URI") or "",
                status=int(h.get_statuscode() or 0), headers=list(h.headers), body=body,
                content_type=ctype.split(";")[0].strip().lower(), record_type=rec.rec_type,
                date=rec.rec_headers.get_header("WARC-Date") or "",
                truncated=rec.rec_headers.get_header("WARC-Truncated") or ("length" if cut else None))
    except (OSError, ValueError, EOFError, zlib.error, zstandard.ZstdError) as exc:
        raise CrawlError(f"cannot read WARC record {warc}: {exc}") from exc
    raise CrawlError(f"no response record at {warc}; was the WARC file rewritten?")


@dataclass
class ScanResult:
    """What :func:`scan` found in one WARC file."""

    records: int = 0
    torn_at: int | None = None  # offset of an incomplete last record, if any
    error: str = ""


def _decompressor(compression: str) -> Any:
    if compression == "gzip":
        return zlib.decompressobj(zlib.MAX_WBITS + 16)
    return zstandard.ZstdDecompressor().decompressobj()


def _iter_members(path: Path, compression: str) -> Iterator[tuple[int, int, bytes]]:
    """(offset, length, plain bytes) for each gzip member or zstd frame.

    Walked by hand rather than through warcio so that a member cut short
    (a crash mid-write) is detected even when its record text looks whole:
    only a member whose trailer arrived counts.
    """
    with open(path, "rb") as fh:
        off = 0
        pending = b""
        while True:
            d = _decompressor(compression)
            parts: list[bytes] = []
            used = 0
            while not d.eof:
                chunk = pending or fh.read(1 << 20)
                pending = b""
                if not chunk:
                    if used or parts:
                        raise EOFError(f"torn record at offset {off}")
                    return
                parts.append(d.decompress(chunk))
                used += len(chunk)
            rest = d.unused_data
            length = used - len(rest)
            yield off, length, b"".join(parts)
            off += length
            pending = rest


def _drain(rec: Any) -> None:
    """Consume a record's raw block (no decoding: the digests cover raw bytes)."""
    while rec.raw_stream.read(1 << 16):
        pass


def iter_records(path: Path) -> Iterator[tuple[int, int, Any]]:
    """(offset, length, record) for each record; raises EOFError on a torn tail."""
    name = path.name
    if name.endswith((".gz", ".zst")):
        comp = "gzip" if name.endswith(".gz") else "zstd"
        for off, length, plain in _iter_members(path, comp):
            for rec in ArchiveIterator(io.BytesIO(plain)):
                _drain(rec)
                yield off, length, rec
        return
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for rec in it:
            _drain(rec)
            yield it.get_record_offset(), it.get_record_length() or 0, rec


def scan(path: Path) -> ScanResult:
    """Read every record of a WARC file; report where a torn last record starts."""
    res = ScanResult()
    last_end = 0
    try:
        for off, length, _rec in iter_records(path):
            res.records += 1
            last_end = off + length
    except Exception as exc:  # noqa: BLE001 -- any reader failure means a torn/damaged tail
        res.torn_at = last_end
        res.error = f"{type(exc).__name__}: {exc}"
        return res
    if last_end < path.stat().st_size:
        res.torn_at, res.error = last_end, "trailing bytes after the last complete record"
    return res
