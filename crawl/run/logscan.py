"""Reading the crawl log selectively: its end, or the lines that name one URL or host.

Monitoring asks "how many 429s in the last five minutes", every minute,
of a log that may hold millions of events. The log is a sequence of zstd
frames (one per append, :mod:`.crawllog`), and a frame's length can be
read from its block headers without decompressing it (RFC 8878 section
3.1.1), so :func:`tail_log` walks the frame boundaries of the newest files and
decompresses only the frames at the end that may hold events of the window.
``crawl why`` asks about one URL or host: :func:`grep_log` decompresses
every frame but parses only the lines that contain what it looks for.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import zstandard

from .crawllog import _frames

_MAGIC = 0xFD2FB528
_SKIPPABLE = 0x184D2A50  # ..0x184D2A5F
_DICT_ID = (0, 1, 2, 4)
_FCS = (0, 2, 4, 8)
_U32 = struct.Struct("<I")


def frames(data: bytes | mmap.mmap) -> list[tuple[int, int]]:
    """(start, end) of every complete zstd frame; stops at a torn or unknown one."""
    out: list[tuple[int, int]] = []
    pos, n = 0, len(data)
    while pos + 4 <= n:
        (magic,) = _U32.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == _SKIPPABLE:
            if pos + 8 > n:
                break
            end = pos + 8 + _U32.unpack_from(data, pos + 4)[0]
            if end > n:
                break
            pos = end
            continue
        if magic != _MAGIC or pos + 5 > n:
            break
        fhd = data[pos + 4]
        single = (fhd >> 5) & 1
        fcs = _FCS[fhd >> 6] or (1 if single else 0)
        at = pos + 5 + (0 if single else 1) + _DICT_ID[fhd & 3] + fcs
        last = False
        while not last:
            if at + 3 > n:
                return out
            head = data[at] | data[at + 1] << 8 | data[at + 2] << 16
            last, kind, size = bool(head & 1), (head >> 1) & 3, head >> 3
            if kind == 3:  # reserved: not a frame we can walk
                return out
            at += 3 + (1 if kind == 1 else size)
        at += 4 if fhd & 4 else 0  # content checksum
        if at > n:
            break
        out.append((pos, at))
        pos = at
    return out


def _events(chunk: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in chunk.splitlines() if line]


def tail_log(directory: str | os.PathLike[str], since: float) -> Iterator[dict[str, Any]]:
    """Events of the log at ``directory`` from (about) time ``since`` on, oldest first.

    Frames are read newest first until one starts before ``since``; every
    event of the frames read is returned, so a caller filters by ``ts``
    itself. A file being appended to is read as far as its last complete
    frame.
    """
    chunks: list[list[dict[str, Any]]] = []
    for path in sorted(Path(directory).glob("crawl-*.ndjson.zst"), reverse=True):
        done = False
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                continue
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as data:
                for start, end in reversed(frames(data)):
                    evs = _events(zstandard.ZstdDecompressor().decompress(data[start:end], max_output_size=1 << 30))
                    chunks.append(evs)
                    first = next((e.get("ts") for e in evs if isinstance(e.get("ts"), int | float)), None)
                    if first is not None and first < since:
                        done = True
                        break
        if done:
            break
    for evs in reversed(chunks):
        yield from evs


def grep_log(directory: str | os.PathLike[str], needles: list[bytes]) -> Iterator[dict[str, Any]]:
    """Events, oldest first, whose line contains one of ``needles`` (bytes as they
    appear in the NDJSON, e.g. ``orjson.dumps(url)``); the caller checks the
    fields it meant. A torn final frame ends a file, as in :func:`crawl.run.read_log`."""
    for path in sorted(Path(directory).glob("crawl-*.ndjson.zst")):
        for _, chunk in _frames(path.read_bytes()):
            if any(n in chunk for n in needles):
                yield from _matching(chunk, needles)


def _matching(chunk: bytes, needles: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in chunk.splitlines():
        if line and any(n in line for n in needles):
            yield orjson.loads(line)
