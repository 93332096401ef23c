"""The WARC store: records written through warcio read back byte-exact, survive crashes."""

from __future__ import annotations

import gzip
import hashlib
import random
import sys
import time
from base64 import b32encode
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from crawl import store
from crawl.store import cdxj, warc

sys.path.insert(0, str(Path(__file__).parent.parent))
from warcutil import capture, warcio_check  # noqa: E402


def _capture(url: str, body: bytes, *, encoding: str | None = None, status: str = "200 OK",
             truncated: str | None = None, extra: tuple[tuple[str, str], ...] = ()) -> store.Capture:
    return capture(url, body, encoding=encoding, status=status, truncated=truncated, extra=extra)


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_round_trip_is_byte_exact_and_passes_warcio_check(tmp_path: Path, compression: str) -> None:
    body = bytes(range(256)) * 400  # binary, > the in-memory spool size
    w = store.WarcWriter(tmp_path, compression=compression)
    ptr = w.write(_capture("http://example.test/p", body))
    w.sync()
    got = store.read_response(tmp_path, ptr)
    assert got.body == body and got.status == 200 and got.content_type == "text/html"
    assert got.url == "http://example.test/p"
    w.close()
    files = cdxj.warc_files(tmp_path)
    assert warcio_check(files) == 0
    types = [r.rec_type for r in ArchiveIterator(open(files[0], "rb"))]
    assert types == ["warcinfo", "response", "request", "metadata"]


def test_record_headers_digests_and_ip(tmp_path: Path) -> None:
    body = b"<html>" + b"x" * 1000
    w = store.WarcWriter(tmp_path)
    w.write(_capture("http://example.test/p", body))
    w.close()
    rec = next(r for r in ArchiveIterator(open(cdxj.warc_files(tmp_path)[0], "rb"))
               if r.rec_type == "response")
    h = rec.rec_headers
    assert h.protocol == "WARC/1.1"
    assert h.get_header("WARC-IP-Address") == "127.0.0.1"
    want = "sha1:" + b32encode(hashlib.sha1(body).digest()).decode()
    assert h.get_header("WARC-Payload-Digest") == want
    assert h.get_header("WARC-Block-Digest").startswith("sha1:")


def test_content_encoding_is_kept_raw_and_decoded_on_read(tmp_path: Path) -> None:
    page = b"<html>" + b"hello " * 5000
    raw = gzip.compress(page)
    w = store.WarcWriter(tmp_path)
    ptr = w.write(_capture("http://example.test/gz", raw, encoding="gzip"))
    w.close()
    rec = next(r for r in ArchiveIterator(open(cdxj.warc_files(tmp_path)[0], "rb"))
               if r.rec_type == "response")
    assert rec.raw_stream.read() == raw  # as received on the wire
    assert store.read_response(tmp_path, ptr).body == page


def test_stored_bomb_is_bounded_on_read(tmp_path: Path) -> None:
    raw = gzip.compress(bytes(30 << 20))
    w = store.WarcWriter(tmp_path)
    ptr = w.write(_capture("http://example.test/bomb", raw, encoding="gzip", truncated="length"))
    w.close()
    got = store.read_response(tmp_path, ptr, max_body=1 << 20)
    assert len(got.body) == 1 << 20 and got.truncated == "length"


def test_zstd_warc_round_trip(tmp_path: Path) -> None:
    body = b"<p>zstd</p>" * 3000
    w = store.WarcWriter(tmp_path, compression="zstd")
    ptrs = [w.write(_capture(f"http://example.test/{i}", body + bytes([i]))) for i in range(3)]
    w.close()
    assert ptrs[0]["file"].endswith(".warc.zst")
    for i, p in enumerate(ptrs):
        assert store.read_response(tmp_path, p).body == body + bytes([i])
    res = store.scan(tmp_path / ptrs[0]["file"])
    assert res.torn_at is None and res.records == 1 + 3 * 3


def test_rotation_by_size(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path, max_size=20_000)
    ptrs = [w.write(_capture(f"http://example.test/{i}", random.Random(i).randbytes(6000)))
            for i in range(12)]
    w.close()
    files = {p["file"] for p in ptrs}
    assert len(files) > 1
    for f in files:
        assert (tmp_path / f).stat().st_size < 20_000 + 15_000
    assert warcio_check(cdxj.warc_files(tmp_path)) == 0


def test_revisit_record(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path)
    resp = store.http_block("HTTP/1.1 304 Not Modified", [("ETag", '"v1"')])
    cap = store.Capture("http://example.test/p", "revisit", time.time(), {"outcome": "not-modified"},
                        response=resp, refers_to={"uri": "http://example.test/p",
                                                  "date": "2026-01-01T00:00:00Z", "digest": "sha1:ABC"})
    ptr = w.write(cap)
    w.close()
    got = store.read_response(tmp_path, ptr)
    assert got.record_type == "revisit" and got.status == 304 and got.body == b""
    rec = next(r for r in ArchiveIterator(open(tmp_path / ptr["file"], "rb")) if r.rec_type == "revisit")
    assert rec.rec_headers.get_header("WARC-Refers-To-Date") == "2026-01-01T00:00:00Z"
    assert "server-not-modified" in rec.rec_headers.get_header("WARC-Profile")


@pytest.mark.parametrize("cut", [1, 37, 200, -3])
def test_torn_last_record_is_detected(tmp_path: Path, cut: int) -> None:
    w = store.WarcWriter(tmp_path)
    for i in range(3):
        w.write(_capture(f"http://example.test/{i}", b"<html>%d</html>" % i * 500))
    w.sync()
    size_before = w._fh.tell()  # type: ignore[union-attr]
    w.write(_capture("http://example.test/last", b"y" * 5000))
    w.close()
    path = cdxj.warc_files(tmp_path)[0]
    data = path.read_bytes()
    end = len(data) + cut if cut < 0 else size_before + cut
    path.write_bytes(data[:end])
    res = store.scan(path)
    assert res.torn_at is not None and res.torn_at >= size_before - 2000
    assert res.records >= 1 + 3 * 3  # everything synced before the tear still reads


def test_cdxj_index_build_and_lookup(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path)
    p1 = w.write(_capture("http://example.test/a", b"one"))
    p2 = w.write(_capture("http://example.test/b", b"two"))
    p3 = w.write(_capture("http://example.test/a", b"three"))
    w.close()
    path, n = cdxj.build(tmp_path)
    assert n == 3
    lines = path.read_text().splitlines()
    assert lines == sorted(lines)
    hits = cdxj.lookup(tmp_path, "http://example.test/a")
    assert [int(h["offset"]) for h in hits] == sorted([p1["offset"], p3["offset"]])
    ptr = {"file": hits[-1]["filename"], "offset": hits[-1]["offset"], "length": hits[-1]["length"]}
    assert store.read_response(tmp_path, ptr).body in (b"one", b"three")
    # rebuilding from the WARC files alone gives the same index
    _, n2 = cdxj.build(tmp_path, rescan=True)
    assert n2 == 3 and path.read_text().splitlines() == lines
    assert cdxj.lookup(tmp_path, "http://example.test/", prefix=True)[0]["url"].startswith("http://example.test/")
    assert p2["file"] == p1["file"]


def test_the_index_carries_a_redirects_absolute_target(tmp_path: Path) -> None:
    """An auditor follows a redirect chain from the index alone (issue 18): a 3xx capture's
    line carries ``location`` resolved against its URL, when written and when rebuilt from
    the WARC; a 200 that sends a Location header carries none."""
    w = store.WarcWriter(tmp_path)
    w.write(_capture("http://example.test/old/a", b"", status="301 Moved Permanently",
                     extra=(("Location", " ../new/b?x=1 "),)))
    w.write(_capture("http://example.test/c", b"c", extra=(("Location", "/elsewhere"),)))
    w.close()
    path, n = cdxj.build(tmp_path)
    assert n == 2
    def fields() -> dict[str, dict]:
        return {cdxj.parse_line(line)[2]["url"]: cdxj.parse_line(line)[2]
                for line in path.read_text().splitlines()}
    written = fields()
    assert written["http://example.test/old/a"]["location"] == "http://example.test/new/b?x=1"
    assert "location" not in written["http://example.test/c"]
    cdxj.build(tmp_path, rescan=True)
    assert fields() == written


def test_read_response_refuses_paths_outside(tmp_path: Path) -> None:
    from crawl.core import CrawlError

    with pytest.raises(CrawlError):
        store.read_response(tmp_path, {"file": "../../etc/passwd", "offset": 0, "length": 10})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(max_size=3000), min_size=1, max_size=5))
def test_any_bodies_read_back_exactly(tmp_path: Path, bodies: list[bytes]) -> None:
    d = tmp_path / f"h{time.perf_counter_ns()}"
    w = store.WarcWriter(d)
    ptrs = [w.write(_capture(f"http://example.test/{i}", b)) for i, b in enumerate(bodies)]
    w.close()
    for b, p in zip(bodies, ptrs, strict=True):
        assert store.read_response(d, p).body == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=st.lists(st.sampled_from(["a", "b", "bb", "c", "a/x", "z", "m?q=1"]), min_size=1, max_size=30),
       probe=st.sampled_from(["a", "b", "bb", "c", "a/x", "z", "m?q=1", "none"]))
def test_index_lookup_finds_exactly_the_captures(tmp_path: Path, paths: list[str], probe: str) -> None:
    d = tmp_path / f"i{time.perf_counter_ns()}"
    d.mkdir()
    lines = sorted(cdxj.cdxj_line(f"http://example.test/{p}", f"2026-01-0{1 + i % 9}T00:00:00Z",
                                  {"n": i, "offset": "0", "length": "1", "filename": "x"})
                   for i, p in enumerate(paths))
    (d / cdxj.INDEX_NAME).write_bytes(b"".join(lines))
    hits = cdxj.lookup(d, f"http://example.test/{probe}")
    assert sorted(h["n"] for h in hits) == sorted(i for i, p in enumerate(paths) if p == probe)


@given(st.binary(max_size=300))
def test_sha1_text_is_warcs_base32_sha1(data: bytes) -> None:
    digest = hashlib.sha1(data).digest()
    assert store.sha1_text(digest) == "sha1:" + b32encode(digest).decode()


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_plain_reader_agrees_with_warcio(tmp_path: Path, compression: str) -> None:
    """The lean reader of read_response gives what warcio's parsing gives, record by record."""
    from crawl.store import read as warcread

    w = store.WarcWriter(tmp_path, compression=compression)
    ptrs = [
        w.write(_capture("http://example.test/a", b"<p>plain</p>" * 50)),
        w.write(_capture("http://example.test/b", gzip.compress(b"<p>gz</p>" * 5000), encoding="gzip")),
        w.write(_capture("http://example.test/c", b"cut", truncated="length", status="404 Not Found")),
        w.write(_capture("http://example.test/d", bytes(range(256)) * 100)),
        w.write(_capture("http://example.test/e", gzip.compress(bytes(3 << 20)), encoding="gzip")),
    ]
    resp = store.http_block("HTTP/1.1 304 Not Modified", [("ETag", '"x"')])
    ptrs.append(w.write(store.Capture("http://example.test/a", "revisit", time.time(), {}, response=resp,
                                      refers_to={"uri": "http://example.test/a", "date": "2026-01-01T00:00:00Z",
                                                 "digest": "sha1:AAAA"})))
    w.close()
    for ptr in ptrs:
        path = tmp_path / ptr["file"]
        data = warcread._read_slice(path, ptr["offset"], ptr["length"])
        for cap in (1 << 20, 64 << 20):
            fast = warcread._fast_response(data, cap)
            assert fast is not None, ptr  # our own records take the lean way
            assert fast == warcread._warcio_response(data, cap, ptr)
    # what the lean reader will not read goes to warcio: a folded header line
    data = warcread._read_slice(tmp_path / ptrs[0]["file"], ptrs[0]["offset"], ptrs[0]["length"])
    folded = data.replace(b"\r\nContent-Length:", b"\r\nX-Long: a\r\n  b\r\nContent-Length:", 1)
    assert warcread._fast_response(folded, 1 << 20) is None


def test_a_url_with_line_breaks_cannot_forge_warc_headers(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path)
    evil = "http://example.test/x\r\nWARC-Type: forged"
    w.write(store.Capture(evil, "none", time.time(), {"outcome": "invalid-url"}))
    w.write(_capture(evil, b"<p>x</p>"))
    w.close()
    files = cdxj.warc_files(tmp_path)
    assert warcio_check(files) == 0
    recs = list(ArchiveIterator(open(files[0], "rb")))
    assert [r.rec_type for r in recs] == ["warcinfo", "metadata", "response", "request", "metadata"]
    for r in recs[1:]:
        assert r.rec_headers.get_header("WARC-Target-URI") == "http://example.test/x%0D%0AWARC-Type:%20forged"


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_warc_date_matches_the_datetime_rendering(ts: float) -> None:
    from datetime import UTC, datetime

    assert store.warc_date(ts) == datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_record_ids_are_version_4_uuid_urns_and_distinct() -> None:
    import uuid

    ids = {warc._record_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    u = uuid.UUID(next(iter(ids))[len("<urn:uuid:"):-1])
    assert u.version == 4 and u.variant == uuid.RFC_4122


def test_a_forked_child_draws_other_record_ids() -> None:
    import os

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child writes its id and leaves at once
        os.write(w, warc._record_id().encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    child = os.read(r, 100).decode()
    os.close(r)
    assert child.startswith("<urn:uuid:") and child != warc._record_id()


# -- malformed pointers: refused before anything is opened or allocated ---------

BAD_POINTERS = [
    ("a string", "x.warc.gz", "not an object"),
    ("no offset", {"file": "x.warc.gz"}, "has no offset or length"),
    ("no file", {"offset": 0, "length": 10}, "has no file"),
    ("NUL in the name", {"file": "x\x00y.warc.gz", "offset": 0, "length": 10}, "control characters"),
    ("newline in the name", {"file": "x\n.warc.gz", "offset": 0, "length": 10}, "control characters"),
    ("a list for a name", {"file": ["x"], "offset": 0, "length": 10}, "not a file name"),
    ("empty name", {"file": "", "offset": 0, "length": 10}, "not a file name"),
    ("outside", {"file": "../../etc/passwd", "offset": 0, "length": 10}, "outside the WARC directory"),
    ("absolute", {"file": "/etc/passwd", "offset": 0, "length": 10}, "outside the WARC directory"),
    ("float length", {"file": "x.warc.gz", "offset": 0, "length": 1e15}, "length 1000000000000000.0"),
    ("bool offset", {"file": "x.warc.gz", "offset": True, "length": 10}, "offset True"),
    ("text offset", {"file": "x.warc.gz", "offset": "12a", "length": 10}, "offset '12a'"),
    ("null length", {"file": "x.warc.gz", "offset": 0, "length": None}, "length None"),
    ("negative offset", {"file": "x.warc.gz", "offset": -1, "length": 10}, "negative offset"),
    ("negative length", {"file": "x.warc.gz", "offset": 0, "length": -10}, "negative length"),
    ("zero length", {"file": "x.warc.gz", "offset": 0, "length": 0}, "length 0"),
]


@pytest.mark.parametrize("ptr, words", [(p, w) for _, p, w in BAD_POINTERS], ids=[n for n, _, _ in BAD_POINTERS])
def test_a_malformed_pointer_is_refused_with_its_fault(tmp_path: Path, ptr: object, words: str) -> None:
    w = store.WarcWriter(tmp_path, prefix="x")
    good = w.write(_capture("http://example.test/p", b"page"))
    w.close()
    (tmp_path / "x.warc.gz").write_bytes((tmp_path / good["file"]).read_bytes())  # the names above exist
    with pytest.raises(store.BadPointer) as got:
        store.read_response(tmp_path, ptr)
    assert words in str(got.value)
    assert store.read_response(tmp_path, good).body == b"page"  # the reader is still fine


def test_a_length_past_the_end_of_the_file_is_refused_before_reading(tmp_path: Path) -> None:
    """``read(n)`` sizes its buffer from n: a claimed 10**15 bytes used to end the reader
    with a MemoryError, a claimed 64 MiB more cost 64 MiB. Both are held against the
    file's size first."""
    import tracemalloc

    w = store.WarcWriter(tmp_path)
    ptr = w.write(_capture("http://example.test/p", b"page"))
    w.close()
    size = (tmp_path / ptr["file"]).stat().st_size
    for claim in ({**ptr, "length": 10**15}, {**ptr, "length": size - ptr["offset"] + (64 << 20)},
                  {**ptr, "offset": size, "length": 1}, {**ptr, "offset": str(size + 5)}):
        tracemalloc.start()
        try:
            with pytest.raises(store.BadPointer, match="past the end of"):
                store.read_response(tmp_path, claim)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, (claim, peak)
    assert store.read_response(tmp_path, {**ptr, "offset": str(ptr["offset"]), "length": str(ptr["length"])}).body == b"page"


@pytest.mark.parametrize("compression", ["gzip", "zstd", "none"])
def test_a_pointer_into_the_middle_of_a_record_is_an_error_not_a_crash(tmp_path: Path, compression: str) -> None:
    """Every span of a real file that is not a record gives CrawlError (warcio's own
    ArchiveLoadFailed escaped for uncompressed files)."""
    from crawl.core import CrawlError

    w = store.WarcWriter(tmp_path, compression=compression)
    ptrs = [w.write(_capture(f"http://example.test/{i}", b"x" * 3000 * i)) for i in range(3)]
    w.close()
    size = (tmp_path / ptrs[0]["file"]).stat().st_size
    starts = {p["offset"] for p in ptrs}
    rng = random.Random(5)
    tried = 0
    for _ in range(300):
        off = rng.randrange(0, size)
        if off in starts:
            continue
        tried += 1
        with pytest.raises(CrawlError):
            store.read_response(tmp_path, {"file": ptrs[0]["file"], "offset": off,
                                           "length": rng.randrange(1, size - off + 1)})
    assert tried > 250


def test_a_damaged_sidecar_line_makes_the_index_rescan_that_file(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path)
    for i in range(3):
        w.write(_capture(f"http://example.test/{i}", b"page %d" % i))
    w.close()
    (f,) = cdxj.warc_files(tmp_path)
    side = f.with_name(f.name + ".cdxj")
    good = side.read_bytes()
    for junk in (b"not a cdxj line\n", b'com,x)/ 2026 {"filename": "' + f.name.encode() + b'"}\n',
                 b'com,x)/ 2026 {"filename": "../../etc/passwd", "offset": "0", "length": "9"}\n',
                 b"com,x)/ 2026 [1, 2]\n"):
        side.write_bytes(good + junk)
        _, n = cdxj.build(tmp_path)
        assert n == 3
        for i in range(3):
            (hit,) = cdxj.lookup(tmp_path, f"http://example.test/{i}")
            assert store.read_response(tmp_path, cdxj.capture_pointer(hit)).body == b"page %d" % i


def test_index_command_survives_damaged_sidecars_and_index_lines(tmp_path: Path) -> None:
    import subprocess
    import sys

    from crawl.core import CrawlDir

    d = tmp_path / "d"
    w = store.WarcWriter(CrawlDir(d).warc)
    for i in range(2):
        w.write(_capture(f"http://example.test/{i}", b"page %d" % i))
    w.close()
    (f,) = cdxj.warc_files(CrawlDir(d).warc)
    with open(f.with_name(f.name + ".cdxj"), "ab") as side:
        side.write(b'com,x)/ 2026 {"filename": "' + f.name.encode() + b'", "offset": "1e15"}\n')

    def index(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "crawl", "index", "--dir", str(d), *args],
                              capture_output=True, text=True, timeout=60)

    built = index()
    assert built.returncode == 0 and "2 captures indexed" in built.stderr, built.stderr
    body = index("--url", "http://example.test/1", "--body")
    assert body.returncode == 0 and body.stdout == "page 1"
    # a hand-edited index line that lost its offset: one clear line, no traceback
    idx = CrawlDir(d).warc / cdxj.INDEX_NAME
    text = idx.read_text()
    idx.write_text(text.replace('"offset":', '"offsets":'))
    bad = index("--url", "http://example.test/1", "--body")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("crawl: error: the warc pointer") and "has no offset" in bad.stderr
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_warcinfo_carries_the_operators_fields(tmp_path: Path) -> None:
    """Fields given to the writer (operator, contact: who to ask about a crawl) land in
    every file's warcinfo record, beside the software and format."""
    w = store.WarcWriter(tmp_path, info={"operator": "ops@example.test", "isPartOf": "nightly"})
    w.write(_capture("http://example.test/p", b"<html>hi</html>"))
    w.close()
    rec = next(iter(ArchiveIterator(open(cdxj.warc_files(tmp_path)[0], "rb"))))
    assert rec.rec_type == "warcinfo"
    text = rec.content_stream().read().decode()
    assert "operator: ops@example.test" in text and "isPartOf: nightly" in text
    assert "software: crawl/" in text


def test_discard_cuts_back_to_the_last_sync_and_the_file_reads_whole(tmp_path: Path) -> None:
    """A group that failed half-way is cut off (file and sidecar), never left as a tail
    that a reader would have to skip; what was synced before stays, pointers and all."""
    w = store.WarcWriter(tmp_path)
    kept = w.write(_capture("http://example.test/kept", b"<html>kept</html>"))
    w.sync()
    f = tmp_path / w.name
    synced, side = f.stat().st_size, (tmp_path / (w.name + ".cdxj")).read_bytes()
    w.write(_capture("http://example.test/lost", b"<html>lost</html>" * 50))
    w.discard()
    w.close()  # what the writer's owner does next: nothing of the lost group may come back
    assert f.stat().st_size == synced
    assert (tmp_path / (f.name + ".cdxj")).read_bytes() == side
    assert store.scan(f).torn_at is None
    assert store.read_response(tmp_path, kept).body == b"<html>kept</html>"
    assert [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(open(f, "rb"))
            if r.rec_type == "response"] == ["http://example.test/kept"]
