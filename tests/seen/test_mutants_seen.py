"""Rules of the seen set that mutation testing (issue 21) showed no test held.

Each test runs `crawl seen` as a command on a real crawl directory (real LMDB),
or builds the directory's files the way the README describes them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lmdb
import numpy as np
import orjson

from crawl.canon import CANON_VERSION, canonicalize
from crawl.core import CrawlDir
from crawl.seen import SeenSet


def _crawl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", *args], input=stdin,
                          capture_output=True, timeout=60)


def _lines(recs: list[dict[str, object]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


def test_a_carried_fp_is_trusted_in_both_spellings_and_only_in_range(tmp_path: Path) -> None:
    # README, crawl seen: a record with `fp` (an integer, or crawl canon's 16 hex
    # digits) and the current canon_v is trusted as it is. So two records naming
    # one fingerprint, once as an int and once in hex, are one URL, whatever
    # their url fields say; an fp outside 0 .. 2**64-1 is not a fingerprint, and
    # its record is canonicalised again.
    def rec(url: str, fp: object) -> dict[str, object]:
        return {"kind": "url", "url": url, "fp": fp, "canon_v": CANON_VERSION}

    odd = 0x0123456789ABCDE0  # hex digits 0-e: read in base 15 or 17 it is another number
    top = (1 << 64) - 1
    recs = [
        rec("http://a.test/0", 0), rec("http://b.test/0", "0000000000000000"),
        rec("http://a.test/top", top), rec("http://b.test/top", "ffffffffffffffff"),
        rec("http://a.test/odd", f"{odd:016x}"), rec("http://b.test/odd", odd),
        rec("http://a.test/neg", -1),
    ]
    p = _crawl("seen", "--dir", str(tmp_path / "c"), stdin=_lines(recs))
    assert p.returncode == 0, p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert [r["url"] for r in out] == ["http://a.test/0", "http://a.test/top", "http://a.test/odd",
                                       "http://a.test/neg"]
    assert [r["fp"] for r in out[:3]] == [0, top, f"{odd:016x}"]  # as they came
    assert out[3]["fp"] == canonicalize("http://a.test/neg").fp_hex  # canonicalised again


def test_an_fp_past_64_bits_is_canonicalised_again(tmp_path: Path) -> None:
    # JSON input cannot carry one (the reader refuses integers past 64 bits),
    # but SeenSet.unseen takes records from Python callers too
    for big in (1 << 64, (1 << 65) - 1):
        with SeenSet(tmp_path / f"s{big}") as s:
            out = s.unseen([{"kind": "url", "url": "http://a.test/big", "fp": big,
                             "canon_v": CANON_VERSION}])
        assert [r["fp"] for r in out] == [canonicalize("http://a.test/big").fp_hex]


def test_expected_sizes_the_saved_filter(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    p = _crawl("seen", "--dir", d, "--expected", "200000", stdin=b"http://a.test/\n")
    assert p.returncode == 0, p.stderr
    summary = orjson.loads(_crawl("seen", "--dir", d, "--summary", "--expected", "1").stdout)
    assert summary["urls"] == 1
    assert 200_000 <= summary["bloom_capacity"] < 2 * 200_000, summary  # the file's filter, as sized


def test_the_filter_is_sized_for_expected_even_when_it_is_one(tmp_path: Path) -> None:
    # the least memory, then the fewest bits, for --expected URLs at --fp-rate:
    # at 0.1% that is one word and 3 bits for one URL, 4 bits for two
    from crawl.seen.bloom import size_for

    for n in (1, 2):
        d = str(tmp_path / f"c{n}")
        p = _crawl("seen", "--dir", d, "--expected", str(n), "--fp-rate", "0.001")
        assert p.returncode == 0, p.stderr
        s = orjson.loads(_crawl("seen", "--dir", d, "--summary", "--fp-rate", "0.001").stdout)
        blocks, k = size_for(n, 0.001)
        assert (s["bloom_bytes"], s["bloom_k"]) == (8 * blocks, k), s
        if n == 1:  # one 64-bit word that holds one URL at 0.1%: 64 bits for it
            assert (s["bloom_capacity"], s["bloom_bits_per_url_at_capacity"]) == (1, 64.0), s


def _built_by_hand(seen: Path, run: list[str], recent: list[str]) -> None:
    """A seen set laid out as the README describes it, written with plain LMDB: the
    runs database keyed by the 8-byte big-endian run id and b"f" (the sorted
    little-endian uint64 fingerprints) or b"i" (their uint32 ids); meta's b"runs"
    listing (run id, size) as uint64 pairs, b"next_id" and b"next_run" big-endian;
    the recent tree keyed by the big-endian fingerprint, its value the id."""
    fps = np.array(sorted(canonicalize(u).fp for u in run), dtype="<u8")
    seen.mkdir(parents=True)
    env = lmdb.open(str(seen), max_dbs=16, map_size=1 << 24)
    urls, runs, meta = (env.open_db(n) for n in (b"urls", b"runs", b"meta"))
    with env.begin(write=True) as txn:
        txn.put((7).to_bytes(8, "big") + b"f", fps.tobytes(), db=runs)
        txn.put((7).to_bytes(8, "big") + b"i", np.arange(len(fps), dtype="<u4").tobytes(), db=runs)
        txn.put(b"runs", np.array([(7, len(fps))], dtype="<u8").tobytes(), db=meta)
        for j, u in enumerate(recent):
            txn.put(canonicalize(u).fp.to_bytes(8, "big"), (len(fps) + j).to_bytes(4, "big"), db=urls)
        txn.put(b"next_id", (len(fps) + len(recent)).to_bytes(8, "big"), db=meta)
        txn.put(b"next_run", (8).to_bytes(8, "big"), db=meta)
    env.close()


def test_a_seen_set_in_the_documented_layout_reads_back(tmp_path: Path) -> None:
    # The seen set outlives the program that wrote it (a crawl directory is
    # resumed by a later crawl): its layout is a format, not a detail.
    d = tmp_path / "c"
    old = [f"http://old.test/{i}" for i in range(300)]
    _built_by_hand(CrawlDir(d).seen, old[:290], old[290:])
    batch = [old[5], "http://new.test/", old[295], old[289], "http://new.test/2"]
    p = _crawl("seen", "--dir", str(d), stdin="".join(u + "\n" for u in batch).encode())
    assert p.returncode == 0, p.stderr
    assert [orjson.loads(x)["url"] for x in p.stdout.splitlines()] == [
        "http://new.test/", "http://new.test/2"]
    with SeenSet(CrawlDir(d).seen) as s:
        assert len(s) == 302
        in_run = sorted(canonicalize(u).fp for u in old[:290])  # a run's ids follow its order
        assert s.ids_of([in_run[0], in_run[-1], canonicalize(old[295]).fp]) == [0, 289, 295]


def test_a_run_missing_from_the_set_is_refused_as_damage(tmp_path: Path) -> None:
    d = tmp_path / "c"
    urls = [f"http://h.test/{i}" for i in range(40)]
    with SeenSet(CrawlDir(d).seen, delta_max=8) as s:  # small: the URLs go into runs
        s.add_fps([canonicalize(u).fp for u in urls])
        assert s.stats()["exact_runs"]
    env = lmdb.open(str(CrawlDir(d).seen), max_dbs=16, map_size=1 << 30)
    with env.begin(write=True) as txn:
        runs = env.open_db(b"runs", txn=txn)
        doomed = [k for k, _ in txn.cursor(db=runs) if k.endswith(b"f")]
        assert doomed
        for k in doomed:
            txn.delete(k, db=runs)
    env.close()
    p = _crawl("seen", "--dir", str(d), stdin=f"{urls[3]}\n".encode())
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "is damaged" in err and "a run listed in meta is missing" in err, err
    assert p.stdout == b""


def _stats(tmp_path: Path, d: str, urls: list[str], *args: str) -> dict[str, object]:
    st = tmp_path / "st.json"
    p = _crawl("seen", "--dir", d, "--stats", str(st), *args,
               stdin="".join(u + "\n" for u in urls).encode())
    assert p.returncode == 0, p.stderr
    summary: dict[str, object] = orjson.loads(st.read_bytes())
    return summary


def _summary(d: str, *args: str) -> dict[str, object]:
    p = _crawl("seen", "--dir", d, "--summary", *args)
    assert p.returncode == 0, p.stderr
    summary: dict[str, object] = orjson.loads(p.stdout)
    return summary


def test_the_recent_tree_holds_4096_urls_then_becomes_a_run(tmp_path: Path) -> None:
    # README: new fingerprints go into the recent B-tree, at most 4,096 of
    # them; when it is full it becomes a new run
    d = str(tmp_path / "c")
    st = _stats(tmp_path, d, [f"http://a.test/{i}" for i in range(4095)])
    assert "recent_flushed" not in st
    s = _summary(d)
    assert (s["urls"], s["exact_recent"], s["exact_runs"]) == (4095, 4095, [])
    st = _stats(tmp_path, d, ["http://a.test/last"])
    assert st["recent_flushed"] == 1  # a summary counter (README)
    s = _summary(d)
    assert (s["urls"], s["exact_recent"], s["exact_runs"]) == (4096, 0, [4096])


def test_a_filter_is_rebuilt_only_when_there_is_one_to_rebuild(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    first = _stats(tmp_path, d, ["http://a.test/"])
    assert "bloom_rebuilds" not in first  # a new directory: a new filter, nothing rebuilt
    (CrawlDir(d).seen / "bloom.bin").unlink()
    again = _stats(tmp_path, d, ["http://a.test/", "http://b.test/"])
    assert again["bloom_rebuilds"] == 1 and again["new"] == 1


def test_a_rebuilt_filter_is_sized_for_the_larger_of_expected_and_the_set_plus_a_quarter(
        tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    _stats(tmp_path, d, [f"http://a.test/{i}" for i in range(4000)], "--expected", "4000")
    (CrawlDir(d).seen / "bloom.bin").unlink()
    s = _summary(d, "--expected", "1000")  # rebuilt for 4000 + 1000
    assert 5000 <= s["bloom_capacity"] < 5000 + 20, s  # type: ignore[operator]
    (CrawlDir(d).seen / "bloom.bin").unlink()
    s = _summary(d, "--expected", "90000")  # rebuilt for --expected
    assert 90000 <= s["bloom_capacity"] < 90000 + 20, s  # type: ignore[operator]


def test_the_filter_is_saved_every_save_every_new_urls(tmp_path: Path) -> None:
    # between saves at close, the filter is also persisted after save_every new
    # URLs, so a crash rarely forces a full rebuild
    from crawl.seen.bloom import BloomFilter

    path = tmp_path / "seen"
    s = SeenSet(path, save_every=3)
    try:
        s.add_fps([1, 2])
        s.add_fps([2])  # not new: counts for nothing
        assert BloomFilter.load(path / "bloom.bin") is None
        s.add_fps([3])
        saved = BloomFilter.load(path / "bloom.bin")
        assert saved is not None and saved.covers == 3
        s.add_fps([4, 5])
        saved = BloomFilter.load(path / "bloom.bin")
        assert saved is not None and saved.covers == 3
        s.add_fps([6])
        saved = BloomFilter.load(path / "bloom.bin")
        assert saved is not None and saved.covers == 6
    finally:
        s.close()


def test_a_delta_max_of_one_or_less_keeps_nothing_in_the_recent_tree(tmp_path: Path) -> None:
    # flushed when recent + new >= delta_max: the tree holds at most delta_max - 1
    for delta in (2, 1, 0, -5):
        with SeenSet(tmp_path / f"s{delta}", delta_max=delta) as s:
            assert s.add_fps([7]) == [True]
            st = s.stats()
            assert (st["exact_recent"], st["exact_runs"]) == ((1, []) if delta == 2 else (0, [1])), delta
            assert s.add_fps([7, 8]) == [False, True]


def test_a_rebuilt_filter_knows_the_recent_tree_and_the_runs(tmp_path: Path) -> None:
    # a rebuild fills the filter from the whole exact set: afterwards no known
    # URL gets past it as "definitely new" (bloom_stale counts those)
    d = str(tmp_path / "c")
    urls = [f"http://a.test/{i}" for i in range(5000)]  # a run of 4096 and 904 recent
    _stats(tmp_path, d, urls[:4096])
    _stats(tmp_path, d, urls[4096:])
    s = _summary(d)
    assert (s["exact_runs"], s["exact_recent"]) == ([4096], 904)
    (CrawlDir(d).seen / "bloom.bin").unlink()
    again = _stats(tmp_path, d, urls[::7] + urls[-50:])
    assert again["bloom_rebuilds"] == 1 and again["already_seen"] == len(urls[::7] + urls[-50:])
    assert "bloom_stale" not in again and "new" not in again, again


def _open_files() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the listing's own descriptor, gone already
    return out


def test_close_releases_the_environment(tmp_path: Path) -> None:
    # a long-lived process (crawl run) opens and closes seen sets: each close
    # must give back LMDB's file and map
    path = tmp_path / "seen"
    for _ in range(3):
        with SeenSet(path) as s:
            s.add_fps([1, 2, 3])
            assert any(f.endswith("seen/data.mdb") for f in _open_files())
        assert not any(str(path) in f for f in _open_files()), _open_files()


def test_a_filter_that_cannot_be_saved_at_close_is_counted(tmp_path: Path) -> None:
    from fullfs import fill, small_fs

    with small_fs(tmp_path / "fs", "4m") as fs:
        seen_dir = CrawlDir(fs / "c").seen
        s = SeenSet(seen_dir, expected=400_000)  # a filter of ~0.5 MB
        s.add_fps(list(range(1, 3000)))
        filler = fill(fs, leave=100_000)
        s.close()  # not an error: the file on disk still says what it covers
        assert s.counts.get("bloom_unsaved") == 1
        filler.unlink()
        with SeenSet(seen_dir, expected=400_000) as again:
            assert again.counts.get("bloom_rebuilds") == 1
            assert all(again.contains_fps(list(range(1, 3000))))


def test_a_big_batch_against_a_short_run_with_keys_below_it(tmp_path: Path) -> None:
    # a run shorter than one index step (512 keys) and a batch of 256 or more
    # (the indexed search): keys below the run's first one are simply absent
    run = list(range(1000, 1100))
    with SeenSet(tmp_path / "seen", delta_max=100) as s:
        s.add_fps(run)
        assert s.stats()["exact_runs"] == [100]
        q = list(range(0, 1300, 4))
        assert len(q) >= 256
        assert s.contains_fps(q) == [x in run for x in q]
        assert s.ids_of([999, 1000, 1099, 1100]) == [None, 0, 99, None]


def test_ids_stop_at_2_to_the_32_with_one_line_and_nothing_written(tmp_path: Path) -> None:
    # ids are 32-bit: past the last one a new URL would share an id (and a
    # fetched bit) with an old one, so the set refuses it instead
    d = tmp_path / "c"
    assert _crawl("seen", "--dir", str(d), stdin=b"http://a.test/first\n").returncode == 0
    env = lmdb.open(str(CrawlDir(d).seen), max_dbs=16, map_size=1 << 30)
    with env.begin(write=True) as txn:
        txn.put(b"next_id", ((1 << 32) - 2).to_bytes(8, "big"), db=env.open_db(b"meta", txn=txn))
    env.close()
    p = _crawl("seen", "--dir", str(d), stdin=b"http://a.test/1\nhttp://a.test/2\n")
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 2
    with SeenSet(CrawlDir(d).seen) as s:
        fps = [canonicalize(f"http://a.test/{i}").fp for i in (1, 2)]
        assert sorted(s.ids_of(fps)) == [(1 << 32) - 2, (1 << 32) - 1]  # type: ignore[type-var]
    p = _crawl("seen", "--dir", str(d), stdin=b"http://a.test/3\n")
    err = p.stderr.decode()
    assert p.returncode != 0 and p.stdout == b"", err
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "2**32" in err, err
    with SeenSet(CrawlDir(d).seen) as s:
        assert len(s) == 3 and s.contains_fps([canonicalize("http://a.test/3").fp]) == [False]


def test_another_writers_urls_in_the_recent_tree_are_not_new_and_ours_are(tmp_path: Path) -> None:
    # b's filter never heard of a's inserts; the recent tree's insert-if-absent
    # says which of the batch were a's: every other one is b's, and new
    path = tmp_path / "seen"
    a = SeenSet(path)
    b = SeenSet(path)
    try:
        assert a.add_fps([11, 30]) == [True, True]
        assert b.add_fps([10, 11, 12, 13, 30, 31]) == [True, False, True, True, False, True]
        assert b.add_fps([12, 31, 32]) == [False, False, True]
    finally:
        a.close()  # one environment per process: closing one closes both


def test_a_merge_is_counted_and_leaves_only_the_listed_runs(tmp_path: Path) -> None:
    # the newest run is merged into the one before while it is at least a
    # quarter of its size; the runs merged away are deleted, not left behind
    d = str(tmp_path / "c")
    _stats(tmp_path, d, [f"http://a.test/{i}" for i in range(4096)])
    st = _stats(tmp_path, d, [f"http://b.test/{i}" for i in range(4096)])
    assert (st["recent_flushed"], st["runs_merged"]) == (1, 1)
    s = _summary(d)
    assert (s["urls"], s["exact_runs"], s["exact_recent"]) == (8192, [8192], 0)
    env = lmdb.open(str(CrawlDir(d).seen), max_dbs=16, map_size=1 << 30, readonly=True)
    with env.begin() as txn:
        runs = env.open_db(b"runs", txn=txn, create=False)
        keys = [k for k, _ in txn.cursor(db=runs)]
        listing = np.frombuffer(txn.get(b"runs", db=env.open_db(b"meta", txn=txn, create=False)),
                                dtype="<u8").reshape(-1, 2).tolist()
    env.close()
    assert [size for _, size in listing] == [8192]
    (run, _), = listing
    assert keys == [run.to_bytes(8, "big") + b"f", run.to_bytes(8, "big") + b"i"]


def test_the_grown_filter_is_twice_the_urls_and_saved_at_once(tmp_path: Path) -> None:
    # README: when the crawl outgrows the filter, it is rebuilt at twice the
    # size, and saved then (a crash after it does not cost another rebuild)
    from crawl.seen.bloom import BloomFilter

    path = tmp_path / "seen"
    s = SeenSet(path, expected=1000)
    try:
        s.add_fps(list(range(1, 1201)))
        assert s.counts["bloom_grown"] == 1
        cap = s.stats()["bloom_capacity"]
        assert 2400 <= cap < 2400 + 20, cap
        saved = BloomFilter.load(path / "bloom.bin")
        assert saved is not None and (saved.covers, saved.blocks) == (1200, s.bloom.blocks)
    finally:
        s.close()


def test_the_summary_counts_checks_and_false_positives(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    urls = [f"http://a.test/{i}" for i in range(300)]
    _stats(tmp_path, d, urls[:100], "--expected", "1", "--fp-rate", "0.5")
    # a filter sized for one URL at 50%: most new URLs are "maybe"s the exact set clears
    st = _stats(tmp_path, d, urls[50:], "--expected", "1", "--fp-rate", "0.5")
    assert st["checked"] == 250 and st["new"] == 200 and st["already_seen"] == 50
    assert st["bloom_false_positive"] == st["bloom_maybe"] - 50 > 0, st


def test_other_kinds_pass_through_untouched_even_for_a_seen_url(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    fetch = {"kind": "fetch", "v": 1, "url": "HTTP://A.test/x#frag", "outcome": "ok"}
    event = {"kind": "event", "v": 1, "ts": 1.0, "event": "note"}
    recs = [{"kind": "url", "url": "http://a.test/x"}, fetch, event, fetch]
    p = _crawl("seen", "--dir", d, stdin=_lines(recs))
    assert p.returncode == 0, p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert out[1:] == [fetch, event, fetch]
    assert out[0]["url"] == "http://a.test/x"


def test_a_second_writer_counts_its_untrusted_batches(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    a = SeenSet(path)
    b = SeenSet(path)
    try:
        a.add_fps([1])
        b.add_fps([2])
        assert b.counts["bloom_untrusted_batches"] == 1 and "bloom_untrusted_batches" not in a.counts
    finally:
        a.close()


def test_the_summary_figures_of_the_filter_and_the_fetched_bitmap(tmp_path: Path) -> None:
    from crawl.seen.bloom import false_positive_rate

    d = str(tmp_path / "c")
    urls = [f"http://a.test/{i}" for i in range(5000)]
    _stats(tmp_path, d, urls, "--expected", "5000")
    fetches = [{"kind": "fetch", "v": 1, "url": u, "outcome": "ok"} for u in urls]
    p = _crawl("seen", "--dir", d, "--fetched", "--cycle", "c1", stdin=_lines(fetches))
    assert p.returncode == 0, p.stderr
    s = _summary(d, "--cycle", "c1")
    assert (s["urls"], s["fetched"], s["unfetched"]) == (5000, 5000, 0)
    # ids 0..4999 all fetched: one run of a roaring bitmap, a few bytes (not 2 a URL)
    assert s["fetched_bitmap_bytes"] < 64, s
    bits = s["bloom_bytes"] * 8 / s["bloom_capacity"]  # type: ignore[operator]
    assert s["bloom_bits_per_url_at_capacity"] == round(bits, 2) and 11 < bits < 13, s
    rate = false_positive_rate(5000, s["bloom_bytes"] // 8, s["bloom_k"])  # type: ignore[operator,arg-type]
    assert s["bloom_expected_fp_rate"] == round(rate, 6) and 0.005 < rate <= 0.01, s


# -- the Bloom filter (crawl/seen/bloom.py) ---------------------------------


def test_fingerprints_in_any_integer_array_are_the_same_fingerprints(tmp_path: Path) -> None:
    with SeenSet(tmp_path / "seen") as s:
        assert s.add_fps(np.array([5, 6, 5], dtype=np.int64)) == [True, True, False]
        assert s.add_fps(np.array([6, 7], dtype=np.uint64)) == [False, True]
        assert s.contains_fps(np.array([5, 7, 8], dtype=np.uint32)) == [True, True, False]


def test_sizing_refuses_rates_outside_0_and_1_and_counts_below_1_as_1() -> None:
    import pytest

    from crawl.seen.bloom import size_for

    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            size_for(100, bad)
    for rate in (0.001, 0.01, 0.3):
        assert size_for(0, rate) == size_for(-7, rate) == size_for(1, rate)
    assert size_for(1, 0.001) != size_for(2, 0.001)  # (one word, 3 bits) and (one word, 4 bits)


def test_a_filter_has_1_to_2_to_the_32_minus_1_blocks() -> None:
    import pytest

    from crawl.seen.bloom import BloomFilter

    for bad in (0, -1, 1 << 32):
        with pytest.raises(ValueError, match="between 1 and 2\\*\\*32 - 1 blocks"):
            BloomFilter(bad, 3)
    assert BloomFilter(1, 3).nbytes == 8


def test_the_rate_of_an_empty_filter_is_0_and_of_one_key_is_not() -> None:
    from crawl.seen.bloom import false_positive_rate

    assert false_positive_rate(0, 1, 3) == 0.0 and false_positive_rate(-3, 1, 3) == 0.0
    assert false_positive_rate(1, 1, 1) > 0.01  # one bit of 64 set: about 1 in 64


def test_a_saved_file_with_an_impossible_header_loads_as_none(tmp_path: Path) -> None:
    import struct

    from crawl.seen.bloom import BloomFilter

    def header(k: int, blocks: int) -> bytes:
        return struct.pack(">8sIIQQQ", b"CRWLBLM1", 1, k, blocks, 0, 0) + b"\0" * 8 * max(blocks, 0)

    for k, blocks, ok in [(0, 1, False), (33, 1, False), (1, 1, True), (32, 1, True), (3, 0, False)]:
        f = tmp_path / f"b{k}-{blocks}"
        f.write_bytes(header(k, blocks))
        got = BloomFilter.load(f)
        assert (got is not None) == ok, (k, blocks)
        if got is not None:
            assert (got.k, got.blocks) == (k, blocks)
    f = tmp_path / "long"
    f.write_bytes(header(3, 1) + b"\0")  # a byte more than its blocks
    assert BloomFilter.load(f) is None


def test_a_rate_that_needs_less_than_one_url_a_block_is_still_sized() -> None:
    # 1e-7: the best pattern (k = 9) holds ~0.0016 URLs a 64-bit block; 1e-8 is beyond any block's reach
    import pytest

    from crawl.seen.bloom import size_for

    blocks, k = size_for(10**6, 1e-7)
    assert k == 9 and blocks > 10**8
    with pytest.raises(ValueError, match="too low"):
        size_for(10**6, 1e-8)


def test_a_one_block_filter_is_saved_and_loaded_back(tmp_path: Path) -> None:
    from crawl.seen.bloom import BloomFilter

    bf = BloomFilter(1, 3)
    bf.add_many(np.array([7, 8], dtype=np.uint64))
    bf.save(tmp_path / "bloom")
    back = BloomFilter.load(tmp_path / "bloom")
    assert back is not None and back.blocks == 1 and back.k == 3
    assert back.maybe_array(np.array([7, 8], dtype=np.uint64)).all()


def test_a_small_run_after_a_big_one_is_a_run_of_its_own_and_both_are_kept(tmp_path: Path) -> None:
    # the recent tree is flushed into sorted runs; a small run after a big one is not merged into it
    # (under a quarter of its size) and must get a new run id: the big run's URLs stay seen
    with SeenSet(tmp_path / "seen", delta_max=16) as s:
        big = list(range(1000, 1200))
        assert all(s.add_fps(big))
        assert all(s.add_fps(list(range(5000, 5020))))  # flushed as a run of its own
        assert s.stats()["exact_runs"] == [200, 20]
        assert s.contains_fps(big) == [True] * 200
        assert s.add_fps(big[:3] + [9000]) == [False, False, False, True]
