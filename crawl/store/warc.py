"""The content store: WARC 1.1 files written through warcio, read back by pointer.

Why WARC: it is what the archiving ecosystem (warcio, pywb, cdxj-indexer)
reads, and it keeps the HTTP exchange *as received*: the response record
holds the status line, the headers and the body bytes with their
Content-Encoding intact. Decoding is the reader's job (:func:`read_response`).
One exception: the HTTP client hands us the body already de-chunked, so a
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

import contextlib
import hashlib
import os
import random
import re
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import zstandard
from isal import isal_zlib
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawl import __version__
from crawl.core import CrawlError, check_file_name

DEFAULT_MAX_SIZE = 1 << 30  # rotate WARC files at 1 GiB
SPOOL_IN_MEMORY = 64 << 10  # bodies larger than this spill to a temp file
COMPRESSIONS = ("gzip", "zstd", "none")
_SUFFIX = {"gzip": ".warc.gz", "zstd": ".warc.zst", "none": ".warc"}


_B32 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [bytes((_B32[i >> 5], _B32[i & 31])) for i in range(1024)]


def sha1_text(digest: bytes) -> str:
    """A 20-byte SHA-1 as WARC writes it: ``sha1:`` + base32 (WARC 1.1 section 5.8).

    160 bits are 16 groups of 10, two base32 letters each, from a table:
    ``base64.b32encode`` is a Python loop, several times slower, and every
    stored page needs four of these.
    """
    v = int.from_bytes(digest, "big")
    return "sha1:" + b"".join([_B32_PAIRS[v >> s & 1023] for s in range(150, -1, -10)]).decode()


def sha1_label(h: Any) -> str:
    """``sha1_text`` of a hashlib object."""
    return sha1_text(h.digest())


_EMPTY_SHA1 = sha1_text(hashlib.sha1(b"").digest())


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _header_safe(value: str) -> str:
    """A URL as a header value (WARC-Target-URI): spaces and control characters
    percent-encoded, so a CR LF cannot start a forged header. Canonical URLs
    have none; raw input lines might."""
    if _CONTROL.search(value) is None:
        return value
    return _CONTROL.sub(lambda m: f"%{ord(m.group()):02X}", value)


_ids = random.Random(int.from_bytes(os.urandom(32), "big"))  # seeded once from the OS ...
os.register_at_fork(after_in_child=lambda: _ids.seed(int.from_bytes(os.urandom(32), "big")))  # ... per process


def _record_id() -> str:
    """A random (version 4) UUID URN. Drawn from a PRNG seeded by the OS at start-up:
    ``uuid.uuid4()`` asks the OS for every id, and each page takes three."""
    return f"<urn:uuid:{uuid.UUID(int=_ids.getrandbits(128), version=4)}>"


_second: tuple[int, str] = (-1, "")


def warc_date(ts: float) -> str:
    """WARC-Date with microseconds (WARC 1.1 allows sub-second precision)."""
    global _second
    sec = int(ts // 1)
    us = round((ts - sec) * 1e6)
    if us == 1_000_000:
        sec, us = sec + 1, 0
    cached = _second  # one read: writer threads may replace it meanwhile
    if cached[0] != sec:  # one strftime per second, not per record
        cached = _second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{cached[1]}.{us:06d}Z"


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


# Gzip members come from ISA-L (the `isal` package), level 1: byte-compatible
# gzip that every WARC reader accepts, about 3x faster than zlib at level 1 with
# the same ratio on test-web HTML; zlib level 6 (the usual default) was 6x
# slower again and the largest CPU cost of `crawl run` (19% of samples).
GZIP_LEVEL = 1


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
        self._parts: list[bytes] = []
        if self.compression == "gzip":
            self._c: Any = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, isal_zlib.MAX_WBITS + 16)
        elif self.compression == "zstd":
            self._c = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
        else:
            self._c = None

    def write(self, data: bytes) -> None:
        if self._c is None:
            self.raw.write(data)
        else:
            self._parts.append(data)  # warcio writes in small pieces: compress once per record

    def flush(self) -> None:
        if self._c is not None:
            self.raw.write(self._c.compress(b"".join(self._parts)) + self._c.flush())
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
        self.prefix = check_file_name(prefix, "WARC file prefix")
        self.dir = Path(warc_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_size = max_size
        self.compression = compression
        self.info = info or {}
        self._seq = 0
        self._fh: BinaryIO | None = None
        self._cdxj: BinaryIO | None = None
        self.name = ""
        self.bytes_written = 0
        self._synced = (0, 0)  # where the current file and its sidecar were when last synced

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
        self._synced = (0, 0)
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

    def _appended(self, write: Callable[[], None]) -> tuple[int, int]:
        """Run ``write`` (one record, one compressed member); where it landed: (offset, length)."""
        assert self._fh is not None
        start = self._fh.tell()
        write()
        end = self._fh.tell()
        self.bytes_written += end - start
        return start, end - start

    def _record(self, rec: Any) -> tuple[int, int]:
        """A record built by warcio (warcinfo, revisit)."""
        return self._appended(lambda: self._w.write_record(rec))

    def write(self, cap: Capture) -> dict[str, Any] | None:
        """Write one capture's records; returns ``{file, offset, length}`` of the
        response or revisit record (None when there was no HTTP response).

        Response, request and metadata records (every page) are serialised
        here; warcio's record builder parsed and rebuilt each header block
        and was ~5% of ``crawl run``'s CPU. Revisits and warcinfo (rare) still
        go through warcio, and the tests read everything back with warcio's
        parser and checker.
        """
        if self._fh is None or self._fh.tell() >= self.max_size:
            self.rotate()
        date = warc_date(cap.ts)
        uri = _header_safe(cap.url)
        common = [("WARC-Date", date)]
        if cap.ip:
            common.append(("WARC-IP-Address", cap.ip))
        pointer: dict[str, Any] | None = None
        main_id = None
        if cap.kind == "response" and cap.response is not None:
            head = cap.response.headers_buff
            body = cap.body or BodyBuffer(head)
            main_id = _record_id()
            digest = sha1_label(body.payload)
            fields = [("WARC-Type", "response"), ("WARC-Record-ID", main_id),
                      ("WARC-Target-URI", uri), *common, ("WARC-Payload-Digest", digest),
                      ("WARC-Block-Digest", sha1_label(body.block))]
            if cap.truncated:
                fields.append(("WARC-Truncated", cap.truncated))
            fields += [("Content-Type", "application/http; msgtype=response"),
                       ("Content-Length", str(len(head) + body.length))]
            off, length = self._emit(fields, head, body.rewind())
            pointer = {"file": self.name, "offset": off, "length": length}
            self._index_line(cap, date, pointer, digest)
        elif cap.kind == "revisit" and cap.response is not None:
            rec = self._w.create_revisit_record(
                cap.url, cap.refers_to["digest"], cap.refers_to["uri"], cap.refers_to["date"],
                http_headers=cap.response, warc_headers_dict=dict(common))
            # WARC 1.1 section 6.7.2: the server said "not modified"
            rec.rec_headers.replace_header(
                "WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/server-not-modified")
            main_id = rec.rec_headers.get_header("WARC-Record-ID")
            off, length = self._record(rec)
            pointer = {"file": self.name, "offset": off, "length": length}
            self._index_line(cap, date, pointer, rec.rec_headers.get_header("WARC-Payload-Digest") or "")
        if main_id is not None and cap.request is not None:
            head = cap.request.headers_buff
            self._emit([("WARC-Type", "request"), ("WARC-Record-ID", _record_id()),
                        ("WARC-Target-URI", uri), *common, ("WARC-Concurrent-To", main_id),
                        ("WARC-Block-Digest", sha1_text(hashlib.sha1(head).digest())),
                        ("WARC-Payload-Digest", _EMPTY_SHA1),
                        ("Content-Type", "application/http; msgtype=request"),
                        ("Content-Length", str(len(head)))], head)
        meta = orjson.dumps(cap.metadata, option=orjson.OPT_SORT_KEYS)
        digest = sha1_text(hashlib.sha1(meta).digest())
        fields = [("WARC-Type", "metadata"), ("WARC-Record-ID", _record_id()),
                  ("WARC-Target-URI", uri), *common]
        if main_id:
            fields.append(("WARC-Concurrent-To", main_id))
        fields += [("WARC-Block-Digest", digest), ("WARC-Payload-Digest", digest),
                   ("Content-Type", "application/json"), ("Content-Length", str(len(meta)))]
        self._emit(fields, meta)
        return pointer

    def _emit(self, fields: list[tuple[str, str]], block: bytes, rest: BinaryIO | None = None) -> tuple[int, int]:
        """One record (WARC/1.1 head, block, two CRLFs) as one compressed member."""
        f = self._framer

        def write() -> None:
            f.write(("WARC/1.1\r\n" + "".join([f"{k}: {v}\r\n" for k, v in fields]) + "\r\n").encode("utf-8"))
            f.write(block)
            if rest is not None:
                while piece := rest.read(1 << 20):
                    f.write(piece)
            f.write(b"\r\n\r\n")
            f.flush()

        return self._appended(write)

    def _index_line(self, cap: Capture, date: str, ptr: dict[str, Any], digest: str) -> None:
        from .cdxj import cdxj_line, redirect_location

        assert self._cdxj is not None and cap.response is not None
        status = cap.response.get_statuscode()
        mime = (cap.response.get_header("Content-Type") or "").split(";")[0].strip()
        extra = {"mime": mime or "unk", "status": status, "digest": digest,
                 "length": str(ptr["length"]), "offset": str(ptr["offset"]), "filename": ptr["file"]}
        if cap.kind == "revisit":
            extra["mime"] = "warc/revisit"
        if loc := redirect_location(cap.url, status, cap.response.get_header("Location")):
            extra["location"] = loc
        self._cdxj.write(cdxj_line(cap.url, date, extra))

    def sync(self) -> None:
        """Flush and fsync: after this, every pointer returned so far is durable."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self._cdxj is not None:
            self._cdxj.flush()  # rebuildable from the WARC: no fsync needed
        if self._fh is not None and self._cdxj is not None:
            self._synced = (self._fh.tell(), self._cdxj.tell())

    def discard(self) -> None:
        """Undo what was written since the last :meth:`sync` and close the file.

        For a group that failed half-way (a full disk): no pointer into it was
        released, so its records are cut off rather than left as a torn tail
        that every reader of the file would trip over, and its sidecar lines
        with them. A file that never got past its warcinfo record goes.
        """
        if self._fh is None or self._cdxj is None:
            return
        path, side = self.dir / self.name, self.dir / (self.name + ".cdxj")
        for fh in (self._fh, self._cdxj):
            try:
                fh.close()  # flushing what is buffered may fail again: closed all the same
            except OSError:
                pass
        self._fh = self._cdxj = None
        end, side_end = self._synced
        if end == 0:
            for f in (path, side):
                with contextlib.suppress(OSError):
                    f.unlink()
            return
        with contextlib.suppress(OSError):  # shrinking needs no space; the error being handled matters
            os.truncate(path, end)
            os.truncate(side, side_end)

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
