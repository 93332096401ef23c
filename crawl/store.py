"""The content store: WARC 1.1 files written through warcio, read back by pointer.

Why WARC: it is what the archiving ecosystem (warcio, pywb, cdxj-indexer)
reads, and it keeps the HTTP exchange *as received*: the response record
holds the status line, the headers and the body bytes with their
Content-Encoding intact. Decoding is the reader's job (:func:`read_response`).
One exception: httpx hands us the body already de-chunked, so a
``Transfer-Encoding`` header is renamed ``X-Crawl-Transfer-Encoding`` (the
stored body is not chunked and the header must not claim it is).

Durability (DESIGN invariant 1): every record is its own gzip member (or
zstd frame, the IIPC ``.warc.zst`` proposal), files are only ever created,
never appended to after a restart, and :meth:`WarcWriter.sync` flushes and
fsyncs before a fetch result that points into the file is released. A crash
can leave at most one torn record at the end of the newest file, which
:func:`scan` reports; no fetch result points at it.

Writers: one :class:`WarcWriter` per process, driven by a single task.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import time
import zlib
from base64 import b32encode
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import brotli
import orjson
import zstandard
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from . import __version__
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

DEFAULT_MAX_SIZE = 1 << 30  # rotate WARC files at 1 GiB
SPOOL_IN_MEMORY = 64 << 10  # bodies larger than this spill to a temp file
COMPRESSIONS = ("gzip", "zstd", "none")
_SUFFIX = {"gzip": ".warc.gz", "zstd": ".warc.zst", "none": ".warc"}


def sha1_label(h: Any) -> str:
    """A digest as WARC writes it: ``sha1:`` + base32 (WARC 1.1 section 5.8)."""
    return "sha1:" + b32encode(h.digest()).decode("ascii")


def warc_date(ts: float) -> str:
    """WARC-Date with microseconds (WARC 1.1 allows sub-second precision)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def http_block(first_line: str, headers: list[tuple[str, str]]) -> StatusAndHeaders:
    """The HTTP header block of a request or response, as warcio writes it."""
    proto, _, rest = first_line.partition(" ")
    sh = StatusAndHeaders(rest, list(headers), protocol=proto)
    sh.compute_headers_buffer()
    return sh


class BodyBuffer:
    """A response body on its way to the WARC: bounded memory, digests on the fly.

    Small bodies stay in memory; larger ones spill to an unlinked temp file,
    so a 5 MB page never sits whole in RAM. The payload digest (entity body,
    WARC 1.1 section 5.9) and the block digest (HTTP headers + body, 5.8)
    are computed as the bytes arrive, so the writer never re-reads them.
    """

    def __init__(self, headers_buff: bytes = b"") -> None:
        self.file: BinaryIO = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115
        self.payload = hashlib.sha1()
        self.block = hashlib.sha1(headers_buff)
        self.length = 0

    def write(self, chunk: bytes) -> None:
        self.file.write(chunk)
        self.payload.update(chunk)
        self.block.update(chunk)
        self.length += len(chunk)

    def rewind(self) -> BinaryIO:
        self.file.seek(0)
        return self.file

    def close(self) -> None:
        self.file.close()


@dataclass
class Capture:
    """Everything one fetch produced, handed by a worker to the single writer.

    ``kind`` is ``response`` (request + response + metadata records),
    ``revisit`` (a 304: request + revisit + metadata) or ``none`` (no HTTP
    response: only the metadata record, the crawl log of the attempt).
    """

    url: str
    kind: str
    ts: float
    metadata: dict[str, Any]
    ip: str | None = None
    request: StatusAndHeaders | None = None
    response: StatusAndHeaders | None = None
    body: BodyBuffer | None = None
    truncated: str | None = None  # WARC-Truncated reason: length, time, disconnect
    refers_to: dict[str, str] = field(default_factory=dict)  # revisit: uri, date, digest

    def close(self) -> None:
        if self.body is not None:
            self.body.close()


class _Framer:
    """File wrapper that makes every warcio ``write_record`` one compressed member.

    warcio calls ``flush()`` once at the end of each record; that is where a
    gzip member or zstd frame ends, so every record can be read (and
    recovered) on its own, and offsets in the index point at member starts.
    """

    def __init__(self, raw: BinaryIO, compression: str) -> None:
        self.raw = raw
        self.compression = compression
        self._start()

    def _start(self) -> None:
        if self.compression == "gzip":
            self._c: Any = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        elif self.compression == "zstd":
            self._c = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
        else:
            self._c = None

    def write(self, data: bytes) -> None:
        self.raw.write(self._c.compress(data) if self._c else data)

    def flush(self) -> None:
        if self._c is not None:
            self.raw.write(self._c.flush())
            self._start()


class WarcWriter:
    """Append-only WARC files under ``warc_dir``, rotated by size.

    Call :meth:`write` for each capture (returns the pointer for the fetch
    result), then :meth:`sync` once per group before releasing any result:
    group commit keeps one fsync per batch instead of one per page.
    A ``<file>.cdxj`` sidecar gets one line per response or revisit record so
    ``crawl index`` can merge instead of rescanning.
    """

    def __init__(
        self,
        warc_dir: Path,
        *,
        prefix: str = "crawl",
        max_size: int = DEFAULT_MAX_SIZE,
        compression: str = "gzip",
        info: dict[str, str] | None = None,
    ) -> None:
        if compression not in COMPRESSIONS:
            raise CrawlError(f"unknown WARC compression {compression!r}; use one of {COMPRESSIONS}")
        self.dir = Path(warc_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_size = max_size
        self.compression = compression
        self.info = info or {}
        self._seq = 0
        self._fh: BinaryIO | None = None
        self._cdxj: BinaryIO | None = None
        self.name = ""
        self.bytes_written = 0

    def _open(self) -> None:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        while True:
            self._seq += 1
            name = f"{self.prefix}-{stamp}-{os.getpid()}-{self._seq:05d}{_SUFFIX[self.compression]}"
            try:
                self._fh = open(self.dir / name, "xb")  # noqa: SIM115 -- never append to an old file
                break
            except FileExistsError:
                continue
        self.name = name
        self._cdxj = open(self.dir / (name + ".cdxj"), "ab")  # noqa: SIM115
        self._framer = _Framer(self._fh, self.compression)
        self._w = WARCWriter(self._framer, gzip=False, warc_version="1.1")
        info = {"software": f"crawl/{__version__} (warcio)", "format": "WARC File Format 1.1",
                "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"}
        info.update(self.info)
        self._w.write_record(self._w.create_warcinfo_record(name, info))
        # make the new file's directory entry durable too
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _record(self, rec: Any) -> tuple[int, int]:
        assert self._fh is not None
        start = self._fh.tell()
        self._w.write_record(rec)
        end = self._fh.tell()
        self.bytes_written += end - start
        return start, end - start

    def write(self, cap: Capture) -> dict[str, Any] | None:
        """Write one capture's records; returns ``{file, offset, length}`` of the
        response or revisit record (None when there was no HTTP response)."""
        if self._fh is None or self._fh.tell() >= self.max_size:
            self.rotate()
        w = self._w
        date = warc_date(cap.ts)
        common = {"WARC-Date": date}
        if cap.ip:
            common["WARC-IP-Address"] = cap.ip
        pointer: dict[str, Any] | None = None
        main_id = None
        if cap.kind in ("response", "revisit") and cap.response is not None:
            hdrs = dict(common)
            if cap.kind == "response":
                body = cap.body or BodyBuffer(cap.response.headers_buff or b"")
                hdrs["WARC-Payload-Digest"] = sha1_label(body.payload)
                hdrs["WARC-Block-Digest"] = sha1_label(body.block)
                if cap.truncated:
                    hdrs["WARC-Truncated"] = cap.truncated
                rec = w.create_warc_record(cap.url, "response", payload=body.rewind(),
                                           length=body.length, http_headers=cap.response,
                                           warc_headers_dict=hdrs)
            else:
                rec = w.create_revisit_record(
                    cap.url, cap.refers_to["digest"], cap.refers_to["uri"], cap.refers_to["date"],
                    http_headers=cap.response, warc_headers_dict=hdrs)
                # WARC 1.1 section 6.7.2: the server said "not modified"
                rec.rec_headers.replace_header(
                    "WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/server-not-modified")
            main_id = rec.rec_headers.get_header("WARC-Record-ID")
            off, length = self._record(rec)
            pointer = {"file": self.name, "offset": off, "length": length}
            self._index_line(cap, date, pointer, rec)
            if cap.request is not None:
                req = w.create_warc_record(cap.url, "request", http_headers=cap.request,
                                           warc_headers_dict={**common, "WARC-Concurrent-To": main_id})
                self._record(req)
        meta = orjson.dumps(cap.metadata, option=orjson.OPT_SORT_KEYS)
        mh = {**common, "Content-Type": "application/json"}
        if main_id:
            mh["WARC-Concurrent-To"] = main_id
        mrec = w.create_warc_record(cap.url, "metadata", payload=io.BytesIO(meta),
                                    length=len(meta), warc_headers_dict=mh)
        self._record(mrec)
        return pointer

    def _index_line(self, cap: Capture, date: str, ptr: dict[str, Any], rec: Any) -> None:
        from .cdxj import cdxj_line

        assert self._cdxj is not None and cap.response is not None
        status = cap.response.get_statuscode()
        digest = rec.rec_headers.get_header("WARC-Payload-Digest") or ""
        mime = (cap.response.get_header("Content-Type") or "").split(";")[0].strip()
        extra = {"mime": mime or "unk", "status": status, "digest": digest,
                 "length": str(ptr["length"]), "offset": str(ptr["offset"]), "filename": ptr["file"]}
        if cap.kind == "revisit":
            extra["mime"] = "warc/revisit"
        self._cdxj.write(cdxj_line(cap.url, date, extra))

    def sync(self) -> None:
        """Flush and fsync: after this, every pointer returned so far is durable."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self._cdxj is not None:
            self._cdxj.flush()  # rebuildable from the WARC: no fsync needed

    def rotate(self) -> None:
        self.close()
        self._open()

    def close(self) -> None:
        if self._fh is not None:
            self.sync()
            self._fh.close()
            self._fh = None
        if self._cdxj is not None:
            self._cdxj.close()
            self._cdxj = None


# ----------------------------------------------------------------- reading


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


def read_response(warc_dir: Path, warc: dict[str, Any], *, max_body: int = 64 << 20) -> StoredResponse:
    """Read back the response a fetch result points to (``warc`` = {file, offset, length}).

    ``max_body`` caps the *decoded* body, so a stored compression bomb cannot
    blow up a reader. Raises CrawlError if the pointer does not lead to a
    response or revisit record.
    """
    from .io import ensure_inside

    path = ensure_inside(Path(warc_dir), Path(warc["file"]))
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
