"""One crawl directory, one writer: ``crawl run`` holds ``D/crawl.lock`` exclusively.

Real processes throughout: a second ``crawl run``, a ``crawl frontier
next`` and a repair beside a live run are refused with one line naming the
holder (pid, host, start time, command line) and exit 2; a SIGKILLed holder
blocks no one (the kernel drops a flock with its process).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from conftest import start_testweb

from crawl.core import DirBusy, hold_dir, holder, own_dir, share_dir

CRAWL = [sys.executable, "-m", "crawl"]


def _wait_for(pred, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def _one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert "Traceback" not in res.stderr, res.stderr
    errors = [x for x in lines if x.startswith("crawl: error:")]
    assert len(errors) == 1, res.stderr
    return errors[0]


def test_a_second_run_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=3, pages=4, mix="slow", latency=1.0) as web:
        d = tmp_path / "c"
        args = [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
                str(web.hosts_file), "--allow-private", "--progress", "none", "--delay", "0.2s"]
        first = subprocess.Popen([*args, "--idle-exit", "60s"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            info = _wait_for(lambda: holder(d), "the first run to hold the directory")
            assert info["pid"] == first.pid and info["host"] == socket.gethostname()
            second = subprocess.run(args, capture_output=True, text=True, timeout=60)
            assert second.returncode == 2
            line = _one_error_line(second)
            started = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(info["started"]))
            assert f"pid {first.pid} on {socket.gethostname()}" in line and started in line, line
            assert f"crawl run --dir {d}" in line, line  # the holder's command line
            # a pipeline's leasing stage is refused too, and so is a repair; readers are not
            nxt = subprocess.run([*CRAWL, "frontier", "next", "--dir", str(d), "-n", "5"],
                                 capture_output=True, text=True, timeout=60)
            assert nxt.returncode == 2 and f"pid {first.pid}" in _one_error_line(nxt)
            assert nxt.stdout == ""  # nothing leased
            rep = subprocess.run([*CRAWL, "check", "--dir", str(d), "--repair"], capture_output=True,
                                 text=True, timeout=120)
            assert rep.returncode == 2 and f"pid {first.pid}" in _one_error_line(rep)
            # the first run's status is the only one written: the second never got that far
            run = _wait_for(lambda: orjson.loads(subprocess.run(
                [*CRAWL, "stats", "--dir", str(d), "--json"], capture_output=True, text=True,
                timeout=60).stdout).get("run"), "the first run's status")
            assert run["pid"] == first.pid and run["alive"] is True
        finally:
            first.send_signal(signal.SIGTERM)
            _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err[-2000:]
        assert holder(d) is None  # a run that ended holds nothing


def test_a_sigkilled_holder_blocks_no_one(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    code = ("import sys, time; from pathlib import Path; from crawl.core import hold_dir; "
            "hold_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert holder(d)["pid"] == proc.pid
        with pytest.raises(DirBusy, match=f"pid {proc.pid}"):
            hold_dir(d)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert holder(d) is None
    lock = hold_dir(d)  # at once: no stale lock to clean up
    lock.release()


def test_leasing_stages_share_and_exclude_a_run(tmp_path: Path) -> None:
    """Several ``crawl frontier next`` lease side by side (shared), never beside a run or a repair."""
    d = tmp_path / "c"
    a, b = share_dir(d), share_dir(d)
    try:
        with pytest.raises(DirBusy, match="crawl frontier next"):
            hold_dir(d)
        with pytest.raises(DirBusy, match="crawl frontier next"):
            own_dir(d)
        assert holder(d) is None  # shared holders are not a run
    finally:
        a.release()
        b.release()
    run = hold_dir(d)
    try:
        with pytest.raises(DirBusy, match=f"crawl run \\(pid {os.getpid()}"):
            share_dir(d)
    finally:
        run.release()
    assert (d / "crawl.lock").read_bytes() == b""  # released: the file names no one
