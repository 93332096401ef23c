"""Reading WARC files that were not written by us, or not written whole.

A WARC file can come from anywhere (copied in, another crawler's, damaged):
the readers must answer with a record or a clear error, in bounded memory,
and must not call a file torn that our own writer wrote whole. The cases
here were found by the fuzz target (tests/fuzz/targets.py ``warc``) and
the growth tests.
"""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crawl import store
from crawl.core import CrawlError
from crawl.store.read import MAX_RECORD


def _record(kind: str, headers: list[tuple[str, str]], block: bytes) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in [("WARC-Type", kind), *headers,
                                                  ("Content-Length", str(len(block)))])
    return b"WARC/1.1\r\n" + head.encode() + b"\r\n" + block + b"\r\n\r\n"


_HTTP = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Folded: a\r\n b\r\n\r\nhello"


def test_a_response_record_without_a_target_uri_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """warcio raises AttributeError on it (it calls startswith on the missing URI)."""
    data = _record("response", [("WARC-Record-ID", "<urn:uuid:1>")], _HTTP)
    (tmp_path / "a.warc").write_bytes(data)
    with pytest.raises(CrawlError, match="cannot read WARC record"):
        store.read_response(tmp_path, {"file": "a.warc", "offset": 0, "length": len(data)})


def test_a_record_with_a_target_uri_still_reads_through_warcio(tmp_path: Path) -> None:
    data = _record("response", [("WARC-Record-ID", "<urn:uuid:1>"), ("WARC-Target-URI", "http://a.test/")], _HTTP)
    (tmp_path / "a.warc").write_bytes(data)
    got = store.read_response(tmp_path, {"file": "a.warc", "offset": 0, "length": len(data)})
    assert got.body == b"hello" and got.url == "http://a.test/"


def _capture(url: str, body: bytes) -> store.Capture:
    resp = store.http_block("HTTP/1.1 200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))])
    buf = store.BodyBuffer(resp.headers_buff)
    buf.write(body)
    req = store.http_block("GET / HTTP/1.1", [("Host", "a.test")])
    return store.Capture(url, "response", time.time(), {"outcome": "ok"}, ip="127.0.0.1",
                         request=req, response=resp, body=buf)


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_a_file_our_writer_wrote_whole_scans_clean(tmp_path: Path, compression: str) -> None:
    """An uncompressed file was reported torn: warcio's record lengths leave out the
    blank lines after each record, so the last record seemed to end 4 bytes early."""
    w = store.WarcWriter(tmp_path, compression=compression)
    for i in range(3):
        w.write(_capture(f"http://a.test/{i}", b"<p>page %d</p>" % i))
    w.close()
    (path,) = [p for p in tmp_path.iterdir() if ".warc" in p.name and not p.name.endswith(".cdxj")]
    res = store.scan(path)
    assert res.torn_at is None and res.error == "", res
    assert res.records >= 9  # warcinfo, then request, response, metadata per capture
    with path.open("ab") as fh:  # and a torn tail is still found
        fh.write(b"WARC/1.1\r\nWARC-Type: resource\r\n")
    assert store.scan(path).torn_at is not None


def test_tiny_gzip_members_are_each_read_once(tmp_path: Path) -> None:
    """Each member used to be decompressed from a copy of the rest of the 1 MiB read
    buffer; every record still comes out, in order, at its own offset."""
    members = [gzip.compress(_record("resource", [("WARC-Record-ID", f"<urn:uuid:{i}>"),
                                                  ("WARC-Target-URI", f"http://a.test/{i}")],
                                      random.Random(i).randbytes(i % 50)), mtime=0) for i in range(3000)]
    path = tmp_path / "many.warc.gz"
    path.write_bytes(b"".join(members))
    got = [(off, length, rec.rec_headers.get_header("WARC-Target-URI")) for off, length, rec in store.iter_records(path)]
    offsets = [sum(len(m) for m in members[:i]) for i in range(len(members))]
    assert got == [(offsets[i], len(members[i]), f"http://a.test/{i}") for i in range(len(members))]
    assert store.scan(path).torn_at is None


def _zstd_bomb(size: int) -> bytes:
    """A zstd frame of RLE blocks: 4 bytes per 128 KiB of zeros (``size`` bytes in all)."""
    frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")  # magic; no content size; 128 KiB window
    blocks = size // (128 << 10)
    for i in range(blocks):
        frame += ((128 << 10) << 3 | 1 << 1 | (i == blocks - 1)).to_bytes(3, "little") + b"\0"
    return bytes(frame)


_READ_BOMB = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from crawl import store
    from crawl.core import CrawlError
    path = Path(sys.argv[1])
    print("scan:", store.scan(path).error)
    try:
        store.read_response(path.parent, {"file": path.name, "offset": 0, "length": path.stat().st_size})
    except CrawlError as exc:
        print("read:", exc)
""")


def test_a_decompression_bomb_in_a_warc_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """64 KiB of zstd that decompress to 2 GiB, read by a process limited to 1 GiB of
    address space: both readers stop at MAX_RECORD and say so (they used to
    decompress the whole frame, and died of a MemoryError)."""
    path = tmp_path / "bomb.warc.zst"
    path.write_bytes(_zstd_bomb(2 << 30))
    proc = subprocess.run([sys.executable, "-c", _READ_BOMB, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"over {MAX_RECORD} bytes" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr
