"""crawl run's child processes end with it, however it ends.

Only the parent is killed here (not its process group, as a crash or the
OOM killer would): what it started must not live on, reparented to init,
still claiming spool batches and holding the crawl's LMDB files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import start_testweb
from proctree import alive, cmdline, group, kill_leftovers, wait_for


def test_sigkill_of_the_parent_takes_its_children_along(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=20, seed=5, pages=16, links=4, mix="plain") as web:
        d = tmp_path / "c"
        args = [sys.executable, "-m", "crawl", "run", "--dir", str(d), "--seeds", str(web.seeds_file),
                "--resolve-file", str(web.hosts_file), "--allow-private", "--scope", "any",
                "--delay", "0.2", "--idle-exit", "3s", "--progress", "none", "--parse-procs", "1"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        pgid, before = proc.pid, set()
        try:
            # mid-crawl: the loop is up and the parse process exists
            def started() -> bool:
                lines = " ".join(cmdline(p) for p in group(pgid))
                return (d / "run-status.json").exists() and "crawl.run.child" in lines

            assert wait_for(started, 60), [cmdline(p) for p in group(pgid)]
            before = group(pgid)
            assert proc.poll() is None and len(before) >= 2
            # a new interpreter, not multiprocessing's spawn: no resource tracker beside it (issue 19)
            assert not any("resource_tracker" in cmdline(p) for p in before), [cmdline(p) for p in before]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            assert wait_for(lambda: not alive(before, pgid), 15), \
                [cmdline(p) for p in alive(before, pgid)]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            kill_leftovers(before, pgid)


# -- parse processes started before the parent's imports (crawl/run/spawn.py) --------

_SPAWN = """
import sys, time
from crawl.run.spawn import Children
kids = Children(1)
p = kids.procs[0]
if sys.argv[1] == "ctrl-c":  # Ctrl-C reaches the whole group while the child is starting
    import os, signal
    os.kill(p.pid, signal.SIGINT)
    os.kill(p.pid, signal.SIGTERM)
    time.sleep(0.5)
    p.popen.stdin.close()
    p.popen.wait(60)
    print(p.exitcode)
elif sys.argv[1] == "no-order":  # the parent stops before its loop: end of file, no order
    p.popen.stdin.close()
    p.popen.wait(60)
    print(p.exitcode)
else:  # "close": the command's clean-up kills a child never given its work
    time.sleep(0.3)  # mid-import, or waiting on its order
    kids.close()
    print(p.exitcode, p.is_alive())
"""


def test_a_parse_process_given_no_work_order_leaves_quietly() -> None:
    """The parent starts its parse process first thing, before it knows the run
    will happen; when no order comes (end of file on stdin) the child exits with
    ORPHANED and says nothing (no EOFError traceback on the operator's terminal)."""
    res = subprocess.run([sys.executable, "-c", _SPAWN, "no-order"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["75"], res.stdout  # crawl.core.lifeline.ORPHANED
    assert res.stderr == ""


def test_children_never_given_work_are_killed_at_close() -> None:
    res = subprocess.run([sys.executable, "-c", _SPAWN, "close"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(-signal.SIGKILL), "False"], res.stdout
    assert "Traceback" not in res.stderr


def test_a_run_that_stops_before_its_loop_leaves_no_process_behind(tmp_path: Path) -> None:
    """`crawl run` with nothing to crawl stops with its one line (exit 2) after it
    started its parse process: that process is gone too, and said nothing."""
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "run", "--dir", str(tmp_path / "c"),
                             "--parse-procs", "1", "--progress", "none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pgid = proc.pid
    try:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, err
        assert err.strip().splitlines() == ["crawl: error: nothing to crawl: give seed URLs (arguments or --seeds FILE)"]
        assert wait_for(lambda: not group(pgid), 15), [cmdline(p) for p in group(pgid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(group(pgid), pgid)


def test_a_parse_process_outlives_a_ctrl_c_during_its_start_up() -> None:
    """The child starts with the command, so the terminal's Ctrl-C (sent to the
    whole process group) can reach it while the interpreter is still starting:
    it is born with SIGINT and SIGTERM blocked and drops them once it ignores
    them. Before, it died with "Fatal Python error: init_import_site" on the
    operator's terminal and the run stopped with "parse process stopped"."""
    res = subprocess.run([sys.executable, "-c", _SPAWN, "ctrl-c"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["75"], (res.stdout, res.stderr)  # it lived to read its (absent) order
    assert res.stderr == ""
