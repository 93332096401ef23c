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
