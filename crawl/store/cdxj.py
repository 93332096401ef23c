"""The CDXJ index: find a stored page by URL and time.

Format (pywb / cdxj-indexer): one line per capture,
``SURT TIMESTAMP {json}``, sorted, so a binary search or a ``grep`` by
SURT prefix finds every capture of a URL. The JSON carries url, mime,
status, digest, length, offset and filename: exactly the pointer
:func:`crawl.store.read_response` needs.

The writer appends unsorted lines to a ``<warc>.cdxj`` sidecar as it goes;
:func:`build` merges every sidecar (or rescans WARC files that have none)
into one sorted ``index.cdxj``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urljoin, urlsplit

import orjson

from crawl.core import replace_file

INDEX_NAME = "index.cdxj"
_WARC_SUFFIXES = (".warc.gz", ".warc.zst", ".warc")


def surt(url: str) -> str:
    """The SURT key (``com,example)/path?q``) used to sort the index.

    Uses the canon module's key when it is available so the index and the
    frontier agree; otherwise a plain rendering of the same rule.
    """
    try:
        from crawl.canon import canonicalize

        return str(canonicalize(url).surt)
    except Exception:  # noqa: BLE001 -- canon missing or URL rejected: fall back
        pass
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    key = ",".join(reversed(host.split(".")))
    if parts.port and parts.port not in (80, 443):
        key += f":{parts.port}"
    path = parts.path or "/"
    return f"{key}){path.lower()}" + (f"?{parts.query.lower()}" if parts.query else "")


_NOT_DIGIT = re.compile(r"\D")


def timestamp14(warc_date: str) -> str:
    """``2026-11-29T19:29:13.123456Z`` -> ``20261129192913``."""
    return _NOT_DIGIT.sub("", warc_date)[:14]


def redirect_location(url: str, status: str | None, location: str | None) -> str | None:
    """The absolute target of a 3xx capture, for the index's ``location`` field, so a
    redirect chain can be followed from the index alone, as from the crawl log."""
    if not location or not status or not status.startswith("3"):
        return None
    try:
        return urljoin(url, location.strip())
    except ValueError:  # a Location no URL parser accepts: keep it as the server sent it
        return location.strip()


def cdxj_line(url: str, warc_date: str, fields: dict[str, Any]) -> bytes:
    body = orjson.dumps({"url": url, **fields})
    return f"{surt(url)} {timestamp14(warc_date)} ".encode() + body + b"\n"


def parse_line(line: bytes | str) -> tuple[str, str, dict[str, Any]]:
    text = line.decode() if isinstance(line, bytes) else line
    key, ts, js = text.rstrip("\n").split(" ", 2)
    return key, ts, orjson.loads(js)


def warc_files(warc_dir: Path) -> list[Path]:
    return sorted(p for p in warc_dir.iterdir() if p.name.endswith(_WARC_SUFFIXES))


def _lines_from_warc(path: Path) -> Iterator[bytes]:
    from .read import iter_records

    try:
        for off, length, rec in iter_records(path):
            if rec.rec_type not in ("response", "revisit") or rec.http_headers is None:
                continue
            h = rec.http_headers
            mime = (h.get_header("Content-Type") or "").split(";")[0].strip() or "unk"
            fields = {
                "mime": "warc/revisit" if rec.rec_type == "revisit" else mime,
                "status": h.get_statuscode(),
                "digest": rec.rec_headers.get_header("WARC-Payload-Digest") or "",
                "length": str(length), "offset": str(off), "filename": path.name,
            }
            url = rec.rec_headers.get_header("WARC-Target-URI")
            if loc := redirect_location(url, fields["status"], h.get_header("Location")):
                fields["location"] = loc
            yield cdxj_line(url, rec.rec_headers.get_header("WARC-Date"), fields)
    except Exception:  # noqa: BLE001 -- a torn tail ends the file's index, not the build
        return


def capture_pointer(capture: dict[str, Any]) -> dict[str, Any]:
    """The ``warc`` pointer ({file, offset, length}) of a capture from the index,
    for :func:`crawl.store.read_response` (which checks it)."""
    return {key: capture[field] for key, field in (("file", "filename"), ("offset", "offset"),
                                                   ("length", "length")) if field in capture}


def _sidecar_lines(wf: Path, side: Path) -> list[bytes] | None:
    """The lines of ``wf``'s sidecar whose records are complete, or None to rescan ``wf``:
    a line that is not a capture of it (a damaged or foreign sidecar) must not hide
    the records, nor stop the build."""
    from .read import BadPointer, check_pointer

    size = wf.stat().st_size
    out = []
    for ln in side.read_bytes().splitlines(keepends=True):
        if not ln.endswith(b"\n"):
            continue  # torn sidecar line
        try:
            _, _, f = parse_line(ln)
            ptr = check_pointer(wf.parent, capture_pointer(f) if isinstance(f, dict) else f)
        except (ValueError, BadPointer):  # UnicodeDecodeError and orjson's errors are ValueErrors
            return None
        if ptr.path.name != wf.name:
            return None
        if ptr.offset + ptr.length <= size:
            out.append(ln)
    return out


def build(warc_dir: Path, *, rescan: bool = False) -> tuple[Path, int]:
    """Write ``warc_dir/index.cdxj`` (sorted) atomically; returns (path, lines).

    Sidecars are trusted unless ``rescan``: they are written by the same
    writer, one line per record, after the record itself.
    """
    lines: list[bytes] = []
    for wf in warc_files(warc_dir):
        side = wf.with_name(wf.name + ".cdxj")
        got = _sidecar_lines(wf, side) if side.exists() and not rescan else None
        lines.extend(_lines_from_warc(wf) if got is None else got)
    lines.sort()
    out = warc_dir / INDEX_NAME
    replace_file(out, lambda fh: fh.writelines(lines))  # no temp file left, even on a full disk
    return out, len(lines)


def _line_start(fh: BinaryIO, pos: int) -> int:
    """Offset of the first line that starts at or after ``pos``."""
    if pos == 0:
        return 0
    fh.seek(pos - 1)
    fh.readline()
    return fh.tell()


def _seek_key(fh: BinaryIO, size: int, key: bytes) -> None:
    """Position ``fh`` at the first line whose key is >= ``key``.

    Binary search over byte offsets (the index is sorted; lines vary in
    length): the key of "the first line starting at or after pos" never
    decreases as pos grows, so the smallest pos where it is >= key finds it.
    """
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) // 2
        fh.seek(_line_start(fh, mid))
        line = fh.readline()
        if line and line.split(b" ", 1)[0] < key:
            lo = mid + 1
        else:
            hi = mid
    fh.seek(_line_start(fh, lo))


def lookup(warc_dir: Path, url: str, *, prefix: bool = False) -> list[dict[str, Any]]:
    """Every capture of ``url`` (oldest first), from the sorted index.

    ``prefix`` matches every URL whose SURT starts with the given one
    (a whole host: ``--prefix http://example.com/``). Found by binary search,
    so a lookup costs a few reads even in a large index.
    """
    idx = warc_dir / INDEX_NAME
    if not idx.exists():
        build(warc_dir)
    key = surt(url)
    if prefix:
        key = key.rstrip("/")
    bkey = key.encode()
    out = []
    with open(idx, "rb") as fh:
        _seek_key(fh, idx.stat().st_size, bkey)
        for ln in fh:
            k = ln.split(b" ", 1)[0]
            if (k.startswith(bkey) if prefix else k == bkey):
                kk, ts, fields = parse_line(ln)
                out.append({"surt": kk, "timestamp": ts, **fields})
            elif k > bkey:
                break
    out.sort(key=lambda h: h["timestamp"])
    return out
