"""Spools: durable claim-then-ack queues, proven with real processes and SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson

from crawl.core import Spool

CRAWL = [sys.executable, "-m", "crawl"]


def _fill(path: Path, n: int) -> None:
    with Spool(path) as sp:
        for start in range(0, n, 1000):
            sp.put({"kind": "url", "v": 1, "url": f"http://h.test/{i}", "i": i}
                   for i in range(start, min(n, start + 1000)))


def _ids(path: Path) -> list[int]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            out.append(orjson.loads(line)["i"])
    return out


def test_put_claim_ack_keeps_order_and_counts(tmp_path: Path) -> None:
    _fill(tmp_path / "s", 25)
    with Spool(tmp_path / "s") as sp:
        first = sp.claim(10)
        assert [orjson.loads(d)["i"] for _, d in first] == list(range(10))
        assert sp.counts() == {"queued": 15, "claimed": 10}
        sp.ack(k for k, _ in first)
        assert sp.counts() == {"queued": 15, "claimed": 0}
        rest = sp.claim(100)
        assert [orjson.loads(d)["i"] for _, d in rest] == list(range(10, 25))


def test_release_returns_claims_in_original_order(tmp_path: Path) -> None:
    _fill(tmp_path / "s", 5)
    with Spool(tmp_path / "s") as sp:
        sp.claim(3)
        sp.release()
        again = sp.claim(10)
    assert [orjson.loads(d)["i"] for _, d in again] == [0, 1, 2, 3, 4]


def test_expired_claims_of_a_live_consumer_come_back(tmp_path: Path) -> None:
    _fill(tmp_path / "s", 4)
    slow = Spool(tmp_path / "s", claim_timeout=-1)
    slow.claim(4)  # its deadline has already passed, though its pid lives
    got = Spool(tmp_path / "s").claim(10)
    slow.close()
    assert len(got) == 4


def test_sigkill_consumer_loses_nothing_and_repeats_only_the_open_batch(tmp_path: Path) -> None:
    n, batch = 20_000, 50
    sp, out = tmp_path / "spool", tmp_path / "out.ndjson"
    _fill(sp, n)
    rng = random.Random(7)
    kills = 0
    with out.open("ab") as sink:
        for _ in range(12):
            proc = subprocess.Popen(
                [*CRAWL, "spool", "take", str(sp), "--batch", str(batch)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
            assert proc.stdout is not None
            # Kill after a random number of delivered records: always mid-stream.
            for _ in range(rng.randint(1, 2500)):
                line = proc.stdout.readline()
                if not line:
                    break
                sink.write(line)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
            sink.write(proc.stdout.read())  # what reached the pipe before the kill
            proc.wait()
    # finish cleanly
    subprocess.run([*CRAWL, "spool", "take", str(sp), "-o", str(out)], check=True, timeout=60)
    got = Counter(_ids(out))
    assert set(got) == set(range(n)), "a record was lost"
    repeats = sum(c - 1 for c in got.values())
    assert kills > 0
    assert repeats <= kills * batch, f"{repeats} repeats for {kills} kills of batch {batch}"
    with Spool(sp) as s:
        assert s.counts() == {"queued": 0, "claimed": 0}


def test_concurrent_consumers_share_without_loss_or_doubling(tmp_path: Path) -> None:
    n = 6000
    sp = tmp_path / "spool"
    _fill(sp, n)
    outs = [tmp_path / f"out{i}.ndjson" for i in range(3)]
    procs = [
        subprocess.Popen([*CRAWL, "spool", "take", str(sp), "--batch", "20", "-o", str(o)])
        for o in outs
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    got = Counter(i for o in outs for i in _ids(o))
    assert set(got) == set(range(n))
    assert max(got.values()) == 1


def test_stage_reads_and_writes_spools(tmp_path: Path) -> None:
    """`crawl spool put` then a spool-to-spool round trip through `take`."""
    src = tmp_path / "in"
    res = subprocess.run(
        [*CRAWL, "spool", "put", str(src)],
        input=b"http://a.test/\nnot a url at all\n{\"kind\":\"url\",\"url\":\"http://b.test/\"}\n",
        capture_output=True, timeout=60,
    )
    assert res.returncode == 0
    assert b"line 2" in res.stderr  # white space in a plain URL line
    subprocess.run([*CRAWL, "spool", "take", str(src), "-o", f"spool:{tmp_path / 'out'}"],
                   check=True, timeout=60)
    with Spool(tmp_path / "out") as sp:
        urls = [orjson.loads(d)["url"] for _, d in sp.claim(10)]
    assert urls == ["http://a.test/", "http://b.test/"]


def test_peek_looks_without_taking(tmp_path: Path) -> None:
    """`crawl spool peek` (the README's way to look at a spool) leaves every record where
    it was, also one a consumer has claimed; `take` then still gets them all."""
    sp_path = tmp_path / "s"
    _fill(sp_path, 30)
    with Spool(sp_path) as sp:
        claimed = sp.claim(3)  # a consumer is mid-batch
    p = subprocess.run([*CRAWL, "spool", "peek", str(sp_path), "-n", "5"], capture_output=True, timeout=60)
    assert p.returncode == 0
    assert [orjson.loads(x)["i"] for x in p.stdout.splitlines()] == [3, 4, 5, 6, 7]
    p = subprocess.run([*CRAWL, "spool", "peek", str(sp_path), "-n", "0", "--claimed"], capture_output=True,
                       timeout=60)
    assert [orjson.loads(x)["i"] for x in p.stdout.splitlines()] == list(range(30))
    with Spool(sp_path) as sp:
        assert sp.counts() == {"queued": 27, "claimed": 3}
        sp.ack(k for k, _ in claimed)
    out = tmp_path / "out.ndjson"
    subprocess.run([*CRAWL, "spool", "take", str(sp_path), "-o", str(out)], check=True, timeout=60)
    assert _ids(out) == list(range(3, 30))


def test_reading_a_missing_spool_creates_nothing(tmp_path: Path) -> None:
    for args in (["spool", "take", "typo"], ["spool", "peek", "typo"], ["spool", "stats", "typo"],
                 ["seen", "--dir", "c", "-i", "spool:typo"]):
        p = subprocess.run([*CRAWL, *args], capture_output=True, timeout=60, cwd=tmp_path)
        assert p.returncode == 2 and b"no spool at typo" in p.stderr, (args, p.stderr)
    assert sorted(x.name for x in tmp_path.iterdir()) == []  # no empty spool, no crawl dir


def test_output_to_a_directory_needs_spool_prefix(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    p = subprocess.run([*CRAWL, "canon", "-o", str(tmp_path / "d")], input=b"http://a.test/\n",
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and b"spool:" in p.stderr
    assert list((tmp_path / "d").iterdir()) == []  # no LMDB files slipped in
    p = subprocess.run([*CRAWL, "canon", "-o", f"spool:{tmp_path / 'd'}"], input=b"http://a.test/\n",
                       capture_output=True, timeout=60)
    assert p.returncode == 0
    with Spool(tmp_path / "d") as sp:
        assert sp.counts()["queued"] == 1


def test_put_says_how_many_it_appended(tmp_path: Path) -> None:
    with Spool(tmp_path / "s") as sp:
        assert sp.put([{"kind": "url", "v": 1, "url": "http://h.test/a"}, b'{"kind":"url"}']) == 2
        assert sp.put([]) == 0
        assert sp.counts() == {"queued": 2, "claimed": 0}
