"""Reading WARC records back: by pointer, or every record of a file.

:func:`read_response` is what parse, dedupe, index and run call with a fetch
record's ``warc`` pointer ({file, offset, length}); it decodes the body of
its transfer and content encodings in bounded pieces, so a stored
compression bomb cannot blow up a reader. A pointer comes from a record,
that is from a pipe or a spool anybody can write to, so
:func:`check_pointer` (which :func:`read_response` calls first) refuses a
malformed one with :class:`BadPointer` before any file is opened or any
buffer sized from it. :func:`scan` walks a file member by member (every
gzip member or zstd frame must be complete, trailer included; an
uncompressed record as long as its Content-Length) and reports where a
torn last record starts, which is how a crash is detected. A file can come
from anywhere, so both read a record decompressed in bounded steps and
refuse one over :data:`MAX_RECORD` bytes.
"""

from __future__ import annotations

import functools
import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brotli
import zstandard
from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeadersParserException

from crawl.core import CrawlError

from .codings import Bomb, Meter


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


def _read_slice(path: Path, offset: int, length: int) -> bytes:
    """The stored bytes of one record: its gzip member or zstd frame, decompressed.

    The claimed length is held against the file's size first: ``read(n)``
    allocates n bytes before it reads one, so a length of 10**15 would end
    the reader with a MemoryError.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if offset + length > size:
            raise BadPointer(f"the record at offset {offset}, length {length}, would end past the end of "
                             f"{path.name} ({size} bytes); the pointer is wrong or the file was cut short")
        fh.seek(offset)
        data = fh.read(length)
    if path.name.endswith(".zst"):
        return _inflate(zstandard.ZstdDecompressor().decompressobj(), data, offset)
    if path.name.endswith(".gz"):
        return _inflate(isal_zlib.decompressobj(31), data, offset)  # one gzip member (ISA-L: ~2x zlib)
    return data


# A record is read whole into memory; past this size once decompressed it is
# refused (a copied-in file can hold a member of 64 KiB that inflates to 2 GiB).
# Far above what a fetch stores (--max-body, 5 MB by default, plus headers).
MAX_RECORD = 256 << 20
_WINDOW = 1 << 10  # compressed bytes per call: zstd can inflate 1 KiB to 32 MiB, no more


def _inflate(d: Any, data: bytes, offset: int) -> bytes:
    """One gzip member or zstd frame of ``data``, decompressed, at most MAX_RECORD bytes.

    Fed in small windows so that no single call makes more than a bounded
    amount; raises ValueError past the cap, or when the member does not end
    (a torn record). Bytes after its end are not read.
    """
    view, parts, size = memoryview(data), [], 0
    for pos in range(0, len(view), _WINDOW):
        parts.append(d.decompress(view[pos:pos + _WINDOW]))
        size += len(parts[-1])
        if size > MAX_RECORD:
            raise ValueError(f"the record at offset {offset} is over {MAX_RECORD} bytes decompressed "
                             "(a compression bomb?); not read")
        if d.eof:
            return b"".join(parts)
    raise ValueError(f"the record at offset {offset} is cut short: its gzip member or zstd frame "
                     "does not end within the pointer's length")


def _head(block: bytes, start: int) -> tuple[list[bytes], int] | None:
    """The lines of a header block starting at ``start`` and where its body starts;
    None for anything the plain reading would get wrong (folded lines, non-ASCII)."""
    end = block.find(b"\r\n\r\n", start)
    if end < 0:
        return None
    head = block[start:end]
    if not head.isascii() or b"\r\n " in head or b"\r\n\t" in head or b"\n" in head.replace(b"\r\n", b""):
        return None
    return head.split(b"\r\n"), end + 4


def _fields(lines: list[bytes]) -> list[tuple[str, str]] | None:
    out = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep:
            return None
        out.append((name.decode("ascii"), value.strip().decode("ascii")))
    return out


def _get(fields: list[tuple[str, str]], name: str) -> str | None:
    n = name.lower()
    for k, v in fields:
        if k.lower() == n:
            return v
    return None


def _fast_response(data: bytes, max_body: int) -> StoredResponse | None:
    """Read a response or revisit record the way :func:`_warcio_response` does, without
    warcio's stream machinery (~3% of ``crawl run``'s CPU). Only plain records
    (our own writer's): anything unusual returns None and goes the warcio way."""
    got = _head(data, 0)
    if got is None or not got[0][0].startswith(b"WARC/"):
        return None
    lines, block_start = got
    warc = _fields(lines[1:])
    if warc is None:
        return None
    kind = _get(warc, "WARC-Type")
    length = _get(warc, "Content-Length")
    if kind not in ("response", "revisit") or length is None or not length.isdigit():
        return None
    block = data[block_start:block_start + int(length)]
    got = _head(block, 0)
    if got is None or not got[0][0].startswith(b"HTTP/"):
        return None
    lines, body_start = got
    status_line = lines[0].split(b" ", 2)
    http = _fields(lines[1:])
    if http is None or len(status_line) < 2 or not status_line[1].isdigit():
        return None
    if (_get(http, "Transfer-Encoding") or "").lower() == "chunked":
        return None
    body, cut = b"", False
    if kind == "response":
        body, cut = _decode(block[body_start:], _get(http, "Content-Encoding") or "", max_body)
    ctype = _get(http, "Content-Type") or ""
    return StoredResponse(
        url=_get(warc, "WARC-Target-URI") or "", status=int(status_line[1]), headers=http, body=body,
        content_type=ctype.split(";")[0].strip().lower(), record_type=kind,
        date=_get(warc, "WARC-Date") or "",
        truncated=_get(warc, "WARC-Truncated") or ("length" if cut else None))


def _decode(raw: bytes, encoding: str, max_body: int) -> tuple[bytes, bool]:
    meter = Meter(encoding, max_body, float("inf"), keep=max_body)
    try:
        for i in range(0, len(raw), 1 << 16):
            meter.feed(raw[i:i + (1 << 16)])
        meter.finish()
    except Bomb:
        return meter.text(), True
    return meter.text(), False


def _decoded_body(rec: Any, max_body: int) -> tuple[bytes, bool]:
    """The record's body without transfer/content encoding, at most ``max_body`` bytes.

    Decoded with :class:`crawl.store.codings.Meter` (bounded pieces), not warcio's
    content_stream, which inflates a whole block at once and so would let a
    stored compression bomb explode in a reader's memory.
    """
    from warcio.bufferedreaders import ChunkedDataReader

    h = rec.http_headers
    raw = rec.raw_stream
    if (h.get_header("Transfer-Encoding") or "").lower() == "chunked":
        raw = ChunkedDataReader(raw)
    return _decode(raw.read(), h.get_header("Content-Encoding") or "", max_body)


class BadPointer(CrawlError):
    """A ``warc`` pointer that cannot name a stored record: the input is malformed,
    not the store damaged. Stages count it and go on with the next record."""


@dataclass(frozen=True)
class Pointer:
    """A checked ``warc`` pointer: the file it names, and where the record lies in it."""

    path: Path
    offset: int
    length: int


_MAX_DIGITS = 19  # positions given as text (CDXJ fields): more digits is no file position
_MAX_NAME = 4096  # PATH_MAX


def check_pointer(warc_dir: Path | None, warc: object) -> Pointer:
    """The file and span a ``warc`` pointer ({file, offset, length}) names, or BadPointer.

    ``file`` must be a printable string naming a file inside ``warc_dir``
    (``None``: a path as given, for ``crawl parse`` without ``--dir``);
    ``offset`` and ``length`` whole numbers (or strings of digits, as CDXJ
    holds them), the offset not negative, the length positive. Whether the
    span fits in the file is checked when it is read, against the file's size.
    """
    if not isinstance(warc, dict):
        raise BadPointer(f"the warc pointer is {_show(warc)}, not an object {{file, offset, length}}")
    missing = [k for k in ("file", "offset", "length") if k not in warc]
    if missing:
        raise BadPointer(f"the warc pointer {_show(warc)} has no {' or '.join(missing)}")
    name = warc["file"]
    if not isinstance(name, str) or not name:
        raise BadPointer(f"the warc pointer {_show(warc)} has a file that is not a file name")
    if len(name) > _MAX_NAME or not name.isprintable():
        raise BadPointer(f"the warc pointer {_show(warc)} has a file name with control characters "
                         f"(NUL, newline...) or longer than {_MAX_NAME}")
    offset = _position(warc, "offset")
    length = _position(warc, "length")
    if length == 0:
        raise BadPointer(f"the warc pointer {_show(warc)} has length 0: no record is that short")
    try:
        path = _named_path(name) if warc_dir is None else _warc_path(str(warc_dir), name)
    except CrawlError:
        raise BadPointer(f"the warc pointer {_show(warc)} names a file outside the WARC directory "
                         f"{warc_dir}") from None
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, an unusable name
        raise BadPointer(f"the warc pointer {_show(warc)} names no usable file: {exc}") from None
    return Pointer(path, offset, length)


def _position(warc: dict[str, Any], key: str) -> int:
    value = warc[key]
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and 0 < len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
        n = int(value)
    else:
        raise BadPointer(f"the warc pointer {_show(warc)} has {key} {_show(value)}: "
                         f"a whole number of bytes is needed")
    if n < 0:
        raise BadPointer(f"the warc pointer {_show(warc)} has a negative {key}")
    return n


def _show(value: object, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@functools.lru_cache(maxsize=1024)
def _warc_path(warc_dir: str, name: str) -> Path:
    """The file a pointer names, refused if it leaves the WARC directory.

    Cached: a crawl has a handful of WARC files and parse reads each one
    thousands of times; resolving the path every time was ~1.5% of
    ``crawl run``'s CPU.
    """
    from crawl.core import ensure_inside

    return ensure_inside(Path(warc_dir), Path(name))


@functools.lru_cache(maxsize=1024)
def _named_path(name: str) -> Path:
    return Path(name).resolve()


def read_response(warc_dir: Path | None, warc: Any, *, max_body: int = 64 << 20) -> StoredResponse:
    """Read back the response a fetch result points to (``warc`` = {file, offset, length}).

    ``max_body`` caps the *decoded* body, so a stored compression bomb cannot
    blow up a reader. Raises :class:`BadPointer` for a malformed pointer
    (:func:`check_pointer`) and CrawlError if it does not lead to a response
    or revisit record. ``warc_dir`` None reads ``file`` as a path as given.
    """
    ptr = check_pointer(warc_dir, warc)
    try:
        data = _read_slice(ptr.path, ptr.offset, ptr.length)
        fast = _fast_response(data, max_body)
        if fast is not None:
            return fast
        return _warcio_response(data, max_body, warc)
    except (OSError, ValueError, EOFError, zlib.error, isal_zlib.error, zstandard.ZstdError,
            ArchiveLoadFailed, StatusAndHeadersParserException) as exc:  # not a record at that offset
        raise CrawlError(f"cannot read WARC record {_show(warc)}: {str(exc)[:300]}") from exc
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        # warcio's own failures on records it cannot make sense of (a response
        # record without WARC-Target-URI: AttributeError on None.startswith)
        raise CrawlError(f"cannot read WARC record {_show(warc)}: warcio failed on it "
                         f"({type(exc).__name__}: {str(exc)[:200]})") from exc


def _warcio_response(data: bytes, max_body: int, warc: dict[str, Any]) -> StoredResponse:
    """Any response or revisit record warcio can read (chunked bodies, folded headers)."""
    for rec in ArchiveIterator(io.BytesIO(data)):
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
    raise CrawlError(f"no response record at {_show(warc)}; was the WARC file rewritten?")


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
        buf, pos = memoryview(b""), 0  # what was read and not yet handed to a decompressor
        while True:
            d = _decompressor(compression)
            parts: list[bytes] = []
            used = size = 0
            while not d.eof:
                if pos == len(buf):
                    buf, pos = memoryview(fh.read(1 << 20)), 0
                    if not buf:
                        if used or parts:
                            raise EOFError(f"torn record at offset {off}")
                        return
                # a window at a time: a member's unused_data is a copy of at most a
                # window (it was the rest of the 1 MiB buffer, per member), and no
                # call inflates without bound
                window = buf[pos:pos + _WINDOW]
                parts.append(d.decompress(window))
                size += len(parts[-1])
                if size > MAX_RECORD:
                    raise ValueError(f"the record at offset {off} is over {MAX_RECORD} bytes "
                                     "decompressed (a compression bomb?); not read")
                taken = len(window) - len(d.unused_data) if d.eof else len(window)
                used += taken
                pos += taken
            yield off, used, b"".join(parts)
            off += used


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
            # No member trailer to tell a whole record here: warcio reads a record cut
            # anywhere as a shorter one, so its block must be as long as it says
            declared = rec.rec_headers.get_header("Content-Length") or ""
            if not declared.isdigit() or getattr(rec.raw_stream, "limit", 0) > 0:
                raise EOFError(f"torn record at offset {it.get_record_offset()}: shorter than its "
                               "Content-Length, or without one")
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
    size = path.stat().st_size
    if last_end < size and not path.name.endswith((".gz", ".zst")):
        # warcio's length of an uncompressed record leaves out the blank lines that
        # end it (WARC 1.1 section 5: CRLF CRLF); they are part of the record
        with open(path, "rb") as fh:
            fh.seek(last_end)
            if fh.read(4) == b"\r\n\r\n":
                last_end += 4
    if last_end < size:
        res.torn_at, res.error = last_end, "trailing bytes after the last complete record"
    return res
