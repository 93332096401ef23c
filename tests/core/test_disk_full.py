"""A full disk: one error naming the file, nothing torn, no temp file left (issue 15, item 10).

Each writer of crawl state is driven onto a real tmpfs that has filled up
(tests/fullfs.py), then given room again: what it wrote before must be
intact and what it writes after must be readable.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fullfs import fill, small_fs
from warcutil import capture

from crawl import store
from crawl.core import CrawlDir, NoSpace, close_env, open_env, records, replace_file
from crawl.run import read_log
from crawl.run.crawllog import CrawlLog
from crawl.seen import SeenSet
from crawl.store import cdxj


@pytest.fixture
def fs(tmp_path: Path):  # noqa: ANN201 - a generator fixture
    with small_fs(tmp_path / "fs", "4m") as point:
        yield point


def _events(n: int, start: int = 0) -> list[records.Record]:
    return [records.make("event", ts=1.0, event="fetch", url=f"http://h.test/{i}", outcome="ok",
                         pad=os.urandom(300).hex()) for i in range(start, start + n)]


def test_a_log_append_that_does_not_fit_leaves_the_log_as_it_was(fs: Path) -> None:
    log = CrawlLog(CrawlDir(fs / "c").log)
    log.write(_events(10))
    path = log.current
    before = path.read_bytes()
    filler = fill(fs, leave=2000)  # room for part of the next frame: write() comes back short
    with pytest.raises(NoSpace) as got:
        log.write(_events(200, 10))  # ~60 KB of incompressible hex
    assert str(path) in str(got.value) and "crawl directory" in str(got.value)
    assert path.read_bytes() == before  # the torn part was cut off again
    filler.unlink()  # space freed: the same writer goes on
    log.write(_events(5, 500))
    urls = [e["url"] for e in read_log(path.parent)]
    assert urls == [f"http://h.test/{i}" for i in range(10)] + [f"http://h.test/{i}" for i in range(500, 505)]


def test_a_bloom_filter_that_cannot_be_saved_leaves_no_temp_file(fs: Path) -> None:
    seen_dir = CrawlDir(fs / "c").seen
    s = SeenSet(seen_dir, expected=400_000)  # a filter of ~0.5 MB
    s.add_fps(list(range(1, 3000)))
    s.save()
    saved = (seen_dir / "bloom.bin").read_bytes()
    s.add_fps(list(range(3000, 4000)))
    filler = fill(fs, leave=100_000)
    with pytest.raises(NoSpace) as got:
        s.save()
    assert "bloom.bin" in str(got.value)
    assert sorted(p.name for p in seen_dir.iterdir()) == ["bloom.bin", "data.mdb", "lock.mdb"]
    assert (seen_dir / "bloom.bin").read_bytes() == saved  # the old filter, whole
    s.close()  # a cache: closing on a full disk is not an error, and leaves no temp either
    assert not [p for p in seen_dir.iterdir() if ".tmp" in p.name]
    filler.unlink()
    with SeenSet(seen_dir, expected=400_000) as again:  # stale filter: rebuilt, nothing missed
        assert all(again.contains_fps(list(range(1, 4000))))


def test_temp_files_of_killed_writers_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "run-status.json"
    dead = tmp_path / "run-status.json.tmp999999999"  # no such process
    dead.write_bytes(b"half")
    replace_file(target, lambda f: f.write(b"{}"))
    assert target.read_bytes() == b"{}" and not dead.exists()


def test_an_lmdb_commit_on_a_full_disk_names_the_file(fs: Path) -> None:
    env = open_env(fs / "c" / "frontier", max_dbs=2)
    try:
        db = env.open_db(b"x")
        with env.begin(write=True) as txn:
            txn.put(b"kept", b"1", db=db)
        filler = fill(fs, leave=0)
        with pytest.raises(NoSpace) as got, env.begin(write=True) as txn:
            for i in range(2000):
                txn.put(b"%06d" % i, os.urandom(500), db=db)
        assert str(fs / "c" / "frontier" / "data.mdb") in str(got.value)
        assert f"crawl directory {fs / 'c'}" in str(got.value)
        with env.begin() as txn:  # the failed commit left nothing half-done
            assert txn.get(b"kept", db=db) == b"1" and txn.get(b"000001", db=db) is None
        filler.unlink()
        with env.begin(write=True) as txn:
            txn.put(b"after", b"2", db=db)
    finally:
        close_env(env)


def _capture(url: str, body: bytes) -> store.Capture:
    return capture(url, body, content_type="text/html", request_line="GET / HTTP/1.1", host="h.test",
                   user_agent=None, ip=None)


def test_a_warc_group_that_does_not_fit_is_cut_off_whole(fs: Path) -> None:
    wdir = CrawlDir(fs / "c").warc
    w = store.WarcWriter(wdir)
    kept = [w.write(_capture(f"http://h.test/{i}", os.urandom(20_000))) for i in range(3)]
    w.sync()
    filler = fill(fs, leave=30_000)
    with pytest.raises(OSError):
        for i in range(3, 40):
            w.write(_capture(f"http://h.test/{i}", os.urandom(20_000)))
        w.sync()
    w.discard()
    (f,) = cdxj.warc_files(wdir)
    res = store.scan(f)
    assert res.torn_at is None and res.records == 1 + 3 * 3  # warcinfo + the synced group
    for ptr in kept:
        assert store.read_response(wdir, ptr).status == 200
    side = [cdxj.parse_line(x)[2] for x in (wdir / (f.name + ".cdxj")).read_bytes().splitlines()]
    assert [s["url"] for s in side] == [f"http://h.test/{i}" for i in range(3)]
    filler.unlink()
    w2 = store.WarcWriter(wdir)  # the next run: a new file beside the clean one
    w2.write(_capture("http://h.test/after", b"x"))
    w2.close()
    assert all(store.scan(p).torn_at is None for p in cdxj.warc_files(wdir))
