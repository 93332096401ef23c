"""The URL-seen set against real LMDB files, and `crawl seen` as a subprocess."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.canon import CANON_VERSION, canonicalize
from crawl.core import CrawlDir
from crawl.seen import SeenSet

fps = st.integers(min_value=0, max_value=(1 << 64) - 1)


def test_order_is_kept_and_the_first_occurrence_wins(tmp_path: Path) -> None:
    with SeenSet(tmp_path / "seen", expected=100) as s:
        assert s.add_fps([3, 1, 3, 2, 1]) == [True, True, False, True, False]
        assert s.add_fps([2, 4, 4, 1]) == [False, True, False, False]
        assert len(s) == 4


@given(st.lists(fps, max_size=60), st.lists(fps, max_size=60), st.sampled_from([0.5, 0.01]))
@settings(max_examples=40, deadline=None)
def test_the_exact_layer_never_reports_a_new_url_as_seen(
    first: list[int], second: list[int], rate: float
) -> None:
    # fp_rate 0.5 on a tiny filter makes most answers "maybe": the exact
    # set has to sort them out
    with tempfile.TemporaryDirectory() as d, SeenSet(d, expected=8, fp_rate=rate) as s:
        s.add_fps(first)
        got = s.add_fps(second)
        known = set(first)
        want = []
        for fp in second:
            want.append(fp not in known)
            known.add(fp)
        assert got == want


def test_a_filter_that_missed_inserts_cannot_make_a_seen_url_new(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    a = SeenSet(path, expected=1000)
    b = SeenSet(path, expected=1000)  # its filter never hears about a's inserts
    assert a.add_fps([10, 11, 12]) == [True, True, True]
    assert b.add_fps([11, 13, 12]) == [False, True, False]
    assert b.counts["bloom_stale"] == 2
    b.save()
    a.close()  # one LMDB environment per process: closing one closes both
    with SeenSet(path, expected=1000) as c:
        assert c.counts["bloom_rebuilds"] == 1  # b's file missed a's 10: not trusted


def test_filter_is_persisted_and_rebuilt_when_missing_or_stale(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    with SeenSet(path, expected=1000) as s:
        s.add_fps(list(range(500)))
    assert (path / "bloom.bin").exists()
    with SeenSet(path, expected=1000) as s:
        assert "bloom_rebuilds" not in s.counts  # loaded as saved
        assert s.bloom.added == 500
        old = (path / "bloom.bin").read_bytes()
        s.add_fps([1000, 1001])
    (path / "bloom.bin").write_bytes(old)  # a file from before the last batch
    with SeenSet(path, expected=1000) as s:
        assert s.counts["bloom_rebuilds"] == 1
        assert s.bloom.covers == 502
        assert s.add_fps([1001, 2000]) == [False, True]
    (path / "bloom.bin").unlink()
    with SeenSet(path, expected=1000) as s:
        assert s.counts["bloom_rebuilds"] == 1
        assert all(s.bloom.maybe_many(list(range(500)) + [1000, 1001, 2000]))


def test_the_filter_grows_when_the_crawl_outgrows_it(tmp_path: Path) -> None:
    import random

    rng = random.Random(3)
    with SeenSet(tmp_path / "seen", expected=1000, fp_rate=0.01) as s:
        s.add_fps([rng.getrandbits(64) for _ in range(5000)])
        assert s.counts["bloom_grown"] >= 1
        assert s.bloom.expected_fp_rate() <= 0.01
        probes = [rng.getrandbits(64) for _ in range(50_000)]
        assert sum(s.bloom.maybe_many(probes)) / len(probes) < 0.02


def test_unseen_canonicalises_rejects_and_passes_other_kinds(tmp_path: Path) -> None:
    c = canonicalize("http://example.com/p")
    trusted = {"kind": "link", "url": c.url, "fp": c.fp, "canon_v": CANON_VERSION, "anchor": "x"}
    from_canon = {"kind": "url", "url": "http://example.com/q", "fp": f"{c.fp ^ 1:016x}",
                  "canon_v": CANON_VERSION}
    recs = [
        {"kind": "url", "v": 1, "url": "HTTP://Example.COM:80/a?utm_source=z#frag", "depth": 2},
        {"kind": "url", "v": 1, "url": "http://example.com/a"},
        {"kind": "url", "v": 1, "url": "http://exa mple.com/"},
        {"kind": "fetch", "v": 1, "url": "http://example.com/", "outcome": "ok"},
        trusted,
        from_canon,
        {**from_canon, "fp": "not-hex-digits!!"},  # not trusted: canonicalised again
    ]
    with SeenSet(tmp_path / "seen") as s:
        out = s.unseen(recs)
        assert [r["kind"] for r in out] == ["url", "reject", "fetch", "link", "url", "url"]
        assert out[4] is from_canon  # `crawl canon`'s hex fp is trusted as it is
        assert out[5]["fp"] == canonicalize("http://example.com/q").fp_hex
        assert out[0]["url"] == "http://example.com/a"
        assert out[0]["depth"] == 2  # unknown fields pass through
        assert out[0]["fp"] == canonicalize("http://example.com/a").fp_hex
        assert out[1]["input"] == "http://exa mple.com/" and out[1]["error"]
        assert out[3] is trusted
        assert s.unseen(recs[:2]) == [] and s.unseen(recs[5:]) == []
        assert s.counts["rejected"] == 1


def test_fetched_bitmap_per_cycle(tmp_path: Path) -> None:
    with SeenSet(tmp_path / "seen") as s:
        s.add_fps(list(range(1, 101)))
        assert s.mark_fetched([5, 6, 5], "c1") == [True, True, False]
        assert s.mark_fetched([5], "c2") == [True]
        st_ = s.stats("c1")
        assert (st_["fetched"], st_["unfetched"], st_["urls"]) == (2, 98, 100)
        assert sorted(s.fetched("c1")) == sorted(i for i in s.ids_of([5, 6]) if i is not None)


def _crawl(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", *args], input=stdin,
                          capture_output=True, timeout=60)


def test_cli_pipes_only_new_urls_and_reports_bad_lines(tmp_path: Path) -> None:
    d = str(tmp_path / "crawl")
    lines = b"\n".join([
        b"http://a.test/x",
        b"http://A.test/x#f",
        b"{not json",
        b'{"kind": "link", "url": "http://b.test/", "rel": ["nav"]}',
        b"::::",
    ]) + b"\n"
    p = _crawl("seen", "--dir", d, "--stats", str(tmp_path / "st.json"), stdin=lines)
    assert p.returncode == 0, p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert [(r["kind"], r.get("url")) for r in out] == [
        ("url", "http://a.test/x"), ("link", "http://b.test/"), ("reject", None)]
    assert out[1]["rel"] == ["nav"]
    assert b"line 3: invalid JSON" in p.stderr
    stats = orjson.loads((tmp_path / "st.json").read_bytes())
    assert stats["bad_records"] == 1 and stats["new"] == 2 and stats["already_seen"] == 1
    assert (CrawlDir(d).seen / "bloom.bin").exists()

    again = _crawl("seen", "--dir", d, "--strict", stdin=lines + b"http://c.test/\n")
    assert again.returncode == 3
    assert [orjson.loads(x)["url"] for x in again.stdout.splitlines()
            if b'"url"' in x] == ["http://c.test/"]

    summary = _crawl("seen", "--dir", d, "--summary", stdin=b"")
    assert orjson.loads(summary.stdout)["urls"] == 3


def test_cli_fetched_mode_flags_a_second_fetch_in_the_cycle(tmp_path: Path) -> None:
    d = str(tmp_path / "crawl")
    _crawl("seen", "--dir", d, stdin=b"http://a.test/\n")
    fetch = orjson.dumps({"kind": "fetch", "v": 1, "url": "http://a.test/", "outcome": "ok"})
    p = _crawl("seen", "--dir", d, "--fetched", "--cycle", "n1", stdin=fetch + b"\n" + fetch)
    assert p.returncode == 0, p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert [r.get("refetch") for r in out] == [None, True]


def test_cli_streams_a_record_before_stdin_closes(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "crawl", "seen", "--dir", str(tmp_path / "c")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    proc.stdin.write(b"http://stream.test/\n")
    proc.stdin.flush()
    line = proc.stdout.readline()  # arrives while stdin is still open
    assert orjson.loads(line)["url"] == "http://stream.test/"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_known_heavy_streams_stay_exact(tmp_path: Path) -> None:
    import random

    rng = random.Random(9)
    known = [rng.getrandbits(64) for _ in range(3000)]
    with SeenSet(tmp_path / "seen", expected=10_000) as s:
        s.add_fps(known)
        for _ in range(20):
            batch = rng.sample(known, 400) + [rng.getrandbits(64)]
            assert s.add_fps(batch) == [False] * 400 + [True]
        assert s.counts["bloom_maybe"] >= 8000


@given(st.lists(st.lists(fps, max_size=30), max_size=12), st.integers(1, 40))
@settings(max_examples=60, deadline=None)
def test_flushes_and_merges_keep_the_set_exact_and_ids_stable(
    batches: list[list[int]], delta_max: int
) -> None:
    # a tiny recent tree forces flushes into runs and merges of runs
    with tempfile.TemporaryDirectory() as d, SeenSet(d, expected=8, fp_rate=0.5,
                                                      delta_max=delta_max) as s:
        known: set[int] = set()
        ids: dict[int, int | None] = {}
        for batch in batches:
            want = []
            for fp in batch:
                want.append(fp not in known)
                known.add(fp)
            assert s.add_fps(batch) == want
            for fp, i in zip(batch, s.ids_of(batch), strict=True):
                assert i is not None and ids.setdefault(fp, i) == i
        assert len(s) == len(known)
        probe = sorted(known)[:5] + [fp ^ 1 for fp in sorted(known)[:5]]
        assert s.contains_fps(probe) == [fp in known for fp in probe]
        assert len(set(ids.values())) == len(ids)  # ids stay distinct


def test_a_stale_filter_is_caught_by_the_runs_too(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    a = SeenSet(path, expected=1000, delta_max=4)
    b = SeenSet(path, expected=1000, delta_max=4)
    assert a.add_fps([10, 11, 12, 13, 14]) == [True] * 5  # straight into a run
    assert b.add_fps([11, 15, 14]) == [False, True, False]
    assert b.counts["bloom_stale"] == 2
    a.close()


def test_lookups_in_runs_longer_than_an_index_step(tmp_path: Path) -> None:
    import random

    rng = random.Random(4)
    keys = [rng.getrandbits(64) for _ in range(5000)] + [0, (1 << 64) - 1]
    with SeenSet(tmp_path / "seen", expected=10_000, delta_max=1000) as s:
        assert s.add_fps(keys) == [True] * len(keys)  # one run of 5,002
        ids = s.ids_of(keys)
        assert sorted(i for i in ids if i is not None) == list(range(len(keys)))
        others = [rng.getrandbits(64) for _ in range(5000)] + [1, (1 << 64) - 2]
        assert s.contains_fps(keys + others) == [True] * len(keys) + [False] * len(others)
        assert s.add_fps(others + keys[:100]) == [True] * len(others) + [False] * 100
        assert len(s) == 2 * len(keys)


def test_sigkill_never_loses_an_emitted_url(tmp_path: Path) -> None:
    import signal

    d = tmp_path / "c"
    src = tmp_path / "urls.txt"
    src.write_bytes(b"".join(b"http://k%d.test/%d\n" % (i % 97, i) for i in range(50_000)))
    with open(src, "rb") as stdin:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crawl", "seen", "--dir", str(d), "--batch", "500"],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout
    # it stops when the pipe fills up, so this kill lands mid-stream
    emitted = [orjson.loads(proc.stdout.readline()) for _ in range(3000)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    emitted += [orjson.loads(x) for x in proc.stdout.read().splitlines() if x.endswith(b"}")]
    assert len(emitted) < 50_000
    with SeenSet(CrawlDir(d).seen) as s:
        assert all(s.contains_fps([int(r["fp"], 16) for r in emitted]))


def test_fetched_marks_keep_one_answer_per_input_in_order(tmp_path: Path) -> None:
    """A URL fetched without passing the seen set (a seed) has no id: it is not judged
    (True) and its place in the answer is kept, so the answers line up with the input."""
    with SeenSet(tmp_path / "seen") as s:
        s.add_fps([1, 2, 3])
        assert s.mark_fetched([1, 999, 2, 1, 998], "c") == [True, True, True, False, True]


def test_run_indexes_of_merged_runs_are_forgotten(tmp_path: Path) -> None:
    """Bounded memory (DESIGN invariant 5): the in-memory index of each run is cached,
    and runs are merged away all the time in a long crawl; the cache holds the runs
    there are, plus at most the one merged away since the last lookup."""
    import random

    rng = random.Random(1)
    with SeenSet(tmp_path / "seen", expected=100_000, delta_max=200) as s:
        excess = merges = 0
        last_runs: set[tuple[int, int]] = set()
        for _ in range(60):
            batch = [rng.getrandbits(64) for _ in range(300)]
            s.add_fps(batch)
            assert s.contains_fps(batch) == [True] * 300  # a big lookup: the runs' indexes are built
            with s.env.begin() as txn:
                runs = set(s._run_list(txn))
            merges += len(last_runs - runs)
            last_runs = runs
            excess = max(excess, len(s._sparse) - len(runs))
        assert merges > 20  # runs did come and go
        assert excess <= 1
