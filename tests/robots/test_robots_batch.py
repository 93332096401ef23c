"""The robots cache's group commit (issue 19): puts from several threads at once
share one fsynced commit, and each put still returns only once its entry is on
disk. Real LMDB environments; the kill is a real SIGKILL of a process that has
just been told its puts returned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import lmdb
import pytest

from crawl.core import open_env
from crawl.core.state import close_env
from crawl.robots.fetch import RobotsCache, _info_from

ROOT = Path(__file__).resolve().parents[2]


def _entry(i: int, verdict: str = "parsed") -> dict[str, object]:
    return {"verdict": verdict, "status": 200 if verdict == "parsed" else 503, "fetched_at": float(i),
            "error": "", "expires": 1000.0 + i}


def _body(i: int) -> bytes:
    return f"User-agent: *\nDisallow: /private-{i}/\n".encode()


def test_puts_waiting_on_a_commit_share_the_next_one(tmp_path: Path) -> None:
    """While one commit cannot finish (another writer holds LMDB's write lock),
    31 more puts pile up; they go to disk in one commit, not 31."""
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4)
    try:
        cache = RobotsCache(env)
        blocker = env.begin(write=True)  # holds the environment's write lock
        errors: list[BaseException] = []

        def put(i: int) -> None:
            try:
                cache.put(f"http://h{i}.test", _entry(i), _body(i))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        first = threading.Thread(target=put, args=(0,), daemon=True)
        rest = [threading.Thread(target=put, args=(i,), daemon=True) for i in range(1, 32)]
        try:
            first.start()
            time.sleep(0.2)  # the first put is committing (it waits for the lock)
            for t in rest:
                t.start()
            time.sleep(0.5)
            assert cache.get("http://h0.test") is None  # nothing is on disk yet,
            assert first.is_alive() and all(t.is_alive() for t in rest)  # and no put has returned
        finally:
            blocker.abort()
        for t in [first, *rest]:
            t.join(30)
        assert not errors
        assert cache.commits == 2
        for i in range(32):  # each origin its own entry and body, read back from LMDB
            got = cache.get(f"http://h{i}.test")
            assert got is not None and got[0] == _entry(i) and got[1] == _body(i)
    finally:
        env.close()


def test_a_failed_commit_raises_in_every_put_it_carried(tmp_path: Path) -> None:
    """A commit that fails (here: the data file is full) fails each of its puts,
    not just the one that ran it; a later put commits again."""
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4, map_size=1 << 20)
    try:
        cache = RobotsCache(env)
        big = b"x" * (600 << 10)
        cache.put("http://a.test", _entry(1), big)
        with pytest.raises(lmdb.MapFullError):
            cache.put("http://b.test", _entry(2), big)
        cache.put("http://c.test", _entry(3), b"small")
        assert cache.get("http://b.test") is None
        got = cache.get("http://c.test")
        assert got is not None and got[1] == b"small"
    finally:
        env.close()


WRITER = """
import sys, threading
from crawl.core import open_env
from crawl.robots.fetch import RobotsCache

env = open_env(sys.argv[1])
cache = RobotsCache(env)

def put(i):
    # each origin twice: first unreachable, then its parsed copy (the one that must stay)
    cache.put(f"http://h{i}.test", {"verdict": "unreachable", "status": 503, "fetched_at": 0.0,
                                    "error": "HTTP 503", "expires": 1.0 + i, "checks": 1}, b"")
    cache.put(f"http://h{i}.test", {"verdict": "parsed", "status": 200, "fetched_at": float(i),
                                    "error": "", "expires": 1000.0 + i},
              f"User-agent: *\\nDisallow: /private-{i}/\\n".encode())

threads = [threading.Thread(target=put, args=(i,)) for i in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(cache.commits, flush=True)
sys.stdin.read()  # killed here, never closed
"""


def test_puts_that_returned_survive_a_sigkill(tmp_path: Path) -> None:
    """200 threads put two verdicts each for their origin; once every put has
    returned the process is SIGKILLed without closing anything. A new process
    reads every origin's last verdict back, with its own body and rules."""
    state = tmp_path / "fetchstate"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(state)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        commits = int(proc.stdout.readline())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert 1 <= commits <= 400  # (fewer than 400 when puts shared commits, which threads usually do)
    env = open_env(state)
    try:
        cache = RobotsCache(env)
        for i in range(200):
            got = cache.get(f"http://h{i}.test")
            assert got is not None
            entry, body = got
            assert entry == {"verdict": "parsed", "status": 200, "fetched_at": float(i), "error": "",
                             "expires": 1000.0 + i}
            info = _info_from(entry, body, f"http://h{i}.test", "cache")
            assert not info.robots.allowed(f"http://h{i}.test/private-{i}/x", "crawl")
            assert info.robots.allowed(f"http://h{i}.test/private-{i + 1}/x", "crawl")
    finally:
        close_env(env)
